"""Placement and multi-node, multi-task variants at submission (issue 32): spec fields per kind, fitted to the kinds
whose nodes can satisfy them, rendered into each variant's `#SBATCH` lines; every refusal one line with the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.core.config import SiteConfig, parse_site_config
from slurmx.core.model import Node
from slurmx.core.resources import Resources
from slurmx.core.validation import ConfigError
from slurmx.slurm.errors import SlurmCommandError
from slurmx.submit.entry import build_submission
from slurmx.submit.placement import check_constraint, fit_kinds
from slurmx.submit.render import render_variant, variant_options
from slurmx.submit.spec import parse_spec
from slurmx.submit.submitter import SubmitError, fit_to_cluster, plan_group, submit_groups


def site(cpu_flags: tuple[str, ...] = ()) -> SiteConfig:
    return parse_site_config({
        "cluster": {"name": "t"},
        "resources": {
            "cpu": {"partition": "cpu", "cpus": 4, "mem": "1G", "extra_flags": list(cpu_flags)},
            "gpu": {"partition": "gpu", "cpus": 2, "mem": "1G", "gres": "gpu:1"},
            "accel": {"partition": "accel", "cpus": 1, "mem": "500M", "gres": "accel:1"},
        },
        "classes": {"te": {"qos": "short"}, "be": {"qos": "scavenger"}},
        "preemption": {"grace": "30s"},
    })


def node(name: str, partition: str, *features: str) -> Node:
    return Node(name, (partition,), Resources(cpus=4), Resources(), "IDLE", features)


# The test cluster's nodes and features (docker-slurm/cluster): nvlink only the gpu nodes have, bigmem only c2.
CLUSTER = [node("c1", "cpu", "x86"), node("c2", "cpu", "x86", "bigmem"), node("g1", "gpu", "x86", "nvlink"),
           node("g2", "gpu", "x86", "nvlink"), node("a1", "accel")]
KINDS = ("cpu", "gpu", "accel")


def spec(**fields: Any) -> Any:
    return parse_spec({"name": "j", "command": "true", **fields}, "job.yaml")


class Nodes:
    """A SlurmAdapter's `nodes()`, counted; `down` makes it fail as an unreachable slurmctld does (typed Any: the
    functions under test take a whole SlurmAdapter)."""

    def __init__(self, down: bool = False) -> None:
        self.calls = 0
        self.down = down

    def nodes(self) -> list[Node]:
        self.calls += 1
        if self.down:
            raise SlurmCommandError(["scontrol", "show", "nodes"], 1,
                                    "slurm_load_node error: Unable to contact slurm controller\n(connect failure)")
        return CLUSTER


# ---------------------------------------------------------------------------------------------- fitting to kinds

def test_a_constraint_only_the_gpu_nodes_have_keeps_the_gpu_kind_with_a_note_on_the_others() -> None:
    kept, notes = fit_kinds(spec(constraint="nvlink"), site(), KINDS, CLUSTER, "job.sh")
    assert kept == ("gpu",)
    assert notes == ["variant cpu left out: no node of its partition cpu has --constraint=nvlink",
                     "variant accel left out: no node of its partition accel has --constraint=nvlink"]


def test_a_constraint_every_kind_but_one_has_keeps_those_kinds() -> None:
    assert fit_kinds(spec(constraint="x86"), site(), KINDS, CLUSTER)[0] == ("cpu", "gpu")
    assert fit_kinds(spec(constraint="bigmem|nvlink"), site(), KINDS, CLUSTER)[0] == ("cpu", "gpu")
    assert fit_kinds(spec(constraint="x86&bigmem"), site(), KINDS, CLUSTER)[0] == ("cpu",)


def test_a_nodelist_of_one_partition_applies_to_that_kind() -> None:
    kept, notes = fit_kinds(spec(nodelist="c2"), site(), KINDS, CLUSTER)
    assert kept == ("cpu",)
    assert notes[0] == "variant gpu left out: c2 is not in its partition gpu"


def test_what_no_kind_can_satisfy_is_refused_in_one_line_with_the_fix() -> None:
    with pytest.raises(ConfigError) as info:
        fit_kinds(spec(constraint="avx512"), site(), KINDS, CLUSTER, "job.sh")
    assert str(info.value) == (
        "job.sh: no variant can run where this job asks (cpu: no node of its partition cpu has --constraint=avx512; "
        "gpu: no node of its partition gpu has --constraint=avx512; accel: no node of its partition accel has "
        "--constraint=avx512); ask for features one kind's nodes have (cpu: bigmem,x86; gpu: nvlink,x86; accel: "
        "none)")
    with pytest.raises(ConfigError) as info:
        fit_kinds(spec(nodelist="c1,g1"), site(), KINDS, CLUSTER, "job.sh")
    assert str(info.value).endswith("list nodes of one kind's partition (cpu: c1,c2; gpu: g1,g2; accel: a1)")
    with pytest.raises(ConfigError) as info:
        fit_kinds(spec(nodes=3), site(), KINDS, CLUSTER, "job.sh")
    assert "cpu: its partition cpu has 2 node(s), and 3 are asked for" in str(info.value)
    assert str(info.value).endswith("; ask for fewer nodes, or exclude fewer")


def test_exclude_and_node_counts_are_fitted_per_partition() -> None:
    assert fit_kinds(spec(exclude="c[1-2]"), site(), KINDS, CLUSTER)[0] == ("gpu", "accel")
    assert fit_kinds(spec(nodes=2), site(), KINDS, CLUSTER)[0] == ("cpu", "gpu")
    kept, notes = fit_kinds(spec(nodes=2, exclude="c1"), site(), KINDS, CLUSTER)
    assert kept == ("gpu",) and notes[0] == ("variant cpu left out: its partition cpu has 1 node(s) left by "
                                             "--exclude, and 2 are asked for")


def test_a_kind_s_own_override_that_its_nodes_cannot_satisfy_is_refused_not_dropped() -> None:
    with pytest.raises(ConfigError) as info:
        fit_kinds(spec(overrides={"cpu": {"constraint": "nvlink"}}), site(), KINDS, CLUSTER, "job.yaml")
    assert str(info.value) == ("job.yaml: overrides.cpu.constraint: kind cpu cannot run it: no node of its partition "
                               "cpu has --constraint=nvlink; change overrides.cpu.constraint or leave it out")
    own = spec(overrides={"gpu": {"constraint": "nvlink"}, "cpu": {"constraint": "bigmem"}})
    assert fit_kinds(own, site(), KINDS, CLUSTER)[0] == KINDS


def test_the_site_s_own_constraint_on_a_kind_narrows_its_nodes() -> None:
    with pytest.raises(ConfigError) as info:
        fit_kinds(spec(nodelist="c1"), site(("--constraint=bigmem",)), KINDS, CLUSTER)
    assert "(cpu: c1 lacks the kind's own --constraint=bigmem (site config); gpu: c1 is not in" in str(info.value)
    assert fit_kinds(spec(nodelist="c2"), site(("--constraint=bigmem",)), KINDS, CLUSTER)[0] == ("cpu",)
    kept, _ = fit_kinds(spec(nodes=2), site(("--constraint=bigmem",)), KINDS, CLUSTER)
    assert kept == ("gpu",)  # one bigmem node of cpu


# ---------------------------------------------------------------------------------------------- the one query

def test_a_spec_without_placement_never_asks_slurm() -> None:
    slurm = Nodes(down=True)
    assert fit_to_cluster(spec(exclusive=True, ntasks=4), site(), slurm) == (None, [])
    assert slurm.calls == 0


def test_placement_reads_the_nodes_once() -> None:
    slurm = Nodes()
    kept, notes = fit_to_cluster(spec(constraint="nvlink", overrides={"gpu": {"nodes": 2}}), site(), slurm,
                                 only=("cpu", "gpu"))
    assert (kept, slurm.calls) == (("gpu",), 1) and len(notes) == 1


def test_slurm_unreachable_is_said_in_one_line() -> None:
    with pytest.raises(SubmitError) as info:
        fit_to_cluster(spec(constraint="nvlink"), site(), Nodes(down=True))
    assert str(info.value) == (
        "cannot read the cluster's nodes to place this job (its constraint, node list or node count): scontrol show "
        "nodes: exit 1: slurm_load_node error: Unable to contact slurm controller (connect failure); nothing was "
        "submitted; retry when Slurm answers (sinfo)")
    only, notes = fit_to_cluster(spec(constraint="nvlink"), site(), Nodes(down=True), strict=False)
    assert only is None and len(notes) == 1 and notes[0].startswith("Slurm unreachable (")
    assert "\n" not in notes[0]


class Cluster(Nodes):
    """Enough of a SlurmAdapter to submit a group: folders on disk, job ids handed out."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []

    def make_private_folder(self, path: str, files: object) -> None:
        Path(path).mkdir(mode=0o700, parents=True)

    def submit(self, script: str, options: object) -> int:
        self.scripts.append(script)
        return 100 + len(self.scripts)


