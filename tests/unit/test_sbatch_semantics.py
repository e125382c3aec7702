"""`slurmx submit` reads what an sbatch user writes as sbatch reads it (issue 19, "sbatch semantics").

Time limits: a bare number is minutes wherever a time limit is written (a spec's `time: 30`, `--time=30`,
`#SBATCH --time=30`, a site kind's `time`); grace periods and estimates stay durations whose bare YAML number is
seconds, as documented.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.core.config import SiteConfig, load_site_config, parse_site_config
from slurmx.core.ownership import FolderOwner, local_folder_owners
from slurmx.core.units import ClockNumber, UnitError, parse_time_limit
from slurmx.core.validation import ConfigError
from slurmx.submit.entry import build_spec
from slurmx.submit.spec import load_spec, parse_spec


def site() -> SiteConfig:
    return parse_site_config({
        "cluster": {"name": "t"},
        "resources": {
            "cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"},
            "gpu": {"partition": "gpu", "cpus": 2, "mem": "500M", "gres": "gpu:1"},
            "accel": {"partition": "accel", "cpus": 1, "mem": "500M", "gres": "accel:1"},
        },
        "classes": {"te": {"qos": "short"}, "be": {"qos": "scavenger"}},
        "preemption": {"grace": "30s"},
    })


# ---------------------------------------------------------------------------------------------- time in minutes


@pytest.mark.parametrize(("value", "seconds"), [
    (30, 1800), (1.5, 90), ("30", 1800), ("90s", 90), ("5m", 300), ("2h", 7200), ("1:30", 90),
    ("1:30:00", 5400), ("2-00", 172800), (ClockNumber(5400, "1:30:00"), 5400), (ClockNumber(90, "1:30"), 90),
])
def test_a_time_limit_reads_a_bare_number_as_minutes(value: str | int | float, seconds: int) -> None:
    assert parse_time_limit(value) == seconds


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), 10**20, True, "soon", [30],
                                   ClockNumber(0, "1:2:3:4")])
def test_a_bad_time_limit_is_a_unit_error(value: object) -> None:
    with pytest.raises(UnitError):
        parse_time_limit(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(("line", "seconds"), [
    ("time: 30", 1800), ("time: '30'", 1800), ("time: 1:30:00", 5400), ("time: 1:30", 90), ("time: 45s", 45),
    ("time: 0.5", 30), ("time: 1-00:00:00", 86400),
])
def test_a_spec_s_time_means_what_sbatch_time_means(tmp_path: Path, line: str, seconds: int) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(f"name: j\ncommand: 'true'\n{line}\noverrides: {{gpu: {{{line}}}}}\n")
    spec = load_spec(path)
    assert spec.time_s == seconds and spec.overrides["gpu"].time_s == seconds


def test_grace_and_estimates_keep_their_seconds(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("name: j\ncommand: 'true'\ntime: 30\ngrace: 30\nestimates: {cpu: 600}\n")
    spec = load_spec(path)
    assert (spec.time_s, spec.grace_s, spec.estimates) == (1800, 30, {"cpu": 600})


def test_the_python_api_reads_time_as_minutes_too() -> None:
    assert parse_spec({"name": "j", "command": "true", "time": 30}).time_s == 1800


def test_the_command_line_a_directive_and_the_spec_agree(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --time=30\ntrue\n")
    yaml_spec = tmp_path / "job.yaml"
    yaml_spec.write_text("name: j\ncommand: 'true'\ntime: 30\n")
    from_directive = build_spec(str(script), [], [], site())[0].time_s
    from_cli = build_spec(str(script), ["--time=30"], [], site())[0].time_s
    from_yaml = build_spec(str(yaml_spec), [], [], site())[0].time_s
    assert from_directive == from_cli == from_yaml == 1800


def test_a_site_kind_s_time_is_minutes_and_grace_stays_seconds(tmp_path: Path) -> None:
    path = tmp_path / "site.yaml"
    path.write_text("cluster: {name: t}\nresources:\n  cpu: {partition: cpu, cpus: 1, mem: 1G, time: 90}\n"
                    "  gpu: {partition: gpu, cpus: 1, mem: 1G, time: 1:30:00}\npreemption: {grace: 30}\n")
    cfg = load_site_config(path)
    assert (cfg.kind("cpu").time_s, cfg.kind("gpu").time_s, cfg.preemption.grace_s) == (5400, 5400, 30)


@settings(max_examples=200, deadline=None, database=None)
@given(st.integers(1, 10**6))
def test_property_every_spelling_of_n_minutes_agrees(minutes: int) -> None:
    hours, mins = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    spellings: list[str | int] = [minutes, str(minutes), f"{minutes}m", f"{days}-{hours:02d}:{mins:02d}:00"]
    assert {parse_time_limit(s) for s in spellings} == {minutes * 60}
    assert parse_spec({"name": "j", "command": "true", "time": minutes}).time_s == minutes * 60


def test_a_config_error_is_raised_for_a_bad_time_in_a_spec() -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec({"name": "j", "command": "true", "time": -3}, "job.yaml")
    assert str(info.value) == "job.yaml: time: expected a finite, non-negative time limit, got -3"


# ---------------------------------------------------------------------------------------------- grace < time


def _render_error(data: dict[str, object], kind: str = "cpu") -> str:
    from slurmx.submit.render import variant_options

    with pytest.raises(ConfigError) as info:
        variant_options(parse_spec(data, "job.yaml"), site(), kind, "j-000000", "race", "job.yaml")
    message = str(info.value)
    assert "\n" not in message
    return message


def test_grace_as_long_as_the_time_limit_is_refused_naming_both() -> None:
    assert _render_error({"name": "j", "command": "true", "grace": "2h", "time": "5m"}) == (
        "job.yaml: grace (02:00:00) must be shorter than time (00:05:00) of variant cpu, or the grace signal comes "
        "at once; shorten grace: or raise time:")


def test_the_site_s_grace_against_a_variant_s_time() -> None:
    assert _render_error({"name": "j", "command": "true", "overrides": {"gpu": {"time": "30s"}}}, "gpu") == (
        "job.yaml: the site's preemption.grace (00:00:30) must be shorter than overrides.gpu.time (00:00:30) of "
        "variant gpu, or the grace signal comes at once; set a shorter grace: or raise time:")


def test_grace_is_free_for_te_jobs_and_below_the_limit() -> None:
    from slurmx.submit.render import variant_options

    for data in ({"name": "j", "command": "true", "grace": "2h", "time": "5m", "class": "te"},
                 {"name": "j", "command": "true", "grace": "4m", "time": 5}):
        assert variant_options(parse_spec(data), site(), "cpu", "j-000000", "race")


# ---------------------------------------------------------------------------------------------- #SBATCH reading


def _directives(text: str) -> dict[str, str]:
    from slurmx.submit.directives import parse_directives

    return parse_directives(text, "job.sh").fields


@pytest.mark.parametrize("separator", ["\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
def test_lines_end_only_at_newline(separator: str) -> None:
    # Python's splitlines() would end the line at the separator and read a second #SBATCH line; sbatch does not.
    assert _directives(f"#!/bin/bash\n#SBATCH -c 2 #x{separator}#SBATCH --mem=9G\ntrue\n") == {"cpus-per-task": "2"}


@pytest.mark.parametrize("blank", ["\v", "\f", "\r", " \t"])
def test_a_line_of_c_whitespace_is_blank_to_sbatch(blank: str) -> None:
    assert _directives(f"#!/bin/bash\n{blank}\n#SBATCH -c 2\ntrue\n") == {"cpus-per-task": "2"}


@pytest.mark.parametrize("command", ["\x85", "\u2028", "\xa0", "\x1c"])
def test_a_line_of_other_unicode_space_is_a_command_to_sbatch(command: str) -> None:
    assert _directives(f"#!/bin/bash\n{command}\n#SBATCH -c 2\ntrue\n") == {}


@pytest.mark.parametrize(("line", "value"), [
    (r"#SBATCH --job-name=a\ b", "a b"),
    (r"#SBATCH --job-name='a\'b'", "a'b"),  # sbatch's backslash escapes inside quotes too
    (r"#SBATCH --job-name=a\#b", "a#b"),
    ("#SBATCH\v--job-name=x\f", "x"),
])
def test_words_are_split_as_sbatch_splits_them(line: str, value: str) -> None:
    assert _directives(f"#!/bin/bash\n{line}\ntrue\n") == {"job-name": value}


def test_a_script_is_submitted_byte_for_byte(tmp_path: Path) -> None:
    from slurmx.submit.render import render_variant

    body = b"#!/bin/bash\n#SBATCH -c 2\nprintf 'a\\rb\\n'  # a lone \r stays\r\necho\xc2\x85x\n\n\n"
    path = tmp_path / "job.sh"
    path.write_bytes(body.replace(b"\r\n", b"\r "))
    spec, _ = build_spec(str(path), [], [], site())
    assert spec.script is not None and spec.script.encode() == path.read_bytes()
    script = render_variant(spec, site(), "cpu", "j-000000", "race").script
    assert spec.script in script  # the payload's here-document holds the whole file, every byte


@pytest.mark.parametrize(("data", "message"), [
    (b"#!/bin/bash\r\n#SBATCH -c 2\r\ntrue\r\n",
     ":1: the script has DOS line breaks (\\r\\n), which sbatch refuses too; convert it with `dos2unix "),
    (b"#!/bin/bash\ntrue\n# caf\xe9\n", ":3: byte 0xe9 is not UTF-8; save the script as UTF-8"),
    (b"#SBATCH -c 2\ntrue\n", ":1: a batch script starts with #! and its interpreter (e.g. #!/bin/bash), as sbatch "
                              "requires"),
])
def test_a_script_sbatch_would_refuse_is_one_line(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "job.sh"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as info:
        build_spec(str(path), [], [], site())
    assert str(info.value).startswith(f"{path}{message}")
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------------------- per-variant payload


def test_a_variant_s_command_replaces_a_top_level_script() -> None:
    from slurmx.submit.render import _payload

    spec = parse_spec({"name": "j", "script": "#!/bin/bash\necho cpu\n",
                       "overrides": {"gpu": {"command": "echo gpu"}, "accel": {"script": "echo accel\n"}}})
    assert _payload(spec, "cpu", "job.yaml") == "#!/bin/bash\necho cpu"
    assert _payload(spec, "gpu", "job.yaml") == "#!/bin/bash\necho gpu"
    assert _payload(spec, "accel", "job.yaml") == "#!/bin/bash\necho accel"


def test_a_variant_with_both_command_and_script_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec({"name": "j", "command": "true", "overrides": {"gpu": {"command": "a", "script": "b"}}},
                   "job.yaml")
    assert str(info.value) == "job.yaml: overrides.gpu: give one of 'command' or 'script', not both"


# ---------------------------------------------------------------------------------------------- resource options


def _options(tmp_path: Path, directives: str, cli: list[str] | None = None,
             variants: tuple[str, ...] | None = None) -> dict[str, tuple[str, ...]]:
    """Each variant's sbatch options for a script with these #SBATCH lines."""
    from slurmx.submit.submitter import plan_group

    path = tmp_path / "job.sh"
    path.write_text(f"#!/bin/bash\n{directives}\ntrue\n")
    spec, _ = build_spec(str(path), cli or [], [], site(), variants)
    _, _, rendered = plan_group(spec, site(), mode="race", only=variants, source=str(path))
    return {r.kind: r.options for r in rendered}


