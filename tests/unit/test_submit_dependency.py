"""`--dependency` on groups and `--array` as groups: resolution into Slurm's terms, and the daemon's wait."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slurmx.core.model import VariantState
from slurmx.daemon.observe import build_view
from slurmx.submit.array import array_environment, parse_array
from slurmx.submit.dependency import parse_dependency, resolve_dependency
from slurmx.submit.groups import GroupStatus, VariantStatus
from slurmx.submit.spec import parse_spec
from slurmx.submit.submitter import array_specs
from tests.unit.test_daemon import NODES, PARTITIONS, SITE, job, spool_owners

HELD, DONE, GONE = VariantState.HELD, VariantState.COMPLETED, VariantState.CANCELLED


def _group(group_id: str, *variants: tuple[int, VariantState], users_ok: bool = True) -> GroupStatus:
    return GroupStatus(group_id, group_id, "alice", "be",
                       tuple(VariantStatus(k, job_id, state, "", "", k) for k, (job_id, state)
                             in zip(("cpu", "gpu", "accel"), variants, strict=False)), valid=users_ok)


GROUPS = {
    "prep-0a0a0a": _group("prep-0a0a0a", (11, HELD), (12, HELD)),  # both variants may still run
    "done-0b0b0b": _group("done-0b0b0b", (21, DONE), (22, GONE)),
    "fail-0c0c0c": _group("fail-0c0c0c", (31, VariantState.FAILED), (32, GONE)),
    "runs-0d0d0d": _group("runs-0d0d0d", (41, VariantState.RUNNING), (42, GONE)),
    "evil-0e0e0e": _group("evil-0e0e0e", (51, HELD), users_ok=False),
}


def _resolve(text: str) -> str:
    return resolve_dependency(text, GROUPS.get)


def test_afterok_on_a_group_waits_for_any_of_its_variants() -> None:
    assert _resolve("afterok:prep-0a0a0a") == "afterok:11?afterok:12"


def test_afterany_waits_for_all_of_them_and_job_ids_pass_through() -> None:
    assert _resolve("afterany:prep-0a0a0a:7") == "afterany:11,afterany:12,afterany:7"


def test_a_running_group_is_its_running_variant_and_an_ended_one_answers_at_once() -> None:
    assert _resolve("afterok:runs-0d0d0d,afterok:done-0b0b0b") == "afterok:41"
    assert _resolve("afterany:fail-0c0c0c") == ""  # ended: nothing to wait for


def test_any_of_flattens_afterok_groups() -> None:
    assert _resolve("afterok:prep-0a0a0a?afterok:9") == "afterok:11?afterok:12?afterok:9"


@pytest.mark.parametrize(("text", "says"), [
    ("afterok:fail-0c0c0c", "already ended failed, so this dependency can never be satisfied"),
    ("afterok:gone-0f0f0f", "no group gone-0f0f0f in squeue or the last 7 days"),
    ("afterok:evil-0e0e0e", "no owner to trust"),
    ("afterok:prep-0a0a0a:7", "Slurm cannot combine that with other terms"),
    ("afterany:prep-0a0a0a?afterok:7", "would satisfy it at once"),
])
def test_what_slurm_could_not_express_or_never_satisfy_is_refused_with_the_fix(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        _resolve(text)


@pytest.mark.parametrize(("text", "says"), [
    ("after:prep-0a0a0a", "satisfies `after` before"), ("afternotok:1", "counts as not ok"),
    ("singleton", "goes by job name"), ("afterok:1,afterany:2?afterok:3", "cannot mix"),
    ("afterok", "needs at least one"), ("afterok:x y", "not a group id"), ("afterok:1+5", "a delay"),
    ("", "an empty dependency"), ("expand:1", "expected afterok:ID"),
])
def test_the_dependency_is_checked_when_the_spec_is_read(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_dependency(text)


def test_an_array_is_one_group_per_index_with_slurms_variables() -> None:
    spec = parse_spec({"name": "sweep", "command": "echo $SLURM_ARRAY_TASK_ID", "array": "0-8:4", "env": {"A": "1"}})
    specs = array_specs(spec)
    assert [s.name for s in specs] == ["sweep_0", "sweep_4", "sweep_8"]
    assert specs[1].env == {"A": "1", "SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "0",
                            "SLURM_ARRAY_TASK_MAX": "8", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_STEP": "4"}
    assert all(s.array is None for s in specs)
    assert parse_array("1,3,2-3") == (1, 3, 2) and array_environment((1, 3, 2), 3)["SLURM_ARRAY_TASK_STEP"] == "1"


@pytest.mark.parametrize(("text", "says"), [("1-3%x", "throttle is a count"), ("3-1", "lower to a higher"),
                                            ("0-2000", "more than 1000"), ("a", "expected an index"),
                                            ("1-9:0", "step of at least 1")])
def test_bad_arrays_are_one_line(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_array(text)


@pytest.mark.parametrize(("shown", "waits"), [
    ("", False), ("afterok:11(unfulfilled)?afterok:12(failed)", True), ("afterok:11(failed)?afterok:12(fulfilled)",
                                                                       False),
    ("afterany:11(fulfilled),afterany:12(unfulfilled)", True), ("afterany:11(fulfilled),afterany:12(fulfilled)", False),
])
def test_the_daemon_leaves_a_group_out_until_slurm_finds_its_dependency_satisfied(shown: str, waits: bool) -> None:
    jobs = [replace(job(1, "a"), dependency=shown), replace(job(2, "a", "gpu"), dependency=shown), job(3, "b")]
    view = build_view(SITE, jobs, NODES, PARTITIONS, 300.0, owner_of=spool_owners(jobs)).view
    assert ("a" not in view.groups) is waits and "b" in view.groups


# ------------------------------------------------------------------------------- dependencies on arrays
def _index(array: str, index: int, *states: VariantState) -> GroupStatus:
    from slurmx.core.arrays import task_key

    return _group(f"{array}[{index}]", *((task_key(700 + n, index), state) for n, state in enumerate(states)))


ARRAY = [_index("sweep-0a1b2c", 0, DONE, GONE), _index("sweep-0a1b2c", 1, HELD, HELD),
         _index("sweep-0a1b2c", 2, VariantState.RUNNING, GONE)]


def _resolve_arrays(text: str, indices: list[GroupStatus]) -> str:
    by_id = {g.group_id: g for g in indices}
    return resolve_dependency(text, by_id.get, lambda gid: [g for g in indices if g.group_id.startswith(f"{gid}[")])


def test_afterany_on_an_array_group_waits_for_its_kind_arrays_whole() -> None:
    assert _resolve_arrays("afterany:sweep-0a1b2c", ARRAY) == "afterany:700,afterany:701"


def test_afterok_on_one_index_waits_for_either_kind_s_task_of_that_index() -> None:
    assert _resolve_arrays("afterok:sweep-0a1b2c[1]", ARRAY) == "afterok:700_1?afterok:701_1"
    assert _resolve_arrays("afterok:sweep-0a1b2c[2]", ARRAY) == "afterok:700_2"  # the running kind


def test_afterok_on_an_array_still_running_on_two_kinds_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"afterok:sweep-0a1b2c: every index .* write afterany:sweep-0a1b2c .*"
                                         r"or afterok:sweep-0a1b2c\[i\] for one index"):
        _resolve_arrays("afterok:sweep-0a1b2c", ARRAY)


def test_afterok_on_a_one_kind_array_is_that_array_and_on_a_finished_one_nothing() -> None:
    one_kind = [_index("pick-0a1b2c", i, HELD) for i in range(3)]
    assert _resolve_arrays("afterok:pick-0a1b2c", one_kind) == "afterok:700"
    ended = [_index("sweep-0a1b2c", i, DONE, GONE) for i in range(3)]
    assert _resolve_arrays("afterok:sweep-0a1b2c", ended) == ""
    failed = [*ended[:2], _index("sweep-0a1b2c", 2, VariantState.FAILED, GONE)]
    with pytest.raises(ValueError, match="already ended failed"):
        _resolve_arrays("afterok:sweep-0a1b2c", failed)
