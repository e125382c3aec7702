"""The sample plan (sizes within the overhead budget, the cap, sbatch overrides) and the Profiler's life cycle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from slurmx.core.resources import Resources
from slurmx.profile.estimator import ProgressReport, Source
from slurmx.profile.history import History, HistoryRun, JobKey
from slurmx.profile.profiler import Profiler
from slurmx.profile.readings import sample_step_seconds, sample_wall_seconds
from slurmx.profile.sampling import (
    GroupToProfile,
    SampleRequest,
    SamplingParams,
    VariantToProfile,
    sample_steps,
    sample_time_limit,
    within_cap,
)

CPU = Resources(cpus=8, mem_mb=4096)
GPU = Resources(cpus=1, mem_mb=4096, gres={"gpu": 1})


def group(gid: str = "g1", steps: int | None = 10_000, declared: float | None = None, t: float = 0.0) -> GroupToProfile:
    return GroupToProfile(gid, "alice", "train", "h1", (VariantToProfile("cpu", CPU, steps, declared, 3600),
                                                         VariantToProfile("gpu", GPU, steps, declared, 3600)), t)


def test_sample_sizes_keep_the_budget_with_cut_slow_siblings() -> None:
    p = SamplingParams()
    # Two variants, budget 3%, cut at 3x: 0.03 / (1 + 3) = 0.75% per variant = 75 steps: 25 + 50.
    assert sample_steps(10_000, 2, p) == (25, 50)
    # One variant: 3% = 300 steps, C-sim's 1% and 2%.
    assert sample_steps(10_000, 1, p) == (100, 200)
    assert sample_steps(10_000, 2, SamplingParams(zero_step_short=True)) == (1, 74)  # 1 step: ~start-up only
    assert sample_steps(100, 2, p) is None  # 0.75 steps per variant: too short to sample within budget


def test_time_limits_and_overrides() -> None:
    p = SamplingParams()
    variant = VariantToProfile("gpu", GPU, 10_000, None, 36_000)
    assert sample_time_limit(variant, 50, p) == 540  # 36000 s · 50/10000 · 3
    assert sample_time_limit(VariantToProfile("gpu", GPU, 10_000, None, 3600), 25, p) == 60  # at least a minute
    assert sample_time_limit(VariantToProfile("gpu", GPU, 10_000), 25, p) == 600
    request = SampleRequest("g1", "gpu", 1, 50, "slurmx-profile", 540, GPU, "train")
    assert request.sample_id == "g1.gpu.1"
    assert request.sbatch_overrides() == ["--qos=slurmx-profile", "--time=9", "--job-name=train@gpu~s1",
                                          "--comment=slurmx-sample:g=g1,v=gpu,s=1,n=50",
                                          "--export=ALL,SLURMX_SAMPLE_STEPS=50", "--no-requeue"]


def test_cap_counts_samples_cpus_and_gres() -> None:
    p = SamplingParams(max_samples=3, max_cpus=10, max_gres={"gpu": 1})
    assert within_cap(Resources(), 0, CPU, p)
    assert not within_cap(CPU, 1, CPU, p)  # 16 CPUs > 10
    assert not within_cap(GPU, 1, GPU, p)  # 2 GPUs > 1
    assert not within_cap(Resources(), 3, GPU, p)
    with pytest.raises(ValidationError, match="overhead_budget"):
        SamplingParams(overhead_budget=0.0)
    with pytest.raises(ValidationError, match="extra"):
        SamplingParams.model_validate({"budget": 0.03})


def test_profiler_samples_extrapolates_and_cuts_the_slow_variant() -> None:
    profiler = Profiler()
    assert not profiler.ready("g1")  # not planned yet
    requests = profiler.plan([group()], now=0.0)
    # Variants side by side, the samples of one variant one after the other.
    assert [(r.sample_id, r.steps) for r in requests] == [("g1.cpu.0", 25), ("g1.gpu.0", 25)]
    assert profiler.plan([group()], now=1.0) == []  # nothing new until a sample ends
    assert not profiler.ready("g1")
    profiler.observe("g1.gpu.0", 15.0)
    assert [(r.sample_id, r.steps) for r in profiler.plan([], now=15.0)] == [("g1.gpu.1", 50)]
    profiler.observe("g1.gpu.1", 20.0)
    profiler.observe("g1.cpu.0", 60.0)
    assert [r.sample_id for r in profiler.plan([], now=60.0)] == ["g1.cpu.1"]
    # GPU: a = (15 - 20) / (25 - 50) = 0.2 s/step, b = 10 s -> 2010 s.
    gpu = profiler.estimates("g1")["gpu"]
    assert gpu.source is Source.SAMPLE and gpu.seconds == pytest.approx(2010.0)
    # The CPU long sample, started at 0, is cut once past 3 x the GPU long sample's 20 s + 5 s of slack.
    assert profiler.to_cut({"g1.cpu.1": 0.0}, now=64.0) == []
    assert profiler.to_cut({"g1.cpu.1": 0.0}, now=66.0) == ["g1.cpu.1"]
    profiler.observe("g1.cpu.1", 66.0, finished=False, steps_done=30)
    cpu = profiler.estimates("g1")["cpu"]
    # At least 66 / 30 x 10,000 = 22,000 s by its sample, but Slurm ends it at its time limit: 3600 s.
    assert cpu.lower_bound and cpu.seconds == 3600.0 and "22000s clamped to the time limit 3600s" in cpu.detail
    assert profiler.ready("g1")
    spent, fraction = profiler.overhead("g1")
    assert spent == pytest.approx(161.0) and fraction == pytest.approx(161.0 / 2010.0)


def test_profiler_respects_the_cap_in_arrival_order() -> None:
    profiler = Profiler(sampling=SamplingParams(max_samples=3, max_gres={"gpu": 1}))
    first = profiler.plan([group("g2", t=5.0), group("g1", t=1.0)], now=10.0)
    assert [r.sample_id for r in first] == ["g1.cpu.0", "g1.gpu.0", "g2.cpu.0"]  # g2's GPU: no profiling GPU
    profiler.observe("g1.cpu.0", 30.0)
    assert [r.sample_id for r in profiler.plan([], now=40.0)] == ["g1.cpu.1"]
    profiler.observe("g1.gpu.0", 50.0)
    # The profiling GPU is free again: g1's long GPU sample comes before g2's first (arrival order).
    assert [r.sample_id for r in profiler.plan([], now=60.0)] == ["g1.gpu.1"]


def test_history_replaces_sampling() -> None:
    history = History()
    history.add([HistoryRun(JobKey("alice", "train", "h1", "gpu"), 100.0, 1800.0, steps=10_000)])
    profiler = Profiler(history)
    requests = profiler.plan([group()], now=200.0)
    assert [r.sample_id for r in requests] == ["g1.cpu.0"]
    gpu = profiler.estimates("g1")["gpu"]
    assert gpu.source is Source.HISTORY and gpu.seconds == pytest.approx(1800.0)
    assert "history" in gpu.detail


def test_progress_updates_and_caps_declared_claims() -> None:
    profiler = Profiler()
    assert profiler.plan([group(steps=None, declared=60.0)], now=0.0) == []
    assert profiler.ready("g1")
    assert profiler.estimates("g1")["gpu"].source is Source.DECLARED
    capped = profiler.on_progress("g1", "gpu", ProgressReport(0, 0, 600.0))
    assert capped is not None and capped.lower_bound and capped.seconds == pytest.approx(600.0)
    measured = profiler.on_progress("g1", "gpu", ProgressReport(500, 1000, 700.0, rate=0.5))
    assert measured is not None and measured.seconds == pytest.approx(1700.0)
    assert profiler.estimates("g1")["gpu"] == measured
    assert profiler.on_progress("nope", "gpu", ProgressReport(1, 2, 3.0)) is None
    profiler.observe("nope.gpu.0", 1.0)  # unknown samples are ignored
    profiler.forget(["g1"])
    assert profiler.estimates("g1") == {}


def test_sample_wall_time_from_the_start_mark_and_the_last_progress(tmp_path: Path) -> None:
    assert sample_wall_seconds(tmp_path, 42) is None and sample_step_seconds(tmp_path, 42) is None
    (tmp_path / "profile-start-42").write_text("1000.250000000\n")
    assert sample_wall_seconds(tmp_path, 42) is None
    (tmp_path / "progress-42.json").write_text(json.dumps({"time": 1003.5, "step": 50}))
    assert sample_wall_seconds(tmp_path, 42) is None  # still running: no profile yet
    (tmp_path / "profile-42.json").write_text(json.dumps({"steps": 60, "times": [0.0, 0.1, 2.95],
                                                          "at_steps": [1, 2, 60]}))
    assert sample_step_seconds(tmp_path, 42) == pytest.approx(0.05)
    assert sample_wall_seconds(tmp_path, 42) is None  # profile written, last progress not yet
    (tmp_path / "progress-42.json").write_text(json.dumps({"time": 1003.5, "step": 60}))
    assert sample_wall_seconds(tmp_path, 42) == pytest.approx(3.25)
    (tmp_path / "progress-42.json").write_text("{broken")
    assert sample_wall_seconds(tmp_path, 42) is None
