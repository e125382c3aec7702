"""The numbers a what-if prints: wait and JCT by class, utilisation, and the jobs that would have moved most.

One definition for both sides, so the comparison is fair: wait = first start - submit, JCT = end - submit, and
utilisation = requested amount x (end - first start) / (capacity x span) per partition and dimension, the span from
the first submission to the last end of that side (a preempted job counts its requeued time as busy). Slurm's
side comes from the accounting itself (each job's meta), the simulated side from the engine's job records. Pure
functions over plain records.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from slurmx.core.model import JobClass
from slurmx.sim.jobs import SimJob
from slurmx.sim.metrics import SimResult, summary

__all__ = ["JobTimes", "actual_times", "compare", "side_stats", "simulated_times"]


class JobTimes(NamedTuple):
    """When one job was submitted, started and ended (seconds since the history's first submission)."""

    job_id: str
    user: str
    job_class: JobClass
    partition: str
    request: Mapping[str, int]  # dimension -> amount, as the utilisation columns name them
    submit: float
    start: float
    end: float

    @property
    def wait(self) -> float:
        return self.start - self.submit

    @property
    def jct(self) -> float:
        return self.end - self.submit


def _dims(job: SimJob) -> tuple[str, dict[str, int]]:
    (variant,) = job.variants.values()
    req = variant.request
    return variant.kind, {"cpus": req.cpus, "mem_mb": req.mem_mb, **{f"gres/{k}": v for k, v in req.gres.items()}}


def actual_times(jobs: Sequence[SimJob]) -> tuple[JobTimes, ...]:
    """What Slurm did, from the epochs the accounting loader keeps in each job's meta."""
    if not jobs:
        return ()
    base = min(float(j.meta["submit_epoch"]) for j in jobs)
    out = []
    for job in jobs:
        _, request = _dims(job)
        meta = job.meta
        start, end = float(meta["start_epoch"]) - base, float(meta["end_epoch"]) - base
        out.append(JobTimes(job.job_id, job.user, job.job_class, str(meta["partition"]), request,
                            float(meta["submit_epoch"]) - base, start, max(end, start + 1.0)))
    return tuple(out)


def simulated_times(result: SimResult, jobs: Sequence[SimJob]) -> tuple[JobTimes, ...]:
    """What the simulator did; a job it never started (cancelled) is left out of the statistics."""
    by_id = {j.job_id: j for j in jobs}
    out = []
    for rec in result.jobs:
        if rec.first_start is None or rec.cancelled:
            continue
        job = by_id[rec.job_id]
        _, request = _dims(job)
        out.append(JobTimes(rec.job_id, rec.user, rec.job_class, str(job.meta["partition"]), request, rec.submit,
                            rec.first_start, rec.finish))
    return tuple(out)


def _utilisation(times: Sequence[JobTimes], capacity: Mapping[tuple[str, str], int]) -> dict[str, float]:
    if not times:
        return {}
    span = max(t.end for t in times) - min(t.submit for t in times)
    used: dict[tuple[str, str], float] = defaultdict(float)
    for t in times:
        for dim, amount in t.request.items():
            used[(t.partition, dim)] += amount * (t.end - t.start)
    return {f"{p}/{d}": used[(p, d)] / (cap * span) if span > 0 else 0.0
            for (p, d), cap in sorted(capacity.items()) if cap > 0}


def side_stats(times: Sequence[JobTimes], capacity: Mapping[tuple[str, str], int]) -> dict[str, Any]:
    """Wait and JCT (count, mean, p50, p95) for all jobs and each class, makespan and utilisation."""
    out: dict[str, Any] = {"jobs": len(times)}
    for label in ("all", *(c.value for c in JobClass)):
        chosen = [t for t in times if label == "all" or t.job_class.value == label]
        out[label] = {"wait": summary([t.wait for t in chosen], (50, 95)),
                      "jct": summary([t.jct for t in chosen], (50, 95))}
    out["makespan"] = (max(t.end for t in times) - min(t.submit for t in times)) if times else 0.0
    out["utilisation"] = _utilisation(times, capacity)
    return out


def _moved(actual: Sequence[JobTimes], simulated: Sequence[JobTimes], top: int) -> list[dict[str, Any]]:
    """The `top` jobs whose start the policy moves most (either way), largest change first."""
    real = {t.job_id: t for t in actual}
    rows: list[dict[str, Any]] = []
    for t in simulated:
        was = real.get(t.job_id)
        if was is not None:
            rows.append({"job_id": t.job_id, "user": t.user, "class": t.job_class.value, "partition": t.partition,
                         "actual_wait_s": was.wait, "wait_s": t.wait, "change_s": t.wait - was.wait})
    rows.sort(key=lambda r: (-abs(float(r["change_s"])), str(r["job_id"])))
    return rows[:top]


def compare(actual: Sequence[JobTimes], runs: Mapping[str, Sequence[JobTimes]],
            capacity: Mapping[tuple[str, str], int], top: int = 10) -> dict[str, Any]:
    """`actual` and every policy's statistics, and each policy's most moved jobs."""
    return {
        "actual": side_stats(actual, capacity),
        "policies": {name: {**side_stats(times, capacity), "moved": _moved(actual, times, top)}
                     for name, times in runs.items()},
    }