def test_submitting_leaves_out_the_kinds_that_cannot_run_and_says_so(tmp_path: Path) -> None:
    the_site = site().model_copy(update={"submit": site().submit.model_copy(update={"spool_dir": str(tmp_path)})})
    slurm = Cluster()
    groups = submit_groups(spec(constraint="nvlink", array="1-2"), the_site, slurm, mode="race")
    assert slurm.calls == 1  # one read for the whole array
    assert [g.variants for g in groups] == [(("gpu", 101),)]  # one Slurm array of the kind kept
    assert groups[0].note.startswith("variant cpu left out: no node of its partition cpu has --constraint=nvlink; ")
    assert all("#SBATCH --constraint=nvlink\n" in script for script in slurm.scripts)


# ---------------------------------------------------------------------------------------------- rendering

def test_nodes_and_tasks_render_into_the_variant_s_sbatch_lines() -> None:
    job = spec(nodes=2, ntasks_per_node=2, mem_per_cpu="1G", overrides={"gpu": {"nodes": 1, "exclusive": True}})
    cpu = variant_options(job, site(), "cpu", "g", "race", "job.yaml")
    assert {"--nodes=2", "--ntasks-per-node=2", "--cpus-per-task=1", "--mem=2048M"} <= set(cpu)  # per node
    gpu = variant_options(job, site(), "gpu", "g", "race", "job.yaml")
    assert {"--nodes=1", "--ntasks-per-node=2", "--exclusive"} <= set(gpu) and "--nodes=2" not in gpu
    tasks = variant_options(spec(ntasks=5, mem_per_cpu="1G", cpus=2), site(), "cpu", "g", "race")
    assert "--mem-per-cpu=1024M" in tasks and not any(o.startswith("--mem=") for o in tasks)  # tasks per node: Slurm's
    assert "--cpus-per-task=2" in tasks and "--ntasks=5" in tasks


