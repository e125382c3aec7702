"""Profiling samples as jobs that hold machines: the AlloX authors' simulator's profiling model.

Their simulator profiles each job (every method but DRFF) with four sample runs, 1% and 2% of its true CPU
time on a CPU node and 1% and 2% of its true GPU time on a GPU, each at least one unit and ending on
the unit step their clock takes. The samples are real
jobs of the job's owner: they hold their machine while they run, start before anything else (strict priority,
`policies.allox.start_samples`), and count against the owner's share. A job is shown to the scheduler once
the samples of every job that arrived at the same instant have finished (their group profiling).

Here each sample is a one-variant trial-and-error group (`JobClass.TE`) with the job's own request on that
kind, known duration (no estimate error), meta `awaited`; the job waits for them with meta `after` (the
engine holds it until they finish). `is_sample` tells them apart when the results are read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from slurmx.core.model import JobClass
from slurmx.sim.jobs import SimJob, SimVariant

__all__ = ["SCALES", "is_sample", "with_samples"]

SCALES = (("cpu", 0.01), ("cpu", 0.02), ("gpu", 0.01), ("gpu", 0.02))  # their cpu_prof_1/2, gpu_prof_1/2
_MIN_UNITS = 1.0


def is_sample(job_id: str) -> bool:
    """Whether a record's job is a profiling sample (left out of JCTs, as their average leaves them out)."""
    return "~" in job_id


def _samples(job: SimJob, unit_s: float) -> list[SimJob]:
    out = []
    for n, (kind, scale) in enumerate(SCALES, start=1):
        variant = job.variants[kind]
        # their clock steps by one unit: a sample ends at the first step at or after its time
        duration = math.ceil(max(variant.duration_s / unit_s * scale, _MIN_UNITS) - 1e-9) * unit_s
        out.append(SimJob(job_id=f"{job.job_id}~{n}", user=job.user, submit_time=job.submit_time,
                          variants={kind: SimVariant(kind, variant.request, duration, duration)},
                          job_class=JobClass.TE, meta={"awaited": True, "sample_of": job.job_id}))
    return out


def with_samples(jobs: Sequence[SimJob], unit_s: float, group: bool = True) -> list[SimJob]:
    """`jobs` with their four samples each, samples first; every job waits for the samples of all jobs that
    arrived at the same instant (`group`, their default) or for its own."""
    samples = {j.job_id: _samples(j, unit_s) for j in jobs}
    by_arrival: dict[float, list[str]] = {}
    for j in jobs:
        by_arrival.setdefault(j.submit_time, []).extend(s.job_id for s in samples[j.job_id])
    out: list[SimJob] = []
    for j in jobs:
        after = by_arrival[j.submit_time] if group else [s.job_id for s in samples[j.job_id]]
        out += samples[j.job_id]
        out.append(SimJob(j.job_id, j.user, j.submit_time, j.variants, j.job_class, j.grace_s, j.work, j.speed,
                          j.deadline, {**j.meta, "after": tuple(after)}))
    return out
