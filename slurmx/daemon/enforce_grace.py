"""Grace steps: preempt or resize a running job through the grace protocol, crash-safely.

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
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from slurmx.core.actions import Preempt, Resize
from slurmx.core.model import GroupState, VariantState
from slurmx.cycle import Outcome
from slurmx.cycle.log import APPLIED, FAILED, REPEATED
from slurmx.daemon import preemption
from slurmx.daemon.enforce_base import WAITING, EnforcerBase, group_variants, one_line, show_ids
from slurmx.daemon.observe import Observation
from slurmx.daemon.store import Intent
from slurmx.slurm import SlurmError
from slurmx.slurm.adapter import JobUpdate
from slurmx.slurm.errors import SlurmUnavailable
from slurmx.slurm.records import SlurmJob

__all__ = ["GraceSteps"]


class GraceSteps(EnforcerBase):
    """The preempt and resize half of the enforcer (mixed into `Enforcer`)."""

    def _preempt(self, action: Preempt, obs: Observation, now: float) -> Outcome:
        group = obs.view.groups[action.group_id]  # admitted (`cycle.admissible`): it runs, not in its grace yet
        variant = group.running_variant()
        if variant is None or variant.job_id is None:
            raise RuntimeError(f"preempt {action.group_id}: admitted with no running job")
        job = obs.jobs.get(variant.job_id)
        key = f"preempt:{variant.job_id}"
        if job is None or job.state is not VariantState.RUNNING or job.job_id in self._settled:
            return Outcome(REPEATED)  # completing, or requeued by this cycle's follow-up
        reason = action.reason + (f" (for {action.beneficiary})" if action.beneficiary else "")
        data = {"job_id": variant.job_id, "grace_s": action.grace_s, "beneficiary": action.beneficiary,
                "nodes": list(variant.nodes), "restart_count": job.restart_count, "t0": now,
                "deadline": float(math.ceil(now + action.grace_s)), "reason": reason}
        self.store.put_intent(key, "preempt", action.group_id, "signalling", data, now)
        self._audit(action.group_id, "decide", f"preempt job {variant.job_id}, grace {action.grace_s} s: {reason}")
        outcome = self._signal(action.group_id, data, job, now)
        intent = self.store.intent(key)
        if action.grace_s == 0 and intent is not None and intent.step == "signalled":
            # No grace: requeued now, as the simulator does, so a Start of this group later in the same plan (a
            # migration) finds it waiting instead of being refused until the next cycle.
            # At its deadline: begin() rounds it up to a whole second, which a clock with a fraction is still before.
            self._advance_preempt(intent, obs, max(now, float(intent.data.get("deadline", now))))
            settled = self.store.intent(key)
            if settled is not None and settled.step == "requeued":
                self._requeued_now[action.group_id] = variant.job_id
        return outcome

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
                kind: str = "preempt") -> Outcome:
        site = self.site
        try:
            ticket = preemption.begin(self.adapter, job.job_id, float(data["grace_s"]),
                                      signal=site.preemption.signal,
                                      spool_dir=preemption.group_spool_dir(site, job), reason=str(data["reason"]),
                                      requeue_exit_code=site.preemption.requeue_exit_code, now=now, job=job,
                                      files=self.files)
        except preemption.PreemptionError as exc:
            self.store.drop_intent(f"{kind}:{job.job_id}")
            self._audit(group_id, kind, f"not {'preempted' if kind == 'preempt' else 'resized'}: {one_line(exc)}")
            return Outcome(FAILED, one_line(exc))
        data = {**data, "t0": ticket.t0, "deadline": ticket.deadline, "restart_count": ticket.restart_count,
                "intent_file": str(ticket.intent) if ticket.intent else None}
        self.store.put_intent(f"{kind}:{job.job_id}", kind, group_id, "signalled", data, self.clock())
        self.on_action(kind, "signalled" if kind == "resize" else "ok")
        if ticket.intent_error is not None:  # the deadline is kept in the store all the same: the job cannot dodge
            self._audit(group_id, kind, f"job {job.job_id}: {ticket.intent_error}")
        self._audit(group_id, kind, f"signalled job {job.job_id} ({site.preemption.signal}); requeue at "
                    f"{time.strftime('%H:%M:%S', time.localtime(ticket.deadline))} unless it exits first")
        return Outcome(APPLIED)

    def _advance_preempt(self, intent: Intent, obs: Observation, now: float) -> None:
        data = dict(intent.data)
        job_id = int(data["job_id"])
        job = obs.jobs.get(job_id)
        if intent.step != "requeued" and self._beneficiary_gone(data, obs):
            # The beneficiary started (or left): the earmark is void for good, as the simulator voids it, so a
            # beneficiary preempted and requeued later does not take the victim's room back while it is in grace.
            data["beneficiary"] = None
            intent = self.store.put_intent(intent.key, "preempt", intent.group_id, intent.step, data, now)
        if intent.step == "requeued":
            aged = now - float(data.get("requeued_at", intent.updated)) > self.site.daemon.start_timeout_s
            if not data.get("beneficiary") or self._beneficiary_gone(data, obs) or aged:
                self.store.drop_intent(intent.key)
            return
        if intent.step == "signalling":
            self._signal_again(intent, data, job_id, job, now, kind="preempt")
            return
        step = self._settle(job_id, data, job, now)
        if step is None:
            return
        action = step.decision.action
        if action.requeues or action is preemption.Settlement.ALREADY_REQUEUED:
            self.store.count_preemption(intent.group_id, now)
            self.store.put_intent(intent.key, "preempt", intent.group_id, "requeued", {**data, "requeued_at": now},
                                  now)
            self.on_action("requeue", "ok")
            self._audit(intent.group_id, "requeue", f"job {job_id}: {step.decision.why}; requeued and held "
                        "until the policy starts it again")
        else:
            self.store.drop_intent(intent.key)
            self._audit(intent.group_id, "preempt", f"job {job_id}: {step.decision.why}; left alone")

    @staticmethod
    def _beneficiary_gone(data: dict[str, Any], obs: Observation) -> bool:
        beneficiary = data.get("beneficiary")
        if not beneficiary:
            return False
        target = obs.view.groups.get(beneficiary)
        return target is None or target.state is GroupState.RUNNING

    def _resize(self, action: Resize, obs: Observation, now: float) -> Outcome:
        requeued = self._requeued_now.get(action.group_id)  # by this plan, with no grace: it waits
        running = next((v for v in group_variants(obs, action.group_id) if v.is_occupying and v.job_id != requeued),
                       None)
        if running is not None:
            return self._resize_running(action, running.job_id, obs, now)
        ids = [v.job_id for v in self._waiting(obs, action.group_id)]
        if not ids:
            raise RuntimeError(f"resize {action.group_id}: admitted with no waiting job")
        change = JobUpdate(cpus=action.cpus, mem_mb=action.mem_mb)
        return self._run(action.group_id, "resize", f"cpus={action.cpus} mem={action.mem_mb}M on jobs {show_ids(ids)}",
                  lambda: self.adapter.update(ids, change), action.reason)

    def _resize_running(self, action: Resize, job_id: int | None, obs: Observation, now: float) -> Outcome:
        """A running job cannot change its CPUs or memory: grace signal, requeue held at the deadline, update,
        release (`_advance_resize`). A job already of that size, or already being resized or preempted, is left."""
        job = obs.jobs.get(job_id) if job_id is not None else None
        if job is None or job.state is not VariantState.RUNNING or job.job_id in self._settled:
            return Outcome(REPEATED)  # completing, or requeued by this cycle's follow-up
        group = obs.view.groups[action.group_id]
        what = f"cpus={action.cpus} mem={action.mem_mb}M for running job {job.job_id} " \
               f"(now cpus={job.request.cpus} mem={job.request.mem_mb}M), grace {group.grace_s} s"
        reason = f" ({action.reason})" if action.reason else ""
        data = {"job_id": job.job_id, "cpus": action.cpus, "mem_mb": action.mem_mb, "grace_s": group.grace_s,
                "restart_count": job.restart_count, "t0": now, "deadline": float(math.ceil(now + group.grace_s)),
                "reason": f"resize to cpus={action.cpus} mem={action.mem_mb}M" + reason}
        self.store.put_intent(f"resize:{job.job_id}", "resize", action.group_id, "signalling", data, now)
        self._audit(action.group_id, "decide", f"resize {what}{reason}")
        return self._signal(action.group_id, data, job, now, kind="resize")

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
            if not (step.decision.action.requeues or step.decision.action is preemption.Settlement.ALREADY_REQUEUED):
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
            if job is None or job.state not in WAITING:
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
            done = f"resize of job {job_id} refused ({one_line(exc)}); released at its old size"
            self.on_action("resize", "error")
        self.adapter.release([job_id])
        self.store.drop_intent(intent.key)
        self._settled.add(job_id)
        self._audit(intent.group_id, "resize", done)

    def _settle(self, job_id: int, data: dict[str, Any], job: SlurmJob | None,
                now: float) -> preemption.Advanced | None:
        """One protocol tick of a signalled job (requeue held at the deadline); None while it is not over."""
        ticket = preemption.PreemptionTicket(
            job_id, self.site.preemption.signal, float(data["grace_s"]), float(data["t0"]), float(data["deadline"]),
            int(data["restart_count"]), self.site.preemption.requeue_exit_code, str(data.get("reason", "")),
            None)
        step = preemption.advance(self.adapter, ticket, job, now, mode="requeuehold", release=False, files=self.files)
        if not step.decision.action.done:
            return None
        if data.get("intent_file"):
            preemption.close(preemption.PreemptionTicket(job_id, "", 0, 0, 0, 0, intent=Path(data["intent_file"])),
                             self.files)
        return step
