"""slurmxd's profiling stage: sample runs, sacct history and progress turn into each variant's `estimate_s`.

Per cycle, between reconcile and decide (docs/profiler.md, "Wiring into slurmxd"):

1. new pending groups are registered with the profiler: history (sacct at start-up, completed runs seen since)
   answers where it can, and samples are planned for the rest, within the profiling QOS cap;
2. samples are submitted **as the group's user** (`runuser`: the daemon never runs a user's script as itself),
   from the sample script the submitter left in the spool, and only if its sha256 matches the `p=` tag the user's
   own (Slurm-enforced) job carries;
3. finished samples are read (spool timings, else Slurm's times), samples far slower than their siblings are cut,
   running variants' progress files update their estimates;
4. the policy's view gets the estimates, and a pending group stays hidden from the policy until its profiling is
   done (AlloX's "a job becomes ready when profiling is done").

Crash safety: a sample's row is written (state `submitting`) before its `sbatch`; a daemon restarted before the
job id was recorded finds the job by its `slurmx-sample:` comment in squeue instead of submitting it twice, and one
restarted later replays finished samples from the store into a fresh profiler (the sample plan is deterministic).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from slurmx.core.config import SiteConfig
from slurmx.core.model import ClusterView, Group, GroupState, VariantState
from slurmx.core.validation import validate_model
from slurmx.daemon.observe import Observation
from slurmx.daemon.store import EstimateRow, SampleRow, Store
from slurmx.profile.estimator import Estimate, ProgressReport
from slurmx.profile.history import History, HistoryParams, HistoryRun, JobKey
from slurmx.profile.profiler import Profiler
from slurmx.profile.readings import sample_step_seconds, sample_wall_seconds
from slurmx.profile.sampling import SAMPLE_TAG, GroupToProfile, SampleRequest, SamplingParams, VariantToProfile
from slurmx.slurm import CliSlurm, SlurmAdapter, SlurmError
from slurmx.slurm.errors import SlurmUnavailable
from slurmx.slurm.records import SlurmJob, parse_comment_tags
from slurmx.slurm.transport import CommandResult, Transport
from slurmx.submit.render import group_spool, sample_script_path, script_hash

__all__ = ["AuditRow", "ProfilingStage", "RunAsUser", "SubmitAs", "submit_as_user"]

log = logging.getLogger("slurmxd")

AuditRow = tuple[float, int, str, str, str]
SubmitAs = Callable[[str, str, Sequence[str]], int]  # (user, script, sbatch options) -> job id
_WAITING = (GroupState.PENDING, GroupState.REQUEUED)
_OPEN = ("submitting", "submitted", "cutting")
VISIBLE_AFTER_S = 30.0  # a sample missing from squeue this soon after sbatch was submitted after the snapshot
AUDIT_CHANGE = 0.05  # a progress estimate is audited again once it moved by more than this fraction


@dataclass(frozen=True, slots=True)
class RunAsUser:
    """A transport that runs each command as another user (`runuser -u USER --`): needs the daemon to be root."""

    inner: Transport
    user: str

    def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
        return self.inner.run(["runuser", "-u", self.user, "--", *argv], stdin, timeout)

    def describe(self) -> str:
        return f"{self.inner.describe()} as {self.user} (runuser)"


def submit_as_user(adapter: SlurmAdapter) -> SubmitAs:
    """sbatch as the group's user over the daemon's own transport (an adapter without one submits directly)."""
    transport = getattr(adapter, "transport", None)
    retry = getattr(adapter, "retry", None)

    def submit(user: str, script: str, options: Sequence[str]) -> int:
        if transport is None:
            return adapter.submit(script, options)
        return CliSlurm(RunAsUser(transport, user), retry).submit(script, options)

    return submit


def _read_text(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _read_progress(path: Path) -> Mapping[str, object] | None:
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _int_tag(tags: Mapping[str, str], key: str) -> int | None:
    text = tags.get(key, "")
    return int(text) if text.isdigit() and int(text) > 0 else None


def _sample_tag(request_id: str) -> str:
    group_id, kind, index = request_id.rsplit(".", 2)
    return f"{SAMPLE_TAG}g={group_id},v={kind},s={index},"


class ProfilingStage:
    """The profiler driven against Slurm: one per daemon; `cycle(obs, now, n)` -> (view for the policy, audit)."""

    def __init__(self, site: SiteConfig, adapter: SlurmAdapter, store: Store, *, dry_run: bool = False,
                 submit: SubmitAs | None = None, read_text: Callable[[str], str | None] = _read_text) -> None:
        self.site = site
        self.adapter = adapter
        self.store = store
        self.dry_run = dry_run
        self.params = validate_model(SamplingParams, site.profile.sampling, "site profile.sampling")
        self.profiler = Profiler(History(HistoryParams(max_age_s=float(site.profile.history_max_age_s))),
                                 self.params)
        self.submit = submit or submit_as_user(adapter)
        self.read_text = read_text
        self.seeded = False
        self._seen_runs: set[int] = set()
        self._scripts: dict[tuple[str, str], str] = {}  # (group, kind) -> verified sample script
        self._users: dict[str, str] = {}
        self._audited: dict[tuple[str, str], tuple[str, float]] = {}
        self._ready: set[str] = set()
        self._requests: dict[str, SampleRequest] = {}  # sample id -> what the profiler asked for
        self._qos: dict[str, str] = {}  # group -> its own QOS (the fallback when the profiling QOS is missing)
        self.qos_missing = False
        self._rows: list[AuditRow] = []
        self._cycle = 0
        self._now = 0.0

    # ------------------------------------------------------------------------------------------ the cycle

    def cycle(self, obs: Observation, now: float, cycle: int) -> tuple[Observation, list[AuditRow]]:
        self._rows, self._cycle, self._now = [], cycle, now
        if not self.seeded:
            self.seed_history(now)
            self.check_qos()
        self._learn_runs(obs)
        self._register(obs, now)
        if not self.dry_run:  # a dry run reads the store's samples (replayed above) but cuts or closes none
            self._follow_samples(obs, now)
        self._replay_and_submit(obs, self.store.samples(), self.profiler.plan([], now), now)  # next samples
        self._feed_progress(obs, now)
        self._record(obs.view, now)
        self._forget_gone(obs.view)
        return replace(obs, view=self._view(obs.view)), self._rows

    def seed_history(self, now: float) -> int:
        """Completed runs from sacct (once per daemon life); a failing sacct leaves history to what runs later."""
        self.seeded = True
        try:
            records = self.adapter.accounting(since=self.site.profile.history_since)
        except SlurmError as exc:
            log.warning("profiling: no history from sacct (%s); estimates start from samples", exc,
                        extra={"event": "profile"})
            return 0
        self._seen_runs.update(r.job_id for r in records)
        added = self.profiler.history.add_records(records)
        log.info("profiling: %d completed run(s) from sacct seed the history", added, extra={"event": "profile"})
        return added

    def _audit(self, group_id: str, event: str, detail: str) -> None:
        self._rows.append((self._now, self._cycle, group_id, event, detail))

    # ------------------------------------------------------------------------------------------ history

    def _learn_runs(self, obs: Observation) -> None:
        """Completed variants squeue still shows become history, so a job key run again needs no samples."""
        for tg in obs.groups.values():
            for kind, job in tg.jobs.items():
                if job.state is not VariantState.COMPLETED or job.job_id in self._seen_runs:
                    continue
                self._seen_runs.add(job.job_id)
                if job.start_time and job.end_time and job.end_time > job.start_time:
                    tags = parse_comment_tags(job.comment)
                    name = job.name.rpartition("@")[0] or job.name
                    self.profiler.history.add([HistoryRun(JobKey(tg.user, name, tags.get("h", ""), kind),
                                                          float(job.end_time), float(job.end_time - job.start_time),
                                                          None, _int_tag(tags, "n"))])

    # ------------------------------------------------------------------------------------------ registration

    def _register(self, obs: Observation, now: float) -> None:
        """Groups the profiler has not seen: pending ones may be sampled; running ones only follow progress."""
        new: list[GroupToProfile] = []
        for group in obs.view.groups.values():
            if self.profiler.known(group.group_id):
                continue
            tg = obs.groups.get(group.group_id)
            if tg is None:
                continue
            waiting = group.state in _WAITING
            variants = []
            for variant in group.variants:
                job = tg.jobs.get(variant.kind)
                tags = parse_comment_tags(job.comment) if job is not None else {}
                steps = _int_tag(tags, "n")
                if waiting and steps and not self._sample_script(group.group_id, variant.kind, tags.get("p", "")):
                    steps = None  # nothing we may submit: history or the declared estimate
                variants.append(VariantToProfile(variant.kind, variant.request, steps if waiting else None,
                                                 tg.estimates.get(variant.kind),
                                                 job.time_limit_s if job is not None else None,
                                                 script_hash=tags.get("h", "")))
            self._users[group.group_id] = tg.user
            self._qos[group.group_id] = next(iter(tg.jobs.values())).qos
            new.append(GroupToProfile(group.group_id, tg.user, group.name, "", tuple(variants), group.submit_time))
        if not new:
            return
        self._replay_and_submit(obs, self.store.samples(), self.profiler.plan(new, now), now)
        for g in new:
            for kind, how in self.profiler.sources(g.group_id).items():
                estimate = self.profiler.estimates(g.group_id).get(kind)
                if how == "history" and estimate is not None:
                    self._audit(g.group_id, "profile", f"{kind}: history replaces sampling ({estimate.detail})")

    def _sample_script(self, group_id: str, kind: str, expected: str) -> bool:
        """Whether the submitter's sample script exists and is the one the user's job names (`p=` tag)."""
        if not expected:
            return False
        text = self.read_text(sample_script_path(self.site, group_id, kind))
        if text is None or script_hash(text) != expected:
            self._audit(group_id, "profile", f"{kind}: no sample script matching p={expected} in the spool: "
                        "not sampled" if text is None else
                        f"{kind}: sample script in the spool does not match p={expected}: not sampled")
            return False
        self._scripts[(group_id, kind)] = text
        return True

    # ------------------------------------------------------------------------------------------ samples

    def _replay_and_submit(self, obs: Observation, rows: Mapping[str, SampleRow], requests: list[SampleRequest],
                           now: float) -> None:
        """Submit what the profiler asks for, except samples the store already knows (an earlier life): those
        finished are replayed into the profiler, which may then ask for the next ones."""
        while requests:
            replayed = False
            for request in requests:
                self._requests[request.sample_id] = request
                row = rows.get(request.sample_id)
                if row is None:
                    self._submit(obs, request, now)
                elif row.state == "done" and row.seconds is not None:
                    self.profiler.observe(row.sample_id, row.seconds, step_seconds=row.step_seconds)
                    replayed = True
                elif row.state == "cut" and row.seconds is not None:
                    self.profiler.observe(row.sample_id, row.seconds, finished=False, steps_done=row.steps_done)
                    replayed = True
                elif row.state == "failed":
                    self.profiler.abandon(row.sample_id)
                    replayed = True
            requests = self.profiler.plan([], now) if replayed else []

    def _submit(self, obs: Observation, request: SampleRequest, now: float) -> None:
        user = self._users.get(request.group_id, "")
        script = self._scripts.get((request.group_id, request.kind))
        options = self._overrides(request)
        what = f"sample {request.index} of {request.kind} ({request.steps} steps, QOS {options[0].split('=', 1)[1]})"
        if self.dry_run:
            self._audit(request.group_id, "profile", f"would submit {what}")
            return
        row = SampleRow(request.sample_id, request.group_id, request.kind, request.steps, None, "submitting", now)
        self.store.put_sample(row, now)  # the intent, durable before sbatch
        try:
            if script is None or not user:
                raise SlurmError(["sbatch"], None, "no verified sample script")
            job_id = self.submit(user, script, options)
        except SlurmUnavailable:
            raise  # unknown whether it went through: the row stays `submitting`, squeue tells next cycle
        except SlurmError as exc:
            self.store.put_sample(replace(row, state="failed"), now)
            self.profiler.abandon(request.sample_id)
            self._audit(request.group_id, "error", f"{what} not submitted: {' '.join(str(exc).split())}; "
                        f"{request.kind} keeps its declared estimate")
            return
        self.store.put_sample(replace(row, job_id=job_id, state="submitted"), now)
        self._audit(request.group_id, "profile", f"submitted {what} as job {job_id}")

    def _overrides(self, request: SampleRequest) -> list[str]:
        """The sample's sbatch overrides; without the profiling QOS on this site, the group's own QOS (no cap)."""
        options = request.sbatch_overrides()
        if self.qos_missing:
            qos = self._qos.get(request.group_id)
            options = [f"--qos={qos}" if o.startswith("--qos=") and qos else o for o in options]
        return options

    def check_qos(self) -> None:
        """Whether the site defines the profiling QOS (`sacctmgr show qos`); warn once and fall back if not."""
        transport = getattr(self.adapter, "transport", None)
        if transport is None:
            return
        try:
            result = transport.run(["sacctmgr", "-n", "-P", "show", "qos", "format=name"], timeout=30.0)
        except SlurmError:
            return
        names = result.stdout.split()
        if result.returncode == 0 and names and self.params.qos not in names:
            self.qos_missing = True
            log.warning("profiling: QOS %r is not defined; samples run under their group's QOS, without a cap "
                        "(define it: sacctmgr add qos %s Priority=... GrpTRES=cpu=N)", self.params.qos,
                        self.params.qos, extra={"event": "profile"})

    def _follow_samples(self, obs: Observation, now: float) -> None:
        """Adopt, read, cut and close the samples the store has open."""
        running: dict[str, float] = {}
        open_rows = {sid: row for sid, row in self.store.samples().items() if row.state in _OPEN}
        for sid, row in open_rows.items():
            if row.state == "submitting":
                row = self._adopt(obs, row, now)
                if row.state == "submitting":
                    continue
            assert row.job_id is not None
            job = obs.jobs.get(row.job_id)
            if job is None and now - row.created < VISIBLE_AFTER_S:
                continue  # submitted after this cycle's snapshot was taken
            group = obs.view.groups.get(row.group_id)
            if row.state == "cutting":
                self._cut(row, job, now)
            elif job is not None and job.state.is_active:
                if group is None or group.state not in _WAITING:
                    self._close(row, job, now, "failed", f"its group left the queue: cancelled sample job {row.job_id}")
                elif job.start_time and job.state is not VariantState.PENDING:
                    running[sid] = float(job.start_time)
            else:
                self._finished(row, job, now)
        for sid in self.profiler.to_cut(running, now):
            row = open_rows[sid]
            self.store.put_sample(replace(row, state="cutting"), now)
            self._cut(row, obs.jobs.get(row.job_id or 0), now)

    def _adopt(self, obs: Observation, row: SampleRow, now: float) -> SampleRow:
        """A sample whose sbatch answer was lost: find it by its comment, else submit it again (once)."""
        tag = _sample_tag(row.sample_id)
        user = self._users.get(row.group_id)
        found = [j for j in obs.jobs.values() if j.comment.startswith(tag) and (user is None or j.user == user)]
        if found:
            job = min(found, key=lambda j: j.job_id)
            adopted = replace(row, job_id=job.job_id, state="submitted")
            self.store.put_sample(adopted, now)
            self._audit(row.group_id, "profile", f"sample {row.sample_id} found in squeue as job {job.job_id}")
            return adopted
        request = self._requests.get(row.sample_id)
        if row.created >= now or self.dry_run or request is None:
            return row  # written this cycle (sbatch unavailable just now): squeue decides next cycle
        user = self._users.get(row.group_id, "")
        script = self._scripts.get((row.group_id, row.kind))
        try:
            if script is None or not user:
                raise SlurmError(["sbatch"], None, "no verified sample script")
            job_id = self.submit(user, script, self._overrides(request))
        except SlurmUnavailable:
            raise
        except SlurmError as exc:
            failed = replace(row, state="failed")
            self.store.put_sample(failed, now)
            self.profiler.abandon(row.sample_id)
            self._audit(row.group_id, "error", f"sample {row.sample_id} not resubmitted: {exc}")
            return failed
        submitted = replace(row, job_id=job_id, state="submitted", created=now)
        self.store.put_sample(submitted, now)
        self._audit(row.group_id, "profile", f"sample {row.sample_id} was never submitted: submitted as job {job_id}")
        return submitted

    def _finished(self, row: SampleRow, job: SlurmJob | None, now: float) -> None:
        spool = group_spool(self.site, row.group_id)
        assert row.job_id is not None
        seconds = sample_wall_seconds(spool, row.job_id)
        step_seconds = sample_step_seconds(spool, row.job_id)
        if seconds is None and job is not None and job.state is VariantState.COMPLETED \
                and job.start_time and job.end_time:
            seconds = float(job.end_time - job.start_time)  # no spool timing: Slurm's whole seconds
        if seconds is None and job is None:
            try:
                records = self.adapter.accounting(job_ids=[row.job_id], since="now-7days")
            except SlurmError:
                records = []
            done = [r for r in records if r.state is VariantState.COMPLETED and r.elapsed_s > 0]
            seconds = float(done[0].elapsed_s) if done else None
        if seconds is None:
            state = job.state_text if job is not None else "gone from squeue and sacct"
            self.profiler.abandon(row.sample_id)
            self.store.put_sample(replace(row, state="failed"), now)
            self._audit(row.group_id, "error", f"sample {row.sample_id} (job {row.job_id}) ended {state} without "
                        f"a timing: {row.kind} keeps its declared estimate")
            return
        self.profiler.observe(row.sample_id, seconds, step_seconds=step_seconds)
        self.store.put_sample(replace(row, state="done", seconds=seconds, step_seconds=step_seconds), now)
        self._audit(row.group_id, "profile", f"sample {row.sample_id} (job {row.job_id}, {row.steps} steps) took "
                    f"{seconds:.2f}s" + (f", {step_seconds:.4g} s/step" if step_seconds else ""))

    def _cut(self, row: SampleRow, job: SlurmJob | None, now: float) -> None:
        """Cancel a sample that already shows its variant is long; its time so far is a lower bound."""
        assert row.job_id is not None
        if job is not None and job.state.is_active:
            self.adapter.cancel([row.job_id])
        started = float(job.start_time) if job is not None and job.start_time else row.created
        progress = _read_progress(Path(group_spool(self.site, row.group_id)) / f"progress-{row.job_id}.json")
        step = progress.get("step") if progress else None
        done = step if isinstance(step, int) else 0
        seconds = max(0.0, now - started)
        self.profiler.observe(row.sample_id, seconds, finished=False, steps_done=done)
        self.store.put_sample(replace(row, state="cut", seconds=seconds, steps_done=done), now)
        self._audit(row.group_id, "profile", f"cut sample {row.sample_id} (job {row.job_id}) after {seconds:.0f}s "
                    f"at step {done}: far slower than its sibling's")

    def _close(self, row: SampleRow, job: SlurmJob, now: float, state: str, why: str) -> None:
        if not self.dry_run:
            self.adapter.cancel([job.job_id])
        self.store.put_sample(replace(row, state=state), now)
        self.profiler.abandon(row.sample_id)
        self._audit(row.group_id, "profile", why)

    # ------------------------------------------------------------------------------------------ progress

    def _feed_progress(self, obs: Observation, now: float) -> None:
        """A running variant's progress file (or, without one, its elapsed time) updates its estimate."""
        for group in obs.view.running_groups():
            variant = group.running_variant()
            if variant is None or variant.job_id is None or variant.start_time is None:
                continue
            if not self.profiler.known(group.group_id):
                continue
            data = _read_progress(Path(group_spool(self.site, group.group_id)) / f"progress-{variant.job_id}.json")
            step, total, rate = (data or {}).get("step"), (data or {}).get("total"), (data or {}).get("rate")
            elapsed = max(0.0, now - variant.start_time)
            report = ProgressReport(step if isinstance(step, int) else 0,
                                    total if isinstance(total, int) else 0, elapsed,
                                    float(rate) if isinstance(rate, int | float) and rate > 0 else None)
            self.profiler.on_progress(group.group_id, variant.kind, report)

    # ------------------------------------------------------------------------------------------ the view

    def _view(self, view: ClusterView) -> ClusterView:
        """Estimates into the variants; pending groups still profiling left out of the policy's sight."""
        groups: dict[str, Group] = {}
        changed = False
        for gid, group in view.groups.items():
            if not self.profiler.known(gid):
                groups[gid] = group
                continue
            if group.state in _WAITING and not self.profiler.ready(gid):
                changed = True
                continue
            estimates = self.profiler.estimates(gid)
            variants = tuple(replace(v, estimate_s=estimates[v.kind].seconds)
                             if v.kind in estimates and v.estimate_s != estimates[v.kind].seconds else v
                             for v in group.variants)
            if any(a is not b for a, b in zip(variants, group.variants, strict=True)):
                group = replace(group, variants=variants)
                changed = True
            groups[gid] = group
        if not changed:
            return view
        return ClusterView(now=view.now, nodes=view.nodes, partitions=view.partitions, groups=groups,
                           kinds=view.kinds)

    def _record(self, view: ClusterView, now: float) -> None:
        """Changed estimates into the store and the audit log; groups done profiling announced; gone ones forgotten."""
        rows: list[EstimateRow] = []
        for gid in list(self._users):
            if gid not in view.groups:
                continue
            if gid not in self._ready and self.profiler.ready(gid):
                self._ready.add(gid)
                spent, fraction = self.profiler.overhead(gid)
                if spent > 0:
                    self._audit(gid, "profile", f"profiling done: samples ran {spent:.1f}s, {fraction:.2%} of the "
                                "fastest estimate; ready for the policy")
            for kind, estimate in self.profiler.estimates(gid).items():
                if self._worth_recording(gid, kind, estimate):
                    rows.append(EstimateRow(gid, kind, estimate.seconds, estimate.source.value,
                                            estimate.uncertainty, estimate.lower_bound, estimate.detail, now))
                    self._audit(gid, "estimate", describe(kind, estimate))
        if rows and not self.dry_run:
            self.store.put_estimates(rows)

    def _forget_gone(self, view: ClusterView) -> None:
        """Groups that left the snapshot (finished, cancelled, forgotten by squeue) leave the profiler too."""
        gone = [gid for gid in self._users if gid not in view.groups]
        if not gone:
            return
        self.profiler.forget(gone)
        if not self.dry_run:
            self.store.forget_profiles(gone)  # the audit log keeps their story for `slurmx explain`
        for gid in gone:
            self._users.pop(gid, None)
            self._ready.discard(gid)
        self._audited = {k: v for k, v in self._audited.items() if k[0] in self._users}
        self._scripts = {k: v for k, v in self._scripts.items() if k[0] in self._users}
        self._qos = {k: v for k, v in self._qos.items() if k in self._users}
        self._requests = {k: v for k, v in self._requests.items() if k.rsplit(".", 2)[0] in self._users}

    def _worth_recording(self, gid: str, kind: str, estimate: Estimate) -> bool:
        last = self._audited.get((gid, kind))
        source = estimate.source.value + ("+" if estimate.lower_bound else "")
        if last is not None and last[0] == source and \
                abs(estimate.seconds - last[1]) <= AUDIT_CHANGE * max(last[1], 1e-9):
            return False
        self._audited[(gid, kind)] = (source, estimate.seconds)
        return True


def describe(kind: str, estimate: Estimate) -> str:
    """One line for `slurmx explain`: `cpu: 1234s ±11% from sample (detail)`."""
    bound = "at least " if estimate.lower_bound else ""
    spread = "" if math.isnan(estimate.uncertainty) else f" ±{estimate.uncertainty:.0%}"
    return f"{kind}: {bound}{estimate.seconds:.0f}s{spread} from {estimate.source.value} ({estimate.detail})"
