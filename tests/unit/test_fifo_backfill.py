"""FIFO's backfill modes on a hand-built cluster: strict, EASY (a reservation for the oldest, as Slurm) and greedy.

Two 4-CPU nodes. Running: r1 (3 CPUs on n1, ends at t=100), r2 (4 CPUs on n2, ends at t=300). Waiting, oldest
first: `head` (4 CPUs: fits nowhere now; n1 frees at t=100, so it is reserved n1 at t=100), then `short`
(1 CPU, 50 s: ends before t=100), `long` (1 CPU, 500 s: would hold n1 past t=100) and `tiny` (no estimate).
"""

from __future__ import annotations

import pytest

from slurmx.core.actions import Start
from slurmx.core.model import ClusterView, Group, JobClass, Node, Partition, Variant, VariantState
from slurmx.core.resources import Resources
from slurmx.policies import make_policy
from slurmx.policies.reservation import reserve

NOW = 0.0
CAP = Resources(4, 4000)


def _running(gid: str, cpus: int, node: str, ends: float) -> Group:
    variant = Variant(gid, "cpu", 1, VariantState.RUNNING, Resources(cpus, 100), "cpu", (node,), estimate_s=ends,
                      start_time=NOW)
    return Group(gid, gid, "u", JobClass.BE, (variant,), submit_time=-10)


def _waiting(gid: str, cpus: int, submit: float, estimate: float | None) -> Group:
    variant = Variant(gid, "cpu", None, VariantState.PENDING, Resources(cpus, 100), "cpu", estimate_s=estimate,
                      submit_time=submit)
    return Group(gid, gid, "u", JobClass.BE, (variant,), submit_time=submit)


def _view(*waiting: Group) -> ClusterView:
    used = {"n1": Resources(3, 100), "n2": Resources(4, 100)}
    nodes = {n: Node(n, ("cpu",), CAP, used[n], "MIXED") for n in ("n1", "n2")}
    groups = [_running("r1", 3, "n1", 100), _running("r2", 4, "n2", 300), *waiting]
    return ClusterView(NOW, nodes, {"cpu": Partition("cpu", ("n1", "n2"))}, {g.group_id: g for g in groups},
                       {"cpu": "cpu"})


QUEUE = (_waiting("head", 4, 1, 60), _waiting("short", 1, 2, 50), _waiting("long", 1, 3, 500),
         _waiting("tiny", 1, 4, None))


def _started(backfill: object) -> list[str]:
    plan = make_policy("fifo", {"backfill": backfill}).schedule(_view(*QUEUE), NOW)
    return [a.group_id for a in plan.of_type(Start)]


def test_the_oldest_is_reserved_the_earliest_node_and_time() -> None:
    found = reserve(_view(*QUEUE), QUEUE[0], {}, [], NOW)
    assert found is not None and (found.nodes, found.at, found.spare) == (("n1",), 100, {"n1": Resources(0, 3900)})


@pytest.mark.parametrize(("backfill", "expected"), [
    (False, []),  # strict: nothing passes the blocked head
    (True, ["short"]),  # EASY: only what ends before the head's reservation on n1
    ("easy", ["short"]),
    ("greedy", ["short"]),  # greedy takes n1's only free CPU in queue order as well ...
])
def test_each_mode_starts_what_it_may(backfill: object, expected: list[str]) -> None:
    assert _started(backfill) == expected


def test_easy_refuses_what_would_delay_the_head_where_greedy_starts_it() -> None:
    queue = (QUEUE[0], QUEUE[2], QUEUE[3])  # no short job: the next ones would hold n1 past t=100
    plan = make_policy("fifo", {"backfill": "easy"}).schedule(_view(*queue), NOW)
    assert not plan.of_type(Start) and any("reserved n1 at t=100" in n for n in plan.notes)
    greedy = make_policy("fifo", {"backfill": "greedy"}).schedule(_view(*queue), NOW)
    assert [a.group_id for a in greedy.of_type(Start)] == ["long"]  # ... and delays the head by 500 s


def test_a_job_beside_the_head_in_what_the_node_spares_may_run_past_the_reservation() -> None:
    head = _waiting("head", 3, 1, 60)  # n1 at t=100 has 4 CPUs: 3 for the head, 1 to spare
    plan = make_policy("fifo", {"backfill": "easy"}).schedule(_view(_waiting("r0", 4, 0, 10), head, QUEUE[2]), NOW)
    # r0 (4 CPUs) blocks first and is reserved n1 at t=100 with nothing to spare; head and long then wait
    assert not plan.of_type(Start)
    plan = make_policy("fifo", {"backfill": "easy"}).schedule(_view(head, QUEUE[2]), NOW)
    assert [a.group_id for a in plan.of_type(Start)] == ["long"]  # 1 CPU spare beside the head from t=100


def test_the_depth_bounds_how_far_behind_a_blocked_head_a_decision_looks() -> None:
    queue = (QUEUE[0], QUEUE[2], _waiting("later", 1, 5, 50))  # head, long (refused), then a short one
    shallow = make_policy("fifo", {"backfill": "easy", "backfill_depth": 1}).schedule(_view(*queue), NOW)
    assert not shallow.of_type(Start)  # `later` is the second behind the head: not looked at
    deeper = make_policy("fifo", {"backfill": "easy", "backfill_depth": 2}).schedule(_view(*queue), NOW)
    assert [a.group_id for a in deeper.of_type(Start)] == ["later"]
