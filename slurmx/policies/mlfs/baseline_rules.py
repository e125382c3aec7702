"""The decision rules of MLFS's baselines (digest §3), pure functions shared by the registered policies
(`mlfs-fairshare`, `slaq`, `tiresias`, `gandiva` in `slurmx.policies.mlfs.baselines`) and the reproduction's
task-level replica (`slurmx.reproduce.mlfs.task_baselines`), so both run the same baseline.

- fair share (TensorFlow on Borg): max-min fair integer shares by water-filling (`fair_shares`);
- SLAQ: the largest predicted normalised loss reduction per unit time first (`slaq_gain`), shares handed out in
  that order in whole granules (`greedy_fill`);
- Tiresias: discretised least-attained-service queues (`tiresias_level`), all or nothing in order (`gang_fill`);
- Gandiva: servers already running jobs of the same size first (`affinity`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence

__all__ = ["affinity", "fair_shares", "gang_fill", "greedy_fill", "slaq_gain", "tiresias_level"]


def fair_shares(demands: Sequence[int], capacity: int, units: Sequence[int] | None = None) -> list[int]:
    """Max-min fair integer shares (water-filling); leftover units go to the earliest jobs. Pure.

    `units[i]` is the granule job i grows by (a data-parallel replica's workers; 1 by default): progressive
    filling then gives the next granule to the job whose share after it would be smallest (ties: the earlier
    job), while it fits, so a job never holds part of a replica."""
    if units is not None and any(u > 1 for u in units):
        return _granular_shares(demands, capacity, units)
    shares = [0] * len(demands)
    left = capacity
    active = [i for i, d in enumerate(demands) if d > 0]
    while left > 0 and active:
        level = max(1, left // len(active))
        for i in list(active):
            give = min(level, demands[i] - shares[i], left)
            shares[i] += give
            left -= give
            if shares[i] >= demands[i]:
                active.remove(i)
            if left == 0:
                break
    return shares


def _granular_shares(demands: Sequence[int], capacity: int, units: Sequence[int]) -> list[int]:
    shares = [0] * len(demands)
    left = capacity
    heap = [(max(1, u), i) for i, (d, u) in enumerate(zip(demands, units, strict=True)) if d >= max(1, u)]
    heapq.heapify(heap)
    while heap:
        after, i = heapq.heappop(heap)
        unit = max(1, units[i])
        if unit > left:
            continue  # this granule no longer fits; smaller ones may
        shares[i] = after
        left -= unit
        if shares[i] + unit <= demands[i]:
            heapq.heappush(heap, (shares[i] + unit, i))
    return shares


def slaq_gain(iteration: int, last_drop: float, iter_time_s: float, workers: int, loss_start: float) -> float:
    """SLAQ's priority: the last iteration's loss reduction per second per worker over the starting loss; a job
    with no finished iteration (I = 1) first (+inf)."""
    if iteration <= 1:
        return math.inf
    return last_drop / (iter_time_s * workers * max(loss_start, 1e-12))


def greedy_fill(demands: Sequence[int], capacity: int, units: Sequence[int]) -> list[int]:
    """Shares in the given order: each job takes what is left, up to its demand, in whole `units`."""
    left, shares = capacity, []
    for demand, unit in zip(demands, units, strict=True):
        k = min(demand, left) // unit * unit
        left -= k
        shares.append(k)
    return shares


def tiresias_level(attained: float, limits: Sequence[float]) -> int:
    """The 2D-LAS queue of a job with `attained` service (GPU-seconds): how many queue limits it has passed."""
    return sum(1 for lim in limits if attained >= lim)


def gang_fill(demands: Sequence[int], capacity: int) -> list[int]:
    """All or nothing in the given order: a job runs whole if what is left holds it (later, smaller ones may)."""
    left, shares = capacity, []
    for demand in demands:
        k = demand if demand <= left else 0
        left -= k
        shares.append(k)
    return shares


def affinity(size_on_server: Mapping[int, set[int]], size: int) -> Callable[[int], float]:
    """Gandiva's affinity: servers already running jobs of the same size rank first (lower is better)."""
    return lambda server: -float(size in size_on_server.get(server, set()))
