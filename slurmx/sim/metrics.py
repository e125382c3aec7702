"""What a run produced (`SimResult`: per-job records, allocation over time, counters) and its metrics, as one
JSON-ready document computed by pure functions.

The definitions follow the papers we reproduce, and each is pinned down here because the papers leave room:

- JCT = finish - submit of each completed job (profiling, queueing, grace periods and lost work included).
- makespan = last finish - first submit.
- slowdown = 1 + wait / exec (FitGpp Eq. 5), where exec is the job's productive run time (no grace period,
  no work lost to a `lose` checkpoint model) and wait = JCT - exec: every moment it was not making progress.
- utilisation = allocated / capacity, per partition and dimension, time-weighted over [first submit, last
  finish]; the series is the time-weighted mean in `bins` equal bins of that span.
- fairness = the spread of per-user mean slowdown: min, max, max - min, coefficient of variation and Jain's
  index (1 = every user sees the same mean slowdown).
- re-scheduling interval = from the preemption signal to the restart (FitGpp Table 2; includes the grace).
- deadlines (jobs that have one): met when the job completed by its deadline; a cancelled job missed it.

Percentiles are numpy's default (linear interpolation between order statistics); empty sets give null.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from slurmx.core.model import JobClass
from slurmx.sim.config import EngineOptions

__all__ = ["JobRecord", "RunStats", "SimResult", "compute_metrics", "fairness", "summary", "utilisation"]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What happened to one job. `exec_s` is its productive run time (no grace, no lost work)."""

    job_id: str
    user: str
    job_class: JobClass
    submit: float
    first_start: float | None
    finish: float
    exec_s: float
    kind: str | None
    preemptions: int
    cancelled: bool = False
    deadline: float | None = None


@dataclass(frozen=True, slots=True)
class RunStats:
    """Counters of a run; the wall times are not part of the (deterministic) result JSON."""

    events: int
    by_event: dict[str, int]
    policy_calls: int
    actions: dict[str, int]
    repeated_preempts: int
    max_pending: int
    notes: dict[str, int]  # plan notes counted by the prefixes the config asks for
    end_time: float
    wall_s: float
    policy_wall_s: float
    policy_calls_skipped: int = 0  # instants a policy waiting for a release was not asked (its plan: empty)


@dataclass(frozen=True)
class SimResult:
    """Per-job records, the allocation step function (one sample per changing instant) and counters."""

    jobs: tuple[JobRecord, ...]
    util_times: np.ndarray
    util_values: np.ndarray  # shape (samples, len(util_columns)): allocated amount per (partition, dim)
    util_columns: tuple[tuple[str, str], ...]
    util_capacity: tuple[int, ...]
    reschedule_intervals: tuple[float, ...]
    stats: RunStats
    options: EngineOptions


def summary(values: Sequence[float] | np.ndarray, percentiles: Sequence[int] = (50, 95, 99)) -> dict[str, Any]:
    """count, mean and the given percentiles (`p50` ...) of `values`; null statistics when empty."""
    arr = np.asarray(values, dtype=np.float64)
    out: dict[str, Any] = {"count": int(arr.size), "mean": float(arr.mean()) if arr.size else None}
    for p in percentiles:
        out[f"p{p}"] = float(np.percentile(arr, p)) if arr.size else None
    return out


def _slowdown(r: JobRecord) -> float:
    jct = r.finish - r.submit
    return 1.0 + (jct - r.exec_s) / r.exec_s


def fairness(records: Sequence[JobRecord]) -> dict[str, Any]:
    """Spread of per-user mean slowdown over completed jobs."""
    by_user: dict[str, list[float]] = defaultdict(list)
    for r in records:
        by_user[r.user].append(_slowdown(r))
    means = np.array([np.mean(v) for _, v in sorted(by_user.items())], dtype=np.float64)
    if not means.size:
        return {"users": 0, "min": None, "max": None, "spread": None, "cv": None, "jain": None}
    mean = float(means.mean())
    return {
        "users": int(means.size),
        "min": float(means.min()),
        "max": float(means.max()),
        "spread": float(means.max() - means.min()),
        "cv": float(means.std() / mean) if mean else None,
        "jain": float(means.sum() ** 2 / (means.size * (means**2).sum())),
        "per_user_mean_slowdown": (
            {u: float(np.mean(v)) for u, v in sorted(by_user.items())} if len(by_user) <= 100 else None),
    }


