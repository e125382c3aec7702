"""Start steps: steer, size and release the chosen variant, then cancel its siblings once it runs.

A `Start` is the intent `start:<group>`: `releasing` -> steer (ReqNodeList), size and release, batched ->
`released`; each cycle, once the variant runs its active siblings are cancelled and the intent is dropped; if it
has not started after `daemon.start_timeout` it is held again and the policy decides anew. Replaying
`releasing` releases again, which Slurm treats as a no-op on a released job.
"""

from __future__ import annotations

from typing import NamedTuple

from slurmx.core.actions import Start
from slurmx.core.arrays import job_text
from slurmx.core.model import VariantState
from slurmx.core.resources import Resources
from slurmx.core.tag import leased, readable_fields
from slurmx.cycle import Outcome
from slurmx.cycle.admissible import Verdict, admissible
from slurmx.cycle.log import APPLIED
from slurmx.daemon.enforce_base import WAITING, EnforcerBase, one_line
from slurmx.daemon.observe import Observation
from slurmx.daemon.store import Intent
from slurmx.slurm import SlurmError
from slurmx.slurm.adapter import JobUpdate
from slurmx.slurm.errors import SlurmUnavailable
from slurmx.slurm.parse import expand_hostlist
from slurmx.slurm.records import SlurmJob

__all__ = ["StartSteps"]


