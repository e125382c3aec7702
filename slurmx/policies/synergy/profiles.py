"""The released per-model Synergy profiles (throughput matrices, best-case demand, speedup, iteration time).

They live beside the policy because the policy reads them the way the daemon reads its profiler's output;
the workload generator (`slurmx.sim.workloads.synergy`) imports them from here (dependencies point from sim
to policies, never back).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["CPU_GRID", "MEM_GRID", "MODELS", "TASKS", "ModelProfile"]

# Grid of the released per-GPU throughput matrices: rows are CPUs per GPU, columns GB of memory per GPU.
CPU_GRID = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 9.0, 12.0, 24.0)
MEM_GRID = (20.83, 62.5, 125.0, 187.5, 250.0)


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """One model of the released simulator: task, best-case demand per GPU, speedup there, iteration time."""

    name: str
    task: str
    ideal_cpus_per_gpu: float
    ideal_mem_gb_per_gpu: float
    speedup: float
    iter_time_s: float
    matrix: tuple[tuple[float, ...], ...]  # [cpu row][mem column], 1.0 at (3 CPU, 62.5 GB)


def _matrix(cols: Mapping[int, tuple[float, ...]], low_mem: float = 0.1) -> tuple[tuple[float, ...], ...]:
    """Build a 9x5 matrix from per-column CPU curves; column 0 (20.83 GB) is `low_mem` unless given."""
    curves = [cols.get(0, (low_mem,) * 9)]
    for c in range(1, 5):
        curves.append(cols.get(c, curves[-1]))
    return tuple(tuple(curves[c][r] for c in range(5)) for r in range(9))


_ALEX = (0.3, 0.66, 1.0, 1.25, 1.53, 1.75, 2.0, 2.0, 2.0)
_RES18 = (0.37, 0.72, 1.0, 1.3, 1.53, 1.75, 2.4, 2.4, 2.4)
_RES50 = (0.4, 0.74, 1.0, 1.15, 1.15, 1.15, 1.15, 1.15, 1.15)
_MOBILE = (0.37, 0.72, 1.0, 1.3, 1.49, 1.55, 1.55, 1.55, 1.55)
_M5_62 = (0.3, 0.66, 1.0, 1.2, 1.4, 1.5, 1.5, 1.5, 1.5)
_M5_125 = (0.3, 0.66, 1.0, 1.2, 1.4, 2.0, 2.0, 2.0, 2.0)
_M5_187 = (0.3, 0.66, 1.0, 1.2, 1.4, 2.5, 2.5, 2.5, 2.5)
_DEEPSPEECH = (0.3, 0.66, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
_FLAT = (1.0,) * 9
# App-A.1 of the digest (simulator/models/*_1.py of msr-fiddle/synergy @ 1bb2bed): task, best-case CPUs and
# GB per GPU, speedup there, iteration time at the proportional share, matrix by memory column.
MODELS: Mapping[str, ModelProfile] = {
    m.name: m
    for m in (
        ModelProfile("alexnet", "image", 12, 125, 2.94, 0.6, _matrix({1: _ALEX, 2: (*_ALEX[:7], 2.94, 2.94)})),
        ModelProfile("res18", "image", 9, 62.5, 2.4, 0.64, _matrix({1: _RES18})),
        ModelProfile("res50", "image", 4, 62.5, 1.15, 0.78, _matrix({1: _RES50})),
        ModelProfile("mobilenet", "image", 6, 62.5, 1.55, 0.71, _matrix({1: _MOBILE})),
        ModelProfile("shufflenet", "image", 12, 125, 2.89, 0.615, _matrix({1: _ALEX, 2: (*_ALEX[:7], 2.89, 2.89)})),
        ModelProfile("gnmt", "language", 1, 20, 1.0, 0.12, _matrix({0: _FLAT})),
        ModelProfile("transformer", "language", 1, 20, 1.0, 0.67, _matrix({0: _FLAT})),
        ModelProfile("lstm", "language", 1, 20, 1.0, 0.011, _matrix({0: _FLAT})),
        ModelProfile("m5", "speech", 6, 187.5, 2.5, 0.6, _matrix({1: _M5_62, 2: _M5_125, 3: _M5_187})),
        ModelProfile("deepspeech", "speech", 3, 62.5, 1.0, 0.757, _matrix({1: _DEEPSPEECH})),
    )
}
TASKS = ("image", "language", "speech")  # order of the split and of tie-breaking, as in the released code
