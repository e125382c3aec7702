"""What the shadow daemon would have done beside what Slurm did, group by group (pure: records in, report out).

Per group: the first would-be Start (when, which kind, where) and any other would-be decisions, beside the variant
Slurm ran (which kind, when it started, how long it waited and took). The summary counts the groups whose kind
differs and compares mean waits and job completion times (JCT: submission to end).

How the would-be JCT is estimated (`JCT_BASIS`): the would-be wait (decision time minus submission; the few
seconds from a release to the job's start are not counted) plus the run time of the kind the policy chose: the
run Slurm measured when Slurm ran that same kind, else the group's own estimate for that kind from its tag (`e=`,
the spec's estimate), else that variant's time limit. The change is would-be JCT minus actual JCT; negative means
the policy would have finished the group sooner.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from slurmx.core import tag
from slurmx.core.model import VariantState
from slurmx.daemon.shadow_store import SeenGroup, ShadowDecision
from slurmx.daemon.shadow_view import ran
from slurmx.slurm.records import AccountingRecord, SlurmJob

__all__ = ["JCT_BASIS", "GroupComparison", "ShadowReport", "Summary", "compare"]

JCT_BASIS = ("would-be JCT = would-be wait (decision time - submission) + run time of the kind the policy chose: "
             "Slurm's measured run when that kind is the one that ran, else the group's tag estimate (e=) for it, "
             "else its time limit")

Job = SlurmJob | AccountingRecord


@dataclass(frozen=True, slots=True)
class GroupComparison:
    group_id: str
    user: str
    submit_time: float
    kinds: tuple[str, ...]
    would: str  # the would-be decision in a few words ("start gpu on n1", "no start decided", ...)
    would_start: float | None
    would_kind: str
    would_nodes: tuple[str, ...]
    would_reason: str
    other_decisions: tuple[str, ...]  # would-be actions other than the first start, in order
    actual_state: str  # pending | running | finished | gone (neither squeue nor sacct knows it)
    actual_kind: str
    actual_start: float | None
    actual_nodes: str
    wait_actual_s: float | None
    wait_would_s: float | None
    run_s: float | None  # Slurm's measured run of the kind that ran (None while it runs)
    jct_actual_s: float | None
    jct_would_s: float | None
    jct_basis: str  # measured | tag estimate | time limit | "" (not estimated)
    jct_change_s: float | None

    @property
    def kind_differs(self) -> bool | None:
        return None if not (self.would_kind and self.actual_kind) else self.would_kind != self.actual_kind


@dataclass(frozen=True, slots=True)
class Summary:
    groups: int
    would_started: int
    ran: int
    compared: int  # groups with both a would-be start and an actual start
    kind_differs: int
    mean_wait_actual_s: float | None
    mean_wait_would_s: float | None
    jct_compared: int
    mean_jct_actual_s: float | None
    mean_jct_would_s: float | None
    mean_jct_change_s: float | None


@dataclass(frozen=True, slots=True)
class ShadowReport:
    groups: tuple[GroupComparison, ...]
    summary: Summary
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"groups": [{**asdict(g), "kind_differs": g.kind_differs} for g in self.groups],
                "summary": asdict(self.summary), "jct_basis": JCT_BASIS, "notes": list(self.notes)}


def compare(seen: Sequence[SeenGroup], decisions: Iterable[ShadowDecision], jobs: Iterable[Job],
            notes: Sequence[str] = ()) -> ShadowReport:
    """`jobs`: the groups' records from squeue and sacct (a job in both: the later record wins, pass squeue last)."""
    by_group: dict[str, list[ShadowDecision]] = {}
    for d in decisions:
        by_group.setdefault(d.group_id, []).append(d)
    records: dict[int, Job] = {}
    for job in jobs:
        records[job.job_id] = job
    members: dict[str, list[Job]] = {}
    for job in records.values():
        group_id = tag.readable_fields(job.comment).get("g")
        if group_id:
            members.setdefault(group_id, []).append(job)
    rows = tuple(_compare_one(g, by_group.get(g.group_id, []), members.get(g.group_id, [])) for g in seen)
    return ShadowReport(rows, _summary(rows), tuple(notes))