def _script_error(tmp_path: Path, directives: str, cli: list[str] | None = None,
                  variants: tuple[str, ...] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        _options(tmp_path, directives, cli, variants)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message.replace(str(tmp_path / "job.sh"), "job.sh")


def test_mem_per_cpu_becomes_each_variant_s_memory_and_replaces_slurmx_s_mem(tmp_path: Path) -> None:
    got = _options(tmp_path, "#SBATCH --mem-per-cpu=4G")
    assert "--mem=4096M" in got["cpu"] and "--mem=8192M" in got["gpu"]  # the gpu kind has 2 CPUs
    assert not any(o.startswith("--mem-per-cpu") for options in got.values() for o in options)
    assert "--mem=8192M" in _options(tmp_path, "#SBATCH --mem-per-cpu=2G -c 4")["cpu"]


def test_the_command_line_s_memory_replaces_the_script_s_in_either_form(tmp_path: Path) -> None:
    assert "--mem=1024M" in _options(tmp_path, "#SBATCH --mem-per-cpu=4G", ["--mem=1G"])["cpu"]
    assert "--mem=3072M" in _options(tmp_path, "#SBATCH --mem=9G", ["--mem-per-cpu=3G"])["cpu"]


def test_mem_and_mem_per_cpu_together_are_refused_as_sbatch_refuses_them(tmp_path: Path) -> None:
    assert _script_error(tmp_path, "#SBATCH --mem=1G\n#SBATCH --mem-per-cpu=2G") == (
        "job.sh:3: --mem-per-cpu and --mem (at job.sh:2) ask for memory twice, and sbatch refuses the pair; keep one")
    with pytest.raises(ConfigError, match=r"^job.yaml: give one of 'mem' \(the job's\) or 'mem_per_cpu', not both"):
        parse_spec({"name": "j", "command": "true", "mem": "1G", "mem_per_cpu": "1G"}, "job.yaml")


@pytest.mark.parametrize("line", ["#SBATCH --gpus=2", "#SBATCH -G 2", "#SBATCH -G2", "#SBATCH --gpus-per-task=2",
                                  "#SBATCH --gpus-per-node=2", "#SBATCH --gpus 2"])
def test_gpus_mean_the_kinds_with_gpus_each_asking_for_that_many(tmp_path: Path, line: str) -> None:
    got = _options(tmp_path, line)
    assert list(got) == ["gpu"]  # not the cpu variant, nor accel (whose GRES is no GPU)
    assert "--gres=gpu:2" in got["gpu"]
    assert not any(o.startswith("--gpus") for o in got["gpu"])


def test_a_gpu_type_replaces_the_kind_s(tmp_path: Path) -> None:
    assert "--gres=gpu:a100:3" in _options(tmp_path, "#SBATCH --gpus=a100:3")["gpu"]


def test_gpus_with_a_kind_that_has_none_is_refused(tmp_path: Path) -> None:
    assert _script_error(tmp_path, "#SBATCH --gpus=2", variants=("cpu", "gpu")) == (
        "job.sh: gpus: 2 asks for GPUs, which kind cpu has none of; choose kinds with GPUs (gpu) or leave gpus out")
    assert _script_error(tmp_path, "#SBATCH --gpus=0") == (
        "job.sh: gpus: expected a GPU count like 2 or a100:2 (at least 1), got '0'")


@pytest.mark.parametrize(("line", "kinds"), [
    ("#SBATCH -p gpu", ["gpu"]), ("#SBATCH --partition=cpu,accel", ["cpu", "accel"]),
    ("#SBATCH --parti=accel", ["accel"]),
])
def test_a_partition_names_the_kinds_on_it(tmp_path: Path, line: str, kinds: list[str]) -> None:
    assert list(_options(tmp_path, line)) == kinds


def test_the_command_line_partition_and_variants_win_over_the_script_s(tmp_path: Path) -> None:
    assert list(_options(tmp_path, "#SBATCH -p gpu", ["-p", "cpu"])) == ["cpu"]
    assert list(_options(tmp_path, "#SBATCH -p gpu", [], ("accel",))) == ["accel"]


def test_a_partition_that_is_no_kind_s_names_the_known_ones(tmp_path: Path) -> None:
    assert _script_error(tmp_path, "#SBATCH -c 1\n#SBATCH -p debug") == (
        "job.sh:3: --partition=debug: 'debug' is the partition of no resource kind; known partitions (kind): "
        "cpu (cpu), gpu (gpu), accel (accel); or choose kinds with --variants")


@pytest.mark.parametrize("line", ["#SBATCH -n 1", "#SBATCH --ntasks=1", "#SBATCH -N 1", "#SBATCH --nodes=1-1",
                                  "#SBATCH --ntasks-per-node=1"])
def test_one_task_on_one_node_is_what_a_variant_is(tmp_path: Path, line: str) -> None:
    got = _options(tmp_path, line)
    assert list(got) == ["cpu", "gpu", "accel"]
    name = line.split()[1].lstrip("-").split("=")[0]
    long = {"n": "ntasks", "N": "nodes"}.get(name, name)
    assert all(f"--{long}=1" in options for options in got.values())  # passed on as a count of one


REFUSED = [
    ("#SBATCH -N 2-4", "job.sh:2: --nodes=2-4: a node range lets Slurm choose the count when the job starts, which "
                       "the policies cannot plan; give one count (--nodes=2 or --nodes=4)"),
    ("#SBATCH -N 2 -n 1", "job.sh:2: --ntasks=1 with --nodes=2: every node runs at least one task; ask for "
                          "--ntasks=2 or more, or --nodes=1"),
    ("#SBATCH -N 3 -w c[1-2]", "job.sh:2: --nodes=3 with --nodelist=c[1-2] (at job.sh:2) naming 2 node(s): slurmx "
                               "places such a job only on the listed nodes; list 3 nodes, or ask for --nodes=2"),
    ("#SBATCH -N 2 -G 2", "job.sh:2: --gpus=2 with --nodes=2: slurmx asks for GPUs per node (each kind's GRES); "
                          "write the GPUs each node needs as --gpus-per-node"),
    ("#SBATCH -C 'a*2'", "job.sh:2: constraint 'a*2': '*' at character 2: a feature count (name*N) is not "
                         "supported; ask for the nodes with -N and the feature alone"),
    ("#SBATCH -w /etc/nodes", "job.sh:2: --nodelist=/etc/nodes: '/etc/nodes' reads as a file of node names, which "
                              "slurmx cannot check; write the names themselves (--nodelist=c1,c2)"),
    ("#SBATCH -F nodes.txt", "job.sh:2: --nodefile is not supported: write the node names as --nodelist=c1,c2 "
                             "(nodelist: in a spec), which slurmx checks against the kinds' partitions"),
    ("#SBATCH --mem-per-gpu=8G", "job.sh:2: --mem-per-gpu is not supported: write the job's whole memory as --mem "
                                 "(mem: in a spec)"),
    ("#SBATCH --cpus-per-gpu=4", "job.sh:2: --cpus-per-gpu is not supported: write the job's whole CPU count as "
                                 "--cpus-per-task (cpus: in a spec)"),
    ("#SBATCH --ntasks-per-gpu=1", "job.sh:2: --ntasks-per-gpu is not supported: each kind has its own GPUs per "
                                   "node; ask for the tasks with --ntasks or --ntasks-per-node and the GPUs per node "
                                   "with --gpus-per-node"),
    ("#SBATCH --gpus-per-socket=1", "job.sh:2: --gpus-per-socket is not supported: write the job's GPUs as --gpus "
                                    "(gpus: in a spec)"),
    ("#SBATCH --tres-per-task=cpu:2", "job.sh:2: --tres-per-task is not supported: write --cpus-per-task and --gpus "
                                      "(cpus: and gpus: in a spec)"),
    ("#SBATCH --array=1-3%0", "job.sh:2: --array=1-3%0: %0: a throttle is a count of tasks at once, e.g. 0-9%3"),
    ("#SBATCH -d afternotok:12", "job.sh:2: --dependency=afternotok:12: afternotok is not supported on groups: "
                                 "a losing variant is cancelled, which counts as not ok while the group itself runs "
                                 "fine; use afterok or afterany"),
]


@pytest.mark.parametrize(("line", "message"), REFUSED, ids=[r[0].split()[1] for r in REFUSED])
def test_an_option_a_group_cannot_keep_is_refused_in_one_line(tmp_path: Path, line: str, message: str) -> None:
    assert _script_error(tmp_path, line) == message


def test_the_same_refusal_from_the_command_line(tmp_path: Path) -> None:
    assert _script_error(tmp_path, "", ["--array=1-3%x"]).startswith("command line: --array=1-3%x: %x: a throttle")


def test_slurmx_s_own_option_after_an_sbatch_one_says_where_it_goes(tmp_path: Path) -> None:
    assert _script_error(tmp_path, "", ["-G", "1", "--variants", "gpu"]) == (
        "command line: --variants is an option of slurmx submit itself: give it before the sbatch options "
        "(slurmx submit --variants ... --time=... job.sh)")


@settings(max_examples=150, deadline=None, database=None)
@given(st.lists(st.sampled_from(["--mem-per-cpu=1G", "--mem=2G", "-G1", "--gpus=a100:2", "-pgpu", "-pcpu",
                                 "-n1", "-n3", "-N2", "--array=1-2", "-d", "afterok:1", "-c2", "--time=5",
                                 "--gpus-per-task=1", "--mem-per-gpu=1G", "-pnone", "--ntasks-per-node=1",
                                 "--wait", "--parsable", "--account=p"]), max_size=6),
       st.sampled_from([None, ("cpu",), ("gpu",), ("cpu", "gpu")]))
def test_property_any_mix_of_resource_options_maps_or_is_refused_in_one_line(
        words: list[str], variants: tuple[str, ...] | None) -> None:
    from slurmx.submit.submitter import plan_group

    path = Path(__file__).resolve().parents[2] / "examples" / "hello.yaml"
    try:
        spec, _ = build_spec(str(path), words, [], site(), variants)
        _, _, rendered = plan_group(spec, site(), mode="race", only=variants, source=str(path))
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(("command line: ", f"{path}: "))
        return
    for variant in rendered:
        names = [o.split("=")[0] for o in variant.options]
        # --mem per node; --mem-per-cpu only where the tasks per node are Slurm's to choose (-n3 without -N)
        spread = spec.ntasks is not None and spec.ntasks > 1 and spec.nodes is None and spec.ntasks_per_node is None
        memory = "--mem-per-cpu" if spread and spec.mem_per_cpu_mb else "--mem"
        assert names.count(memory) == 1 and names.count("--mem") + names.count("--mem-per-cpu") == 1
        assert "--gpus" not in names
        assert not {"--array", "--mem-per-gpu"} & set(names)  # an array is groups; per-GPU memory refused
        assert {o for o in variant.options if o.startswith("--dependency")} <= {"--dependency=afterok:1"}
        layout = {o for o in variant.options if o.startswith(("--ntasks", "--nodes"))}
        assert layout <= {"--ntasks=1", "--ntasks=3", "--ntasks-per-node=1", "--nodes=2"}  # as asked, once each
        assert len({o.split("=")[0] for o in layout}) == len(layout)
        if spec.gpus is not None:
            assert any(o.startswith("--gres=gpu:") for o in variant.options), variant.options


# ---------------------------------------------------------------------------------------------- --wait, --parsable


class _GroupSlurm:
    """Enough of a SlurmAdapter for `slurmx submit`: sbatch hands out ids; squeue shows the group's jobs, which
    end with `final` states after `polls` looks."""

    def __init__(self, final: dict[str, str], polls: int = 1) -> None:
        self.final = final
        self.polls = polls
        self.submitted: list[tuple[int, str]] = []

    def make_private_folder(self, path: str, files: object) -> None:
        Path(path).mkdir(mode=0o700)  # as the submitting user (this test's): the group's owner

    def folder_owners(self, paths: Sequence[str]) -> dict[str, FolderOwner | None]:
        return local_folder_owners(paths)

    def submit(self, script: str, options: object) -> int:
        job_id = 100 + len(self.submitted)
        self.submitted.append((job_id, script))
        return job_id

    def jobs(self, job_ids: object = None, user: object = None) -> list[object]:
        import os
        import re

        from slurmx.core.model import VariantState
        from slurmx.core.resources import Resources
        from slurmx.slurm.records import SlurmJob

        self.polls -= 1
        found = []
        for job_id, script in self.submitted:
            comment = re.search(r"#SBATCH --comment=(\S+)", script)
            kind = re.search(r"#SBATCH --job-name=\S+@(\w+)", script)
            assert comment is not None and kind is not None
            state = VariantState(self.final[kind.group(1)]) if self.polls < 0 else VariantState.PENDING
            found.append(SlurmJob(job_id=job_id, name=f"j@{kind.group(1)}", user="alice", user_id=os.getuid(),
                                  state=state, state_text=state.value.upper(), reason="", partition=kind.group(1),
                                  qos="be", comment=comment.group(1), nodes="", request=Resources(),
                                  allocated=Resources(), priority=1, nice=0, held=False, restart_count=0,
                                  time_limit_s=60, submit_time=1, start_time=None, end_time=None))
        return found

    def accounting(self, job_ids: object = None, since: str = "") -> list[object]:
        return []


def _submit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, slurm: _GroupSlurm, *words: str) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from slurmx.cli import app as cli_module
    from slurmx.cli.context import Context
    from slurmx.submit.api import GroupHandle

    site_path = tmp_path / "site.yaml"
    site_path.write_text("cluster: {name: t}\nresources:\n  cpu: {partition: cpu, cpus: 1, mem: 1G}\n"
                         "  gpu: {partition: gpu, cpus: 1, mem: 1G, gres: 'gpu:1'}\n"
                         f"submit: {{spool_dir: {tmp_path}, mode: race}}\n")
    monkeypatch.setattr(Context, "adapter", lambda self: slurm)
    wait = GroupHandle.wait
    monkeypatch.setattr(GroupHandle, "wait", lambda self, timeout=None, poll=2.0: wait(self, timeout, 0.0))
    result = CliRunner().invoke(cli_module.cli, ["--site", str(site_path), "submit", *words])
    failure = f"slurmx: {result.exception}\n" if result.exit_code == 1 and result.exception else ""  # as _run
    return result.exit_code, result.stdout, result.stderr + failure


