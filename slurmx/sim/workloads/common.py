"""What every workload generator shares: the params base class, seeded sampling, sorting and re-timing.

Generators are pure functions `(params, seed) -> list[SimJob]`. Purity is what makes a sweep reproducible
and a paper's number checkable, so everything random goes through one `numpy.random.Generator` seeded here,
and every knob lives in a frozen params model (unknown keys rejected, defaults from the paper digests).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, model_validator
from scipy.special import ndtr, ndtri

from slurmx.core.placement import ConstraintError, parse_constraint
from slurmx.core.resources import Resources
from slurmx.sim.jobs import SimJob

__all__ = [
    "FloatArray",
    "PlacementMix",
    "WorkloadParams",
    "gb_to_mb",
    "make_rng",
    "multiplicative_error",
    "offered_load",
    "sort_jobs",
    "truncated_normal",
    "with_submit_times",
]

FloatArray = npt.NDArray[np.float64]


MAX_JOBS = 5_000_000
"""The most jobs a generator makes: above, a typo (an extra zero) would take the machine's memory for minutes
before failing, so it is one line at once instead (a run of 1M jobs peaks near 2.5 GB today)."""


class PlacementMix(BaseModel):
    """`placement:` on every generator's params: a seeded share of the groups made constrained (`constraints`,
    kind -> `--constraint` expression) or multi-node (2 to `multi_node_max` nodes); `workloads/placement.py`."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    constrained_fraction: float = Field(0.0, ge=0, le=1)
    constraints: dict[str, str] = Field(default_factory=dict)
    multi_node_fraction: float = Field(0.0, ge=0, le=1)
    multi_node_max: int = Field(4, ge=2, le=1024)

    @property
    def any(self) -> bool:
        return self.constrained_fraction > 0 or self.multi_node_fraction > 0

    @model_validator(mode="after")
    def _readable(self) -> PlacementMix:
        if self.constrained_fraction > 0 and not self.constraints:
            raise ValueError("constrained_fraction needs constraints: the constraint per kind, e.g. {cpu: bigmem}")
        for kind, text in self.constraints.items():
            try:
                parse_constraint(text)
            except ConstraintError as exc:
                raise ValueError(f"constraints.{kind}: {exc}") from None
        return self


class WorkloadParams(BaseModel):
    """Base of every generator's parameters: typed, frozen, unknown keys rejected (a typo is an error), no inf or
    NaN, and at most MAX_JOBS jobs planned."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    placement: PlacementMix = Field(default_factory=PlacementMix)  # constrained and multi-node groups; none

    def planned_jobs(self) -> int:
        """How many jobs these parameters make (generators override it)."""
        return 0

    @model_validator(mode="after")
    def _size(self) -> WorkloadParams:
        planned = self.planned_jobs()
        if planned > MAX_JOBS:
            raise ValueError(f"these parameters make {planned:,} jobs, over the {MAX_JOBS:,} a run may have; "
                             "lower the job count")
        return self


def make_rng(seed: int) -> np.random.Generator:
    """The one source of randomness of a generator run; negative seeds are refused rather than wrapped."""
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    return np.random.default_rng(seed)


def truncated_normal(
    rng: np.random.Generator, mean: float, sd: float, low: float, high: float, size: int
) -> FloatArray:
    """Samples of Normal(mean, sd) restricted to [low, high], by inverse CDF (one uniform draw per sample).

    Inverse CDF rather than rejection keeps the number of draws fixed, so changing a bound never shifts the
    random stream of the samples that follow. `sd == 0` (or `low == high`) gives the clipped mean.
    """
    if low > high:
        raise ValueError(f"truncated normal: low {low} > high {high}")
    u = rng.random(size)
    if sd <= 0 or low == high:
        return np.full(size, float(np.clip(mean, low, high)))
    a = float(ndtr((low - mean) / sd))
    b = float(ndtr((high - mean) / sd))
    if b - a < 1e-12:  # the whole mass is beyond one bound: the nearest bound is the limit of the distribution
        return np.full(size, low if mean < low else high)
    x = mean + sd * np.asarray(ndtri(a + u * (b - a)), dtype=np.float64)
    return np.clip(x, low, high)


def multiplicative_error(rng: np.random.Generator, size: int, sd: float, clamp: float = 0.99) -> FloatArray:
    """Factors `1 + eps`, eps ~ Normal(0, sd) clamped to [-clamp, clamp] (AlloX's estimation-error model).

    The draw happens even when `sd == 0`, so switching errors on or off does not shift the stream.
    """
    eps = rng.standard_normal(size)
    return np.asarray(1.0 + np.clip(eps * sd, -clamp, clamp), dtype=np.float64)


def gb_to_mb(gb: float) -> int:
    """Memory in whole MB from GB (1 GB = 1024 MB, as Slurm counts); 62.5 GB is exactly 64000 MB."""
    return round(gb * 1024)


def sort_jobs(jobs: Iterable[SimJob]) -> list[SimJob]:
    """Stable sort by submit time: ties keep generation order, so ids stay in a reproducible order."""
    return sorted(jobs, key=lambda job: job.submit_time)


def with_submit_times(jobs: Sequence[SimJob], submit_times: Sequence[float]) -> list[SimJob]:
    """The same jobs re-stamped with new submit times (e.g. from an engine-based load calibration).

    Deadlines keep their slack: a job that had `deadline - submit_time = d` still has `d` afterwards.
    """
    if len(jobs) != len(submit_times):
        raise ValueError(f"{len(jobs)} jobs but {len(submit_times)} submit times")
    out = []
    for job, t in zip(jobs, submit_times, strict=True):
        deadline = None if job.deadline is None else job.deadline - job.submit_time + float(t)
        out.append(replace(job, submit_time=float(t), deadline=deadline))
    return sort_jobs(out)


def offered_load(
    jobs: Sequence[SimJob],
    capacity: Resources,
    horizon_s: float,
    *,
    kind: str | None = None,
    dimension: str = "dominant",
) -> float:
    """Offered load = sum of work / (capacity x horizon), the analytic form of "cluster load".

    The work of a job is its duration times its share of the cluster: `dimension="dominant"` takes the largest
    share over cpus, memory and every GRES of `capacity` (DRF's dominant share); a dimension name
    (`"cpus"`, `"mem_mb"`, `"gres/gpu"`) takes that one. `kind` picks the variant (default: the job's only
    or first variant). A load of 1.0 keeps the cluster exactly busy on average if nothing were ever blocked.
    """
    if horizon_s <= 0:
        raise ValueError(f"horizon must be > 0, got {horizon_s}")
    cap = {k: v for k, v in capacity.dims().items() if v > 0}
    if dimension != "dominant" and dimension not in cap:
        raise ValueError(f"dimension {dimension!r} not in capacity {sorted(cap)}")
    total = 0.0
    for job in jobs:
        variant = job.variants[kind] if kind is not None else next(iter(job.variants.values()))
        demand = variant.request.dims()
        shares = {d: demand.get(d, 0) / c for d, c in cap.items()}
        share = max(shares.values()) if dimension == "dominant" else shares[dimension]
        total += share * variant.duration_s
    return total / horizon_s
