"""Turn a policy's plan into Slurm commands, crash-safely (mechanism apart from policy).

Every multi-step action is an *intent* in the store, written before its first Slurm call and advanced after each
step, so a daemon killed at any instruction resumes it from the next cycle's snapshot:

- `Start` (key `start:<group>`): `releasing` -> steer (ReqNodeList) and release, batched -> `released`; then, each
  cycle, once the variant runs its active siblings are cancelled and the intent is dropped; if it has not started
  after `daemon.start_timeout` it is held again and the policy decides anew. Replaying `releasing` releases
  again, which Slurm treats as a no-op on a released job.
- `Preempt` (key `preempt:<job>`): `signalling` -> durable intent file + grace signal -> `signalled`; each cycle
  `preemption.advance` settles it (requeue at the deadline or when the job exits for requeue; a job that finished
  in its grace is left alone) -> `requeued`; the beneficiary's earmark stays until it starts. The daemon requeues
  with `requeuehold` and leaves the victim held, so the victim returns when the policy starts it, not when
  Slurm's own scheduler would. Replaying `signalling` (killed between intent and signal: unknown whether the
  signal went out) signals again with a fresh deadline, so no job is ever requeued without a full grace period.
  A requeue is never sent twice: the restart count recorded at the signal tells a done requeue from a lost one.
- `Resize` of a running job (key `resize:<job>`): the same grace protocol (`signalling` -> `signalled`), requeued
  held at the deadline -> `requeued`; then `scontrol update` NumCPUs/MinMemoryNode while it is held, release,
  intent dropped. Replaying `requeued` holds a job it finds pending unheld, updates and releases again (all safe
  to repeat); a job found running again or gone was released already. A pending group is updated in place.

One failed action never aborts the cycle; slurmctld unreachable does (the rest of the plan would act on a stale
view), and the next cycle starts from a fresh snapshot.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from slurmx.core.actions import Action, Cancel, Hold, Plan, Preempt, Release, Resize, SetPriority, Start
from slurmx.core.config import SiteConfig
from slurmx.core.model import GroupState, VariantState
from slurmx.core.resources import Resources
from slurmx.daemon import preemption
from slurmx.daemon.observe import GraceMark, Observation, StartMark
from slurmx.daemon.store import Intent, Store
from slurmx.slurm import SlurmAdapter, SlurmError
from slurmx.slurm.adapter import JobUpdate
from slurmx.slurm.errors import SlurmUnavailable
from slurmx.slurm.records import SlurmJob

__all__ = ["AuditRow", "Enforcer", "grace_marks", "start_marks"]

AuditRow = tuple[float, int, str, str, str]
_WAITING = (VariantState.PENDING, VariantState.HELD, VariantState.REQUEUED)


def start_marks(store: Store) -> dict[str, StartMark]:
    """Open Start intents as the view needs them (group -> released variant and its nodes)."""
    return {i.group_id: StartMark(str(i.data["kind"]), int(i.data["job_id"]), tuple(i.data.get("nodes", ())),
                                  float(i.data.get("released_at", i.created)))
            for i in store.intents("start")}


def grace_marks(store: Store) -> dict[str, GraceMark]:
    """Open preemptions as the view needs them (group -> deadline while in grace, beneficiary, nodes)."""
    marks: dict[str, GraceMark] = {}
    for i in store.intents("preempt"):
        deadline = None if i.step == "requeued" else float(i.data.get("deadline", i.created))
        marks[i.group_id] = GraceMark(deadline, i.data.get("beneficiary"), tuple(i.data.get("nodes", ())))
    return marks


@dataclass
class Enforcer:
    """Applies plans and advances open intents. `dry_run` prints what it would do and touches nothing."""

    adapter: SlurmAdapter
    store: Store
    site: SiteConfig
    dry_run: bool = False
    clock: Callable[[], float] = time.time
    on_action: Callable[[str, str], None] = lambda kind, outcome: None  # metrics hook: (action type, outcome)
    log: list[AuditRow] = field(default_factory=list)
    cycle: int = 0
    _last_note: dict[str, str] = field(default_factory=dict)
    _settled: set[int] = field(default_factory=set)  # jobs requeued or released by this cycle's follow-up

    def _audit(self, group_id: str, event: str, detail: str) -> None:
        self.log.append((self.clock(), self.cycle, group_id, event, detail))

    def flush(self) -> list[AuditRow]:
        rows, self.log = self.log, []
        if not self.dry_run:
            self.store.audit(rows)
        return rows

    # ------------------------------------------------------------------------------------------ the plan

    def apply(self, plan: Plan, obs: Observation, now: float) -> None:
        """Enforce one plan against the snapshot it was computed from."""
        for note in plan.notes:  # policies repeat a note every cycle while it holds: record it when it changes
            head = note.split(":", 1)[0]
            group = head if head in obs.view.groups else ""
            if group and self._last_note.get(group) != note:
                self._last_note[group] = note
                self._audit(group, "note", note)
        starts = [a for a in plan.actions if isinstance(a, Start)]
        others = [a for a in plan.actions if not isinstance(a, Start)]
        try:
            for action in others:  # preemptions first: they free what the starts may use
                self._one(action, obs, now)
            self._starts(starts, obs, now)
        except SlurmUnavailable as exc:
            self._audit("", "error", f"slurmctld unreachable while enforcing; rest of the plan dropped: {exc}")
            self.on_action("cycle", "unavailable")
            raise

    def _one(self, action: Action, obs: Observation, now: float) -> None:
        kind = type(action).__name__.lower()
        try:
            if isinstance(action, Preempt):
                self._preempt(action, obs, now)
            elif isinstance(action, SetPriority):
                self._on_waiting(action.group_id, obs, kind, f"priority {action.priority}", lambda ids: self.adapter
                                 .update(ids, JobUpdate(priority=action.priority)), action.reason)
            elif isinstance(action, Hold):
                self._on_waiting(action.group_id, obs, kind, "hold", self.adapter.hold, action.reason, held=False)
            elif isinstance(action, Release):
                self._on_waiting(action.group_id, obs, kind, "release", self.adapter.release, action.reason,
                                 held=True)
            elif isinstance(action, Cancel):
                ids = _active_ids(obs, action.group_id)
                self._run(action.group_id, kind, f"cancel jobs {_show(ids)}", lambda: self.adapter.cancel(ids),
                          action.reason)
            elif isinstance(action, Resize):
                self._resize(action, obs, now)
        except SlurmUnavailable:
            raise
        except (SlurmError, preemption.PreemptionError) as exc:
            self.on_action(kind, "error")
            self._audit(action.group_id, "error", f"{kind} failed: {_line(exc)}")

    def _run(self, group_id: str, kind: str, what: str, call: Callable[[], None], reason: str) -> None:
        if self.dry_run:
            self._audit(group_id, kind, f"would {what}" + (f" ({reason})" if reason else ""))
            return
        call()
        self.on_action(kind, "ok")
        self._audit(group_id, kind, what + (f" ({reason})" if reason else ""))

    def _on_waiting(self, group_id: str, obs: Observation, kind: str, what: str,
                    call: Callable[[list[int]], None], reason: str, held: bool | None = None) -> None:
        ids = [v.job_id for v in _group_variants(obs, group_id) if v.job_id is not None and v.state in _WAITING
               and (held is None or (v.state is VariantState.HELD) == held)]
        if ids:
            self._run(group_id, kind, f"{what} jobs {_show(ids)}", lambda: call(ids), reason)

    def _resize(self, action: Resize, obs: Observation, now: float) -> None:
        variants = _group_variants(obs, action.group_id)
        running = next((v for v in variants if v.is_occupying), None)
        if running is not None:
            self._resize_running(action, running.job_id, obs, now)
            return
        ids = [v.job_id for v in variants if v.job_id is not None and v.state in _WAITING]
        change = JobUpdate(cpus=action.cpus, mem_mb=action.mem_mb)
        self._run(action.group_id, "resize", f"cpus={action.cpus} mem={action.mem_mb}M on jobs {_show(ids)}",
                  lambda: self.adapter.update(ids, change), action.reason)

    def _resize_running(self, action: Resize, job_id: int | None, obs: Observation, now: float) -> None:
        """A running job cannot change its CPUs or memory: grace signal, requeue held at the deadline, update,
        release (`_advance_resize`). A job already of that size, or already being resized or preempted, is left."""
        job = obs.jobs.get(job_id) if job_id is not None else None
        if job is None or job.state is not VariantState.RUNNING or job.job_id in self._settled:
            return
        if job.request.cpus == action.cpus and job.request.mem_mb == action.mem_mb:
            return
        if self.store.intent(f"resize:{job.job_id}") or self.store.intent(f"preempt:{job.job_id}"):
            return
        group = obs.view.groups[action.group_id]
        what = f"cpus={action.cpus} mem={action.mem_mb}M for running job {job.job_id} " \
               f"(now cpus={job.request.cpus} mem={job.request.mem_mb}M), grace {group.grace_s} s"
        reason = f" ({action.reason})" if action.reason else ""
        if self.dry_run:
            self._audit(action.group_id, "resize", f"would resize: {what}{reason}")
            return
        data = {"job_id": job.job_id, "cpus": action.cpus, "mem_mb": action.mem_mb, "grace_s": group.grace_s,
                "restart_count": job.restart_count, "t0": now, "deadline": float(math.ceil(now + group.grace_s)),
                "reason": f"resize to cpus={action.cpus} mem={action.mem_mb}M" + reason}
        self.store.put_intent(f"resize:{job.job_id}", "resize", action.group_id, "signalling", data, now)
        self._audit(action.group_id, "decide", f"resize {what}{reason}")
        self._signal(action.group_id, data, job, now, kind="resize")

    def _advance_resize(self, intent: Intent, obs: Observation, now: float) -> None:
        """signalling -> signalled -> requeued (held) -> updated and released; each step replayable."""
        data = dict(intent.data)
        job_id = int(data["job_id"])
        job = obs.jobs.get(job_id)
        if intent.step == "signalling":
            self._signal_again(intent, data, job_id, job, now, kind="resize")
            return
        if intent.step == "signalled":
            step = self._settle(job_id, data, job, now)
            if step is None:
                return
            if not (step.decision.action.requeues or step.decision.action is preemption.Action.ALREADY_REQUEUED):
                self.store.drop_intent(intent.key)
                self._audit(intent.group_id, "resize", f"job {job_id}: {step.decision.why}; not resized")
                return
            self.store.put_intent(intent.key, "resize", intent.group_id, "requeued", {**data, "requeued_at": now},
                                  now)
            self._settled.add(job_id)
            self._audit(intent.group_id, "requeue", f"job {job_id}: {step.decision.why}; requeued held to resize")
            # Our requeuehold left it held; a requeue this snapshot already showed (a crash lost our record of it)
            # may not have: it is held below before the update.
            held = step.decision.action.requeues or job is None or job.held
        else:  # requeued: killed before the update or the release went out; both are safe to repeat
            if job is None or job.state not in _WAITING:
                self.store.drop_intent(intent.key)  # released already (it runs again) or gone
                return
            held = job.held
        if not held:
            self.adapter.hold([job_id])  # never let it start at the old size between the update and the release
        change = JobUpdate(cpus=int(data["cpus"]), mem_mb=int(data["mem_mb"]))
        try:
            self.adapter.update([job_id], change)
            done = f"resized job {job_id} to cpus={change.cpus} mem={change.mem_mb}M and released it"
            self.on_action("resize", "ok")
        except SlurmUnavailable:
            raise
        except SlurmError as exc:  # Slurm refused the size: the job still gets its run back, at the old one
            done = f"resize of job {job_id} refused ({_line(exc)}); released at its old size"
            self.on_action("resize", "error")
        self.adapter.release([job_id])
        self.store.drop_intent(intent.key)
        self._settled.add(job_id)
        self._audit(intent.group_id, "resize", done)

    def _settle(self, job_id: int, data: dict[str, Any], job: SlurmJob | None, now: float) -> preemption.Step | None:
        """One protocol tick of a signalled job (requeue held at the deadline); None while it is not over."""
        ticket = preemption.PreemptionTicket(
            job_id, self.site.preemption.signal, float(data["grace_s"]), float(data["t0"]), float(data["deadline"]),
            int(data["restart_count"]), self.site.preemption.requeue_exit_code, str(data.get("reason", "")),
            None)
        step = preemption.advance(self.adapter, ticket, job, now, mode="requeuehold", release=False)
        if not step.decision.action.done:
            return None
        if data.get("intent_file"):
            preemption.close(preemption.PreemptionTicket(job_id, "", 0, 0, 0, 0, intent=Path(data["intent_file"])))
        return step

    # ------------------------------------------------------------------------------------------ start

    def _starts(self, starts: list[Start], obs: Observation, now: float) -> None:
        chosen: list[tuple[Start, int, bool, tuple[int, int] | None]] = []  # (action, job id, held, new size)
        open_starts = {i.group_id for i in self.store.intents("start")}
        for action in starts:
            group = obs.view.groups.get(action.group_id)
            variant = group.variant(action.kind) if group is not None else None
            if group is None or variant is None or variant.job_id is None or variant.state not in _WAITING:
                self._audit(action.group_id, "error", f"start {action.kind}: no waiting variant of that kind")
                self.on_action("start", "error")
                continue
            if action.group_id in open_starts:
                continue  # already being started
            chosen.append((action, variant.job_id, variant.state is VariantState.HELD, _size(action, variant.request)))
        if not chosen:
            return
        if self.dry_run:
            for action, job_id, _, size in chosen:
                where = f" on {','.join(action.nodes)}" if action.nodes else ""
                where += f" as cpus={size[0]} mem={size[1]}M" if size else ""
                self._audit(action.group_id, "start", f"would release {action.kind} job {job_id}{where}"
                            + (f" ({action.reason})" if action.reason else ""))
            return
        rows = []
        for action, job_id, _, size in chosen:
            group = obs.view.groups[action.group_id]
            siblings = [v.job_id for v in group.variants if v.kind != action.kind and v.job_id is not None]
            rows.append((f"start:{action.group_id}", "start", action.group_id, "releasing",
                         {"kind": action.kind, "job_id": job_id, "nodes": list(action.nodes), "siblings": siblings,
                          "released_at": now, "reason": action.reason, "size": list(size) if size else None}))
        self.store.put_intents(rows, now)  # durable before the first Slurm command of any of them
        for action, job_id, _, size in chosen:
            self._audit(action.group_id, "decide", f"start {action.kind} (job {job_id})"
                        + (f" on {','.join(action.nodes)}" if action.nodes else "")
                        + (f" as cpus={size[0]} mem={size[1]}M" if size else "")
                        + (f": {action.reason}" if action.reason else ""))
        self._release([_ToRelease(a.group_id, j, a.nodes, held, size) for a, j, held, size in chosen])

    def _release(self, items: list[_ToRelease]) -> None:
        """Size and steer each job, release the held ones in one call, advance their intents."""
        self._resize_before_release(items)
        for group_id, job_id, nodes, _, _ in items:
            if nodes:
                try:
                    self.adapter.update([job_id], JobUpdate(nodelist=",".join(nodes)))
                except SlurmUnavailable:
                    raise
                except SlurmError as exc:  # unsteered it may still run; the timeout re-decides if it does not
                    self._audit(group_id, "error", f"steer job {job_id}: {_line(exc)}")
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
                    self._audit("", "error", f"release job {job_id}: {_line(exc)}")
        open_starts = {i.key: i for i in self.store.intents("start")}
        released = [(i.key, "start", i.group_id, "released", i.data) for i in
                    (open_starts.get(f"start:{item.group_id}") for item in items) if i is not None]
        self.store.put_intents(released, self.clock())
        for group_id, job_id, nodes, _, _ in items:
            self.on_action("start", "ok")
            self._audit(group_id, "release", f"released job {job_id}" + (f" steered to {','.join(nodes)}"
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
                    self._audit(item.group_id, "error", f"size job {item.job_id} to cpus={cpus} mem={mem_mb}M: "
                                f"{_line(exc)}; released at the size it asked for")
                continue
            for _ in group:
                self.on_action("resize", "ok")

    # ------------------------------------------------------------------------------------------ preempt

    def _preempt(self, action: Preempt, obs: Observation, now: float) -> None:
        group = obs.view.groups.get(action.group_id)
        variant = group.running_variant() if group is not None else None
        if group is None or variant is None or variant.job_id is None:
            self._audit(action.group_id, "error", "preempt: the group is not running")
            self.on_action("preempt", "error")
            return
        job = obs.jobs.get(variant.job_id)
        key = f"preempt:{variant.job_id}"
        if job is None or job.state is not VariantState.RUNNING or self.store.intent(key) is not None \
                or job.job_id in self._settled or self.store.intent(f"resize:{job.job_id}") is not None:
            return
        reason = action.reason + (f" (for {action.beneficiary})" if action.beneficiary else "")
        if self.dry_run:
            self._audit(action.group_id, "preempt", f"would signal job {variant.job_id} with {action.grace_s} s "
                        f"grace{': ' + reason if reason else ''}")
            return
        data = {"job_id": variant.job_id, "grace_s": action.grace_s, "beneficiary": action.beneficiary,
                "nodes": list(variant.nodes), "restart_count": job.restart_count, "t0": now,
                "deadline": float(math.ceil(now + action.grace_s)), "reason": reason}
        self.store.put_intent(key, "preempt", action.group_id, "signalling", data, now)
        self._audit(action.group_id, "decide", f"preempt job {variant.job_id}, grace {action.grace_s} s: {reason}")
        self._signal(action.group_id, data, job, now)

    def _signal_again(self, intent: Intent, data: dict[str, Any], job_id: int, job: SlurmJob | None, now: float,
                      kind: str) -> None:
        """A daemon killed before the signal surely went out: signal again with a fresh grace, unless the job
        no longer runs the same attempt (then the preemption or resize is void and dropped)."""
        if job is None or job.state is not VariantState.RUNNING or job.restart_count > data["restart_count"]:
            self.store.drop_intent(intent.key)
            what = "preemption" if kind == "preempt" else kind
            self._audit(intent.group_id, kind, f"job {job_id} no longer running; {what} dropped")
            return
        data["deadline"] = float(math.ceil(now + float(data["grace_s"])))
        self._signal(intent.group_id, data, job, now, kind=kind)

    def _signal(self, group_id: str, data: dict[str, Any], job: SlurmJob, now: float,
                kind: str = "preempt") -> None:
        site = self.site
        try:
            ticket = preemption.begin(self.adapter, job.job_id, float(data["grace_s"]),
                                      signal=site.preemption.signal,
                                      spool_dir=preemption.group_spool_dir(site, job), reason=str(data["reason"]),
                                      requeue_exit_code=site.preemption.requeue_exit_code, now=now, job=job)
        except preemption.PreemptionError as exc:
            self.store.drop_intent(f"{kind}:{job.job_id}")
            self._audit(group_id, kind, f"not {'preempted' if kind == 'preempt' else 'resized'}: {_line(exc)}")
            return
        data = {**data, "t0": ticket.t0, "deadline": ticket.deadline, "restart_count": ticket.restart_count,
                "intent_file": str(ticket.intent) if ticket.intent else None}
        self.store.put_intent(f"{kind}:{job.job_id}", kind, group_id, "signalled", data, self.clock())
        self.on_action(kind, "signalled" if kind == "resize" else "ok")
        self._audit(group_id, kind, f"signalled job {job.job_id} ({site.preemption.signal}); requeue at "
                    f"{time.strftime('%H:%M:%S', time.localtime(ticket.deadline))} unless it exits first")

    # ------------------------------------------------------------------------------------------ follow-up

    def follow_up(self, obs: Observation, now: float) -> None:
        """Advance every open intent on this cycle's snapshot, then cancel siblings of running variants."""
        if self.dry_run:
            return
        try:
            self._settled.clear()
            for intent in self.store.intents("preempt"):
                self._advance_preempt(intent, obs, now)
            for intent in self.store.intents("resize"):
                self._advance_resize(intent, obs, now)
            for intent in self.store.intents("start"):
                self._advance_start(intent, obs, now)
            self._cancel_siblings(obs)
        except SlurmUnavailable:
            raise
        except SlurmError as exc:
            self.on_action("follow_up", "error")
            self._audit("", "error", f"follow-up failed: {_line(exc)}")

    def _advance_start(self, intent: Intent, obs: Observation, now: float) -> None:
        job_id = int(intent.data["job_id"])
        job = obs.jobs.get(job_id)
        group = intent.group_id
        if job is None or not job.state.is_active:
            self.store.drop_intent(intent.key)
            self._audit(group, "start", f"job {job_id} {'left squeue' if job is None else job.state.value} "
                        "before the daemon saw it run")
            return
        if job.state in (VariantState.RUNNING, VariantState.COMPLETING):
            self.store.drop_intent(intent.key)  # siblings: `_cancel_siblings` below, on this same snapshot
            self._audit(group, "started", f"{intent.data['kind']} job {job_id} runs on {job.nodes or '?'}")
            return
        timed_out = now - float(intent.data.get("released_at", intent.created)) > self.site.daemon.start_timeout_s
        if intent.step == "releasing" and not timed_out:  # killed between the intent and the release: again
            size = intent.data.get("size")
            self._release([_ToRelease(group, job_id, tuple(intent.data.get("nodes", ())), job.held,
                                      (int(size[0]), int(size[1])) if size else None)])
            return
        if timed_out:
            if job.held:
                self.store.drop_intent(intent.key)
                return
            self.adapter.hold([job_id])
            if intent.data.get("nodes"):
                self.adapter.update([job_id], JobUpdate(nodelist=""))
            self.store.drop_intent(intent.key)
            self.on_action("start", "timeout")
            self._audit(group, "timeout", f"job {job_id} did not start within {self.site.daemon.start_timeout_s} s "
                        f"({job.reason or 'no reason given'}); held again, to be decided anew")

    def _advance_preempt(self, intent: Intent, obs: Observation, now: float) -> None:
        data = dict(intent.data)
        job_id = int(data["job_id"])
        job = obs.jobs.get(job_id)
        if intent.step == "requeued":
            beneficiary = data.get("beneficiary")
            target = obs.view.groups.get(beneficiary) if beneficiary else None
            aged = now - float(data.get("requeued_at", intent.updated)) > self.site.daemon.start_timeout_s
            if target is None or target.state is GroupState.RUNNING or aged:
                self.store.drop_intent(intent.key)
            return
        if intent.step == "signalling":
            self._signal_again(intent, data, job_id, job, now, kind="preempt")
            return
        step = self._settle(job_id, data, job, now)
        if step is None:
            return
        action = step.decision.action
        if action.requeues or action is preemption.Action.ALREADY_REQUEUED:
            self.store.count_preemption(intent.group_id, now)
            self.store.put_intent(intent.key, "preempt", intent.group_id, "requeued", {**data, "requeued_at": now},
                                  now)
            self.on_action("requeue", "ok")
            self._audit(intent.group_id, "requeue", f"job {job_id}: {step.decision.why}; requeued and held "
                        "until the policy starts it again")
        else:
            self.store.drop_intent(intent.key)
            self._audit(intent.group_id, "preempt", f"job {job_id}: {step.decision.why}; left alone")

    def _cancel_siblings(self, obs: Observation) -> None:
        """Once a variant runs, cancel its active siblings (one `scancel` for all groups). If two ever run, the
        one the open Start chose (else the lower job id) stays."""
        doomed: list[tuple[str, int]] = []
        starts = {i.group_id: int(i.data["job_id"]) for i in self.store.intents("start")}
        occupying = (VariantState.RUNNING, VariantState.COMPLETING)
        for group in obs.groups.values():
            active = [j for j in group.jobs.values() if j.state.is_active]
            if not active or (len(active) == len(group.jobs) and all(j.state in _WAITING for j in active)):
                continue  # the common case: nothing of the group runs or ran yet
            running = [j for j in active if j.state in occupying]
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
            self.adapter.cancel([j for _, j in doomed])
            for group_id, job_id in doomed:
                self.on_action("cancel_sibling", "ok")
                self._audit(group_id, "cancel", f"cancelled sibling job {job_id}: another variant runs")


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


def _group_variants(obs: Observation, group_id: str) -> tuple[Any, ...]:
    group = obs.view.groups.get(group_id)
    return group.variants if group is not None else ()


def _active_ids(obs: Observation, group_id: str) -> list[int]:
    group = obs.groups.get(group_id)
    return [j.job_id for j in group.jobs.values() if j.state.is_active] if group is not None else []


def _show(ids: Iterable[int]) -> str:
    return ",".join(map(str, ids)) or "none"


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
