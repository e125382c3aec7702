"""The decision log both drivers write: one record per action taken, in the same format.

A record says when the decision was taken, on which view (a digest of what the policy could read, without Slurm's
job ids, which the simulator does not have), which action (`action_id`, its type and fields) and what became of
it. Two runs that decided alike produce equal logs; a parity test compares them record by record.
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass, field
from typing import NamedTuple

from slurmx.core.actions import Action
from slurmx.core.model import ClusterView, VariantState

__all__ = ["APPLIED", "FAILED", "REFUSED", "REPEATED", "SHADOW", "DecisionLog", "DecisionRecord", "Outcome", "Status",
           "canonical_view", "view_digest"]

class Status(enum.StrEnum):
    """What became of an action (a `str`, so a log written with the plain words reads the same)."""

    APPLIED = "applied"  # took effect (or, on Slurm, its first step did: the rest follows crash-safely)
    REPEATED = "repeated"  # already under way from an earlier decision; nothing new done
    REFUSED = "refused"  # cannot apply to the group as it is (`cycle.admissible`)
    FAILED = "failed"  # tried and failed (Slurm refused); the group is left as it was
    SHADOW = "shadow"  # a dry run: what would have been done


APPLIED = Status.APPLIED
REPEATED = Status.REPEATED
REFUSED = Status.REFUSED
FAILED = Status.FAILED
SHADOW = Status.SHADOW


class Outcome(NamedTuple):
    status: Status
    detail: str = ""


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    t: float
    decision: int  # the how-manieth policy call of the run
    view: str  # `view_digest` of the view the plan was computed from ("" when not computed)
    action_id: str
    action: str  # the action's type
    group_id: str
    outcome: Outcome
    kind: str = ""  # the variant a Start runs

    def key(self) -> tuple[float, str, str, str, str]:
        """What two drivers must agree on: the time, the view, the action and what became of it."""
        return (self.t, self.view, self.action_id, self.group_id, self.outcome.status)


@dataclass
class DecisionLog:
    """Records in order; `digest_views` costs a hash over the whole view per decision (tests and audits only)."""

    digest_views: bool = False
    keep_views: bool = False  # keep each view's canonical text by digest, to show where two logs part
    records: list[DecisionRecord] = field(default_factory=list)
    views: dict[str, str] = field(default_factory=dict)
    decisions: list[tuple[float, int, str]] = field(default_factory=list)  # (time, number, view) of every call

    def decided(self, t: float, decision: int, view: str) -> None:
        self.decisions.append((t, decision, view))

    def add(self, t: float, decision: int, view: str, actions: list[Action], outcomes: list[Outcome]) -> None:
        for action, outcome in zip(actions, outcomes, strict=True):
            self.records.append(DecisionRecord(t, decision, view, action.action_id, type(action).__name__,
                                               action.group_id, outcome, getattr(action, "kind", "")))


_WAITING = (VariantState.PENDING, VariantState.HELD, VariantState.REQUEUED)


def view_digest(view: ClusterView, keep: dict[str, str] | None = None) -> str:
    """A hash of what a policy can read in `view`, the same for the same world whichever driver built it
    (`canonical_view`); `keep` collects the text by digest."""
    text = canonical_view(view)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    if keep is not None:
        keep[digest] = text
    return digest


def canonical_view(view: ClusterView) -> str:
    """What a policy can read in `view`, as one JSON text, the same for the same world whichever driver built it.

    Left out: job ids and display names (Slurm's and the simulator's differ), node states and features beyond
    what allocation needs, priorities Slurm computes itself. A waiting variant is "waiting" whether Slurm holds it
    (slurmxd's managed variants are held) or not (the simulator's): policies treat the two alike.
    """
    groups = []
    for gid in sorted(view.groups):
        g = view.groups[gid]
        groups.append([gid, g.user, g.job_class.value, g.grace_s, g.preemptions, g.submit_time, g.grace_deadline,
                       g.preempted_for, list(g.preempted_nodes), g.requeue_time,
                       [[v.kind, "waiting" if v.state in _WAITING else v.state.value, v.request.dims(),
                         list(v.nodes), v.estimate_s, v.start_time] for v in g.variants]])
    nodes = [[n.name, list(n.partitions), n.capacity.dims(), n.allocated.dims()]
             for n in sorted(view.nodes.values(), key=lambda n: n.name)]
    return json.dumps({"now": view.now, "kinds": sorted(view.kinds.items()), "nodes": nodes, "groups": groups},
                      sort_keys=True, default=str)
