"""AlloX with the authors' simulator's books (`books`: numbered machines, bookings and progress kept in the memo;
slurmx/policies/allox_books.py): each behaviour on a hand-built view, and the memo's round trip."""

from __future__ import annotations

import pickle

from slurmx.core.actions import Plan, Start
from slurmx.core.model import JobClass
from slurmx.policies.allox import Allox, AlloxArgs, SampleSort
from slurmx.policies.allox_baselines import Drfa, DrfaArgs, Drfs, DrfsArgs
from slurmx.policies.allox_books import Books, hash_set_order
from slurmx.policies.allox_queue_order import QueueOrder
from tests.unit.test_allox import Spec, _nodes, _Run, _view

BOOKS = Allox(AlloxArgs(books=True, samples_first=True))


def _starts(plan: Plan) -> list[tuple[str, str]]:
    return [(a.group_id, a.kind) for a in plan.of_type(Start)]


def test_hash_set_order_is_javas_for_small_integer_ids() -> None:
    # their solve listed user 0's jobs 0, 10, 20, 30, 40 in this order (a table of 16 buckets)
    assert hash_set_order([0, 10, 20, 30, 40]) == [0, 20, 40, 10, 30]
    assert hash_set_order([16, 0, 1]) == [16, 0, 1]  # one bucket keeps insertion order
    assert hash_set_order([*range(11), 16]) == [0, 16, *range(1, 11)]  # 12 ids: 16 buckets, 16 in bucket 0
    assert hash_set_order([*range(12), 16]) == [*range(12), 16]  # 13 ids: 32 buckets, 16 in bucket 16


def test_a_sample_holds_the_lowest_free_number_so_a_plan_landing_there_waits() -> None:
    # one GPU node with 2 GPUs and one CPU node; ann's sample holds a GPU; her job ties on both GPUs (ω = 0)
    specs = [Spec("s1", "ann", {"gpu": 5.0}, job_class=JobClass.TE), Spec("a1", "ann", {"gpu": 3.0, "cpu": 100.0})]
    view = _view(1.0, specs, {"s1": _Run("gpu", "g1", 0.0, 1.0)}, {"a1": 1.0}, set(), _nodes(1, 2, 1))
    assert _starts(BOOKS.schedule(view, 1.0)) == []  # planned on number 0, which the sample holds
    assert _starts(Allox(AlloxArgs(samples_first=True)).schedule(view, 1.0)) == [("a1", "gpu")]


def test_a_booking_outlives_the_decision_in_the_memo_and_moves_the_next_plan() -> None:
    # one GPU, one CPU node that carl's c0 holds until 1.2: a1 and a2 are both planned on the GPU (1·2 + 2 < 1 +
    # 1.2 + 3.2); a1 starts, and the GPU stays booked until both would have ended (t = 3), not until a1's end (1)
    specs = [Spec("a1", "ann", {"gpu": 1.0, "cpu": 100.0}), Spec("a2", "ann", {"gpu": 2.0, "cpu": 3.2}),
             Spec("c0", "carl", {"cpu": 1.2})]
    left = {"a1": 1.0, "a2": 1.0}
    first = BOOKS.schedule(_view(0.0, specs, {"c0": _Run("cpu", "c1", 0.0, 1.0)}, left, set(), _nodes(1, 1, 1)), 0.0)
    assert _starts(first) == [("a1", "gpu")]  # a2 then waits for the CPU node (1.2 + 3.2 < 3 + 2)
    memo = pickle.loads(pickle.dumps(first.memo))
    assert isinstance(memo, Books) and memo.booked["a1"].until == 3.0 and memo.progress["ann"] > 0
    later = _view(1.5, specs, {"a1": _Run("gpu", "g1", 0.0, 1.0)}, left, {"c0"}, _nodes(1, 1, 1))
    # with the booking, the GPU is free at 3 (1.5 + 2 = 3.5 > 3.2): a2 goes to the CPU now
    assert _starts(BOOKS.schedule(later.with_memo(memo), 1.5)) == [("a2", "cpu")]
    # from an empty memo (a restart) a1's machine is free at its start + estimate (now): a2 waits for the GPU
    assert _starts(BOOKS.schedule(later, 1.5)) == []