def _script(tmp_path: Path, directives: str = "") -> str:
    path = tmp_path / "job.sh"
    path.write_text(f"#!/bin/bash\n{directives}\ntrue\n")
    return str(path)


def test_parsable_prints_the_group_id_a_script_feeds_to_the_next_command(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    slurm = _GroupSlurm({"cpu": "completed", "gpu": "cancelled"})
    code, out, _ = _submit(monkeypatch, tmp_path, slurm, "--parsable", _script(tmp_path))
    assert code == 0 and out.count("\n") == 1
    assert out.strip().startswith("job-") and f"g={out.strip()}," in slurm.submitted[0][1]
    code, out, _ = _submit(monkeypatch, tmp_path, _GroupSlurm({}), _script(tmp_path, "#SBATCH --parsable"))
    assert code == 0 and out.strip().startswith("job-") and " " not in out.strip()  # from the script, as sbatch


def test_wait_blocks_until_the_group_ends_whichever_variant_ran(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    slurm = _GroupSlurm({"cpu": "cancelled", "gpu": "completed"}, polls=3)
    code, out, err = _submit(monkeypatch, tmp_path, slurm, "--wait", "--parsable", _script(tmp_path))
    assert code == 0, err
    assert slurm.polls < 0  # it looked until the jobs ended
    assert f"Group {out.strip()} completed (variant gpu)" in err


@pytest.mark.parametrize("where", ["cli", "script", "after-an-sbatch-option"])
def test_wait_fails_like_sbatch_when_the_group_did_not_complete(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                where: str) -> None:
    slurm = _GroupSlurm({"cpu": "failed", "gpu": "cancelled"})
    script = _script(tmp_path, "#SBATCH -W" if where == "script" else "")
    words = {"cli": ["--wait", script], "script": [script], "after-an-sbatch-option": ["-c", "1", "--wait", script]}
    code, _, err = _submit(monkeypatch, tmp_path, slurm, *words[where])
    assert code == 1
    assert err.strip().splitlines()[-1].startswith("slurmx: group job-") and err.rstrip().endswith(
        "ended failed (variant cpu)")


@pytest.mark.parametrize(("gres", "kinds", "option"), [
    ("gpu", ["gpu"], "--gres=gpu:1"), ("gpu:2", ["gpu"], "--gres=gpu:2"), ("gpu:a100:2", ["gpu"], "--gres=gpu:a100:2"),
    ("gpu:a100", ["gpu"], "--gres=gpu:a100:1"), ("accel:1", ["cpu", "gpu", "accel"], None),
])
def test_a_gpu_gres_is_gpus_and_another_gres_is_the_kind_s(tmp_path: Path, gres: str, kinds: list[str],
                                                           option: str | None) -> None:
    got = _options(tmp_path, f"#SBATCH --gres={gres}")
    assert list(got) == kinds
    if option is not None:
        assert option in got["gpu"]
    else:  # dropped with a note: each kind keeps its own GRES
        assert "--gres=gpu:1" in got["gpu"] and "--gres=accel:1" in got["accel"]


# ---------------------------------------------------------------------------------------------- the reader vs sbatch


def _sbatch_reference(body: bytes) -> list[tuple[int, bytes]]:
    """sbatch's own loop (src/sbatch/opt.c, _opt_batch_script and next_line), transliterated over bytes: lines end
    at b"\\n" only; a line starting with the magic word is a directive; else a line with a non-isspace() byte before
    any '#' stops the reading."""
    found = []
    for lineno, line in enumerate(body.split(b"\n"), start=1):
        if line.startswith(b"#SBATCH"):
            found.append((lineno, line[len(b"#SBATCH"):]))
            continue
        is_cmd = False
        for byte in line:
            if byte in b" \t\n\v\f\r":
                continue
            is_cmd = byte != ord("#")
            break
        if is_cmd:
            break
    return found


PIECES = st.sampled_from(["#SBATCH -c 2", "#SBATCH --mem=1G", "#SBATCH", "  #SBATCH -c 9", "# note", "#!/bin/bash",
                          "echo hi", "", " ", "\t", "\v", "\f", "\r", "\x85", "\u2028", "\x1c", "\xa0", "#SBATCH -J a",
                          "#SBATCH\t-J b", "##SBATCH -c 7", "#SBATCHx"])


@settings(max_examples=400, deadline=None, database=None)
@given(st.lists(st.tuples(PIECES, st.sampled_from(["\n", "\n", "\r\n", "\v", "\x85", "\u2028", "\f"])), max_size=8))
def test_property_directive_lines_are_the_ones_sbatch_reads(pieces: list[tuple[str, str]]) -> None:
    from slurmx.submit.directives import _directive_lines

    text = "".join(piece + end for piece, end in pieces)
    ours = [(n, body.encode()) for n, body in _directive_lines(text)]
    assert ours == _sbatch_reference(text.encode())


def test_a_clock_number_survives_pickle_and_copy() -> None:
    import copy
    import pickle

    number = ClockNumber(5400, "1:30:00")
    for again in (pickle.loads(pickle.dumps(number)), copy.deepcopy(number), copy.copy(number)):
        assert again == 5400 and isinstance(again, ClockNumber) and again.text == "1:30:00"


def test_test_only_submits_nothing_as_sbatch_s(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    slurm = _GroupSlurm({})
    code, out, err = _submit(monkeypatch, tmp_path, slurm, _script(tmp_path, "#SBATCH --test-only"))
    assert code == 0, err
    assert slurm.submitted == [] and out.startswith("# ---- group job-")


def test_a_heterogeneous_job_is_refused_in_one_line(tmp_path: Path) -> None:
    assert _script_error(tmp_path, "#SBATCH -c 1\n#SBATCH hetjob\n#SBATCH -c 2") == (
        "job.sh:3: heterogeneous jobs (hetjob) are not supported: a group runs one job of one kind; submit each "
        "component as a group of its own")
