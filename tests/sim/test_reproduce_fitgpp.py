"""`slurmx reproduce fitgpp`: the quick run end to end, the FIFO closed-loop calibration with exact answers,
the slowdown of Eq. 5 (digest A9), and behaviour that holds on a small seeded instance."""

from __future__ import annotations

import numpy as np
import pytest

from slurmx.core.model import JobClass
from slurmx.core.resources import Resources
from slurmx.reproduce import Reproduction, ReproOptions, UnknownPaper, run
from slurmx.reproduce.fitgpp.experiment import (
    EXPERIMENTS,
    RunSpec,
    backlog,
    measured_load,
    run_on_one_workload,
    run_one,
    slowdowns,
)
from slurmx.reproduce.fitgpp.report import non_increasing_in_s
from slurmx.sim.config import parse_sim_config
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.runner import run_config
from slurmx.sim.workloads.fitgpp import fifo_closed_loop_times
from tests.sim.claims import assert_machine_checkable


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Reproduction:
    plots = tmp_path_factory.mktemp("plots")
    return run("fitgpp", ReproOptions(quick=True, workers=1, progress=False, plot_dir=plots))


def test_quick_run_reports_every_table_claim_and_figure(quick: Reproduction) -> None:
    assert_machine_checkable(quick)
    assert quick.quick and quick.paper == "fitgpp"
    assert {"table1", "table2", "table3", "s", "P", "te_share", "grace_scale", "be_sources"} <= set(quick.data)
    titles = [t.title.split(":")[0] for t in quick.tables]
    assert titles == ["Table 1", "Table 2", "Table 3", "Fig. 4", "Fig. 5 / Table 4", "Fig. 6", "Fig. 7",
                      "BE sources (not in the paper)", "Readings (not in the paper)", "Steady state (not in the paper)",
                      "Restart cost (not in the paper)"]
    for claim in quick.claims:
        assert claim.paper and claim.ours
        assert claim.holds is None or claim.check
    papers = {c.what: c.paper for c in quick.claims}
    assert papers["TE p95 slowdown, FitGpp vs FIFO"] == "-96.6% (33.4 -> 1.15)"
    assert papers["BE p50 slowdown, FitGpp vs FIFO"] == "+18.0% (2.78 -> 3.28)"
    assert papers["BE p95 slowdown, FitGpp vs FIFO"] == "+23.9% (4.89 -> 6.06)"
    assert any("closed loop" in a for a in quick.assumptions)
    names = sorted(p.name for p in quick.figures)
    assert names == ["fitgpp-fig3-slowdown-cdf.png", "fitgpp-fig4-s.png", "fitgpp-fig5-P.png",
                     "fitgpp-fig6-te-share.png", "fitgpp-fig7-grace-scale.png"]
    assert all(p.stat().st_size > 1000 for p in quick.figures)


def test_identical_runs_are_simulated_once(quick: Reproduction) -> None:
    # main 4; s 0/4/8: 3; P: LRTP, RAND at 1 and all three at inf: 5; TE share 0.3 adds FIFO, 0.5 all four: 5;
    # grace x8: FitGpp s=4, s=8, LRTP, RAND: 4 (x1 is s=4, s=8 and P=1 already); BE sources: FitGpp at P = 0 (FIFO
    # and FitGpp are the TE share 0.3 runs); readings: FIFO at grace sd 1, and FitGpp, LRTP, RAND at wait / sd 1,
    # reselect / sd 1 and reselect / sd 3 (wait / sd 3 is the default: the runs above); steady: FIFO and FitGpp
    # at 512 and 1,024 jobs (2,048 is main); restart cost: FitGpp at 5 min (FIFO and 0 min are the TE share 0.3 runs)
    assert quick.data["runs"] == 4 + 3 + 5 + 5 + 4 + 1 + 10 + 4 + 1
    assert quick.data["readings"]["wait, GP sd 3"]["be_p50"]["fitgpp"] == quick.data["s"]["s=4"]["fitgpp"]["be_p50"]
    assert quick.data["be_sources"]["FitGpp, P=1"]["be_p50"] == quick.data["s"]["s=4"]["fitgpp"]["be_p50"]
    assert quick.data["be_sources"]["TE first, P=0"]["preempted_be"] == 0.0
    assert quick.data["s"]["s=4"]["fitgpp"] == quick.data["P"]["P=1"]["fitgpp"] == \
        quick.data["grace_scale"]["GP x1 s=4"]["fitgpp"]


