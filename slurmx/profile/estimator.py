"""AlloX's runtime estimator (Le et al., EuroSys '20, §4.1) and the life of an estimate once the job runs.

A variant is sampled twice, at two step counts; the run time is taken as linear in steps, `T(n) = a·n + b` (b is
the start-up cost), and extrapolated to the job's declared steps. Where the fit is meaningless (equal step counts,
the longer sample ran faster, a negative result) the estimator falls back to scaling the longest sample
proportionally, floored at the longest sample itself (the digest's "max(t1, t2), with a floor" keeps the same
lower bound; scaling is what a sample of a longer job says beyond it).

A sample cut for running far longer than its siblings' (it already shows the job is long) gives a lower bound.

While a variant runs, its own progress reports replace the estimate (elapsed + remaining steps / measured rate),
and an estimate that measurement contradicts (a job that claimed to be short but is still running) is capped by
the measurement: it is never allowed below what has already been observed.

Every estimate is finite and bounded: at most the variant's time limit (Slurm ends the job there), else
`MAX_ESTIMATE_S` (`bounded`); the inputs are the user's claims (progress files, sample timings), so an absurd but
finite one becomes a long estimate, never an overflow.

Pure functions over small frozen records: the daemon and the simulator's profiling model call the same code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

__all__ = [
    "MAX_ESTIMATE_S",
    "Estimate",
    "EstimatorParams",
    "ProgressReport",
    "SampleRun",
    "Source",
    "bounded",
    "cut_deadline",
    "estimate_from_samples",
    "fit_linear",
    "reconcile",
    "update_from_progress",
]


MAX_ESTIMATE_S = 366 * 24 * 3600.0
"""The longest estimate of a variant without a time limit (UNLIMITED): a year. Site-wide and fixed: no policy plans
meaningfully beyond it, and it keeps every sum of estimates a policy forms (loads, make-spans, flow times over
thousands of groups) far from overflowing. With a time limit, the limit bounds the estimate instead."""


class Source(StrEnum):
    """Where an estimate came from, most trusted last among the pre-run ones; progress beats them all."""

    DECLARED = "declared"
    SAMPLE = "sample"
    HISTORY = "history"
    PROGRESS = "progress"


@dataclass(frozen=True, slots=True)
class Estimate:
    """A variant's total run time (seconds) with its source and relative 1-sigma uncertainty.

    `lower_bound` marks an estimate known only to be at least this long (a cut sample, a contradicted claim).
    `detail` is the one line `slurmx explain` shows.
    """

    seconds: float
    source: Source
    uncertainty: float
    lower_bound: bool = False
    detail: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.seconds) and self.seconds >= 0):
            raise ValueError(f"estimate seconds must be finite and >= 0, got {self.seconds}")
        if not self.uncertainty >= 0:
            raise ValueError(f"estimate uncertainty must be >= 0, got {self.uncertainty}")


@dataclass(frozen=True, slots=True)
class SampleRun:
    """One sample of a variant: `steps` steps took `seconds` of wall time (start-up included).

    `finished` is False for a sample cut before its last step: `seconds` is then how long it ran, and
    `steps_done` how far it got (0 when unknown).
    """

    steps: int
    seconds: float
    finished: bool = True
    steps_done: int = 0
    step_seconds: float | None = None  # seconds per step measured inside the run (the hooks' step times)


@dataclass(frozen=True, slots=True)
class ProgressReport:
    """What a running variant reported: `step` of `total` after `elapsed_s` of this run, at `rate` steps/s."""

    step: int
    total: int
    elapsed_s: float
    rate: float | None = None


@dataclass(frozen=True, slots=True)
class EstimatorParams:
    """Knobs of the estimator, with the paper's numbers as defaults.

    sample_uncertainty: relative 1-sigma of a sample-based estimate (paper Fig. 10: MAE 8%, std 11%).
    fallback_uncertainty: of the proportional fallback, which ignores start-up cost.
    cut_factor: a sample running this many times longer than the same-length sample of its fastest sibling is cut.
    cut_slack_s: added to that limit: a running sample's clock (Slurm's start) includes launch latency that its
    sibling's in-job wall time does not.
    progress_min_fraction: progress reports replace the prior estimate once this fraction of steps is done.
    floor_s: no estimate is shorter than this (the digest's floor).
    use_step_times: when a sample carries its in-run step time (the hooks record every step), take the slope a
    from it and b from the samples' remainder, instead of the two-point difference, which start-up jitter on a
    busy node corrupts (measured on the test cluster: see docs/profiler.md).
    """

    sample_uncertainty: float = 0.11
    fallback_uncertainty: float = 0.5
    cut_factor: float = 3.0
    cut_slack_s: float = 5.0
    progress_min_fraction: float = 0.01
    floor_s: float = 1.0
    use_step_times: bool = True


DEFAULT_PARAMS = EstimatorParams()


def fit_linear(n1: int, t1: float, n2: int, t2: float) -> tuple[float, float] | None:
    """The digest's two-point fit: a = (t1 - t2) / (n1 - n2), b = t1 - a·n1; None when it is meaningless.

    Meaningless: equal step counts, or the longer sample ran faster (a < 0).
    """
    if n1 == n2:
        return None
    a = (t1 - t2) / (n1 - n2)
    if a < 0:
        return None
    return a, t1 - a * n1


def estimate_from_samples(
    samples: Sequence[SampleRun], total_steps: int, params: EstimatorParams = DEFAULT_PARAMS
) -> Estimate:
    """Extrapolate a variant's samples to `total_steps` (two finished samples of different lengths: a·n + b).

    A cut sample makes the estimate a lower bound: at least its rate so far times the total, and never less
    than the time the sample already ran.
    """
    if total_steps <= 0:
        raise ValueError(f"total_steps must be > 0, got {total_steps}")
    if not samples:
        raise ValueError("estimate_from_samples needs at least one sample")
    cut = [s for s in samples if not s.finished]
    if cut:
        longest = max(cut, key=lambda s: s.seconds)
        done = longest.steps_done if longest.steps_done > 0 else longest.steps
        seconds = max(params.floor_s, longest.seconds, longest.seconds / done * total_steps)
        return Estimate(seconds, Source.SAMPLE, params.fallback_uncertainty, lower_bound=True,
                        detail=f"sample cut after {longest.seconds:.0f}s at step {longest.steps_done}: at least")
    ordered = sorted(samples, key=lambda s: s.steps)
    short, long = ordered[0], ordered[-1]
    timed = [s for s in ordered if s.step_seconds is not None and s.step_seconds > 0]
    if params.use_step_times and timed:
        # The slope from inside the longest timed run; b = what the samples took beyond their steps (start-up).
        a = float(timed[-1].step_seconds or 0.0)
        b = max(0.0, sum(s.seconds - a * s.steps for s in ordered) / len(ordered))
        return Estimate(max(params.floor_s, a * total_steps + b), Source.SAMPLE, params.sample_uncertainty,
                        detail=f"samples {short.steps}/{long.steps} steps, step time measured in the run: "
                               f"{a:.4g} s/step + {b:.3g}s")
    fit = fit_linear(short.steps, short.seconds, long.steps, long.seconds)
    if fit is not None:
        a, b = fit
        seconds = a * total_steps + b
        if seconds >= 0:
            return Estimate(max(params.floor_s, seconds), Source.SAMPLE, params.sample_uncertainty,
                            detail=f"samples {short.steps}/{long.steps} steps: {a:.4g} s/step + {b:.3g}s")
    proportional = long.seconds / long.steps * total_steps if long.steps > 0 else long.seconds
    seconds = max(params.floor_s, long.seconds, proportional)
    return Estimate(seconds, Source.SAMPLE, params.fallback_uncertainty,
                    detail=f"samples {short.steps}/{long.steps} steps do not fit a·n+b: scaled the longer one")


def bounded(estimate: Estimate, limit_s: float | None) -> Estimate:
    """`estimate`, at most `limit_s` (the variant's time limit; None: `MAX_ESTIMATE_S`), the clamp said in its
    detail (what `slurmx explain` shows)."""
    limit = MAX_ESTIMATE_S if limit_s is None or not 0 < limit_s <= MAX_ESTIMATE_S else float(limit_s)
    if estimate.seconds <= limit:
        return estimate
    what = "time limit" if limit_s is not None and limit == limit_s else "site maximum"
    return replace(estimate, seconds=limit,
                   detail=f"{estimate.detail}; {estimate.seconds:.0f}s clamped to the {what} {limit:.0f}s")


def cut_deadline(sibling_seconds: float, params: EstimatorParams = DEFAULT_PARAMS) -> float:
    """How long a sample may run when the same-length sample of its fastest sibling took `sibling_seconds`."""
    return params.cut_factor * max(sibling_seconds, params.floor_s) + params.cut_slack_s


def update_from_progress(
    prior: Estimate | None, report: ProgressReport, params: EstimatorParams = DEFAULT_PARAMS
) -> Estimate:
    """The estimate of a running variant from its own progress: elapsed + remaining / rate.

    Until `progress_min_fraction` of the steps are done (or without a rate) the prior stands, raised to what
    has been observed already (`reconcile`). The uncertainty shrinks with the fraction done: only the remaining
    part is extrapolated.
    """
    fraction = report.step / report.total if report.total > 0 else 0.0
    rate = report.rate
    if rate is None and report.step > 0 and report.elapsed_s > 0:
        rate = report.step / report.elapsed_s
    if rate is None or rate <= 0 or fraction < params.progress_min_fraction:
        return reconcile(prior, report.elapsed_s, params)
    remaining = max(0, report.total - report.step) / rate  # floats: inf at worst (bounded counts), never raises
    return Estimate(max(params.floor_s, min(report.elapsed_s + remaining, MAX_ESTIMATE_S)), Source.PROGRESS,
                    params.sample_uncertainty * (1.0 - min(1.0, fraction)),
                    detail=f"progress {report.step}/{report.total} at {rate:.4g} steps/s")


def reconcile(prior: Estimate | None, elapsed_s: float, params: EstimatorParams = DEFAULT_PARAMS) -> Estimate:
    """Cap a claimed estimate by measurement: a variant that has run `elapsed_s` takes at least that long.

    A prior that is still ahead of the clock stands unchanged; one the clock has overtaken (it claimed to be
    short but runs long) becomes a lower bound at the elapsed time.
    """
    if prior is not None and prior.seconds > elapsed_s:
        return prior
    claimed = f" (claimed {prior.seconds:.0f}s, {prior.source.value})" if prior is not None else ""
    return Estimate(max(params.floor_s, elapsed_s), Source.PROGRESS, params.fallback_uncertainty, lower_bound=True,
                    detail=f"still running after {elapsed_s:.0f}s{claimed}: at least")

