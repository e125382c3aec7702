"""Every sbatch option honoured, mapped or refused with a usable fix (issue 32, item 4).

Each error names where its value came from (the command line or `file:line`) and says what to write instead.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.core.config import SiteConfig, parse_site_config
from slurmx.core.validation import ConfigError
from slurmx.submit.entry import build_spec
from slurmx.submit.render import RenderedVariant


def site(**extra: object) -> SiteConfig:
    return parse_site_config({
        "cluster": {"name": "t"},
        "resources": {
            "cpu": {"partition": "cpu", "cpus": 1, "mem": "500M", "time": "1h"},
            "gpu": {"partition": "gpu", "cpus": 2, "mem": "500M", "gres": "gpu:1"},
        },
        "classes": {"te": {"qos": "short"}, "be": {"qos": "scavenger"}},
        "preemption": {"grace": "30s"},
        **extra,
    })


def _script(tmp_path: Path, directives: str = "", body: str = "true") -> Path:
    path = tmp_path / "job.sh"
    path.write_text(f"#!/bin/bash\n{directives}\n{body}\n")
    return path


def _rendered(tmp_path: Path, directives: str = "", cli: list[str] | None = None, mode: str = "race",
              the_site: SiteConfig | None = None, body: str = "true") -> dict[str, RenderedVariant]:
    from slurmx.submit.submitter import plan_group

    the_site = the_site or site()
    path = _script(tmp_path, directives, body)
    spec, _ = build_spec(str(path), cli or [], [], the_site)
    _, _, rendered = plan_group(spec, the_site, mode=mode, source=str(path))
    return {r.kind: r for r in rendered}


def _error(tmp_path: Path, directives: str = "", cli: list[str] | None = None, mode: str = "race",
           the_site: SiteConfig | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        _rendered(tmp_path, directives, cli, mode, the_site)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message.replace(str(tmp_path / "job.sh"), "job.sh")


# ------------------------------------------------------------------------------------ 1. where a value came from

@pytest.mark.parametrize("option", ["--mem=0", "--mem=0G", "--mem-per-cpu=0"])
def test_whole_node_memory_from_the_command_line_is_refused_naming_the_command_line(tmp_path: Path,
                                                                                      option: str) -> None:
    message = _error(tmp_path, "#SBATCH --mem=2G", [option])
    key = option.split("=")[0]
    assert message.startswith(f"command line: {option}: all of a node's memory")
    assert f"leave {key} out (each variant then asks for its kind's memory" in message


def test_whole_node_memory_in_a_script_names_its_line(tmp_path: Path) -> None:
    assert _error(tmp_path, "#SBATCH -c 2\n#SBATCH --mem=0").startswith("job.sh:3: --mem=0: all of a node's memory")


@pytest.mark.parametrize("value", ["UNLIMITED", "unlimited", "INFINITE", "-1", "0", "0:00"])
def test_an_unlimited_time_is_refused_with_a_fix_naming_where(tmp_path: Path, value: str) -> None:
    assert _error(tmp_path, "", [f"--time={value}"]) == (
        f"command line: --time={value}: a variant's time limit is finite: slurmx sends its grace signal before the "
        "limit; leave --time out (each variant then gets its kind's limit from the site config, else the "
        "partition's default) or give one like --time=2-00:00:00")
    assert _error(tmp_path, f"#SBATCH -t {value}").startswith(f"job.sh:2: --time={value}: a variant's time")


def test_the_fix_for_an_unlimited_time_works(tmp_path: Path) -> None:
    got = _rendered(tmp_path, "#SBATCH --mem=1G")
    assert "--time=01:00:00" in got["cpu"].options  # the kind's limit
    assert not any(o.startswith("--time") for o in got["gpu"].options)  # the partition's default


@settings(max_examples=100, deadline=None, database=None)
@given(option=st.sampled_from(["--time", "--mem", "--mem-per-cpu", "--cpus-per-task"]),
       value=st.text(st.sampled_from("0123456789:-GMKTx. "), min_size=1, max_size=8),
       on_command_line=st.booleans())
def test_property_a_bad_value_names_where_it_was_written(tmp_path_factory: pytest.TempPathFactory, option: str,
                                                         value: str, on_command_line: bool) -> None:
    tmp_path = tmp_path_factory.mktemp("p")
    value = value.strip() or "x"
    cli = [f"{option}={value}"] if on_command_line else []
    directives = "" if on_command_line else f"#SBATCH {option}='{value}'"
    try:
        _rendered(tmp_path, directives, cli)
    except ConfigError as exc:
        message = str(exc).replace(str(tmp_path / "job.sh"), "job.sh")
        assert "\n" not in message
        assert message.startswith("command line: " if on_command_line else "job.sh:2: "), message


# ------------------------------------------------------------------------------------ 7. the site's Slurm release

def _at(release: str) -> SiteConfig:
    return site(cluster={"name": "t", "slurm_version": release})


@pytest.mark.parametrize(("option", "since"), [("--oom-kill-step", "24.11"), ("--stepmgr", "24.05"),
                                               ("--tres-bind=gres/gpu:closest", "23.11"),
                                               ("--resources=lic", "25.11"), ("--container-type=oci", "26.05")])
def test_an_option_newer_than_the_site_s_slurm_is_refused_naming_both_versions(tmp_path: Path, option: str,
                                                                             since: str) -> None:
    name = option.split("=")[0]
    expected = (f"{name} is new in Slurm {since}; this site runs Slurm 22.05 (cluster.slurm_version), whose "
                "sbatch refuses it: leave it out")
    assert _error(tmp_path, "", [option], the_site=_at("22.05")) == f"command line: {expected}"
    assert _error(tmp_path, f"#SBATCH {option}", the_site=_at("22.05")) == f"job.sh:2: {expected}"
    got = _rendered(tmp_path, f"#SBATCH {option}", the_site=_at("26.05"))
    assert option in got["cpu"].options
    assert option in _rendered(tmp_path, f"#SBATCH {option}")["cpu"].options  # no release configured: sbatch's call


def test_a_spec_s_sbatch_list_is_checked_against_the_release_too() -> None:
    from slurmx.submit.render import variant_options
    from slurmx.submit.spec import parse_spec

    spec = parse_spec({"name": "j", "command": "true", "sbatch": ["--oom-kill-step"]})
    with pytest.raises(ConfigError) as info:
        variant_options(spec, _at("24.05"), "cpu", "g1", "race", "job.yaml")
    assert str(info.value) == ("job.yaml: sbatch: --oom-kill-step is new in Slurm 24.11; this site runs Slurm 24.05 "
                               "(cluster.slurm_version), whose sbatch refuses it: leave it out")
    assert "--oom-kill-step" in variant_options(spec, _at("24.11"), "cpu", "g1", "race", "job.yaml")


def test_an_option_a_release_dropped_is_refused_from_it_on(tmp_path: Path) -> None:
    assert _error(tmp_path, "#SBATCH --power=level", the_site=_at("24.11")) == (
        "job.sh:2: --power was removed in Slurm 24.05; this site runs Slurm 24.11 (cluster.slurm_version): "
        "leave it out")
    assert "--power=level" in _rendered(tmp_path, "#SBATCH --power=level", the_site=_at("22.05"))["cpu"].options


# ------------------------------------------------------------------------------------ 2. --export

@pytest.mark.parametrize(("line", "value"), [("#SBATCH --export=NONE", "NONE"), ("#SBATCH --export=none", "NONE"),
                                             ("#SBATCH --export=ALL,DATA=/scratch,X", "ALL,DATA=/scratch,X"),
                                             ("#SBATCH --export=NIL", "NIL"), ("#SBATCH --export DATA=1", "DATA=1")])
def test_export_is_honoured_on_every_variant(tmp_path: Path, line: str, value: str) -> None:
    for mode in ("race", "managed"):
        got = _rendered(tmp_path, line, mode=mode)
        assert all(f"--export={value}" in r.options for r in got.values()), mode
        assert all(f"#SBATCH --export={value}\n" in r.script for r in got.values())


def test_the_command_line_s_export_wins_and_a_spec_says_export(tmp_path: Path) -> None:
    got = _rendered(tmp_path, "#SBATCH --export=NONE", ["--export=ALL"])
    assert "--export=ALL" in got["cpu"].options and "--export=NONE" not in got["cpu"].options
    assert "PATH=" not in got["cpu"].script.split("export SLURMX_GROUP")[0]  # everything travels: nothing added
    from slurmx.submit.spec import parse_spec

    assert parse_spec({"name": "j", "command": "true", "export": "none"}).export == "NONE"


@pytest.mark.parametrize(("line", "message"), [
    ("#SBATCH --export=NONE,X=1", "job.sh:2: --export=NONE,X=1: NONE exports no variable, so it takes no list; "
                                  "write --export=NONE, or --export=X=1 for those variables alone"),
    ("#SBATCH --export=ALL,SLURMX_GROUP=x", "job.sh:2: --export=ALL,SLURMX_GROUP=x: SLURMX_GROUP is set by slurmx "
                                            "in each variant; choose another name"),
    ("#SBATCH --export=1X", "job.sh:2: --export=1X: expected ALL, NONE, NIL or NAME[=value] items separated by "
                            "commas, got '1X'"),
])
def test_a_bad_export_is_refused_in_one_line_naming_where(tmp_path: Path, line: str, message: str) -> None:
    assert _error(tmp_path, line) == message


def test_export_nil_needs_slurm_23_11(tmp_path: Path) -> None:
    assert _error(tmp_path, "#SBATCH --export=NIL", the_site=_at("22.05")) == (
        "job.sh:2: --export=NIL is new in Slurm 23.11; this site runs Slurm 22.05 (cluster.slurm_version), whose "
        "sbatch refuses it: leave it out")
    assert "--export=NIL" in _rendered(tmp_path, "#SBATCH --export=NIL", the_site=_at("24.11"))["cpu"].options


_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
_ITEM = st.one_of(_NAME, st.tuples(_NAME, st.text("abc/:.=-_01", max_size=5)).map(lambda t: f"{t[0]}={t[1]}"),
                  st.sampled_from(["ALL", "all", "NONE", "NIL", "", "1a", "a b", "SLURMX_X"]))


@settings(max_examples=150, deadline=None, database=None)
@given(items=st.lists(_ITEM, min_size=1, max_size=4), on_command_line=st.booleans())
def test_property_an_export_list_is_honoured_as_written_or_refused_in_one_line(
        tmp_path_factory: pytest.TempPathFactory, items: list[str], on_command_line: bool) -> None:
    tmp_path = tmp_path_factory.mktemp("e")
    value = ",".join(items)
    cli = [f"--export={value}"] if on_command_line else []
    directives = "" if on_command_line else f"#SBATCH '--export={value}'"
    try:
        got = _rendered(tmp_path, directives, cli)
    except ConfigError as exc:
        message = str(exc).replace(str(tmp_path / "job.sh"), "job.sh")
        assert "\n" not in message
        assert message.startswith("command line: " if on_command_line else "job.sh:2: "), message
        return
    keyword = items[0].upper() in ("ALL", "NONE", "NIL")
    expected = ",".join([items[0].upper(), *items[1:]]) if keyword else value
    for rendered in got.values():
        assert f"--export={expected}" in rendered.options


def _run_under_export(tmp_path: Path, export: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import shutil

    spool = tmp_path / "spool"
    spool.mkdir(exist_ok=True)
    the_site = site(submit={"spool_dir": str(spool)})
    path = _script(tmp_path, f"#SBATCH --export={export}",
                   'echo "path=$PATH" > "$MARKS/payload"; command -v stat >> "$MARKS/payload"\n'
                   'python3 -c "import slurmx.hooks" && echo hooks >> "$MARKS/payload"')
    spec, _ = build_spec(str(path), [], [], the_site)
    from slurmx.submit.render import render_variant

    script = render_variant(spec, the_site, "cpu", "j-0a1b2c", "pick", str(path)).script
    return subprocess.run([shutil.which("bash") or "/bin/bash", "-c", script], capture_output=True, text=True,
                          timeout=60, check=False, env={**env, "SLURM_JOB_ID": "7", "MARKS": str(tmp_path)},
                          cwd=tmp_path)


def test_under_export_none_the_script_finds_what_it_needs_without_the_submitting_environment(tmp_path: Path) -> None:
    # What a node gives when no login environment could be loaded: SLURM_* alone, or a PATH without Slurm's tools.
    for env in ({}, {"PATH": "/nonexistent"}):
        (tmp_path / "payload").unlink(missing_ok=True)
        result = _run_under_export(tmp_path, "NONE", env)
        assert result.returncode == 0, result.stderr
        lines = (tmp_path / "payload").read_text().splitlines()
        assert lines[0].startswith("path=" + env.get("PATH", "")) and lines[-1] == "hooks", lines


def test_under_export_all_nothing_is_added_and_a_bare_path_would_not_do(tmp_path: Path) -> None:
    result = _run_under_export(tmp_path, "ALL", {"PATH": "/nonexistent"})
    assert result.returncode != 0  # the wrapper cannot run without its tools: why NONE appends their folders


# ------------------------------------------------------------------------------------ 3. -o / -e patterns

@pytest.mark.parametrize("pattern", ["logs/%x-%j.out", "%j.out", "slurm-%A_%a.out", "/abs/%u/%J.log",
                                     "%8j.txt", "run-%x.log"])
def test_a_pattern_that_differs_per_job_is_honoured_as_written(tmp_path: Path, pattern: str) -> None:
    from slurmx.submit.entry import build_submission

    got = _rendered(tmp_path, f"#SBATCH -o {pattern}")
    assert all(f"--output={pattern}" in r.options for r in got.values())
    assert build_submission(str(tmp_path / "job.sh"), [], [], site()).notes == []


def test_a_shared_file_becomes_one_per_variant_and_the_note_names_each(tmp_path: Path) -> None:
    from slurmx.submit.entry import build_submission

    got = _rendered(tmp_path, "#SBATCH -o logs/out.log -e %u-%N.err")
    assert "--output=logs/out.cpu.log" in got["cpu"].options and "--output=logs/out.gpu.log" in got["gpu"].options
    assert "--error=%u-%N.cpu.err" in got["cpu"].options and "--error=%u-%N.gpu.err" in got["gpu"].options
    notes = build_submission(str(tmp_path / "job.sh"), ["-e", "x"], [], site()).notes
    assert notes == [
        "--output=logs/out.log: each variant is a job of its own and writes its own file: logs/out.cpu.log (cpu), "
        "logs/out.gpu.log (gpu); the job's output is in the file of the variant that ran",
        "--error=x: each variant is a job of its own and writes its own file: x.cpu (cpu), x.gpu (gpu); the job's "
        "output is in the file of the variant that ran"]


def test_the_note_names_the_files_of_the_kinds_that_run(tmp_path: Path) -> None:
    from slurmx.submit.entry import build_submission

    _script(tmp_path, "#SBATCH -o out.log -G 1")
    assert build_submission(str(tmp_path / "job.sh"), [], [], site()).notes == [
        "--output=out.log: each variant is a job of its own and writes its own file: out.gpu.log (gpu); the job's "
        "output is in the file of the variant that ran"]


def test_a_profiling_sample_keeps_its_output_in_the_group_folder(tmp_path: Path) -> None:
    from slurmx.submit.render import render_with_sample

    path = _script(tmp_path, "#SBATCH -o out.log -e err-%j.log")
    spec, _ = build_spec(str(path), [], [], site())
    spec = spec.model_copy(update={"work": 100})
    rendered = render_with_sample(spec, site(), "cpu", "g-0a1b2c", "managed", str(path))
    assert "#SBATCH --output=out.cpu.log\n" in rendered.script and "#SBATCH --error=err-%j.log\n" in rendered.script
    assert rendered.sample_script is not None
    assert "#SBATCH --output=" in rendered.sample_script and "out.cpu.log" not in rendered.sample_script
    assert "--error=" not in rendered.sample_script


def test_without_o_the_output_stays_in_the_group_folder(tmp_path: Path) -> None:
    got = _rendered(tmp_path)
    assert next(o for o in got["cpu"].options if o.startswith("--output=")).endswith("/cpu-%j.out")
    assert not any(o.startswith("--error=") for o in got["cpu"].options)


def test_under_an_array_a_is_the_group_s_index(tmp_path: Path) -> None:
    from slurmx.submit.submitter import array_specs, plan_group

    path = _script(tmp_path, "#SBATCH --array=3-4 -o out-%a.log -e e-%3a-%j")
    spec, _ = build_spec(str(path), [], [], site())
    outputs = [[o for o in r.options if o.startswith(("--output", "--error"))]
               for one in array_specs(spec) for r in plan_group(one, site(), mode="race")[2] if r.kind == "cpu"]
    assert outputs == [["--output=out-3.cpu.log", "--error=e-003-%j"], ["--output=out-4.cpu.log", "--error=e-004-%j"]]


@settings(max_examples=200, deadline=None, database=None)
@given(pattern=st.lists(st.sampled_from([*"ab/._-", "%j", "%x", "%A", "%a", "%u", "%N", "%%", "%4j", "%n", "%s",
                                         "%t", "%J", "%b"]),
                        min_size=1, max_size=8).map("".join))
def test_property_each_variant_gets_a_file_of_its_own(pattern: str) -> None:
    """Slurm expands each variant's pattern with that job's id and name; two variants never get the same file,
    and a pattern that already differs per job is passed on untouched."""
    from slurmx.submit.output import per_variant

    def expand(text: str, job_id: int, kind: str) -> str:
        return re.sub(r"%([0-9]*)([%A-Za-z])", lambda m: {"%": "%", "j": str(job_id), "J": f"{job_id}.batch",
                                                          "A": str(job_id), "x": f"job@{kind}"}.get(m[2], m[2]),
                      text)

    files = {kind: per_variant(pattern, kind) for kind in ("cpu", "gpu")}
    assert expand(files["cpu"], 10, "cpu") != expand(files["gpu"], 11, "gpu"), files
    tokens = re.sub("%%", "", pattern)
    if re.search(r"%[0-9]*[jJAx]", tokens):
        assert files == {"cpu": pattern, "gpu": pattern}


# ------------------------------------------------------------------------------------ 5. --signal

USER_SCRIPT = """trap 'echo "user $(date +%s)" >> "$MARKS/log"' USR1
source "$SLURMX_HOOK_SH"
slurmx_on_preempt bash -c 'echo slurmx-checkpoint >> "$MARKS/log"'
bash -c 'trap "echo child >> \\"\\$MARKS/log\\"" USR1; sleep 6 & wait $!; sleep 6 & wait $!' &
echo started >> "$MARKS/log"
for _ in 1 2 3; do sleep 2 & wait $!; done
wait
echo done >> "$MARKS/log"
"""


def _signal_job(tmp_path: Path, line: str, env: dict[str, str]) -> subprocess.Popen[str]:
    import os
    import shutil

    spool = tmp_path / "spool"
    spool.mkdir(exist_ok=True)
    the_site = site(submit={"spool_dir": str(spool)})
    path = _script(tmp_path, line, USER_SCRIPT)
    spec, _ = build_spec(str(path), [], [], the_site)
    from slurmx.submit.render import render_variant

    script = render_variant(spec, the_site, "cpu", "j-0a1b2c", "pick", str(path)).script
    return subprocess.Popen([shutil.which("bash") or "/bin/bash", "-c", script], text=True, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "SLURM_JOB_ID": "7",
                                 "MARKS": str(tmp_path), **env})


def _log(tmp_path: Path, until: str, timeout: float = 20) -> list[str]:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = (tmp_path / "log").read_text().splitlines() if (tmp_path / "log").exists() else []
        if any(line.startswith(until) for line in lines):
            return lines
        time.sleep(0.05)
    raise AssertionError(f"no {until!r} in {lines}")


def test_on_preemption_the_user_s_handler_runs_then_slurmx_s_checkpoint(tmp_path: Path) -> None:
    import signal as sig

    job = _signal_job(tmp_path, "#SBATCH --signal=B:USR1@30", {})
    try:
        _log(tmp_path, "started")
        job.send_signal(sig.SIGUSR2)  # what slurmxd's preemption sends the batch shell
        assert job.wait(30) == 99, job.stderr.read() if job.stderr else ""
    finally:
        job.kill()
    lines = (tmp_path / "log").read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["started", "user", "slurmx-checkpoint"]  # B: the script alone


def test_before_the_time_limit_the_user_s_signal_comes_at_its_time(tmp_path: Path) -> None:
    import time

    start = int(time.time())
    job = _signal_job(tmp_path, "#SBATCH --signal=USR1@30", {"SLURM_JOB_END_TIME": str(start + 32)})
    try:
        lines = _log(tmp_path, "done")
        assert job.wait(30) == 0
    finally:
        job.kill()
    user = [line for line in lines if line.startswith("user")]
    assert len(user) == 1 and start + 1 <= int(user[0].split()[1]) <= start + 4, lines
    assert "child" in lines and "slurmx-checkpoint" not in lines  # without B: every process of the script


def test_a_signal_far_from_the_end_does_not_come_and_the_job_ends_as_usual(tmp_path: Path) -> None:
    import time

    job = _signal_job(tmp_path, "#SBATCH --signal=B:USR1", {"SLURM_JOB_END_TIME": str(int(time.time()) + 3600)})
    try:
        lines = _log(tmp_path, "done")
        assert job.wait(30) == 0
    finally:
        job.kill()
    assert not any(line.startswith(("user", "child", "slurmx")) for line in lines)


def test_the_signal_rides_in_the_script_not_in_slurm_s_one_signal_option(tmp_path: Path) -> None:
    got = _rendered(tmp_path, "#SBATCH --signal=B:USR1@30")
    assert [o for o in got["cpu"].options if o.startswith("--signal")] == ["--signal=B:USR2@30"]  # slurmx's grace
    assert "export SLURMX_USER_SIGNAL=USR1 SLURMX_USER_SIGNAL_TO=batch\n" in got["cpu"].script
    assert "_slurmx_user_timer 30 " in got["cpu"].script


@pytest.mark.parametrize(("value", "message"), [
    ("B:USR2@60", "job.sh:2: --signal=B:USR2@60: USR2 is slurmx's grace signal on this site (preemption.signal), "
                  "which its hooks handle; give your handler another signal (e.g. USR1): slurmx sends it to your "
                  "script on preemption too"),
    ("R:USR1@60", "job.sh:2: --signal=R:USR1@60: R: lets the job overlap a reservation, which needs Slurm to send "
                  "the signal; slurmx sends it from the job script (Slurm holds slurmx's grace signal): leave R: out"),
    ("B:KILL", "job.sh:2: --signal=B:KILL: KILL cannot be caught, so no handler of yours would run; use USR1 or TERM"),
    ("B:NOPE@1", "job.sh:2: --signal=B:NOPE@1: NOPE is not a signal; name one like USR1, TERM or INT"),
])
def test_a_signal_that_cannot_be_delivered_is_refused_with_a_fix(tmp_path: Path, value: str, message: str) -> None:
    assert _error(tmp_path, f"#SBATCH --signal={value}") == message


@settings(max_examples=150, deadline=None, database=None)
@given(flags=st.sampled_from(["", "B:", "R:", "b:", "BR:"]), name=st.sampled_from(["USR1", "SIGTERM", "10", "int",
                                                                                  "KILL", "99", "X"]),
       at=st.one_of(st.none(), st.integers(0, 70000)))
def test_property_a_signal_value_is_delivered_as_written_or_refused_in_one_line(flags: str, name: str,
                                                                                at: int | None) -> None:
    from slurmx.submit.signals import parse_signal

    value = f"{flags}{name}" + (f"@{at}" if at is not None else "")
    try:
        got = parse_signal(value)
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    assert got.batch_only == ("B" in flags.upper()) and got.seconds == (60 if at is None else at)
    assert parse_signal(str(got)) == got


def test_a_spec_s_signal_that_is_the_grace_signal_is_refused_at_render() -> None:
    from slurmx.submit.render import variant_options
    from slurmx.submit.spec import parse_spec

    with pytest.raises(ConfigError) as info:
        variant_options(parse_spec({"name": "j", "command": "true", "signal": "usr2"}), site(), "cpu", "g", "race",
                        "job.yaml")
    assert str(info.value).startswith("job.yaml: signal: USR2@60: USR2 is slurmx's grace signal on this site")


# ------------------------------------------------------------------------------------ 6. --begin

@pytest.mark.parametrize("value", ["now+1hour", "16:00", "2026-12-01T08:00", "tomorrow", "now+90", "noon"])
def test_begin_holds_every_variant_in_race_mode(tmp_path: Path, value: str) -> None:
    got = _rendered(tmp_path, f"#SBATCH --begin={value}")
    assert all([o for o in r.options if o.startswith("--begin")] == [f"--begin={value}"] for r in got.values())


def test_begin_in_managed_mode_waits_for_the_later_of_the_lease_and_the_users_time(tmp_path: Path) -> None:
    """More in tests/unit/test_begin_mail.py: the tag carries the user's time, slurmxd never starts it before."""
    later = _rendered(tmp_path, "", ["-b", "now+2hours"], mode="managed")
    assert [o for o in later["cpu"].options if o.startswith("--begin")] == ["--begin=now+7200"]
    managed = _rendered(tmp_path, "", mode="managed")
    assert [o for o in managed["cpu"].options if o.startswith("--begin")] == ["--begin=now+600"]  # the lease alone