def test_small_instance_preemption_cuts_te_slowdown_and_fitgpp_preempts_least(quick: Reproduction) -> None:
    """The quick workload is seeded: FIFO makes TE jobs queue behind BE jobs, the preemptive policies serve them
    at once (median exactly 1), and on the 12-node sweep FitGpp's one-victim rule preempts fewer jobs than
    LRTP's and RAND's preempt-until-it-fits, without its fallback."""
    table = quick.data["table1"]
    assert table["fifo"]["te_p95"] > 5 * table["fitgpp"]["te_p95"]
    assert table["fitgpp"]["te_p50"] == table["lrtp"]["te_p50"] == table["rand"]["te_p50"] == 1.0
    at_cap = quick.data["P"]["P=1"]
    assert 0 < at_cap["fitgpp"]["preempted"] < min(at_cap["lrtp"]["preempted"], at_cap["rand"]["preempted"])
    assert quick.data["table3"]["fallbacks"] == 0
    assert at_cap["fitgpp"]["fallbacks"] == 0
    assert all(at_cap[p]["preempted_twice"] == at_cap[p]["preempted_3plus"] == 0 for p in at_cap)  # P = 1
    assert 1.9 <= quick.data["fifo_load"] <= 2.1


def test_runs_sharing_a_workload_equal_runs_each_on_its_own() -> None:
    specs = (RunSpec("fitgpp", 1, 384, 12), RunSpec("lrtp", 1, 384, 12), RunSpec("fifo", 1, 384, 12),
             RunSpec("fitgpp", 1, 384, 12, (("s", 0.0),), restart_cost_s=300.0))
    shared = run_on_one_workload(specs)
    for spec, got in zip(specs, shared, strict=True):
        alone = run_one(spec)
        for name in ("te", "be", "intervals_min", "preemptions", "te_at", "be_at"):
            assert np.array_equal(getattr(got, name), getattr(alone, name)), (spec.policy, name)
        assert (got.fallbacks, got.load, got.backlog) == (alone.fallbacks, alone.load, alone.backlog)
        assert got.gpu_alloc == alone.gpu_alloc
    assert shared[0].preemptions.sum() > 0  # the replays preempt: a run that changed a job would show here
    with pytest.raises(ValueError, match="2 workloads"):
        run_on_one_workload((RunSpec("fitgpp", 1, 384, 12), RunSpec("fitgpp", 2, 384, 12)))


def test_unknown_experiment_is_a_one_line_error() -> None:
    with pytest.raises(UnknownPaper, match=r"unknown experiment.*choose from " + ", ".join(EXPERIMENTS)):
        run("fitgpp", ReproOptions(quick=True, workers=1, progress=False, only=("tabel1",)))


def test_closed_loop_calibration_by_hand() -> None:
    """One node of 2 units, each job takes 1 unit (share 1/2), load 2: four jobs fit in the system at t = 0, two
    run; at t = 60 j0 ends (j1 runs 2 minutes), so j4 enters and j2 starts; at 120 j1 and j2 end, j3 starts,
    j5 and j6 enter; j4 takes the other unit."""
    requests = np.ones((7, 1), dtype=np.int64)
    exec_s = np.array([60.0, 120, 60, 60, 60, 60, 60])
    shares = np.full((7, 1), 0.5)
    times = fifo_closed_loop_times(requests, exec_s, shares, (2,), 1, 2.0, 60.0)
    assert times.tolist() == [0, 0, 0, 0, 60, 120, 120]


