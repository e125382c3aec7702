"""The paper's two baselines for accelerator batches (digest `accel_batch.md` §3), as pure functions.

- SCT, Smallest Completion Time: every job to the responder with the smallest p_ij = s_i / r_j + t_ij,
  ignoring load, then the paper's MTTF order. Exact ties go to a seeded random responder (with identical
  responders, lowest-index ties would put every job on one).
- MMI, Minimum Make-span Increase: greedily pick the (job, responder) pair whose appending raises the
  batch make-span least. The paper leaves open how the increase is measured: `increase="overlap"` (default)
  appends to the flow shop, C' = max(C_j, A_j + a_ij) + b_ij, `"nonoverlap"` uses loads L_j + p_ij. Ties
  (equal increase) go to the smallest C', then the lowest (i, j). With either measure the greedy is then
  min-min: the pick always has the smallest C' of all pairs (every other C' is at least the new make-span,
  so no pair ever adds nothing except an exact tie), so the paper's other open choice, the tie-break,
  changes nothing and is not a parameter. Jobs run in selection order, or re-sorted by MTTF with
  `reorder="mttf"`.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from slurmx.policies.accel_batch.model import BatchInstance, IntArray, Schedule, schedule_from_assignment

__all__ = ["MmiIncrease", "MmiReorder", "mmi_schedule", "sct_schedule"]

MmiIncrease = Literal["overlap", "nonoverlap"]
MmiReorder = Literal["selection", "mttf"]


def sct_schedule(instance: BatchInstance, seed: int = 0) -> Schedule:
    """Each job to its fastest responder (load ignored), MTTF order on each."""
    p = instance.nonoverlap_s
    noise = np.random.default_rng(seed).random(p.shape)
    is_best = p <= p.min(axis=1, keepdims=True)
    assignment: IntArray = np.argmax(np.where(is_best, noise, -1.0), axis=1).astype(np.int64)
    return schedule_from_assignment(instance, assignment, "mttf")


def mmi_schedule(instance: BatchInstance, increase: MmiIncrease = "overlap", reorder: MmiReorder = "selection"
                 ) -> Schedule:
    """Greedy minimum make-span increase; O(J * (J R)) array work, one column refreshed per pick."""
    n_jobs, n_resp = instance.n_jobs, instance.n_responders
    a, b = instance.transmit_s, instance.compute_s
    nic = np.zeros(n_resp)  # when each NIC has received everything assigned so far
    done = np.zeros(n_resp)  # when each accelerator (or, non-overlapped, each responder) is free
    completion = (a + b).copy()  # C' of appending job i to responder j, for the current state
    assignment = np.zeros(n_jobs, dtype=np.int64)
    queues: list[list[int]] = [[] for _ in range(n_resp)]
    for _ in range(n_jobs):
        flat = int(np.argmin(completion))  # min increase max(0, C' - Cmax) = min C'; lowest (i, j)
        i, j = divmod(flat, n_resp)
        assignment[i] = j
        queues[j].append(i)
        nic[j] += a[i, j]
        done[j] = completion[i, j]
        completion[i, :] = np.inf
        open_rows = np.isfinite(completion[:, j])
        if increase == "overlap":
            refreshed = np.maximum(done[j], nic[j] + a[:, j]) + b[:, j]
        else:
            refreshed = done[j] + a[:, j] + b[:, j]
        completion[:, j] = np.where(open_rows, refreshed, np.inf)
    if reorder == "mttf":
        return schedule_from_assignment(instance, assignment, "mttf")
    return Schedule(assignment, tuple(tuple(q) for q in queues))