class StartSteps(EnforcerBase):
    """The start half of the enforcer (mixed into `Enforcer`)."""

    def _starts(self, starts: list[Start], obs: Observation, now: float) -> list[Outcome]:
        """One outcome per start, in order; the chosen ones are released together."""
        chosen: list[tuple[Start, int, bool, tuple[int, int] | None]] = []  # (action, job id, held, new size)
        outcomes: list[Outcome] = []
        lookup = self.standing(obs)
        for action in starts:
            verdict = admissible(action, lookup)
            if verdict is not Verdict.ADMITTED:
                outcomes.append(self._not_admitted(action, verdict))
                continue
            variant = obs.view.groups[action.group_id].variant(action.kind)  # admitted: it waits, with a job id
            if variant is None or variant.job_id is None:
                raise RuntimeError(f"start {action.group_id}: admitted with no waiting {action.kind} job")
            requeued = variant.job_id == self._requeued_now.get(action.group_id)
            held = requeued or variant.state is VariantState.HELD  # requeued by this plan: held by `requeuehold`
            chosen.append((action, variant.job_id, held, _size(action, variant.request)))
            self._started_now.add(action.group_id)
            outcomes.append(Outcome(APPLIED))
        if not chosen:
            return outcomes
        asked = self.store.user_nodes(
            (j, a.group_id, job.required_nodes, job.excluded_nodes) for a, j, _, _ in chosen
            if a.nodes and (job := obs.jobs.get(j)) is not None)  # before slurmxd steers any of them
        rows = []
        for action, job_id, _, size in chosen:
            group = obs.view.groups[action.group_id]
            siblings = [v.job_id for v in group.variants if v.kind != action.kind and v.job_id is not None]
            required, excluded = asked.get(job_id, ("", ""))
            rows.append((f"start:{action.group_id}", "start", action.group_id, "releasing",
                         {"kind": action.kind, "job_id": job_id, "nodes": list(action.nodes), "siblings": siblings,
                          "released_at": now, "reason": action.reason, "size": list(size) if size else None,
                          "user_nodes": required, "user_excluded": excluded}))
        self.store.put_intents(rows, now)  # durable before the first Slurm command of any of them
        for action, job_id, _, size in chosen:
            self._audit(action.group_id, "decide", f"start {action.kind} (job {job_text(job_id)})"
                        + (f" on {','.join(action.nodes)}" if action.nodes else "")
                        + (f" as cpus={size[0]} mem={size[1]}M" if size else "")
                        + (f": {action.reason}" if action.reason else ""))
        self._release([_ToRelease(a.group_id, j, self._narrowed(a.group_id, j, a.nodes, asked.get(j, ("", ""))),
                                  held, size) for a, j, held, size in chosen])
        return outcomes

    def _narrowed(self, group_id: str, job_id: int, nodes: tuple[str, ...], user: tuple[str, str]) \
            -> tuple[str, ...]:
        """The nodes to steer the job to: the policy's, when they narrow what the user asked for (`-w` and `-x`, as
        first seen: `Store.user_nodes`; `_narrows`); else none, said in one line: steering narrows the user's node
        list, it never replaces it (Slurm then runs the job where the user asked)."""
        if not nodes or _narrows(nodes, *user):
            return nodes
        asked = ", ".join(p for p in (f"-w {user[0]}" if user[0] else "", f"-x {user[1]}" if user[1] else "") if p)
        self._audit(group_id, "start", f"job {job_text(job_id)}: the policy's nodes {','.join(nodes)} are outside "
                    f"what its user asked for ({asked}): released without steering, where the user asked")
        return ()

    def _release(self, items: list[_ToRelease]) -> None:
        """Size and steer each job, release the held ones in one call, advance their intents."""
        self._resize_before_release(items)
        steer = [(item.job_id, JobUpdate(nodelist=",".join(item.nodes))) for item in items if item.nodes]
        try:
            refused = self.adapter.update_each(steer) if steer else {}  # one scontrol process for all of them
        except SlurmUnavailable:
            raise
        except SlurmError as exc:  # the command could not run at all: no job was steered
            refused = {job_id: exc for job_id, _ in steer}
        for group_id, job_id, _, _, _ in items:
            if job_id in refused:  # unsteered it may still run; the timeout re-decides if it does not
                self._audit(group_id, "error", f"steer job {job_text(job_id)}: {one_line(refused[job_id])}")
        held = [item.job_id for item in items if item.held]
        try:
            self.adapter.release(held)
        except SlurmUnavailable:
            raise
        except SlurmError:
            for job_id in held:  # one job vanished or refused; the others still need their release
                try:
                    self.adapter.release([job_id])
                except SlurmUnavailable:
                    raise
                except SlurmError as exc:
                    self.on_action("start", "error")
                    self._audit("", "error", f"release job {job_text(job_id)}: {one_line(exc)}")
        open_starts = {i.key: i for i in self.store.intents("start")}
        released = [(i.key, "start", i.group_id, "released", i.data) for i in
                    (open_starts.get(f"start:{item.group_id}") for item in items) if i is not None]
        self.store.put_intents(released, self.clock())
        for group_id, job_id, nodes, _, _ in items:
            self.on_action("start", "ok")
            self._audit(group_id, "release", f"released job {job_text(job_id)}" + (f" steered to {','.join(nodes)}"
                                                                           if nodes else ""))

    def _resize_before_release(self, items: list[_ToRelease]) -> None:
        """Give held jobs the CPUs and memory their Start allots (Synergy sizes each job) before they may run:
        one `scontrol update` per distinct size. Refused: the job runs at the size it asked for, and it is said."""
        by_size: dict[tuple[int, int], list[_ToRelease]] = {}
        for item in items:
            if item.size is not None:
                by_size.setdefault(item.size, []).append(item)
        for (cpus, mem_mb), group in by_size.items():
            try:
                self.adapter.update([i.job_id for i in group], JobUpdate(cpus=cpus, mem_mb=mem_mb))
            except SlurmUnavailable:
                raise
            except SlurmError as exc:
                for item in group:
                    self.on_action("resize", "error")
                    self._audit(item.group_id, "error", f"size job {job_text(item.job_id)} to cpus={cpus} "
                                f"mem={mem_mb}M: {one_line(exc)}; released at the size it asked for")
                continue
            for _ in group:
                self.on_action("resize", "ok")

    def _advance_start(self, intent: Intent, obs: Observation, now: float) -> None:
        job_id = int(intent.data["job_id"])
        job = obs.jobs.get(job_id)
        group = intent.group_id
        if job is None or not job.state.is_active:
            self.store.drop_intent(intent.key)
            self._audit(group, "start", f"job {job_text(job_id)} {'left squeue' if job is None else job.state.value} "
                        "before the daemon saw it run")
            return
        if job.state in (VariantState.RUNNING, VariantState.COMPLETING):
            self.store.drop_intent(intent.key)  # siblings: `_cancel_siblings` below, on this same snapshot
            self._audit(group, "started", f"{intent.data['kind']} job {job_text(job_id)} runs on {job.nodes or '?'}")
            return
        timed_out = now - float(intent.data.get("released_at", intent.created)) > self.site.daemon.start_timeout_s
        if intent.step == "releasing" and not timed_out:  # killed between the intent and the release: again
            size = intent.data.get("size")
            nodes = tuple(intent.data.get("nodes", ()))
            if nodes and not _narrows(nodes, str(intent.data.get("user_nodes", "")),
                                      str(intent.data.get("user_excluded", ""))):
                nodes = ()  # said when it was decided; the user's list as it was then (the job may show ours now)
            self._release([_ToRelease(group, job_id, nodes, job.held, (int(size[0]), int(size[1])) if size else None)])
            return
        if timed_out:
            if job.held:
                self.store.drop_intent(intent.key)
                return
            self.adapter.hold([job_id])
            if intent.data.get("nodes"):  # the user's own list back (none: cleared), never the daemon's
                self.adapter.update([job_id], JobUpdate(nodelist=str(intent.data.get("user_nodes", ""))))
            self.store.drop_intent(intent.key)
            self.on_action("start", "timeout")
            self._audit(group, "timeout", f"job {job_text(job_id)} did not start within "
                        f"{self.site.daemon.start_timeout_s} s ({job.reason or 'no reason given'}); held again, to be "
                        "decided anew")

    def _cancel_siblings(self, obs: Observation) -> None:
        """Once a variant runs, cancel its active siblings (one `scancel` for all groups). If two ever run, the
        one the open Start chose (else the lower job id) stays. Each is first set `MailType=NONE` (one
        `scontrol update` for all): Slurm mails END for a cancelled job too, and only the variant that runs
        may mail its user; a failed update (a sibling that just ended) never keeps the others from going."""
        doomed: list[tuple[str, int]] = []
        starts = {i.group_id: int(i.data["job_id"]) for i in self.store.intents("start")}
        occupying = (VariantState.RUNNING, VariantState.COMPLETING)
        for group in obs.groups.values():
            for job in group.jobs.values():  # a plain loop: it runs for every group every cycle
                if job.state not in WAITING:
                    break
            else:
                continue  # the common case: every variant still waits, nothing of the group runs or ran yet
            active = [j for j in group.jobs.values() if j.state.is_active]
            if not active:
                continue
            running = [j for j in active if j.state in occupying]
            self._report_unchosen(group.group_id, running, starts.get(group.group_id))
            if running:
                keep: int | None = starts.get(group.group_id)
                if keep not in {j.job_id for j in running}:
                    keep = min(j.job_id for j in running)
            elif any(_ran(j) for j in group.jobs.values()):
                keep = None  # a variant already ran to its end (possibly between two snapshots): the group is done
            else:
                continue
            doomed += [(group.group_id, j.job_id) for j in active if j.job_id != keep]
        if doomed:
            try:
                self.adapter.update([j for _, j in doomed], JobUpdate(mail_none=True))
            except SlurmError as exc:
                for group_id in dict.fromkeys(g for g, _ in doomed):
                    self._audit(group_id, "cancel", f"MailType=NONE before cancelling siblings: {one_line(exc)}")
            self.adapter.cancel([j for _, j in doomed])
            for group_id, job_id in doomed:
                self.on_action("cancel_sibling", "ok")
                self._audit(group_id, "cancel", f"cancelled sibling job {job_text(job_id)}: another variant runs")


    def _report_unchosen(self, group_id: str, running: list[SlurmJob], starting: int | None) -> None:
        """Audit, once per job, a variant that runs though slurmxd never started it (for `slurmx explain`)."""
        for job in running:
            if job.job_id in self._seen_running:
                continue
            self._seen_running.add(job.job_id)
            if job.job_id == starting or not leased(job.comment):  # race and pick groups are Slurm's to start
                continue
            mark = f"(job {job_text(job.job_id)})"
            if any(e.event == "decide" and mark in e.detail for e in self.store.history(group_id)):
                continue
            kind = readable_fields(job.comment).get("v", "?")
            self._audit(group_id, "unchosen", f"{kind} job {job_text(job.job_id)} runs though slurmxd did not start "
                        "it: its lease ran out (slurmxd stopped or drained) or someone moved its begin time or "
                        "released it (site-config/job_submit.lua forbids that to users); exactly one variant still "
                        "does the work")