def test_fifo_replay_keeps_the_calibrated_load() -> None:
    """The engine's strict FIFO on the closed-loop submit times keeps running + queued demand at 2.0."""
    spec = RunSpec("fifo", 3, 1500, 12)
    outcome = run_one(spec)
    assert outcome.load == pytest.approx(2.0, abs=0.05)
    assert outcome.preemptions.sum() == 0 and outcome.intervals_min.size == 0


def _job(job_id: str, submit: float, exec_s: float) -> SimJob:
    request = Resources(32, 256 * 1024, {"gpu": 8})
    return SimJob(job_id, "u", submit, {"gpu": SimVariant("gpu", request, exec_s)}, JobClass.BE)


def test_slowdown_eq5_is_exactly_one_without_waiting_and_counts_the_wait() -> None:
    """Digest A9: a job that never waits has slowdown 1.0; one that waits 600 s for a 300 s run has 3.0."""
    config = parse_sim_config({
        "cluster": {"partitions": [{"name": "gpu", "kind": "gpu", "nodes": 1, "cpus": 32, "mem": "256G",
                                    "gres": "gpu:8"}]},
        "policy": {"name": "fifo", "params": {"backfill": False}}, "mode": "tick"})
    jobs = [_job("a", 0.0, 600.0), _job("b", 0.0, 300.0)]
    result = run_config(config, jobs)
    assert slowdowns(result.jobs, JobClass.BE).tolist() == [1.0, 3.0]
    assert measured_load(jobs, {"a": 600.0, "b": 900.0}, 1) == 0.0  # one submit instant: no window to average


def test_preemption_end_to_end_grace_earmark_head_of_queue_and_interval() -> None:
    """Digest A7 in the engine, one node, 1-minute ticks: BE (whole node, 60 min, grace 2 min) runs from 0; TE
    (4 CPU, 32 GB, 1 GPU, 5 min) arrives at 10 min and fits nowhere, so FitGpp signals BE. BE holds the node
    until 12 min, then TE starts there; BE, back at the head with 50 min left, waits for the whole node
    until TE ends at 17 min and finishes at 67 min. Interval signal -> restart: 7 min."""
    config = parse_sim_config({
        "cluster": {"partitions": [{"name": "gpu", "kind": "gpu", "nodes": 1, "cpus": 32, "mem": "256G",
                                    "gres": "gpu:8"}]},
        "policy": {"name": "fitgpp", "params": {}}, "mode": "tick"})
    be = SimJob("be", "u", 0.0, {"gpu": SimVariant("gpu", Resources(32, 256 * 1024, {"gpu": 8}), 3600.0)},
                JobClass.BE, grace_s=120)
    te = SimJob("te", "u", 600.0, {"gpu": SimVariant("gpu", Resources(4, 32 * 1024, {"gpu": 1}), 300.0)},
                JobClass.TE)
    result = run_config(config, [be, te])
    records = {r.job_id: r for r in result.jobs}
    assert (records["te"].first_start, records["te"].finish) == (720.0, 1020.0)
    assert (records["be"].finish, records["be"].exec_s, records["be"].preemptions) == (4020.0, 3600.0, 1)
    assert result.reschedule_intervals == (420.0,)
    assert slowdowns(result.jobs, JobClass.TE).tolist() == [1.4]
    assert slowdowns(result.jobs, JobClass.BE).tolist() == [pytest.approx(4020 / 3600)]


def test_s_check_is_strict_where_the_paper_falls_and_noise_tolerant_where_it_is_flat() -> None:
    """Fig. 4 falls up to s = 4 and is flat from 4 to 8: a rise below 4 fails however small; from 4 on a rise
    within two standard errors of the difference (2 * hypot(0.003, 0.004) = 0.01) passes, a larger one fails."""
    falling = [(0.0, 1.05, 0.003), (2.0, 1.03, 0.003), (4.0, 1.02, 0.003)]
    assert non_increasing_in_s(falling)
    assert not non_increasing_in_s([(0.0, 1.05, 0.003), (2.0, 1.02, 0.003), (4.0, 1.0201, 0.004)])
    assert non_increasing_in_s([*falling, (8.0, 1.0299, 0.004)])
    assert not non_increasing_in_s([*falling, (8.0, 1.0301, 0.004)])