def test_a_begin_sbatch_would_refuse_names_where(tmp_path: Path) -> None:
    assert _error(tmp_path, "#SBATCH --begin=soonish").startswith(
        "job.sh:2: --begin=soonish: expected a time as sbatch takes it: now+1hour, 16:00")


# ------------------------------------------------------------------------------------ the option corpus

_SAMPLE = {"time": "30", "mem": "1G", "mem-per-cpu": "1G", "cpus-per-task": "2", "gpus": "1", "gpus-per-task": "1",
           "gpus-per-node": "1", "partition": "cpu", "qos": "short", "array": "1-2", "dependency": "afterany:1",
           "signal": "B:USR1@30", "begin": "now+1hour", "export": "NONE", "output": "o-%j", "error": "e-%j",
           "ntasks": "4", "nodes": "2", "ntasks-per-node": "2", "gres": "gpu:1", "job-name": "j",
           "constraint": "nvlink|bigmem", "nodelist": "c[1-2]", "exclude": "g1"}


def test_corpus_every_option_sbatch_knows_is_mapped_honoured_or_refused_in_one_line(tmp_path: Path) -> None:
    """Each long option of the table (sbatch(1) of 22.05 to 26.05), from the command line: it lands on the
    variants, in a spec field, in the command's own options or in a note, or is refused in one line naming the
    command line; never silently dropped."""
    from slurmx.submit.directives import _LONG
    from slurmx.submit.entry import build_submission
    from slurmx.submit.submitter import plan_group

    path = _script(tmp_path)
    the_site = site()
    fields = {"time_s", "mem_mb", "mem_per_cpu_mb", "cpus", "gpus", "variants", "job_class", "array", "dependency",
              "signal", "begin", "export", "output", "error", "name", "constraint", "nodelist", "exclude",
              "exclusive", "nodes", "ntasks", "ntasks_per_node"}
    for name, kind in sorted(_LONG.items()):
        option = f"--{name}" if kind != "arg" else f"--{name}={_SAMPLE.get(name, '1')}"
        try:
            submission = build_submission(str(path), [option], [], the_site)
            rendered = plan_group(submission.spec, the_site, mode="race", source=str(path))[2]
        except ConfigError as exc:
            message = str(exc)
            assert "\n" not in message and message.startswith(("command line: ", str(path))), (option, message)
            continue
        on_variants = any(o == option or o.startswith(f"--{name}=") for r in rendered for o in r.options)
        in_field = any(getattr(submission.spec, f) not in (None, ()) and
                       getattr(submission.spec, f) != getattr(_bare_spec(path, the_site), f) for f in fields)
        noted = any(f"--{name}" in note for note in submission.notes)
        assert on_variants or in_field or noted or name in submission.client, option


def _bare_spec(path: Path, the_site: SiteConfig) -> object:
    from slurmx.submit.entry import build_submission

    return build_submission(str(path), [], [], the_site).spec
