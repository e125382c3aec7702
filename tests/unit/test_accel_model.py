"""Zhao et al.'s execution model: the flow-shop recurrence, MTTF vs Johnson (the Theorem 3 erratum), SCT, MMI.

Exact answers from the digest (`accel_batch.md` §2.5): job A (a 1, b 0.1), job B (a 2, b 10): MTTF runs A then B
and ends at 13; Johnson runs B then A and ends at 12.1.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from slurmx.policies.accel_batch.baselines import mmi_schedule, sct_schedule
from slurmx.policies.accel_batch.model import (
    MTTF_COUNTEREXAMPLE,
    BatchInstance,
    Schedule,
    flow_shop_makespan,
    johnson_order,
    mttf_order,
)
from slurmx.reproduce.accel.batch_replica import ResponderState, execute, execute_stream


def _counterexample() -> tuple[np.ndarray, np.ndarray]:
    a = np.array([x for x, _ in MTTF_COUNTEREXAMPLE])
    b = np.array([y for _, y in MTTF_COUNTEREXAMPLE])
    return a, b


def test_theorem_3_counterexample_mttf_13_johnson_12_1() -> None:
    a, b = _counterexample()
    mttf, johnson = mttf_order(a, b), johnson_order(a, b)
    assert list(mttf) == [0, 1]
    assert list(johnson) == [1, 0]
    assert flow_shop_makespan(a[mttf], b[mttf]) == pytest.approx(13.0)
    assert flow_shop_makespan(a[johnson], b[johnson]) == pytest.approx(12.1)


def test_recurrence_counts_the_jobs_own_transfer_l_le_k() -> None:
    # One job: its computation cannot start before its own input is in: 2 + 3, not 3.
    assert flow_shop_makespan(np.array([2.0]), np.array([3.0])) == 5.0
    # (a, b) = (1, 5), (4, 1): A = 1, 5; C = 6, max(6, 5) + 1 = 7.
    assert flow_shop_makespan(np.array([1.0, 4.0]), np.array([5.0, 1.0])) == 7.0


def test_johnson_matches_brute_force_and_overlap_bounds_hold() -> None:
    rng = np.random.default_rng(3)
    mttf_worse = 0
    for _ in range(120):
        n = int(rng.integers(2, 6))
        a = rng.uniform(0.1, 2.0, n)
        b = a * rng.uniform(0.5, 1.5, n)
        best = min(flow_shop_makespan(a[list(p)], b[list(p)]) for p in itertools.permutations(range(n)))
        j, m = johnson_order(a, b), mttf_order(a, b)
        assert flow_shop_makespan(a[j], b[j]) == pytest.approx(best)
        span = flow_shop_makespan(a[m], b[m])
        mttf_worse += span > best + 1e-12
        assert max(a.sum(), b.sum()) <= span <= (a + b).sum() + 1e-12  # Theorem 4 and the lemma
    assert mttf_worse > 30  # MTTF is not optimal (the digest saw 1573 of 2000)


def test_execute_matches_the_recurrence_and_chains_batches() -> None:
    inst = BatchInstance(np.array([1000.0, 2000.0, 500.0]), np.array([1000.0, 500.0]),
                         np.array([[0.1, 9.0], [10.0, 9.0], [0.5, 9.0]]))
    schedule = Schedule(np.array([0, 0, 1]), ((1, 0), (2,)))
    run, state = execute(inst, schedule)
    # responder 0: B (a 2, b 10) then A (a 1, b 0.1): 12.1; responder 1: a = 1, b = 9 -> 10
    assert run.makespan == pytest.approx(12.1)
    assert run.compute_done.tolist() == pytest.approx([12.1, 12.0, 10.0])
    assert state.nic_free.tolist() == pytest.approx([3.0, 1.0])
    assert schedule.makespan(inst) == pytest.approx(12.1)
    # A second copy arriving at 5: responder 0's NIC is free at 5, its accelerator at 12.1.
    runs = execute_stream([(inst, schedule, 0.0), (inst, schedule, 5.0)])
    assert runs[1].compute_done[1] == pytest.approx(max(12.1, 5 + 2) + 10)
    assert runs[1].finish == pytest.approx(12.1 + 10 + 0.1)
    busy = ResponderState(np.array([0.0, 0.0]), np.array([100.0, 0.0]))
    assert execute(inst, schedule, 0.0, busy)[0].compute_done[1] == pytest.approx(110.0)


def test_sct_puts_each_job_on_its_fastest_responder_and_breaks_ties_by_seed() -> None:
    inst = BatchInstance(np.array([100.0, 100.0]), np.array([1000.0, 1000.0]), np.array([[1.0, 2.0], [3.0, 1.0]]))
    assert sct_schedule(inst).assignment.tolist() == [0, 1]
    tied = BatchInstance(np.full(40, 100.0), np.full(2, 1000.0), np.ones((40, 2)))
    spread = {tuple(sct_schedule(tied, seed).assignment.tolist()) for seed in range(3)}
    assert len(spread) == 3
    assert 0 < sct_schedule(tied, 0).assignment.sum() < 40


def test_mmi_greedy_picks_the_smallest_completion_and_spreads_load() -> None:
    # Four equal jobs (a 0.1, b 1) on two equal responders: two each, make-span 0.1 + 2 = 2.1.
    inst = BatchInstance(np.full(4, 100.0), np.full(2, 1000.0), np.ones((4, 2)))
    for increase in ("overlap", "nonoverlap"):
        schedule = mmi_schedule(inst, increase=increase)
        assert sorted(np.bincount(schedule.assignment).tolist()) == [2, 2]
        assert schedule.makespan(inst) == pytest.approx(2.1)
    # The myopic trap: the two short jobs go first, one per responder, and the long one lands on top: 5, not 4.
    inst = BatchInstance(np.zeros(3), np.ones(2), np.array([[4.0, 4.0], [1.0, 1.0], [1.0, 1.0]]))
    trapped = mmi_schedule(inst)
    assert trapped.makespan(inst) == pytest.approx(5.0)
    assert trapped.orders == ((1, 0), (2,))  # selection order
    assert mmi_schedule(inst, reorder="mttf").orders == ((0, 1), (2,))  # equal (zero) transfers: by index


def test_bad_instances_fail_with_one_line_naming_the_shape() -> None:
    with pytest.raises(ValueError, match=r"compute_s has shape \(2, 3\)"):
        BatchInstance(np.ones(2), np.ones(2), np.ones((2, 3)))
    with pytest.raises(ValueError, match="rates > 0"):
        BatchInstance(np.ones(1), np.zeros(1), np.ones((1, 1)))