def test_backlog_counts_be_jobs_submitted_but_not_started() -> None:
    """Submission window [0, 400]: at 100, 200, 300 and 400 count the BE jobs submitted by then that have not
    started. BE a (0, starts 250), b (100, starts 100: not waiting at 100), c (400, starts 500); the TE job
    (0, starts 350) is never counted."""
    jobs = [_job("a", 0.0, 60.0), _job("b", 100.0, 60.0), _job("c", 400.0, 60.0)]
    te = SimJob("t", "u", 0.0, {"gpu": SimVariant("gpu", Resources(1, 1024, {"gpu": 1}), 60.0)}, JobClass.TE)
    starts = {"a": 250.0, "b": 100.0, "c": 500.0, "t": 350.0}
    assert backlog([*jobs, te], starts) == (1, 1, 0, 1)


def _gpu_job(job_id: str, submit: float, gpus: int, minutes: float, cls: JobClass = JobClass.BE) -> SimJob:
    request = Resources(1, 1024, {"gpu": gpus})
    return SimJob(job_id, "u", submit, {"gpu": SimVariant("gpu", request, minutes * 60)}, cls,
                  grace_s=60 if cls is JobClass.BE else 0)


def test_a_fitgpp_victim_moves_into_a_hole_a_blocked_fifo_head_leaves_idle() -> None:
    """Why FitGpp can help BE jobs (docs, "Why FitGpp's BE slowdown ..."). Three 8-GPU nodes, first fit in id order:
    a (6) and b (2) fill n1, c (4) and d (2) leave 2 GPUs on n2, e (6) leaves 2 on n3; the head h (8 GPUs) is
    blocked. The TE job (4 GPUs) arrives at 1 min and fits nowhere. FitGpp preempts d, the smallest job passing
    Eq. 2 (2 + 2 free on n2); when d's 1-minute grace ends the TE job takes n2 and d, back at the head, restarts at
    once in n3's idle hole — no re-queue wait. Under strict FIFO the TE job waits behind h until the 600-minute
    jobs end."""
    cluster = {"partitions": [{"name": "gpu", "kind": "gpu", "nodes": 3, "cpus": 32, "mem": "256G",
                               "gres": "gpu:8"}]}
    jobs = [_gpu_job("a", 0, 6, 600), _gpu_job("b", 0, 2, 600), _gpu_job("c", 0, 4, 600), _gpu_job("d", 0, 2, 600),
            _gpu_job("e", 0, 6, 600), _gpu_job("h", 0, 8, 60), _gpu_job("t", 60, 4, 5, JobClass.TE)]
    runs = {}
    for policy, params in (("fitgpp", {}), ("fifo", {"backfill": False})):
        config = parse_sim_config({"cluster": cluster, "policy": {"name": policy, "params": params}, "mode": "tick"})
        result = run_config(config, jobs)
        runs[policy] = ({r.job_id: r for r in result.jobs}, result.reschedule_intervals)
    fit, intervals = runs["fitgpp"]
    assert [j for j, r in sorted(fit.items()) if r.preemptions] == ["d"]
    assert fit["t"].first_start == 120.0 and intervals == (60.0,)  # d restarted the minute its grace ended
    assert fit["d"].finish == 120.0 + 600 * 60 - 60  # 1 minute done before the signal, none during grace
    assert fit["h"].first_start == 600 * 60  # the blocked head waits for a whole node either way
    fifo, _ = runs["fifo"]
    assert fifo["t"].first_start == 600 * 60 and fifo["h"].first_start == 600 * 60
