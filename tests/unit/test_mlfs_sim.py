"""The task-level MLFS replica: MLF-C stopping, invariants, determinism; the baselines' fair shares."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slurmx.policies.mlfs.baseline_rules import fair_shares
from slurmx.policies.mlfs.model import JobState, TaskState
from slurmx.policies.mlfs.rules import MlfsArgs
from slurmx.reproduce.mlfs.task_baselines import Tiresias
from slurmx.reproduce.mlfs.task_mlfh import MlfH
from slurmx.reproduce.mlfs.task_model import (
    MlfsSimError,
    MlfsSimParams,
    Snapshot,
    TaskPlan,
    _progress_share,
    simulate_mlfs,
)
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


def test_fair_shares_grow_by_whole_replicas() -> None:
    # a 4-worker model-parallel job (one replica of 4 partitions) beside two data-parallel jobs of 2 workers
    assert fair_shares([4, 2, 2], 6, [4, 1, 1]) == [0, 2, 2]  # 4 never fits beside the others' fair 2 + 2
    assert fair_shares([4, 2, 2], 8, [4, 1, 1]) == [4, 2, 2]
    assert fair_shares([8, 3], 8, [4, 1]) == [4, 3]  # one replica of 4; the second no longer fits
    assert fair_shares([1, 4, 8], 8, [1, 1, 1]) == fair_shares([1, 4, 8], 8) == [1, 4, 3]


def test_progress_share_counts_whole_replicas() -> None:
    def job(stages: tuple[int, ...], dp: int) -> JobState:
        tasks = [TaskState("j", 0, -1, 0.0, np.zeros(3), 0.0)]
        tasks += [TaskState("j", 1 + i, s, 0.0, np.zeros(3), 0.5)
                  for i, s in enumerate(s for s, n in enumerate(stages) for _ in range(n))]
        return JobState("j", 0.0, 1, math.inf, stages, 1.0, 0.0, 10, 0.0, 0.0, 1.0, 1.0, 0.0, 0.9, 0.0, 50.0, 50.0,
                        tasks, dp_degree=dp)

    chain = job((1, 1, 1, 1), 1)  # model parallel: four partitions, one replica
    assert _progress_share(chain, chain.tasks[1:4], "whole_replicas") == 0.0
    assert _progress_share(chain, chain.tasks[1:4], "time_share") == 0.75
    assert _progress_share(chain, chain.tasks[1:], "whole_replicas") == 1.0
    dp = job((4,), 4)  # data parallel only: every worker is a replica
    assert _progress_share(dp, dp.tasks[1:4], "whole_replicas") == 0.75
    two = job((2, 2), 2)  # two stages x two replicas: tasks 1, 2 are stage 0 (replicas 0, 1), tasks 3, 4 stage 1
    assert _progress_share(two, [two.tasks[1], two.tasks[3]], "whole_replicas") == 0.5  # replica 0 complete
    assert _progress_share(two, [two.tasks[1], two.tasks[4]], "whole_replicas") == 0.0  # neither replica


class _PlaceAllButOne:
    """Places the PS and every worker but the last of each job, each worker on its own GPU of server 0."""

    name = "all-but-one"

    def decide(self, snapshot: Snapshot) -> TaskPlan:
        plan = TaskPlan()
        for job in snapshot.jobs.values():
            if job.tasks[0].server is None:
                plan.assign[job.tasks[0].key] = (0, None)
                for gpu, t in enumerate(job.tasks[1:-1]):
                    plan.assign[t.key] = (0, gpu)
        return plan


def test_a_model_parallel_job_missing_a_partition_does_not_progress() -> None:
    jobs = mlfs(MlfsParams(n_jobs=30, jobs_per_hour=20.0, duration_cdf_min=DURATIONS, gpu_choices=(4,)), 3)
    job = next(j for j in jobs if j.meta["dp_degree"] == 1)
    params = {"servers": 1, "horizon_h": 48.0}
    stalled = simulate_mlfs([job], _PlaceAllButOne(), MlfsSimParams(**params, partial_progress="whole_replicas"))
    shared = simulate_mlfs([job], _PlaceAllButOne(), MlfsSimParams(**params, partial_progress="time_share"))
    assert stalled.finished == 0
    assert shared.finished == 1