def test_a_one_task_variant_keeps_the_kind_s_cpus() -> None:
    assert "--cpus-per-task=4" in variant_options(spec(nodes=2), site(), "cpu", "g", "race")


def test_placement_renders_per_kind_and_merges_with_the_site_s_constraint() -> None:
    job = spec(constraint="x86", nodelist=["c1", "c2"], exclude="c3",
               overrides={"gpu": {"constraint": "nvlink|bigmem", "nodelist": "g[1-2]"}})
    cpu = variant_options(job, site(("--constraint=avx2", "--account=p")), "cpu", "g", "race")
    assert "--constraint=avx2&x86" in cpu and "--account=p" in cpu
    assert not any(o == "--constraint=avx2" for o in cpu)
    either = variant_options(spec(constraint="a|b"), site(("--constraint=avx2",)), "cpu", "g", "race")
    assert "--constraint=avx2&(a|b)" in either  # an or-list joins in brackets: & binds before |
    with pytest.raises(ConfigError, match=r"cannot be joined in Slurm's grammar .*a bracket inside another"):
        variant_options(spec(constraint="(a|b)|c"), site(("--constraint=avx2",)), "cpu", "g", "race")
    assert {"--nodelist=c1,c2", "--exclude=c3"} <= set(cpu)
    gpu = render_variant(job, site(), "gpu", "g", "race").script
    assert "#SBATCH --constraint=nvlink|bigmem\n" in gpu and "#SBATCH --nodelist=g[1-2]\n" in gpu


def test_a_multi_node_variant_script_runs_srun_as_the_user_wrote_it(tmp_path: Path) -> None:
    path = tmp_path / "mpi.sh"
    path.write_text("#!/bin/bash\n#SBATCH -N 2 --ntasks-per-node=1\nsrun hostname\n")
    submission = build_submission(str(path), [], [], site())
    rendered = {r.kind: r for r in plan_group(submission.spec, site(), mode="race", source=str(path))[2]}
    for variant in rendered.values():
        assert {"--nodes=2", "--ntasks-per-node=1"} <= set(variant.options)
        assert "\nsrun hostname\n" in variant.script  # the payload, verbatim


# ---------------------------------------------------------------------------------------------- where values come from

