"""Metrics on tiny runs whose every number is computed by hand in the comments."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pytest

from slurmx.core.actions import Action, Preempt
from slurmx.core.model import ClusterView, JobClass
from slurmx.policies import make_policy
from slurmx.sim.config import EngineOptions
from slurmx.sim.metrics import JobRecord, RunStats, SimResult, compute_metrics, fairness, summary, utilisation
from slurmx.sim.report import result_document, result_json, summary_table
from tests.sim import Scripted, cluster, job, run

FIFO = make_policy("fifo")


def test_summary_uses_linear_percentiles_and_null_for_no_data() -> None:
    assert summary([10.0, 20.0]) == {"count": 2, "mean": 15.0, "p50": 15.0, "p95": 19.5, "p99": pytest.approx(19.9)}
    assert summary([]) == {"count": 0, "mean": None, "p50": None, "p95": None, "p99": None}
    assert summary([1.0, 2.0, 3.0, 4.0], (75,)) == {"count": 4, "mean": 2.5, "p75": 3.25}


def _two_jobs() -> SimResult:
    # One node of 2 cpus / 4096 MB. a (te, user x): 1 cpu, 100 MB, 10 s at t=0 -> runs 0..10.
    # b (be, user y): 2 cpus, 200 MB, 10 s at t=0 -> strict FIFO waits for a, runs 10..20.
    return run([job("a", 0, 10, cpus=1, mem_mb=100, user="x", job_class=JobClass.TE),
                job("b", 0, 10, cpus=2, mem_mb=200, user="y")], model=cluster(cpus=2))


def test_jct_makespan_and_slowdown_by_class_on_a_two_job_run() -> None:
    m = compute_metrics(_two_jobs(), bins=2)
    assert m["jobs"] == {"total": 2, "completed": 2, "cancelled": 0}
    # JCT a = 10, b = 20; wait a = 0, b = 10; slowdown a = 1 + 0/10 = 1, b = 1 + 10/10 = 2.
    assert m["jct"] == {"count": 2, "mean": 15.0, "p50": 15.0, "p95": 19.5, "p99": pytest.approx(19.9)}
    assert m["wait"]["mean"] == 5.0
    assert m["makespan"] == 20.0
    assert m["slowdown"]["te"] == {"count": 1, "mean": 1.0, "p50": 1.0, "p95": 1.0, "p99": 1.0}
    assert m["slowdown"]["be"] == {"count": 1, "mean": 2.0, "p50": 2.0, "p95": 2.0, "p99": 2.0}
    assert m["slowdown"]["all"]["mean"] == 1.5


def test_utilisation_is_time_weighted_per_partition_and_dimension() -> None:
    m = compute_metrics(_two_jobs(), bins=2)
    # cpus: 1 of 2 on [0, 10), 2 of 2 on [10, 20) -> mean 0.75, bins [0.5, 1.0].
    # mem: (100 x 10 + 200 x 10) / (4096 x 20) = 3000 / 81920.
    util = m["utilisation"]
    assert util["mean"] == {"cpu/cpus": 0.75, "cpu/mem_mb": 3000 / 81920}
    assert util["series"]["t"] == [5.0, 15.0]
    assert util["series"]["cpu/cpus"] == [0.5, 1.0]
    assert util["series"]["cpu/mem_mb"] == pytest.approx([100 / 4096, 200 / 4096])


def test_fairness_is_the_spread_of_per_user_mean_slowdown() -> None:
    fair = compute_metrics(_two_jobs())["fairness"]
    # user means 1 and 2: spread 1, cv = std/mean = 0.5 / 1.5, Jain = 3^2 / (2 x (1 + 4)) = 0.9.
    assert fair == {"users": 2, "min": 1.0, "max": 2.0, "spread": 1.0, "cv": pytest.approx(1 / 3),
                    "jain": pytest.approx(0.9), "per_user_mean_slowdown": {"x": 1.0, "y": 2.0}}


def test_preemption_counts_and_rescheduling_intervals() -> None:
    # a (100 s, whole node) is preempted at 30 with grace 10 and restarted at 40: one preemption, interval 10;
    # b (1 s) arrives at 30 only to trigger the decision.
    def decide(view: ClusterView, now: float) -> Sequence[Action]:
        return [Preempt("a", 10)] if now == 30 else FIFO.schedule(view, now).actions

    result = run([job("a", 0, 100, cpus=2), job("b", 30, 1, cpus=2)], Scripted(decide), model=cluster(cpus=2))
    m = compute_metrics(result)
    assert m["preemptions"] == {"total": 1, "jobs_preempted": 1, "fraction_preempted": 0.5,
                                "histogram": {"0": 1, "1": 1}}
    assert m["rescheduling_interval"] == {"count": 1, "mean": 10.0, "p50": 10.0, "p75": 10.0, "p95": 10.0,
                                          "p99": 10.0}
    # a: done at 110 (30 + grace 10 + 70 left); exec 100, wait 10 -> slowdown 1.1. b: 110..111, slowdown 81.
    assert m["slowdown"]["be"]["mean"] == pytest.approx((1.1 + 81.0) / 2)


def _handmade(times: list[float], values: list[list[float]], capacity: tuple[int, ...]) -> SimResult:
    stats = RunStats(0, {}, 0, {}, 0, 0, {}, 0.0, 0.0, 0.0)
    jobs = (JobRecord("a", "u", JobClass.BE, 0.0, 0.0, 10.0, 10.0, "cpu", 0),)
    return SimResult(jobs, np.array(times), np.array(values, dtype=np.float64).reshape(len(times), len(capacity)),
                     (("p", "cpus"), ("p", "mem_mb"))[: len(capacity)], capacity, (), stats, EngineOptions())


def test_utilisation_integrates_a_step_function_across_bin_edges() -> None:
    # 4 cpus: 0 until 2, then 4 until 5, then 2 after; over [0, 10] the integral is 4 x 3 + 2 x 5 = 22 -> 0.55.
    result = _handmade([2.0, 5.0], [[4.0], [2.0]], (4,))
    util = utilisation(result, 0.0, 10.0, 4)  # bins of 2.5 s: [0, 2.5) 4 x 0.5 = 2; [2.5, 5) 10; then 5, 5
    assert util["mean"] == {"p/cpus": 0.55}
    assert util["series"]["p/cpus"] == [2 / 2.5 / 4, 10 / 2.5 / 4, 5 / 2.5 / 4, 5 / 2.5 / 4]
    empty = utilisation(_handmade([], [], (4,)), 0.0, 10.0, 2)
    assert empty["mean"] == {"p/cpus": 0.0} and empty["series"]["p/cpus"] == [0.0, 0.0]


def test_columns_without_capacity_are_left_out() -> None:
    result = _handmade([0.0], [[1.0, 0.0]], (2, 0))
    assert list(utilisation(result, 0.0, 1.0, 1)["mean"]) == ["p/cpus"]


def test_deadlines_met_count_completed_jobs_finishing_in_time() -> None:
    # a: 0..10 with deadline 10 (met); b: waits for a, 10..20 with deadline 15 (missed); c has none.
    jobs = [job("a", 0, 10, cpus=2, deadline=10.0), job("b", 0, 10, cpus=2, deadline=15.0), job("c", 0, 1, cpus=2)]
    assert compute_metrics(run(jobs, model=cluster(cpus=2)))["deadlines"] == {"jobs": 2, "met": 1, "fraction_met": 0.5}
    assert compute_metrics(_two_jobs())["deadlines"] == {"jobs": 0, "met": 0, "fraction_met": None}


def test_fairness_of_nobody_is_null() -> None:
    assert fairness([]) == {"users": 0, "min": None, "max": None, "spread": None, "cv": None, "jain": None}


def test_the_json_document_is_canonical_and_the_table_renders() -> None:
    m = compute_metrics(_two_jobs(), bins=2)
    text = result_json(result_document(None, m))
    assert text.endswith("}\n") and json.loads(text)["metrics"] == json.loads(json.dumps(m))
    assert text == result_json(json.loads(text))  # key order does not matter: sorted on output
    table = summary_table(m, "two jobs", wall_s=0.5)
    assert table.row_count >= 8
