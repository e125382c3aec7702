"""Zhao et al.'s batch model: jobs sent over a responder's ingress link, then computed there, one at a time.

Each responder is a two-machine flow shop (digest `accel_batch.md` §1.1-1.2): its NIC receives the inputs of
its jobs back to back in processing order (a_i = s_i / r_j), and its accelerator computes them in the same
order (b_i = t_ij), a computation starting once its own input has fully arrived (the `l <= k` reading of the
paper's constraint (2)). Transfers overlap earlier computations; computations never overlap.

This module holds the instance, a schedule (responder and order of every job), the completion-time
recurrence, and the two per-responder orders: the paper's MTTF and Johnson's rule, which is optimal for
F2||Cmax (the paper's Theorem 3, "MTTF is optimal", is false: `MTTF_COUNTEREXAMPLE`). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "MTTF_COUNTEREXAMPLE",
    "BatchInstance",
    "OrderRule",
    "Schedule",
    "flow_shop_makespan",
    "johnson_order",
    "mttf_order",
    "order_jobs",
    "schedule_from_assignment",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
OrderRule = Literal["mttf", "johnson"]

# Digest §2.5: A = (a 1, b 0.1), B = (a 2, b 10). MTTF runs A, B -> 13; Johnson runs B, A -> 12.1.
MTTF_COUNTEREXAMPLE: tuple[tuple[float, float], ...] = ((1.0, 0.1), (2.0, 10.0))


@dataclass(frozen=True)
class BatchInstance:
    """One batch: input sizes s_i (Mb), responder ingress rates r_j (Mb/s), computation times t_ij (s)."""

    sizes_mb: FloatArray
    rates_mbps: FloatArray
    compute_s: FloatArray
    transmit_s: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        sizes = np.asarray(self.sizes_mb, dtype=np.float64)
        rates = np.asarray(self.rates_mbps, dtype=np.float64)
        compute = np.asarray(self.compute_s, dtype=np.float64)
        if compute.shape != (len(sizes), len(rates)):
            raise ValueError(f"accel instance: compute_s has shape {compute.shape}, expected "
                             f"(jobs, responders) = ({len(sizes)}, {len(rates)})")
        if np.any(sizes < 0) or np.any(rates <= 0) or np.any(compute < 0):
            raise ValueError("accel instance: sizes and computation times must be >= 0 and rates > 0")
        object.__setattr__(self, "sizes_mb", sizes)
        object.__setattr__(self, "rates_mbps", rates)
        object.__setattr__(self, "compute_s", compute)
        object.__setattr__(self, "transmit_s", sizes[:, None] / rates[None, :])

    @property
    def n_jobs(self) -> int:
        return len(self.sizes_mb)

    @property
    def n_responders(self) -> int:
        return len(self.rates_mbps)

    @property
    def nonoverlap_s(self) -> FloatArray:
        """p_ij = s_i / r_j + t_ij, eq. (5): a job's time on a responder with nothing overlapped."""
        return self.transmit_s + self.compute_s

    def with_compute(self, compute_s: FloatArray) -> BatchInstance:
        """The same jobs and links with other computation times (the truth behind an estimate)."""
        return BatchInstance(self.sizes_mb, self.rates_mbps, compute_s)

    def subset(self, jobs: Sequence[int]) -> BatchInstance:
        idx = np.asarray(jobs, dtype=np.int64)
        return BatchInstance(self.sizes_mb[idx], self.rates_mbps, self.compute_s[idx])


@dataclass(frozen=True)
class Schedule:
    """Which responder runs each job, and in what order: `orders[j]` lists responder j's jobs first to last."""

    assignment: IntArray
    orders: tuple[tuple[int, ...], ...]

    def makespan(self, instance: BatchInstance) -> float:
        """The batch's make-span under the overlapped execution model (every responder starts idle at 0)."""
        spans = [flow_shop_makespan(instance.transmit_s[list(o), j], instance.compute_s[list(o), j])
                 for j, o in enumerate(self.orders) if o]
        return max(spans, default=0.0)


def flow_shop_makespan(a: FloatArray, b: FloatArray) -> float:
    """C_n of A_k = A_{k-1} + a_k, C_k = max(C_{k-1}, A_k) + b_k, i.e. max_k (A_k + sum_{l >= k} b_l)."""
    if len(a) == 0:
        return 0.0
    arrival = np.cumsum(a)
    tail = np.cumsum(b[::-1])[::-1]
    return float(np.max(arrival + tail))


def mttf_order(a: FloatArray, b: FloatArray) -> IntArray:
    """Minimum Transmission Time First (the paper's Theorem 3 order); ties by index."""
    del b
    return np.argsort(a, kind="stable").astype(np.int64)


def johnson_order(a: FloatArray, b: FloatArray) -> IntArray:
    """Johnson's rule: jobs with a <= b by increasing a, then the rest by decreasing b. Optimal for F2||Cmax."""
    idx = np.arange(len(a))
    first = idx[a <= b]
    last = idx[a > b]
    first = first[np.argsort(a[first], kind="stable")]
    last = last[np.argsort(-b[last], kind="stable")]
    return np.concatenate([first, last]).astype(np.int64)


def order_jobs(rule: OrderRule, a: FloatArray, b: FloatArray) -> IntArray:
    return johnson_order(a, b) if rule == "johnson" else mttf_order(a, b)


def schedule_from_assignment(instance: BatchInstance, assignment: IntArray, rule: OrderRule) -> Schedule:
    """Order every responder's jobs by `rule`, judged on this instance's times (the scheduler's estimates)."""
    orders: list[tuple[int, ...]] = []
    for j in range(instance.n_responders):
        jobs = np.nonzero(assignment == j)[0]
        seq = order_jobs(rule, instance.transmit_s[jobs, j], instance.compute_s[jobs, j])
        orders.append(tuple(int(i) for i in jobs[seq]))
    return Schedule(np.asarray(assignment, dtype=np.int64), tuple(orders))
