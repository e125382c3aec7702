"""`slurmx explain GROUP`: why a group waits, why it got its variant, why it was preempted — from the audit log.

It also shows each variant's latest run-time estimate, its source (sample / history / declared / progress) and
uncertainty, and says when sacct history replaced sampling (the profiling stage audits both).

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
    unchosen = [e for e in entries if e.event == "unchosen"]
    if unchosen:
        answers.append(f"not the daemon's choice: {unchosen[-1].detail}")
    answers += _estimates(entries)
    last = entries[-1]
    profiling = [e for e in entries
                 if e.event == "profile" and e.detail.startswith(("released sample", "submitted sample"))]
    done = any(e.event == "profile" and e.detail.startswith("profiling done") for e in entries)
    if ignored and not starts:
        pass  # an ignored group waits for nothing slurmxd does: the answer above says why
    elif profiling and not done and not starts:
        answers.append(f"why waiting: profiling ({len(profiling)} sample(s) released); the policy sees the group "
                       "once its samples are done")
    elif last.event in ("note", "timeout", "requeue") or not starts:
        notes = [e for e in entries if e.event == "note"]
        why = notes[-1].detail if notes else "the policy has not chosen it yet (no note given)"
        answers.append(f"why waiting: {why}")
    history = [f"  {_when(e.t)}  {e.event:<9} {e.detail}" for e in entries]
    return [f"{group_id}:", *(f"  {a}" for a in answers), "history:", *history]


def _estimates(entries: Sequence[AuditEntry]) -> list[str]:
    """The latest estimate of each variant, and which of them history replaced sampling for."""
    latest: dict[str, str] = {}
    for e in entries:
        if e.event == "estimate":
            latest[e.detail.split(":", 1)[0]] = e.detail
    lines = [f"estimate {detail}" for _, detail in sorted(latest.items())]
    lines += [f"history replaces sampling for {e.detail.split(': history replaces sampling', 1)[0]}: "
              f"{e.detail.split('history replaces sampling ', 1)[1].strip('()')}"
              for e in entries if e.event == "profile" and ": history replaces sampling" in e.detail]
    return lines