class _ToRelease(NamedTuple):
    group_id: str
    job_id: int
    nodes: tuple[str, ...]
    held: bool
    size: tuple[int, int] | None  # (cpus, mem MB) the Start allots, when not what the job asks for


def _size(action: Start, request: Resources) -> tuple[int, int] | None:
    """The Start's allotment when its CPUs or memory differ from the job's request (None: release as it is)."""
    alloc = action.alloc
    if alloc is None or alloc.cpus <= 0 or alloc.mem_mb <= 0:
        return None
    if (alloc.cpus, alloc.mem_mb) == (request.cpus, request.mem_mb):
        return None
    return alloc.cpus, alloc.mem_mb


def _ran(job: SlurmJob) -> bool:
    """The job ran and ended (anything but cancelled): its group has had its one run."""
    return job.state.is_finished and job.state is not VariantState.CANCELLED


def _narrows(nodes: tuple[str, ...], required: str, excluded: str) -> bool:
    """Whether steering to `nodes` (all the job's nodes: one, or N for `-N N`) keeps to what the user asked: every
    node of `-w` among them (Slurm's `-w` is nodes the job must hold, with others added up to its node count,
    so `-w c1 -N 2` may be steered to c1,c2) and none of `-x`."""
    chosen = set(nodes)
    if required and not set(expand_hostlist(required)) <= chosen:
        return False
    return not (excluded and chosen & set(expand_hostlist(excluded)))
