"""Profiling samples as jobs that hold machines: the AlloX authors' simulator's profiling model.

Their simulator profiles each job (every method but DRFF) with four sample runs, 1% and 2% of its true CPU
time on a CPU node and 1% and 2% of its true GPU time on a GPU, each at least one unit and ending on
the unit step their clock takes. The samples are real
jobs of the job's owner: they hold their machine while they run, start before anything else (strict priority,
`policies.allox.start_samples`), and count against the owner's share. A job is shown to the scheduler once
the samples of every job that arrived at the same instant have finished (their group profiling).

Here each sample is a one-variant trial-and-error group (`JobClass.TE`) with the job's own request on that
kind, its duration on their one-unit clock (no estimate error; for their ES, which sorts by it, the estimate
is their unrounded `max(time * scale, 1)`), meta `awaited`; the job waits for them with meta `after` (the
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


def _profile_s(job: SimJob, kind: str, scale: float, unit_s: float) -> float:
    """The sample's time as their scheduler sees it (`max(time * scale, 1)` units, not rounded): what their
    ES sorts a user's waiting items by."""
    return max(job.variants[kind].duration_s / unit_s * scale, _MIN_UNITS) * unit_s


def _units(job: SimJob, kind: str, scale: float, unit_s: float) -> float:
    # their clock steps by one unit: a sample ends at the first step at or after its time
    return math.ceil(_profile_s(job, kind, scale, unit_s) / unit_s - 1e-9) * unit_s


def _samples(job: SimJob, unit_s: float, any_kind: bool) -> list[SimJob]:
    """The job's four samples, each on its own kind; with `any_kind` also on the job's other kinds at its
    scale of the job's time there (their ES starts waiting samples in its own passes, on either kind), its
    own kind listed first (where the samples' turn starts it)."""
    out = []
    for n, (kind, scale) in enumerate(SCALES, start=1):
        kinds = (kind, *(k for k in job.variants if k != kind and any_kind))
        variants = {}
        for k in kinds:
            duration = _units(job, k, scale, unit_s)
            variants[k] = SimVariant(k, job.variants[k].request, duration,
                                     _profile_s(job, k, scale, unit_s) if any_kind else duration)
        out.append(SimJob(job_id=f"{job.job_id}~{n}", user=job.user, submit_time=job.submit_time,
                          variants=variants, job_class=JobClass.TE,
                          meta={"awaited": True, "sample_of": job.job_id}))
    return out


def with_samples(jobs: Sequence[SimJob], unit_s: float, group: bool = True,
                 any_kind: bool = False) -> list[SimJob]:
    """`jobs` with their four samples each, samples first; every job waits for the samples of all jobs that
    arrived at the same instant (`group`, their default) or for its own. `any_kind`: a sample may also run
    on the job's other kinds (for a policy that starts waiting samples by its own rule: their ES)."""
    samples = {j.job_id: _samples(j, unit_s, any_kind) for j in jobs}
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
