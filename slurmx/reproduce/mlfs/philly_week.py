"""MLFS's real-cluster input from the Philly trace, as the paper built it: one randomly selected week, 1,860 jobs
with their arrival times, durations and GPU counts (§4.1, digest §4.1-4.3).

The raw `cluster_job_log` is not available here; the Philly-derived CSV (`../shared/traces/philly_derived_pollux_
sia/philly.csv`: submission, duration, GPUs per job) stands in. Its full weeks run from its first submission; a seed
picks the week and the jobs in it, uniformly, so seeds differ in both. Arrivals are re-based to the week's start.
GPU counts above the paper's largest job (32) are cut to 32. Everything else (algorithm, tasks, accuracy,
deadline) is synthesised by `mlfs_from_trace` as for the generator.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from slurmx.core.resources import Resources
from slurmx.reproduce import UnknownPaper
from slurmx.reproduce.philly_csv import PHILLY_CSV, philly_csv
from slurmx.sim.jobs import SimJob

__all__ = ["MAX_GPUS", "PHILLY_CSV", "WEEK_S", "Week", "philly_week"]

WEEK_S = 7 * 24 * 3600.0
MAX_GPUS = 32  # the paper's largest job (GPUs uniform over {1, ..., 32})


@dataclass(frozen=True)
class Week:
    """The jobs drawn for one seed, and where they came from."""

    index: int  # which full week of the trace (0 = the one starting at its first submission)
    available: int  # jobs submitted in that week
    jobs: tuple[SimJob, ...]


def _capped(job: SimJob, submit: float) -> SimJob:
    variant = next(iter(job.variants.values()))
    gpus = variant.request.gres_count("gpu")
    if gpus > MAX_GPUS:
        request = Resources(variant.request.cpus, variant.request.mem_mb, {"gpu": MAX_GPUS})
        variant = replace(variant, request=request)
    return replace(job, submit_time=submit, variants={variant.kind: variant})


def philly_week(seed: int, n_jobs: int, path: Path = PHILLY_CSV) -> Week:
    """`n_jobs` jobs of one full week of the trace (all of them if the week has fewer), chosen by `seed`."""
    jobs = philly_csv("mlfs", path).jobs
    weeks = int(max(j.submit_time for j in jobs) // WEEK_S)  # full weeks only
    if weeks < 1:
        raise UnknownPaper(f"mlfs: {path} spans less than a week")
    rng = np.random.default_rng(seed)
    index = int(rng.integers(weeks))
    start = index * WEEK_S
    pool = [j for j in jobs if start <= j.submit_time < start + WEEK_S]
    take = np.sort(rng.choice(len(pool), size=min(n_jobs, len(pool)), replace=False))
    chosen = tuple(_capped(pool[i], pool[i].submit_time - start) for i in take)
    return Week(index, len(pool), chosen)
