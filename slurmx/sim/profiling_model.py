"""Profiling in the simulator through the live estimator: simulated sample runs -> `slurmx.profile` -> estimates.

The engine's built-in model draws estimate = truth·(1 + ε) and delays each job by `fixed + fraction·longest`.
This module gives both numbers a mechanism, the one the daemon uses: each variant runs a short and a long sample
(fractions of its true duration; the AlloX reproduction's 1% + 2%), whose step time carries a relative timing
noise, and `slurmx.profile.estimator.estimate_from_samples` extrapolates them. So "10% estimation error" is the
sample noise that makes the estimator's error 10% (`noise_for_error`), and "3% overhead" is the samples' length,
the same in both places. Samples of different variants run side by side, the two of one variant one after the
other (the engine's `fraction · longest` delay); with `cut_factor` a variant's sample is cut at that multiple of
its fastest sibling's, as live.

`apply_profiling(jobs, params, seed)` returns the jobs with `estimate_s` set on every variant and the profiling
cost in `meta` (`profiling_delay_s`: how long the job waits for its samples, `profiling_overhead_s`: the
resource time they hold). The engine delays a job whose meta has `profiling_delay_s` by exactly that instead of
`fixed + fraction·longest` (`engine_equivalent(params)` is the same delay when no sample is cut).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from slurmx.profile.estimator import EstimatorParams, SampleRun, cut_deadline, estimate_from_samples
from slurmx.sim.jobs import SimJob

__all__ = ["ProfiledVariant", "SimProfilingParams", "apply_profiling", "engine_equivalent", "noise_for_error",
           "profile_job"]

STEPS = 100_000
"""Abstract steps per job: samples are fractions of them, fine enough that rounding does not show."""


class SimProfilingParams(BaseModel):
    """Sample lengths as fractions of a variant's true duration, their timing noise, start-up cost, cut rule."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    short_fraction: float = Field(0.01, ge=0, lt=1, description="short sample, fraction of the job (C-sim 1%)")
    long_fraction: float = Field(0.02, gt=0, lt=1, description="long sample, fraction of the job (C-sim 2%)")
    sample_noise: float = Field(0.0, ge=0, description="relative 1-sigma of a sample's step time")
    startup_s: float = Field(0.0, ge=0, description="fixed cost of every sample run")
    cut_factor: float | None = Field(None, gt=1, description="cut samples at this multiple of the fastest sibling")
    floor_s: float = Field(1.0, ge=0, description="shortest estimate (C-sim: 1 time unit)")


@dataclass(frozen=True, slots=True)
class ProfiledVariant:
    kind: str
    samples: tuple[SampleRun, SampleRun]
    estimate_s: float
    lower_bound: bool


def noise_for_error(error_sigma: float, params: SimProfilingParams) -> float:
    """The sample noise that gives estimates a relative error of `error_sigma` (1-sigma), for these fractions.

    With independent relative noise e1, e2 on the step time of samples at f1 and f2 = r·f1 of the job, the
    two-point extrapolation's relative error is (e2·r(1 - f1) - e1·(1 - r·f1)) / (r - 1).
    """
    f1, f2 = params.short_fraction, params.long_fraction
    if f1 == 0:
        return error_sigma  # (0, f2): the start-up is measured exactly, the error is e2's
    r = f2 / f1
    return error_sigma * (r - 1) / math.hypot(r * (1 - f1), 1 - r * f1)


def engine_equivalent(params: SimProfilingParams) -> dict[str, float]:
    """The engine's `profiling: {fixed, fraction}` that gives the same per-job delay (no cut, no noise).

    The two samples take 2·s + f·(D - s) for start-up s, fractions f = f1 + f2 and duration D (start-up included).
    """
    f = params.short_fraction + params.long_fraction
    return {"fixed": params.startup_s * (2 - f), "fraction": f}


def _samples(duration: float, params: SimProfilingParams, noise: np.ndarray) -> list[SampleRun]:
    per_step = max(0.0, duration - params.startup_s) / STEPS  # a run is its start-up plus its steps
    out = []
    for fraction, e in zip((params.short_fraction, params.long_fraction), noise, strict=True):
        steps = round(fraction * STEPS)
        out.append(SampleRun(steps, params.startup_s + steps * per_step * max(0.0, 1.0 + float(e))))
    return out


def profile_job(job: SimJob, params: SimProfilingParams, rng: np.random.Generator) -> tuple[
        list[ProfiledVariant], float, float]:
    """Sample every variant of `job`: (per-variant results, delay before it is schedulable, overhead seconds)."""
    est_params = EstimatorParams(cut_factor=params.cut_factor or math.inf, cut_slack_s=0.0, floor_s=params.floor_s)
    kinds = list(job.variants)
    noise = rng.standard_normal((len(kinds), 2)) * params.sample_noise
    runs = {k: _samples(job.variants[k].duration_s, params, noise[i]) for i, k in enumerate(kinds)}
    if params.cut_factor is not None and len(kinds) > 1:
        for index in (0, 1):
            fastest = min(runs[k][index].seconds for k in kinds)
            limit = cut_deadline(fastest, est_params)
            for k in kinds:
                run = runs[k][index]
                if run.seconds > limit:
                    done = int(run.steps * limit / run.seconds)
                    runs[k][index] = SampleRun(run.steps, limit, finished=False, steps_done=done)
    out = []
    for k in kinds:
        est = estimate_from_samples(runs[k], STEPS, est_params)
        out.append(ProfiledVariant(k, (runs[k][0], runs[k][1]), est.seconds, est.lower_bound))
    per_variant = [sum(r.seconds for r in runs[k]) for k in kinds]
    return out, max(per_variant), sum(per_variant)


def apply_profiling(jobs: Sequence[SimJob], params: SimProfilingParams, seed: int) -> list[SimJob]:
    """The jobs with sample-based estimates and their profiling cost in `meta` (deterministic given `seed`)."""
    rng = np.random.default_rng([seed, 0x9F0F])
    out = []
    for job in jobs:
        profiled, delay, overhead = profile_job(job, params, rng)
        variants = {p.kind: replace(job.variants[p.kind], estimate_s=p.estimate_s) for p in profiled}
        meta = {**job.meta, "profiling_delay_s": delay, "profiling_overhead_s": overhead}
        out.append(replace(job, variants=variants, meta=meta))
    return out

