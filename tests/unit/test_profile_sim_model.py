"""The simulator's profiling model: the live estimator on simulated samples, same overhead and error meaning."""

from __future__ import annotations

import numpy as np
import pytest

from slurmx.core.resources import Resources
from slurmx.policies import make_policy
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape
from slurmx.sim.engine import Engine
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.profiling_model import (
    SimProfilingParams,
    apply_profiling,
    engine_equivalent,
    noise_for_error,
    profile_job,
)


def job(i: int, cpu_s: float, gpu_s: float) -> SimJob:
    return SimJob(f"j{i}", "u", 0.0, {"cpu": SimVariant("cpu", Resources(cpus=32), cpu_s),
                                      "gpu": SimVariant("gpu", Resources(cpus=1, gres={"gpu": 1}), gpu_s)})


def test_noiseless_samples_give_the_truth_and_the_engines_delay() -> None:
    params = SimProfilingParams(startup_s=5.0)
    [profiled] = apply_profiling([job(0, 1000.0, 100.0)], params, seed=1)
    assert profiled.variants["cpu"].estimate_s == pytest.approx(1000.0)
    assert profiled.variants["gpu"].estimate_s == pytest.approx(100.0)
    # A run is 5 s of start-up plus steps. Side by side, 1% + 2% of the CPU's 995 s of steps one after the
    # other, plus two start-ups: 5 + 9.95 + 5 + 19.9 = 39.85 s; the GPU's: 5 + 0.95 + 5 + 1.9 = 12.85 s.
    assert profiled.meta["profiling_delay_s"] == pytest.approx(39.85)
    assert profiled.meta["profiling_overhead_s"] == pytest.approx(39.85 + 12.85)
    eq = engine_equivalent(params)
    assert eq == {"fixed": pytest.approx(9.85), "fraction": pytest.approx(0.03)}
    assert eq["fixed"] + eq["fraction"] * 1000.0 == pytest.approx(profiled.meta["profiling_delay_s"])


def test_noise_for_error_gives_that_estimation_error() -> None:
    params = SimProfilingParams()
    # r = 2, f1 = 1%: error = 1.98·e2 - 0.98·e1, so sigma_s = 0.1 / hypot(1.98, 0.98).
    noise = noise_for_error(0.1, params)
    assert noise == pytest.approx(0.1 / np.hypot(1.98, 0.98))
    noisy = params.model_copy(update={"sample_noise": noise})
    jobs = [job(i, 1000.0 + i, 100.0 + i) for i in range(3000)]
    errors = [(p.variants[k].estimate_s or 0.0) / j.variants[k].duration_s - 1
              for p, j in zip(apply_profiling(jobs, noisy, seed=7), jobs, strict=True) for k in ("cpu", "gpu")]
    assert np.std(errors) == pytest.approx(0.1, abs=0.006)
    assert abs(float(np.mean(errors))) < 0.006
    assert noise_for_error(0.1, SimProfilingParams(short_fraction=0.0, long_fraction=0.015)) == pytest.approx(0.1)


def test_cut_bounds_the_slow_variants_samples_and_marks_a_lower_bound() -> None:
    params = SimProfilingParams(cut_factor=3.0)
    profiled, delay, overhead = profile_job(job(0, 1000.0, 100.0), params, np.random.default_rng(0))
    cpu, gpu = profiled
    assert gpu.estimate_s == pytest.approx(100.0) and not gpu.lower_bound
    # CPU samples 10 s and 20 s are cut at 3 x the GPU's 1 s and 2 s: 3 s and 6 s, a lower bound of 1000 s.
    assert cpu.lower_bound and [r.seconds for r in cpu.samples] == pytest.approx([3.0, 6.0])
    assert cpu.estimate_s == pytest.approx(1000.0)
    assert delay == pytest.approx(9.0) and overhead == pytest.approx(12.0)


def test_same_seed_same_estimates() -> None:
    params = SimProfilingParams(sample_noise=0.05)
    jobs = [job(i, 500.0, 50.0) for i in range(5)]
    first = [j.variants["cpu"].estimate_s for j in apply_profiling(jobs, params, seed=3)]
    assert first == [j.variants["cpu"].estimate_s for j in apply_profiling(jobs, params, seed=3)]
    assert first != [j.variants["cpu"].estimate_s for j in apply_profiling(jobs, params, seed=4)]


def test_the_engine_delays_a_profiled_job_by_its_samples_own_time() -> None:
    # With a cut the samples' time differs from `fixed + fraction·longest`: the engine takes the measured delay.
    [profiled] = apply_profiling([job(0, 1000.0, 100.0)], SimProfilingParams(startup_s=5.0, cut_factor=2.0), seed=1)
    delay = profiled.meta["profiling_delay_s"]
    assert delay != pytest.approx(engine_equivalent(SimProfilingParams(startup_s=5.0))["fixed"] + 30.0)
    site = ModelCluster([PartitionShape("cpu", "cpu", (NodeShape(1, Resources(32, 4096), "c"),)),
                         PartitionShape("gpu", "gpu", (NodeShape(1, Resources(8, 4096, {"gpu": 1}), "g"),))])
    [record] = Engine(site, make_policy("fifo"), [profiled]).run().jobs
    assert record.first_start == pytest.approx(delay)