def test_a_bad_constraint_names_where_it_was_written(tmp_path: Path) -> None:
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/bash\n#SBATCH -c 1\n#SBATCH --constraint='a&(b'\ntrue\n")
    with pytest.raises(ConfigError) as info:
        build_submission(str(path), [], [], site())
    assert str(info.value) == f"{path}:3: constraint 'a&(b': the bracket at character 3 is not closed"
    with pytest.raises(ConfigError) as info:
        build_submission(str(path), ["-C", "a!"], [], site())
    assert str(info.value) == ("command line: constraint 'a!': '!' at character 2: features are letters, digits "
                               "and _ . : + -")


def test_a_node_count_beyond_the_listed_nodes_names_both_places(tmp_path: Path) -> None:
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/bash\n#SBATCH -w c1\ntrue\n")
    with pytest.raises(ConfigError) as info:
        build_submission(str(path), ["-N", "2"], [], site())
    assert str(info.value) == (f"command line: --nodes=2 with --nodelist=c1 (at {path}:2) naming 1 node(s): slurmx "
                               "places such a job only on the listed nodes; list 2 nodes, or ask for --nodes=1")


def test_blanks_in_a_constraint_separate_features_and_never_join_them() -> None:
    assert check_constraint(" nvlink | bigmem ") == "nvlink|bigmem"
    with pytest.raises(ValueError, match="unexpected 'b' at character 3"):
        check_constraint("a b")


def test_exclusive_with_a_value_passes_on_and_bare_is_the_field(tmp_path: Path) -> None:
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/bash\n#SBATCH --exclusive=user\ntrue\n")
    assert build_submission(str(path), [], [], site()).spec.sbatch == ("--exclusive=user",)
    assert build_submission(str(path), ["--exclusive"], [], site()).spec.exclusive is True


_CONSTRAINT_ALPHABET = st.sampled_from([*"ab_1.:+-&|,()[]*! \t", "nvlink", "x86"])


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(_CONSTRAINT_ALPHABET, max_size=14).map("".join), st.booleans())
def test_property_any_constraint_either_parses_or_is_refused_in_one_line(text: str, in_spec: bool) -> None:
    try:
        kept = check_constraint(text)
    except ValueError as exc:
        assert "\n" not in str(exc) and str(exc)
        with pytest.raises(ConfigError) as info:
            spec(constraint=text) if in_spec else build_submission(
                str(Path(__file__).parents[2] / "examples" / "hello.yaml"), [f"--constraint={text}"], [], site())
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith("job.yaml: constraint: " if in_spec else "command line: constraint ")
        return
    assert kept == "".join(text.split())
    job = spec(constraint=text)
    assert f"--constraint={kept}" in variant_options(job, site(), "cpu", "g", "race")  # safe in an #SBATCH line


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_examples_fit_the_test_cluster_and_render_their_layout() -> None:
    placed = build_submission(str(EXAMPLES / "placed.yaml"), [], [], site()).spec
    assert fit_kinds(placed, site(), ("cpu", "gpu"), CLUSTER) == (("cpu", "gpu"), [])
    cpu = variant_options(placed, site(), "cpu", "g", "race")
    assert {"--nodes=2", "--ntasks-per-node=2", "--cpus-per-task=1"} <= set(cpu)
    assert {"--nodes=1", "--constraint=nvlink", "--exclusive"} <= set(variant_options(placed, site(), "gpu", "g",
                                                                                      "race"))
    mpi = build_submission(str(EXAMPLES / "mpi_hostname.sh"), [], [], site()).spec
    assert fit_kinds(mpi, site(), KINDS, CLUSTER) == (("cpu", "gpu"), [
        "variant accel left out: its partition accel has 1 node(s), and 2 are asked for"])


@settings(max_examples=200, deadline=None, database=None)
@given(st.sampled_from(["nodes", "ntasks", "ntasks-per-node"]),
       st.text(st.sampled_from("0123456789-kK, x"), min_size=1, max_size=7))
def test_property_a_count_is_rendered_as_one_number_or_refused_in_one_line_naming_the_command_line(
        option: str, value: str) -> None:
    hello = str(EXAMPLES / "hello.yaml")
    try:
        job = build_submission(hello, [f"--{option}={value}"], [], site()).spec
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(f"command line: --{option}={value}: "), str(exc)
        return
    count = getattr(job, option.replace("-", "_"))
    assert isinstance(count, int) and count >= 1
    assert f"--{option}={count}" in variant_options(job, site(), "cpu", "g", "race")
