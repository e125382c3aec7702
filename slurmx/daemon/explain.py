"""`slurmx explain GROUP`: why a group waits, why it got its variant, why it was preempted — from the audit log.

Pure over audit entries, so it reads the same from a live store or a copy an admin sends along.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from slurmx.daemon.store import AuditEntry

__all__ = ["explain"]


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def explain(group_id: str, entries: Sequence[AuditEntry]) -> list[str]:
    """Answers first (one line each), then the group's history, oldest first."""
    if not entries:
        return [f"{group_id}: slurmxd has recorded nothing about this group (not seen yet, not a slurmx group, "
                "or decided by another daemon's store)"]
    answers: list[str] = []
    ignored = [e for e in entries if e.event == "ignore"]
    if ignored:
        answers.append(f"ignored: {ignored[-1].detail}")
    starts = [e for e in entries if e.event == "decide" and e.detail.startswith("start ")]
    if starts:
        answers.append(f"why this variant: {starts[-1].detail}")
    preempts = [e for e in entries if e.event == "decide" and e.detail.startswith("preempt ")]
    if preempts:
        answers.append(f"why preempted: {preempts[-1].detail} ({len(preempts)} preemption(s) in all)")
    last = entries[-1]
    if last.event in ("note", "timeout", "requeue") or not starts:
        notes = [e for e in entries if e.event == "note"]
        why = notes[-1].detail if notes else "the policy has not chosen it yet (no note given)"
        answers.append(f"why waiting: {why}")
    history = [f"  {_when(e.t)}  {e.event:<9} {e.detail}" for e in entries]
    return [f"{group_id}:", *(f"  {a}" for a in answers), "history:", *history]