def test_progress_is_a_running_sum_taken_off_when_the_job_ends() -> None:
    specs = [Spec("a1", "ann", {"gpu": 1.0, "cpu": 100.0}), Spec("b1", "bob", {"gpu": 1.0, "cpu": 100.0},
                                                                  submit=0.5)]
    first = BOOKS.schedule(_view(0.0, specs, {}, {"a1": 1.0, "b1": 1.0}, set(), _nodes(1, 1, 1)), 0.0)
    assert _starts(first) == [("a1", "gpu")]
    assert isinstance(first.memo, Books) and set(first.memo.progress) == {"ann"} and first.memo.progress["ann"] > 0
    after = _view(2.0, specs, {}, {"a1": 1.0, "b1": 1.0}, {"a1"}, _nodes(1, 1, 1)).with_memo(first.memo)
    second = BOOKS.schedule(after, 2.0)
    assert isinstance(second.memo, Books) and second.memo.progress["ann"] == 0.0
    assert "a1" not in second.memo.booked and _starts(second) == [("b1", "gpu")]


def test_a_baseline_remembers_when_their_scheduler_last_sorted_its_samples() -> None:
    # one CPU node: ann's two CPU samples; their DRFS sorts a user's queue (shortest first) whenever it runs, so
    # s2 (2 s) goes before s1 (5 s) if both were there at the last sort, and after it if s2 arrived since
    specs = [Spec("s1", "ann", {"cpu": 5.0}, job_class=JobClass.TE),
             Spec("s2", "ann", {"cpu": 2.0}, submit=1.0, job_class=JobClass.TE)]
    view = _view(3.0, specs, {}, {"s1": 1.0, "s2": 1.0}, set(), _nodes(1, 1, 1))
    drfs = Drfs(DrfsArgs(samples_first=True, samples_order="fastest"))
    sorted_then = drfs.schedule(view.with_memo(SampleSort(2.0)), 3.0)
    assert _starts(sorted_then) == [("s2", "cpu")]
    assert sorted_then.memo == SampleSort(3.0)  # the GPUs had room: their scheduler ran, and sorted, now
    assert _starts(drfs.schedule(view.with_memo(SampleSort(0.5)), 3.0)) == [("s1", "cpu")]


def test_drfa_keeps_each_users_queue_as_their_sorts_leave_it() -> None:
    # one GPU and one CPU node, both held by bob: ann is picked, her list sorted by GPU time, then (no GPU free)
    # by CPU time, and nothing starts; the memo keeps that order, and her samples go in it at the next turn
    specs = [Spec("b0", "bob", {"gpu": 9.0}), Spec("b1", "bob", {"cpu": 9.0}),
             Spec("j1", "ann", {"gpu": 5.0, "cpu": 50.0}), Spec("j2", "ann", {"gpu": 2.0, "cpu": 60.0}),
             Spec("j3", "ann", {"gpu": 1.0, "cpu": 40.0})]
    running = {"b0": _Run("gpu", "g1", 0.0, 1.0), "b1": _Run("cpu", "c1", 0.0, 1.0)}
    left = {s.name: 1.0 for s in specs}
    drfa = Drfa(DrfaArgs(samples_first=True, samples_order="accelerator", ties="by_name"))
    plan = drfa.schedule(_view(1.0, specs, running, left, set(), _nodes(1, 1, 1)), 1.0)
    assert _starts(plan) == [] and plan.memo == QueueOrder({"ann": ("j3", "j1", "j2")})
    samples = [Spec("s1", "ann", {"cpu": 1.0}, job_class=JobClass.TE), Spec("s2", "ann", {"cpu": 1.0},
                                                                             job_class=JobClass.TE)]
    view = _view(2.0, samples, {}, {"s1": 1.0, "s2": 1.0}, set(), _nodes(1, 1, 1))
    assert _starts(drfa.schedule(view, 2.0)) == [("s1", "cpu")]  # a fresh list: arrival order (then id)
    assert _starts(drfa.schedule(view.with_memo(QueueOrder({"ann": ("s2", "s1")})), 2.0)) == [("s2", "cpu")]
