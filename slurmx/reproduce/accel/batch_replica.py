"""A replica of Zhao et al.'s batch execution model (the corrected one), for one batch or a stream of them.

It decides nothing: it executes the schedules the registered policies' own decision functions made
(`zhao_schedule`, `sct_schedule`, `mmi_schedule`). It stays beside the engine because the engine has no
input transfers: here a responder's NIC and its accelerator overlap, which is the make-span the paper's
bounds and figures are about.

A responder's NIC receives its jobs' inputs back to back in the planned order (never before the batch
arrives), and its accelerator computes them in that order, each once its own input is in and the previous
computation is done (the `l <= k` fix of the paper's constraint (2); digest `accel_batch.md` §1.2). The plan
is made on estimated computation times and executed here on the true ones (Fig. 5). Batches that arrive
while earlier ones still run are appended to the responders' queues, each planned on its own (the digest's
residual-work option (a), Fig. 4). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from slurmx.policies.accel_batch.model import BatchInstance, FloatArray, Schedule

__all__ = ["BatchRun", "ResponderState", "execute", "execute_stream"]


@dataclass(frozen=True)
class ResponderState:
    """When each responder's NIC and accelerator are next free (absolute seconds)."""

    nic_free: FloatArray
    accel_free: FloatArray

    @classmethod
    def idle(cls, n_responders: int) -> ResponderState:
        return cls(np.zeros(n_responders), np.zeros(n_responders))


@dataclass(frozen=True)
class BatchRun:
    """What happened to one batch: per-job input arrival and computation end, and the batch's make-span."""

    arrival: float
    input_done: FloatArray
    compute_done: FloatArray

    @property
    def finish(self) -> float:
        return float(self.compute_done.max()) if len(self.compute_done) else self.arrival

    @property
    def makespan(self) -> float:
        """From the batch's arrival to its last computation's end."""
        return self.finish - self.arrival


def execute(truth: BatchInstance, schedule: Schedule, arrival: float = 0.0,
            state: ResponderState | None = None) -> tuple[BatchRun, ResponderState]:
    """Run `schedule` on the true times of `truth`, from `state` (idle responders by default)."""
    state = state or ResponderState.idle(truth.n_responders)
    if len(schedule.assignment) != truth.n_jobs or len(schedule.orders) != truth.n_responders:
        raise ValueError(f"accel execute: schedule is for {len(schedule.assignment)} jobs on "
                         f"{len(schedule.orders)} responders, the batch has {truth.n_jobs} on {truth.n_responders}")
    nic, accel = state.nic_free.copy(), state.accel_free.copy()
    input_done = np.zeros(truth.n_jobs)
    compute_done = np.zeros(truth.n_jobs)
    a, b = truth.transmit_s, truth.compute_s
    for j, order in enumerate(schedule.orders):
        if not order:
            continue
        jobs = np.asarray(order, dtype=np.int64)
        arrive = max(nic[j], arrival) + np.cumsum(a[jobs, j])
        done = accel[j]
        for k, i in enumerate(jobs):  # C_k = max(C_{k-1}, A_k) + b_k
            done = max(done, arrive[k]) + b[i, j]
            compute_done[i] = done
        input_done[jobs] = arrive
        nic[j], accel[j] = arrive[-1], done
    return BatchRun(arrival, input_done, compute_done), ResponderState(nic, accel)


def execute_stream(batches: Sequence[tuple[BatchInstance, Schedule, float]]) -> list[BatchRun]:
    """Run (truth, schedule, arrival) batches in arrival order on shared responders."""
    runs = []
    state: ResponderState | None = None
    for truth, schedule, arrival in sorted(batches, key=lambda item: item[2]):
        run, state = execute(truth, schedule, arrival, state)
        runs.append(run)
    return runs
