"""Workload generators: determinism by seed, the parameters' effects, and distributions within the digests' ranges."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import numpy as np
import pytest

from slurmx.core.model import JobClass
from slurmx.core.resources import Resources
from slurmx.core.validation import ConfigError
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.workloads import (
    PHILLY_MULTI_GPU,
    WORKLOADS,
    AlloxParams,
    FitgppParams,
    MlfsParams,
    SynergyParams,
    SynergySpeed,
    ZhaoParams,
    allox,
    calibrated_horizon,
    fitgpp,
    fitgpp_capacity,
    generate,
    mlfs,
    mlfs_from_trace,
    offered_load,
    synergy,
    task_graph,
    with_submit_times,
    zhao,
    zhao_batches,
)
from slurmx.sim.workloads.common import truncated_normal
from slurmx.sim.workloads.synergy import MODELS

PEER_JOBLIST = Path(__file__).resolve().parents[2].parent / "shared" / "peers" / "synergy" / "joblist_load9.0.csv"
MIN = 60.0

SMALL = {
    "allox": AlloxParams(jobs_per_user=200),
    "fitgpp": FitgppParams(n_jobs=5000),
    "synergy": SynergyParams(n_jobs=2000),
    "zhao": ZhaoParams(n_batches=2, jobs_per_batch=200, batch_interval_s=1.0),
    "mlfs": MlfsParams(n_jobs=300),
}


def _only(job: SimJob) -> SimVariant:
    return next(iter(job.variants.values()))


# --- properties every generator has ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_deterministic_by_seed_and_sorted(name: str) -> None:
    params = SMALL[name]
    _, generator = WORKLOADS[name]
    first, again, other = generator(params, 7), generator(params, 7), generator(params, 8)
    assert first == again
    assert first != other
    times = [j.submit_time for j in first]
    assert times == sorted(times)
    assert len({j.job_id for j in first}) == len(first)
    # A sweep ships (params, seed) to its workers, which regenerate the very same jobs.
    assert generator(pickle.loads(pickle.dumps(params)), 7) == first


def test_generate_validates_names_and_keys() -> None:
    jobs = generate("fitgpp", {"n_jobs": 100, "te_fraction": 1.0}, seed=3)
    assert len(jobs) == 100 and all(j.job_class is JobClass.TE for j in jobs)
    assert generate("zhao", ZhaoParams(jobs_per_batch=10), seed=1) == zhao(ZhaoParams(jobs_per_batch=10), 1)
    partial = generate("fitgpp", {"n_jobs": 50, "te": {"exec_max_min": 10}}, seed=3)
    assert max(_only(j).duration_s for j in partial if j.job_class is JobClass.TE) <= 10 * MIN
    assert FitgppParams.model_validate({"te": {"exec_max_min": 10}}).te.gpus_mean == 1
    with pytest.raises(ValueError, match="unknown workload 'gavel'"):
        generate("gavel")
    with pytest.raises(ConfigError) as exc:
        generate("fitgpp", {"te_share": 0.5})
    assert "te_share: unknown key; valid keys: placement, n_jobs, te_fraction" in str(exc.value)
    with pytest.raises(ConfigError, match="te_fraction: must be <= 1"):
        generate("fitgpp", {"te_fraction": 1.5})
    with pytest.raises(ValueError, match="takes FitgppParams"):
        generate("fitgpp", ZhaoParams())
    with pytest.raises(ValueError, match="seed must be >= 0"):
        fitgpp(FitgppParams(n_jobs=10), -1)


def test_truncated_normal_stays_in_bounds_and_keeps_the_stream() -> None:
    rng = np.random.default_rng(0)
    x = truncated_normal(rng, 5.0, 5.0, 1.0, 30.0, 20000)
    assert x.min() >= 1.0 and x.max() <= 30.0
    # Truncating at 1 raises the mean above 5; the untruncated median 5 stays close to the sample median.
    assert 6.0 < x.mean() < 7.5 and 5.0 < float(np.median(x)) < 6.5
    assert np.all(truncated_normal(rng, 100.0, 1.0, 0.0, 10.0, 5) == 10.0)  # all mass beyond the bound
    a, b = np.random.default_rng(1), np.random.default_rng(1)
    truncated_normal(a, 0, 1, -1, 1, 10), truncated_normal(b, 0, 1, -3, 3, 10)
    assert a.random() == b.random()  # one draw per sample whatever the bounds


# --- AlloX ---------------------------------------------------------------------------------------------


def test_allox_distributions_match_the_authors_simulator() -> None:
    p = AlloxParams()
    jobs = allox(p, 1)
    assert len(jobs) == 10000
    users = [j.user for j in jobs]
    assert all(users.count(f"user{u}") == 1000 for u in range(10))
    cpu = np.array([j.variants["cpu"].duration_s for j in jobs]) / MIN
    gpu = np.array([j.variants["gpu"].duration_s for j in jobs]) / MIN
    assert cpu.min() >= 40 and cpu.max() <= 450 and gpu.min() >= 1 and gpu.max() <= 400
    assert 180 < cpu.mean() < 250  # job_google_m1.txt: mean 215
    speedup = cpu / gpu
    assert speedup.min() >= 0.7 and speedup.max() <= 450
    assert np.mean(speedup > 1) > 0.85  # the authors' list: 94% of jobs are faster on GPU
    by_user = [np.mean([j.meta["speedup"] for j in jobs if j.meta["user_index"] == u]) for u in range(10)]
    assert by_user[0] < 3 and by_user[9] > 10 and by_user[9] > by_user[4] > by_user[0]
    assert all(j.variants["cpu"].request.cpus == 32 and 1024 <= j.variants["cpu"].request.mem_mb <= 16384 for j in jobs)
    assert all(j.variants["gpu"].request == Resources(1, 2048, {"gpu": 1}) for j in jobs)
    for j in jobs:
        for v in j.variants.values():
            assert v.estimate_s is not None and 0.01 * v.duration_s <= v.estimate_s <= 1.99 * v.duration_s
    # Bursty arrivals: an initial burst at t=0, and ~0.455 jobs per unit over the run (authors: 0.444).
    units = np.array([j.submit_time for j in jobs]) / MIN
    assert np.sum(units == 0) >= 20
    assert 17000 < units.max() < 28000
    per_1000 = np.histogram(units, bins=np.arange(0, units.max(), 1000))[0]
    assert per_1000.min() < 400 < per_1000.max()  # windows differ: low and high states


def test_allox_parameters_take_effect() -> None:
    exact = allox(AlloxParams(jobs_per_user=50, estimate_error_sd=0), 2)
    assert all(v.estimate_s is None for j in exact for v in j.variants.values())
    few = allox(AlloxParams(n_users=3, jobs_per_user=20, cpu_cores=20, initial_burst_units=0), 2)
    assert len(few) == 60 and {j.user for j in few} == {"user0", "user1", "user2"}
    assert all(j.variants["cpu"].request.cpus == 20 for j in few)
    with pytest.raises(ValueError, match="user_speedups"):
        allox(AlloxParams(n_users=11, jobs_per_user=1), 0)


# --- FitGpp --------------------------------------------------------------------------------------------


def test_fitgpp_defaults_follow_the_paper() -> None:
    p = FitgppParams()
    jobs = fitgpp(p, 1)
    assert len(jobs) == 65536
    te = [j for j in jobs if j.job_class is JobClass.TE]
    be = [j for j in jobs if j.job_class is JobClass.BE]
    assert abs(len(te) / len(jobs) - 0.3) < 0.01
    te_exec = np.array([_only(j).duration_s for j in te]) / MIN
    be_exec = np.array([_only(j).duration_s for j in be]) / MIN
    assert te_exec.min() >= 1 and te_exec.max() <= 30 and be_exec.min() >= 1 and be_exec.max() <= 24 * 60
    assert 4 < np.median(te_exec) < 8 and 25 < np.median(be_exec) < 45  # means of the fitted normals: 5, 30 min
    assert all(j.grace_s == 0 for j in te)
    gp = np.array([j.grace_s for j in be]) / MIN
    assert gp.min() >= 0 and gp.max() <= 20 and 3 < gp.mean() < 5
    for j in jobs:
        r = _only(j).request
        assert 1 <= r.gres_count("gpu") <= 8 and 1 <= r.cpus <= 32 and 1024 <= r.mem_mb <= 256 * 1024
        assert j.submit_time % 60 == 0 and _only(j).duration_s % 60 == 0 and j.grace_s % 60 == 0
    assert np.mean([_only(j).request.gres_count("gpu") for j in be]) > np.mean(
        [_only(j).request.gres_count("gpu") for j in te]
    )
    load = offered_load(jobs, fitgpp_capacity(p), jobs[-1].submit_time)
    assert load == pytest.approx(2.0, rel=0.002)


def test_fitgpp_parameters_take_effect() -> None:
    base = FitgppParams(n_jobs=20000)
    for share in (0.1, 0.5, 0.9):
        jobs = fitgpp(base.model_copy(update={"te_fraction": share}), 4)
        assert abs(sum(j.job_class is JobClass.TE for j in jobs) / len(jobs) - share) < 0.015
    half = fitgpp(base.model_copy(update={"load": 1.0, "tick_s": 0}), 4)
    full = fitgpp(base.model_copy(update={"load": 2.0, "tick_s": 0}), 4)
    assert half[-1].submit_time == pytest.approx(2 * full[-1].submit_time)
    assert offered_load(half, fitgpp_capacity(base), half[-1].submit_time) == pytest.approx(1.0)
    gpu_only = base.model_copy(update={"load_dimension": "gres/gpu", "tick_s": 0})
    jobs = fitgpp(gpu_only, 4)
    assert offered_load(jobs, fitgpp_capacity(base), jobs[-1].submit_time, dimension="gres/gpu") == pytest.approx(2.0)
    gp1 = np.mean([j.grace_s for j in fitgpp(base, 4) if j.job_class is JobClass.BE])
    gp4 = np.mean([j.grace_s for j in fitgpp(base.model_copy(update={"gp_scale": 4.0}), 4) if j.grace_s])
    assert 3.5 < gp4 / gp1 < 4.5
    assert max(j.grace_s for j in fitgpp(base.model_copy(update={"gp_scale": 8.0}), 4)) <= 160 * 60
    uniform = fitgpp(base.model_copy(update={"arrivals": "uniform", "tick_s": 0, "n_jobs": 100}), 4)
    gaps = np.diff([j.submit_time for j in uniform])
    assert np.allclose(gaps, gaps[0])
    with pytest.raises(ValueError, match="load_dimension"):
        fitgpp(base.model_copy(update={"load_dimension": "gres/accel"}), 4)


def test_calibration_formula_by_hand() -> None:
    cap = Resources(64, 256000, {"gpu": 8})  # two jobs: 1 GPU x 400 s (share 1/8), 16 CPUs x 100 s (share 1/4)
    gpu_job = SimVariant("gpu", Resources(1, 1000, {"gpu": 1}), 400)
    cpu_job = SimVariant("cpu", Resources(16, 1000), 100)
    jobs = [
        SimJob(job_id="a", user="u", submit_time=0, variants={"gpu": gpu_job}),
        SimJob(job_id="b", user="u", submit_time=0, variants={"cpu": cpu_job}),
    ]
    assert offered_load(jobs, cap, 100) == pytest.approx((400 / 8 + 100 / 4) / 100)
    assert offered_load(jobs, cap, 100, dimension="gres/gpu") == pytest.approx(0.5)
    assert calibrated_horizon(jobs, cap, load=0.5) == pytest.approx(150)
    with pytest.raises(ValueError, match="dimension"):
        offered_load(jobs, cap, 1, dimension="gres/accel")


def test_with_submit_times_keeps_deadline_slack() -> None:
    jobs = mlfs(MlfsParams(n_jobs=5), 1)
    moved = with_submit_times(jobs, [100.0 * i for i in range(5, 0, -1)])
    assert [j.submit_time for j in moved] == [100, 200, 300, 400, 500]
    slack = {j.job_id: j.deadline - j.submit_time for j in jobs if j.deadline is not None}
    assert all(j.deadline is not None and j.deadline - j.submit_time == pytest.approx(slack[j.job_id]) for j in moved)
    with pytest.raises(ValueError, match="5 jobs but 1"):
        with_submit_times(jobs, [0.0])


# --- Synergy -------------------------------------------------------------------------------------------


def test_synergy_durations_mix_and_arrivals() -> None:
    jobs = synergy(SynergyParams(), 42)
    assert len(jobs) == 7000
    minutes = np.array([_only(j).duration_s for j in jobs]) / MIN
    assert minutes.min() >= 10**1.5 - 0.1 and minutes.max() <= 10**4
    long = np.mean(minutes > 1000)
    assert 0.17 < long < 0.23
    assert 700 < minutes.mean() < 1300  # derived mean 1006 min
    tasks = [j.meta["task"] for j in jobs]
    assert abs(tasks.count("image") - 1400) <= 1 and abs(tasks.count("language") - 4900) <= 1
    gaps = np.diff([0.0] + [j.submit_time for j in jobs])
    assert np.all(gaps == np.round(gaps)) and 360 < gaps.mean() < 440  # 9 jobs/hour
    assert all(_only(j).request == Resources(3, 64000, {"gpu": 1}) for j in jobs)
    assert sum(j.meta["measured"] for j in jobs) == 1000
    for j in jobs[:200]:
        assert _only(j).duration_s == pytest.approx(j.meta["total_iters"] * MODELS[j.meta["model"]].iter_time_s)


def test_synergy_model_sequence_is_the_authors() -> None:
    ours = [j.meta["model"] for j in sorted(synergy(SynergyParams(n_jobs=14), 0), key=lambda j: int(j.job_id[8:]))]
    assert ours == [
        "alexnet", "gnmt", "transformer", "m5", "lstm", "gnmt", "res18",
        "transformer", "lstm", "gnmt", "res50", "transformer", "lstm", "deepspeech",
    ]  # fmt: skip


@pytest.mark.skipif(not PEER_JOBLIST.exists(), reason="../shared/peers not present")
def test_synergy_model_counts_equal_the_authors_run() -> None:
    jobs = synergy(SynergyParams(n_jobs=6925), 0)
    ours = sorted(j.meta["model"] for j in jobs)
    theirs = sorted(line.split(",")[1] for line in PEER_JOBLIST.read_text().splitlines()[1:])
    assert ours == theirs


def test_synergy_parameters_take_effect() -> None:
    static = synergy(SynergyParams(n_jobs=100, arrivals="static"), 1)
    assert max(j.submit_time for j in static) < 1
    multi = synergy(SynergyParams(n_jobs=3000, gpu_demand=PHILLY_MULTI_GPU), 1)
    gpus = [_only(j).request.gres_count("gpu") for j in multi]
    assert set(gpus) <= {1, 2, 4, 8, 16} and 0.9 < gpus.count(1) / len(gpus) < 0.96
    four = next(j for j in multi if _only(j).request.gres_count("gpu") == 4)
    assert _only(four).request == Resources(12, 256000, {"gpu": 4})
    split = synergy(SynergyParams(n_jobs=1000, split=(50, 0, 50)), 1)
    assert {j.meta["task"] for j in split} == {"image", "speech"}
    slow = synergy(SynergyParams(n_jobs=500, jobs_per_hour=1.0), 1)
    assert slow[-1].submit_time > 5 * synergy(SynergyParams(n_jobs=500, jobs_per_hour=9.0), 1)[-1].submit_time
    short = synergy(SynergyParams(n_jobs=500, short_prob=1.0), 1)
    assert max(_only(j).duration_s for j in short) <= 1000 * MIN
    with pytest.raises(ValueError):
        SynergyParams(split=(-1, 50, 51))


def test_synergy_speed_matrix() -> None:
    def speed(model: str, gpus: int, cpus: int, mem_gb: float, mode: str = "matrix") -> float:
        return SynergySpeed(model, gpus, mode)("gpu", cpus, round(mem_gb * 1024))  # type: ignore[arg-type]

    for name in MODELS:
        assert speed(name, 1, 3, 62.5) == 1.0  # 1.0 at the proportional share
        p = MODELS[name]
        assert speed(name, 1, int(p.ideal_cpus_per_gpu), p.ideal_mem_gb_per_gpu) == p.speedup
        assert speed(name, 2, 2 * int(p.ideal_cpus_per_gpu), 2 * p.ideal_mem_gb_per_gpu, "binary") == p.speedup
    assert speed("alexnet", 1, 12, 62.5) == 2.0 and speed("alexnet", 1, 24, 500) == 2.94
    assert speed("res18", 1, 8, 62.5) == 1.75  # 8 CPUs round down to the 6-CPU row
    assert speed("res18", 1, 3, 20) == 0.1 and speed("gnmt", 1, 1, 20) == 1.0  # below proportional memory
    assert speed("res18", 1, 6, 62.5, "binary") == 1.0 and speed("m5", 4, 24, 750) == 2.5
    job = synergy(SynergyParams(n_jobs=1), 0)[0]
    assert job.speed is not None and job.speed("gpu", 12, 128000) == 2.94  # alexnet first
    binary = synergy(SynergyParams(n_jobs=1, speed_model="binary"), 0)[0]
    assert binary.speed is not None and binary.speed("gpu", 12, 64000) == 1.0


# --- Zhao et al. -------------------------------------------------------------------------------------------


def test_zhao_batches_sizes_rates_and_spread() -> None:
    p = ZhaoParams(n_batches=5, jobs_per_batch=1000, batch_interval_s=2.0)
    work = zhao_batches(p, 3)
    assert len(work.batches) == 5 and all(len(b) == 1000 for b in work.batches)
    assert work.responder_rates_mbps == (1000.0,) * 50
    assert [b[0].submit_time for b in work.batches] == [0.0, 2.0, 4.0, 6.0, 8.0]
    sizes = np.array([j.meta["size_mb"] for j in work.jobs])
    assert 190 < sizes.mean() < 210 and 190 < sizes.std() < 210  # exponential: sd = mean
    for j in work.jobs[:300]:
        ratio = np.array(j.meta["compute_s"]) / j.meta["size_mb"]
        assert len(ratio) == 50 and ratio.min() >= 0.0005 - 1e-12 and ratio.max() <= 0.0015 + 1e-12
        assert j.meta["compute_est_s"] == j.meta["compute_s"]  # no estimation error by default
        mean_p = np.mean(j.meta["size_mb"] / 1000 + np.array(j.meta["compute_s"]))
        assert _only(j).duration_s == pytest.approx(mean_p) and _only(j).request == Resources(gres={"accel": 1})
    assert zhao(p, 3) == work.jobs


def test_zhao_parameters_take_effect() -> None:
    exact = zhao_batches(ZhaoParams(jobs_per_batch=50, compute_spread=0.0), 1)
    for j in exact.jobs:
        assert np.allclose(j.meta["compute_s"], 0.001 * j.meta["size_mb"])
    noisy = zhao_batches(ZhaoParams(jobs_per_batch=50, estimate_error=0.3), 1)
    for j in noisy.jobs:
        ratio = np.array(j.meta["compute_est_s"]) / np.array(j.meta["compute_s"])
        assert ratio.min() >= 0.7 - 1e-12 and ratio.max() <= 1.3 + 1e-12 and ratio.std() > 0
    spread = zhao_batches(ZhaoParams(jobs_per_batch=5, n_responders=10, rate_spread=0.5), 1)
    assert len(set(spread.responder_rates_mbps)) == 10
    assert all(500 <= r <= 1500 for r in spread.responder_rates_mbps)


# --- MLFS ----------------------------------------------------------------------------------------------


def test_mlfs_jobs_tasks_deadlines_and_curves() -> None:
    p = MlfsParams(n_jobs=3000)
    jobs = mlfs(p, 5)
    algos = [j.meta["algorithm"] for j in jobs]
    assert set(algos) == {"alexnet", "resnet", "mlp", "lstm", "svm"}
    assert all(450 < algos.count(a) < 750 for a in set(algos))
    minutes = np.array([_only(j).duration_s for j in jobs]) / MIN
    assert abs(np.mean(minutes <= 10) - 0.67) < 0.04 and abs(np.mean(minutes <= 100) - 0.86) < 0.03
    for j in jobs:
        v, meta = _only(j), j.meta
        g = v.request.gres_count("gpu")
        assert g in (1, 2, 4, 8, 16, 32) and v.request == Resources(8 * g, 61 * 1024 * g, {"gpu": g})
        assert j.deadline is not None
        slack = j.deadline - j.submit_time
        assert slack >= 1.1 * v.duration_s - 1e-6 and slack >= 0.5 * 3600 - 1e-6
        assert slack <= max(1.1 * v.duration_s, 24 * 3600) + 1e-6
        assert (
            100 <= meta["data_mb"] <= 1000 and 50 <= meta["comm_ps_mb"] <= 100 and 50 <= meta["comm_worker_mb"] <= 100
        )
        assert 1 <= meta["urgency"] <= 10
        tasks = task_graph(meta)
        workers = [t for t in tasks if t.stage >= 0]
        assert tasks[0].stage == -1 and len(workers) == g  # one worker per GPU, plus the PS
        assert math.isclose(sum(meta["params_frac"]), 1.0)
        if meta["algorithm"] == "svm":
            assert meta["dp_degree"] == g and all(t.children == (0,) for t in workers)
        else:
            assert len(meta["params_frac"]) == g
            assert any(0 in t.children for t in workers)
        curve = meta["accuracy_curve"]
        assert curve.accuracy(0) < curve.accuracy(meta["iterations"]) < curve.acc_max
        assert curve.loss_drop(1) > curve.loss_drop(2) > 0
        assert curve.acc_start < meta["accuracy_req"] < curve.acc_max
        assert curve.iterations_to(meta["accuracy_req"]) > 0
    chain = next(j for j in jobs if j.meta["algorithm"] == "mlp" and _only(j).request.gres_count("gpu") == 4)
    assert [t.children for t in task_graph(chain.meta)] == [(), (2,), (3,), (4,), (0,)]
    layered = next(j for j in jobs if j.meta["algorithm"] == "resnet" and _only(j).request.gres_count("gpu") == 8)
    assert layered.meta["stages"] == (2, 2, 2, 2)


def test_mlfs_parameters_and_trace_mode() -> None:
    urgent = mlfs(MlfsParams(n_jobs=200, urgency_levels=3, gpu_choices=(2,), estimate_error=0.2), 1)
    assert {j.meta["urgency"] for j in urgent} == {1, 2, 3}
    assert {_only(j).request.gres_count("gpu") for j in urgent} == {2}
    assert all(0.8 * _only(j).duration_s <= (_only(j).estimate_s or 0) <= 1.2 * _only(j).duration_s for j in urgent)
    with pytest.raises(ValueError, match="iter_time_s has no entry for bert"):
        MlfsParams(algorithms=("bert",), dag={"bert": "chain"}, batch_mb={"bert": 1.0})
    busy = mlfs(MlfsParams(n_jobs=500, jobs_per_hour=100), 1)
    quiet = mlfs(MlfsParams(n_jobs=500, jobs_per_hour=10), 1)
    assert quiet[-1].submit_time > 5 * busy[-1].submit_time
    trace = [
        SimJob(job_id=f"t{i}", user="u", submit_time=10.0 * i,
               variants={"gpu": SimVariant("gpu", Resources(3, 1000, {"gpu": 1 + i % 3}), 3600.0)})
        for i in range(30)
    ]  # fmt: skip
    jobs = mlfs_from_trace(trace, MlfsParams(), 2)
    assert [j.submit_time for j in jobs] == [10.0 * i for i in range(30)]
    assert [_only(j).request.gres_count("gpu") for j in jobs] == [1 + i % 3 for i in range(30)]
    assert all(abs(_only(j).duration_s - 3600) <= 1 for j in jobs)
    assert mlfs_from_trace(trace, MlfsParams(), 2) == jobs
