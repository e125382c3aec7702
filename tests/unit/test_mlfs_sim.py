"""The task-level MLFS simulator: MLF-C stopping, invariants, determinism; the baselines' fair shares."""

from __future__ import annotations

import math

import pytest

from slurmx.policies.mlfs import MlfH, MlfsArgs
from slurmx.policies.mlfs_baselines import Tiresias, fair_shares
from slurmx.policies.mlfs_model import Snapshot, TaskPlan
from slurmx.sim.mlfs_sim import MlfsSimError, MlfsSimParams, simulate_mlfs
from slurmx.sim.workloads.mlfs import MlfsParams, mlfs

DURATIONS = ((0.1, 0.0), (10.0, 0.5), (60.0, 1.0))


def _jobs(n: int, seed: int = 3) -> list:  # type: ignore[type-arg]
    return mlfs(MlfsParams(n_jobs=n, jobs_per_hour=20.0, duration_cdf_min=DURATIONS, gpu_choices=(1, 2, 4)), seed)


def test_mlf_c_stops_a_job_at_its_required_accuracy() -> None:
    job = _jobs(1)[0]
    curve = job.meta["accuracy_curve"]
    plain = simulate_mlfs([job], MlfH(), MlfsSimParams(servers=2))
    switched = simulate_mlfs([job], MlfH(MlfsArgs(mlf_c=True)), MlfsSimParams(servers=2))
    # the first call sees the job queued (overload), so it stops at a_J^r, not at the OptStop plateau
    need = math.ceil(curve.iterations_to(job.meta["accuracy_req"]))
    assert switched.avg_accuracy == pytest.approx(curve.accuracy(need))
    assert plain.avg_accuracy > switched.avg_accuracy
    assert switched.avg_jct_min < plain.avg_jct_min
    assert switched.finished == plain.finished == 1


def test_runs_are_deterministic_for_a_seed() -> None:
    jobs = _jobs(12)
    a = simulate_mlfs(jobs, MlfH(), MlfsSimParams(servers=3), seed=5).as_dict()
    b = simulate_mlfs(jobs, MlfH(), MlfsSimParams(servers=3), seed=5).as_dict()
    a.pop("overhead_ms"), b.pop("overhead_ms")
    assert a == b
    assert a["finished"] == 12


class _Greedy:
    """Puts every queued worker on server 0, GPU 0: over-allocates as soon as two tasks share it."""

    name = "greedy"

    def decide(self, snapshot: Snapshot) -> TaskPlan:
        plan = TaskPlan()
        for job in snapshot.jobs.values():
            for t in job.tasks:
                if t.server is None:
                    plan.assign[t.key] = (0, None if t.is_ps else 0)
        return plan


class _Requeue:
    name = "requeue"

    def decide(self, snapshot: Snapshot) -> TaskPlan:
        return TaskPlan(to_queue=[job.tasks[0].key for job in snapshot.jobs.values()])


def test_invariants_reject_over_allocation_and_double_starts() -> None:
    with pytest.raises(MlfsSimError, match="over-allocated"):
        simulate_mlfs(_jobs(6), _Greedy(), MlfsSimParams(servers=2))
    with pytest.raises(MlfsSimError, match="cannot preempt queued task"):
        simulate_mlfs(_jobs(1), _Requeue(), MlfsSimParams(servers=2))


def test_fair_shares_water_fill() -> None:
    assert fair_shares([1, 4, 8], 8) == [1, 4, 3]
    assert fair_shares([2, 2], 8) == [2, 2]
    assert fair_shares([5, 5, 5], 3) == [1, 1, 1]


def test_tiresias_runs_everything_to_completion() -> None:
    result = simulate_mlfs(_jobs(10), Tiresias(), MlfsSimParams(servers=2))
    assert result.finished == 10
    assert 0.0 <= result.deadline_ratio <= 1.0
