"""Zhao et al.'s decision for one batch: LST assignment, then an order on every responder; and its bound.

`zhao_schedule` is what the registered `accel_batch` policy calls on the batch it reads from a view, and
what the replica of the paper's batch model (`slurmx.reproduce.accel.batch_replica`) executes: one
decision function for both. Make-span <= 4 OPT whatever the order (digest `accel_batch.md` §2.6);
`overlap_lower_bound` is what every reproduced batch is checked against.
"""

from __future__ import annotations

from slurmx.policies.accel_batch.lst import LstResult, Search, lst_assign
from slurmx.policies.accel_batch.model import BatchInstance, OrderRule, Schedule, schedule_from_assignment

__all__ = ["overlap_lower_bound", "zhao_schedule"]


def zhao_schedule(instance: BatchInstance, order: OrderRule = "mttf", search: Search = "descent") -> \
        tuple[Schedule, LstResult]:
    """The 4-approximation: LST assignment on p_ij, then `order` on every responder."""
    lst = lst_assign(instance.nonoverlap_s, search=search)
    return schedule_from_assignment(instance, lst.assignment, order), lst


def overlap_lower_bound(instance: BatchInstance, t_lp: float) -> float:
    """A lower bound on the overlapped optimum (digest check C11): a job's own transfer and computation
    cannot overlap; every accelerator's and every NIC's work averaged over responders; T_LP / 2 (Theorem 4)."""
    a, b = instance.transmit_s, instance.compute_s
    n_resp = instance.n_responders
    return float(max((a + b).min(axis=1).max(), b.min(axis=1).sum() / n_resp, a.min(axis=1).sum() / n_resp,
                     t_lp / 2))
