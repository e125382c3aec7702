"""Synergy's optimistic profiling (Mohan et al., OSDI '22, §3.1): W[cpu, mem] from a few CPU points.

Only CPU sensitivity is measured, with memory at its maximum (the dataset fully cached), by the released
profiler's sparse search: start at the most CPUs, compare each point with the previous one, halve the CPUs where
the epoch time changed by less than 10% (flat) and step down by the GPU count where it changed more (steep). Every
other memory column follows from the memory model: with a static-subset cache (MinIO) a fraction f of the dataset
is served from memory each epoch and the rest from disk, so the epoch time is max(T_cpu(c), T_io(f)).

Open choices, parameters here: the saturation tolerance that defines the knee (c*, m*) (the paper does not give
it), and an optional bisection that refines the knee between the last steep and first flat point (the paper's
search alone can leave a gap there: ResNet18's knee 9 sits between the profiled 6 and 12).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

# The search itself runs inside a sample job too (`python3 -m slurmx.hooks.search`), so it lives with the
# standard-library hooks; the daemon, the simulator and the tests use this one copy.
from slurmx.hooks.search import Measure, SearchParams, cpu_search, knee, refine_knee

__all__ = [
    "Measure",
    "MemoryModel",
    "SearchParams",
    "SensitivityProfile",
    "best_case_demand",
    "cpu_search",
    "interpolate_row",
    "knee",
    "memory_matrix",
    "profile_sensitivity",
    "refine_knee",
]

def interpolate_row(points: Mapping[int, float], max_cpus: int) -> NDArray[np.float64]:
    """Throughput at 1..max_cpus CPUs: linear between profiled points, flat beyond the ends."""
    xs = sorted(points)
    return np.interp(np.arange(1, max_cpus + 1), xs, [points[c] for c in xs]).astype(np.float64)


@dataclass(frozen=True, slots=True)
class MemoryModel:
    """The digest's §2.2 inputs: dataset size D (GB), disk bandwidth (MB/s), memory read bandwidth (GB/s, a
    function of CPUs), the process's own memory (GB), and the cached fractions to tabulate (0%, 10%, ..., 100%)."""

    dataset_gb: float
    disk_mb_s: float
    mem_gb_s: Callable[[int], float]
    process_gb: float = 0.0
    fractions: tuple[float, ...] = tuple(i / 10 for i in range(11))

    def io_seconds(self, cpus: int, fraction: float) -> float:
        """T_io(f) = cached/B_mem(c) + missed·1024/B_disk, per epoch."""
        cache = fraction * self.dataset_gb
        miss = self.dataset_gb - cache
        return cache / self.mem_gb_s(cpus) + miss * 1024.0 / self.disk_mb_s

    def memory_gb(self) -> list[float]:
        """Memory for each tabulated fraction: the process plus the cached part of the dataset."""
        return [self.process_gb + f * self.dataset_gb for f in self.fractions]


def memory_matrix(cpu_epoch_s: NDArray[np.float64], model: MemoryModel) -> NDArray[np.float64]:
    """W[c-1, k] in epochs/s: 1 / max(T_cpu(c), T_io(f_k)), from full-memory epoch times at 1..C CPUs."""
    w = np.empty((len(cpu_epoch_s), len(model.fractions)))
    for i, t_cpu in enumerate(cpu_epoch_s):
        for k, f in enumerate(model.fractions):
            w[i, k] = 1.0 / max(float(t_cpu), model.io_seconds(i + 1, f))
    return w


def best_case_demand(w: NDArray[np.float64], memory_gb: list[float], saturation: float) -> tuple[int, float]:
    """(c*, m*): the fewest CPUs, then the least memory, within `saturation` of the matrix's best throughput."""
    target = (1.0 - saturation) * float(w.max())
    cpus = int(np.argmax(w.max(axis=1) >= target)) + 1
    mem = memory_gb[int(np.argmax(w[cpus - 1] >= target))]
    return cpus, mem


@dataclass(frozen=True, slots=True)
class SensitivityProfile:
    """The result handed to Synergy: W (epochs/s) over CPUs 1..C × memory, the demand (c*, m*), the cost."""

    w: NDArray[np.float64]
    memory_gb: list[float]
    c_star: int
    m_star_gb: float
    measured: dict[int, float]
    order: list[int]

    @property
    def points_run(self) -> int:
        """How many sample runs the search cost (the warm-up included)."""
        return len(self.order)


def profile_sensitivity(
    measure: Measure, params: SearchParams, model: MemoryModel, steps_per_epoch: float
) -> SensitivityProfile:
    """Search CPUs with memory at maximum, then fill in memory with the model: W[cpu, mem] and (c*, m*)."""
    points, order = cpu_search(measure, params)
    if params.refine_knee:
        refine_knee(measure, points, order, params.saturation)
    epoch_s = steps_per_epoch / interpolate_row(points, params.max_cpus)
    w = memory_matrix(epoch_s, model)
    mem = model.memory_gb()
    c_star, m_star = best_case_demand(w, mem, params.saturation)
    return SensitivityProfile(w, mem, c_star, m_star, points, order)