def _cumulative(times: np.ndarray, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Integral from -inf to each of `at` of the step function that is values[i] on [times[i], times[i+1])."""
    if not times.size:
        return np.zeros((at.size, values.shape[1] if values.ndim == 2 else 0))
    widths = np.diff(times)
    cum = np.vstack([np.zeros((1, values.shape[1])), np.cumsum(values[:-1] * widths[:, None], axis=0)])
    idx = np.searchsorted(times, at, side="right") - 1
    before = idx < 0
    idx = np.clip(idx, 0, times.size - 1)
    out = cum[idx] + values[idx] * (at - times[idx])[:, None]
    out[before] = 0.0
    return np.asarray(out, dtype=np.float64)


def utilisation(result: SimResult, start: float, end: float, bins: int) -> dict[str, Any]:
    """Mean utilisation and its binned series per `partition/dim` column (columns with capacity only)."""
    cols = [i for i, c in enumerate(result.util_capacity) if c > 0]
    names = [f"{result.util_columns[i][0]}/{result.util_columns[i][1]}" for i in cols]
    if end <= start or not cols:
        return {"mean": dict.fromkeys(names, 0.0), "series": {"t": [], **{n: [] for n in names}}}
    capacity = np.array([result.util_capacity[i] for i in cols], dtype=np.float64)
    values = result.util_values[:, cols] if result.util_values.size else np.zeros((0, len(cols)))
    edges = np.linspace(start, end, bins + 1)
    cum = _cumulative(result.util_times, values, edges)
    per_bin = np.diff(cum, axis=0) / np.diff(edges)[:, None] / capacity
    total = (cum[-1] - cum[0]) / (end - start) / capacity
    series: dict[str, list[float]] = {"t": [float(x) for x in (edges[:-1] + edges[1:]) / 2]}
    for k, n in enumerate(names):
        series[n] = [float(x) for x in per_bin[:, k]]
    return {"mean": {n: float(total[k]) for k, n in enumerate(names)}, "series": series}


def _deadlines(records: Sequence[JobRecord]) -> dict[str, Any]:
    due = [r for r in records if r.deadline is not None]
    met = sum(1 for r in due if not r.cancelled and r.deadline is not None and r.finish <= r.deadline)
    return {"jobs": len(due), "met": met, "fraction_met": met / len(due) if due else None}


def compute_metrics(result: SimResult, bins: int = 100) -> dict[str, Any]:
    """Every metric of a run, JSON-ready; deterministic for a deterministic result (no wall times inside)."""
    done = [r for r in result.jobs if not r.cancelled]
    jct = [r.finish - r.submit for r in done]
    start = min((r.submit for r in result.jobs), default=0.0)
    end = max((r.finish for r in result.jobs), default=start)
    slowdowns: dict[str, Any] = {"all": summary([_slowdown(r) for r in done])}
    for cls in JobClass:
        slowdowns[cls.value] = summary([_slowdown(r) for r in done if r.job_class is cls])
    waits = [r.finish - r.submit - r.exec_s for r in done]
    histogram = Counter(r.preemptions for r in result.jobs)
    preempted = sum(1 for r in result.jobs if r.preemptions)
    stats = result.stats
    return {
        "jobs": {"total": len(result.jobs), "completed": len(done), "cancelled": len(result.jobs) - len(done)},
        "jct": summary(jct),
        "wait": summary(waits),
        "makespan": end - start,
        "slowdown": slowdowns,
        "utilisation": utilisation(result, start, end, bins),
        "fairness": fairness(done),
        "preemptions": {
            "total": int(sum(r.preemptions for r in result.jobs)),
            "jobs_preempted": preempted,
            "fraction_preempted": preempted / len(result.jobs) if result.jobs else 0.0,
            "histogram": {str(k): histogram[k] for k in sorted(histogram)},
        },
        "rescheduling_interval": summary(result.reschedule_intervals, (50, 75, 95, 99)),
        "deadlines": _deadlines(result.jobs),
        "engine": {
            "events": stats.events,
            "by_event": dict(stats.by_event),
            "policy_calls": stats.policy_calls,
            "policy_calls_skipped": stats.policy_calls_skipped,
            "actions": dict(stats.actions),
            "repeated_preempts": stats.repeated_preempts,
            "max_pending": stats.max_pending,
            "notes": dict(stats.notes),
            "end_time": stats.end_time,
        },
    }