def _compare_one(group: SeenGroup, decisions: list[ShadowDecision], jobs: list[Job]) -> GroupComparison:
    start = next((d for d in decisions if d.action == "Start" and d.outcome == "shadow"), None)
    others = tuple(_describe(d) for d in decisions if d is not start)
    if start is not None:
        would = f"start {start.kind}" + (f" on {','.join(start.nodes)}" if start.nodes else "")
    elif decisions:
        would = "no start decided; " + others[-1]
    else:
        would = "no decision (waited)"
    winner = _winner(jobs)
    state = _state(jobs, winner)
    submit = group.submit_time
    actual_start = float(winner.start_time) if winner is not None and winner.start_time else None
    ended = winner is not None and winner.state.is_finished and winner.end_time and actual_start is not None
    run_s = float(winner.end_time or 0) - (actual_start or 0.0) if ended and winner is not None else None
    jct_actual = (float(winner.end_time or 0) - submit) if ended and winner is not None else None
    wait_would = start.t - submit if start is not None else None
    wait_actual = actual_start - submit if actual_start is not None else None
    jct_would, basis = None, ""
    if start is not None:
        chosen_run, basis = _run_estimate(start.kind, winner, run_s, jobs)
        jct_would = None if chosen_run is None or wait_would is None else wait_would + chosen_run
    change = jct_would - jct_actual if jct_would is not None and jct_actual is not None else None
    return GroupComparison(
        group.group_id, group.user, submit, group.kinds, would, start.t if start else None,
        start.kind if start else "", start.nodes if start else (), start.reason if start else "", others, state,
        _kind(winner) if winner is not None else "", actual_start, winner.nodes if winner is not None else "",
        wait_actual, wait_would, run_s, jct_actual, jct_would, basis, change)


def _describe(d: ShadowDecision) -> str:
    what = f"{d.action.lower()}" + (f" {d.kind}" if d.kind else "") + (f" on {','.join(d.nodes)}" if d.nodes else "")
    return what if d.outcome == "shadow" else f"{what} ({d.outcome})"


def _kind(job: Job) -> str:
    return tag.readable_fields(job.comment).get("v", "")


def _winner(jobs: list[Job]) -> Job | None:
    """The variant Slurm ran for the group: one that ran and was not cancelled, else the cancelled one that ran
    longest (a race loser runs for a moment before it cancels itself; a group cancelled while running)."""
    started = [j for j in jobs if _ran(j)]
    kept = [j for j in started if j.state is not VariantState.CANCELLED]
    if kept:
        return min(kept, key=lambda j: j.start_time or 0)
    if started:
        return max(started, key=lambda j: (j.end_time or 0) - (j.start_time or 0))
    return None


def _ran(job: Job) -> bool:
    if isinstance(job, SlurmJob):
        return ran(job)
    state = job.state
    if state in (VariantState.PENDING, VariantState.HELD, VariantState.REQUEUED) or not job.start_time:
        return False
    return state is not VariantState.CANCELLED or job.elapsed_s > 0


def _state(jobs: list[Job], winner: Job | None) -> str:
    if not jobs:
        return "gone"
    if winner is not None:
        return "finished" if winner.state.is_finished else "running"
    return "pending" if any(j.state.is_active for j in jobs) else "cancelled"


def _run_estimate(kind: str, winner: Job | None, run_s: float | None, jobs: list[Job]) -> tuple[float | None, str]:
    if winner is not None and _kind(winner) == kind and run_s is not None:
        return run_s, "measured"
    same = [j for j in jobs if _kind(j) == kind]
    for job in same:
        text = tag.readable_fields(job.comment).get("e")
        try:
            value = float(text) if text else 0.0
        except ValueError:
            value = 0.0
        if 0 < value < float("inf"):
            return value, "tag estimate"
    for job in same:
        limit = getattr(job, "time_limit_s", None)
        if limit:
            return float(limit), "time limit"
    return None, ""


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _summary(rows: Sequence[GroupComparison]) -> Summary:
    both = [r for r in rows if r.wait_would_s is not None and r.wait_actual_s is not None]
    jct = [r for r in rows if r.jct_change_s is not None]
    return Summary(
        groups=len(rows), would_started=sum(r.would_start is not None for r in rows),
        ran=sum(r.actual_start is not None for r in rows), compared=len(both),
        kind_differs=sum(bool(r.kind_differs) for r in rows),
        mean_wait_actual_s=_mean([r.wait_actual_s for r in both if r.wait_actual_s is not None]),
        mean_wait_would_s=_mean([r.wait_would_s for r in both if r.wait_would_s is not None]),
        jct_compared=len(jct), mean_jct_actual_s=_mean([r.jct_actual_s for r in jct if r.jct_actual_s is not None]),
        mean_jct_would_s=_mean([r.jct_would_s for r in jct if r.jct_would_s is not None]),
        mean_jct_change_s=_mean([r.jct_change_s for r in jct if r.jct_change_s is not None]))
