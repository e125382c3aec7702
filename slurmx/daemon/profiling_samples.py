"""The sample lifecycle of slurmxd's profiling stage: release what the user queued, follow, cut, close.

Samples are the user's code, so the user's own `slurmx submit` queues them, held, beside the variants
(`slurmx.profile.sampling.sample_requests`, the plan the daemon's profiler makes too). The daemon only releases,
reads and cancels them: it needs no root and runs nobody's script as anyone. Before a release it checks the
queued job against the plan and the group's own variant (user, tag, steps, QOS, time limit, resources), so a user
cannot get a bigger job started under the high-priority profiling QOS by faking a sample.

Crash safety: a sample's row (with its job id) is written before the release; a daemon restarted after a lost
answer sees the sample still held and releases it again, and one restarted later replays finished samples from
the store into a fresh profiler (the sample plan is deterministic).

A sample's timings are the user's claims (its comment, its files): each is finite and within the sample's time
limit, or not a timing (`readings.bounded_seconds`). Each sample's handling runs under the stage's per-group
isolation (`profiling_isolation`), so one group's sample that raises sets that group aside, not the cycle.
"""

import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from slurmx.core.config import SiteConfig
from slurmx.core.model import GroupState, VariantState
from slurmx.core.resources import Resources
from slurmx.core.spool import group_spool
from slurmx.daemon.observe import Observation
from slurmx.daemon.profiling_isolation import Isolation
from slurmx.daemon.store import SampleRow, Store
from slurmx.profile.estimator import MAX_ESTIMATE_S
from slurmx.profile.profiler import Profiler
from slurmx.profile.readings import (
    bounded_seconds,
    progress_report,
    read_spool_json,
    sample_step_seconds,
    sample_wall_seconds,
)
from slurmx.profile.sampling import SAMPLE_TAG, SEARCH_INDEX, SampleRequest, SamplingParams, sample_fields
from slurmx.slurm import SlurmAdapter, SlurmError
from slurmx.slurm.errors import SlurmUnavailable
from slurmx.slurm.records import SlurmJob

__all__ = ["WAITING", "AuditRow", "QueuedSample", "SampleLifecycle", "read_progress", "reported_timing",
           "sample_mismatch"]

log = logging.getLogger("slurmxd")

AuditRow = tuple[float, int, str, str, str]
_OPEN = ("submitting", "submitted", "cutting")
WAITING = (GroupState.PENDING, GroupState.REQUEUED)
VISIBLE_AFTER_S = 30.0  # a sample missing from squeue this soon after its release or submission is not gone yet


def reported_timing(comment: str, limit_s: float) -> tuple[float | None, float | None]:
    """(wall seconds, seconds per step) the sample appended to its comment when it ended (`slurmx.hooks.sample`):
    the user's claim, like the files it replaces, so only finite values within the sample's time limit count."""
    fields = sample_fields(comment) or {}
    wall = bounded_seconds(fields.get("t"), limit_s)
    return wall, bounded_seconds(fields.get("ps"), limit_s) if wall is not None else None


class QueuedSample(NamedTuple):
    """A sample job of the snapshot and the fields of its comment."""

    fields: dict[str, str]
    job: SlurmJob


def sample_mismatch(job: SlurmJob, request: SampleRequest, variant: Resources, partition: str, qos: str) -> str:
    """Why a queued sample is not the planned one (empty: it is). The user made it, so all of it is checked: a
    bigger or longer job must not start under the profiling QOS. A run-time sample asks for exactly its
    variant's request; a sensitivity sample for `search_cpus` CPUs with the variant's memory and GRES."""
    if job.qos != qos:
        return f"QOS {job.qos!r}, not {qos!r}"
    if job.time_limit_s is None or job.time_limit_s > request.time_limit_rounded_s:
        return f"time limit {job.time_limit_s}s over the plan's {request.time_limit_rounded_s}s"
    if job.partition != partition:
        return f"partition {job.partition!r}, not its variant's {partition!r}"
    want, whose = (Resources(request.search_cpus, variant.mem_mb, dict(variant.gres)), "the search's") \
        if request.search_cpus else (variant, "its variant's")
    if job.request != want:
        return f"request {job.request}, not {whose} {want}"
    return ""


def _sample_tag(request_id: str) -> str:
    group_id, kind, index = request_id.rsplit(".", 2)
    return f"{SAMPLE_TAG}g={group_id},v={kind},s={index},"


def read_progress(path: Path, owner: int | None) -> Mapping[str, object] | None:
    """A job's progress file from its group's folder: the user's file, so read as hostile (`read_spool_json`)."""
    return read_spool_json(path, owner)


class SampleLifecycle:
    """Releasing and following samples: the half of `ProfilingStage` that talks to Slurm about samples."""

    site: SiteConfig
    adapter: SlurmAdapter
    store: Store
    params: SamplingParams
    profiler: Profiler
    qos_missing: bool
    _users: dict[str, str]
    _uids: dict[str, int]  # group -> its submitter's uid (Slurm's UserId): who its spool files must belong to
    _qos: dict[str, str]
    _variants: dict[tuple[str, str], SlurmJob]  # (group, kind) -> the variant a sample must match
    sample_jobs: dict[tuple[str, str], list[QueuedSample]]  # this cycle's sample jobs by (group, kind)
    _requests: dict[str, SampleRequest]
    _rows: list[AuditRow]
    _cycle: int
    _now: float
    isolation: Isolation

    def _audit(self, group_id: str, event: str, detail: str) -> None:
        self._rows.append((self._now, self._cycle, group_id, event, detail))

    def _replay_and_submit(self, obs: Observation, rows: Mapping[str, SampleRow], requests: list[SampleRequest],
                           now: float) -> None:
        """Release what the profiler asks for, except samples the store already knows (an earlier life): those
        finished are replayed into the profiler, which may then ask for the next ones."""
        while requests:
            replayed = False
            for request in requests:
                with self.isolation.group(request.group_id, "releasing samples"):
                    replayed = self._replay_or_release(obs, request, rows.get(request.sample_id), now) or replayed
            requests = self.profiler.plan([], now) if replayed else []

    def _replay_or_release(self, obs: Observation, request: SampleRequest, row: SampleRow | None,
                           now: float) -> bool:
        """Release the sample, or replay what the store knows of it; whether the profiler learnt something."""
        self._requests[request.sample_id] = request
        if row is None:
            self._release(obs, request, now)
        elif row.state == "done" and row.seconds is not None:
            self.profiler.observe(row.sample_id, row.seconds, step_seconds=row.step_seconds)
        elif row.state == "cut" and row.seconds is not None:
            self.profiler.observe(row.sample_id, row.seconds, finished=False, steps_done=row.steps_done)
        elif row.state == "failed":
            self.profiler.abandon(row.sample_id)
        else:
            return False
        return True

    def index_samples(self, obs: Observation) -> None:
        """Every sample job of the snapshot by (group, kind), its comment read once: registration, release, the
        search and the clean-up all look samples up, and a scan of the whole queue per group would grow with
        groups x jobs."""
        index: dict[tuple[str, str], list[QueuedSample]] = {}
        for job in obs.jobs.values():
            fields = sample_fields(job.comment)
            if fields is not None:
                index.setdefault((fields.get("g", ""), fields.get("v", "")), []).append(QueuedSample(fields, job))
        for found in index.values():
            found.sort(key=lambda q: q.job.comment)
        self.sample_jobs = index

    def queued_samples(self, group_id: str, kind: str, *, held: bool = True, search: bool = False) \
            -> list[SlurmJob]:
        """The samples the group's user queued for this variant (`slurmx submit`), lowest index first: the
        run-time samples, or (`search`) the sensitivity sample; those still held, or (`held=False`) in any state,
        e.g. released by this daemon's previous life."""
        user = self._users.get(group_id)
        return [q.job for q in self.sample_jobs.get((group_id, kind), ())
                if (q.fields.get("s") == str(SEARCH_INDEX)) is search and q.job.user == user
                and (q.job.state is VariantState.HELD or not held)]

    def _release(self, obs: Observation, request: SampleRequest, now: float) -> None:
        what = f"sample {request.index} of {request.kind} ({request.steps} steps, QOS {self._qos_of(request)})"
        tag = request.comment
        job = next((j for j in self.queued_samples(request.group_id, request.kind) if j.comment == tag), None)
        if job is None:
            self._fail(SampleRow(request.sample_id, request.group_id, request.kind, request.steps, None, "failed",
                                 now), f"no queued {what} (`slurmx submit` queues it held beside the variants): "
                                 f"{request.kind} keeps its declared estimate")
            return
        problem = self._mismatch(job, request)
        if problem:
            self.adapter.cancel([job.job_id])
            self._fail(SampleRow(request.sample_id, request.group_id, request.kind, request.steps, job.job_id,
                                 "failed", now), f"cancelled queued {what}, job {job.job_id}: {problem}; "
                                 f"{request.kind} keeps its declared estimate")
            return
        row = SampleRow(request.sample_id, request.group_id, request.kind, request.steps, job.job_id, "submitted",
                        now)
        self.store.put_sample(row, now)  # the intent, durable before the release (a lost answer: released again)
        self.adapter.release([job.job_id])
        self._audit(request.group_id, "profile", f"released {what}, job {job.job_id}")

    def _fail(self, row: SampleRow, why: str) -> None:
        self.store.put_sample(row, self._now)
        self.profiler.abandon(row.sample_id)
        self._audit(row.group_id, "error", why)

    def _qos_of(self, request: SampleRequest) -> str:
        """The profiling QOS; without it on this site, the group's own QOS (no cap)."""
        return self._qos.get(request.group_id, request.qos) if self.qos_missing else request.qos

    def _mismatch(self, job: SlurmJob, request: SampleRequest) -> str:
        """Why a queued sample is not the one the plan and the group's variant say (empty: it is)."""
        variant = self._variants.get((request.group_id, request.kind))
        if variant is None:
            return "its variant is not in the queue"
        return sample_mismatch(job, request, variant.request, variant.partition, self._qos_of(request))

    def cancel_unneeded(self, obs: Observation, now: float) -> None:
        """Cancel queued samples nothing will release: their group left the queue or was never a group, or the
        profiler no longer wants them (history answered, a sibling was cut, profiling is done)."""
        doomed: list[int] = []
        for fields, job in (q for found in self.sample_jobs.values() for q in found):
            if job.state is not VariantState.HELD:
                continue
            gid = fields.get("g", "")
            with self.isolation.group(gid, "cancelling unneeded samples"):
                if self._unneeded(obs, fields, job, now):
                    doomed.append(job.job_id)
        if doomed:
            try:
                self.adapter.cancel(doomed)
            except SlurmUnavailable:
                raise
            except SlurmError as exc:
                log.warning("profiling: cancelling %d unneeded sample(s) failed: %s", len(doomed), exc,
                            extra={"event": "profile"})

    def _unneeded(self, obs: Observation, fields: Mapping[str, str], job: SlurmJob, now: float) -> bool:
        gid = fields.get("g", "")
        group = obs.view.groups.get(gid)
        if job.submit_time is None or now - job.submit_time < VISIBLE_AFTER_S:
            return False  # `slurmx submit` queues samples before the variants: give it time to finish
        orphan = group is None or group.state not in WAITING or job.user != self._users.get(gid, job.user)
        sample_id = f"{gid}.{fields.get('v')}.{fields.get('s')}"
        search = fields.get("s") == str(SEARCH_INDEX)  # released or given up by profiling_search
        unwanted = self.profiler.known(gid) and not search and not self.profiler.wants(sample_id)
        return orphan or unwanted

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
        open_rows = {sid: row for sid, row in self.store.samples().items()
                     if row.state in _OPEN and not sid.endswith(f".{SEARCH_INDEX}")}  # searches: profiling_search
        for sid, row in open_rows.items():
            if row.group_id in self.isolation:
                continue
            with self.isolation.group(row.group_id, "following samples"):
                started = self._follow(obs, row, now)
                if started is not None:
                    running[sid] = started
        for sid in self.profiler.to_cut(running, now):
            row = open_rows[sid]
            with self.isolation.group(row.group_id, "cutting samples"):
                self.store.put_sample(replace(row, state="cutting"), now)
                self._cut(row, obs.jobs.get(row.job_id or 0), now)

    def _follow(self, obs: Observation, row: SampleRow, now: float) -> float | None:
        """One open sample advanced on this snapshot; its start time if it runs (a candidate for a cut)."""
        if row.state == "submitting":
            row = self._adopt(obs, row, now)
            if row.state == "submitting":
                return None
        assert row.job_id is not None
        job = obs.jobs.get(row.job_id)
        if job is None and now - row.created < VISIBLE_AFTER_S:
            return None  # submitted after this cycle's snapshot was taken
        group = obs.view.groups.get(row.group_id)
        if job is not None and job.state is VariantState.HELD and row.state == "submitted" \
                and row.created < now and group is not None and group.state in WAITING:
            self.adapter.release([job.job_id])  # the release's answer was lost (or an admin held it)
            return None
        if row.state == "cutting":
            self._cut(row, job, now)
        elif job is not None and job.state.is_active:
            if group is None or group.state not in WAITING:
                self._close(row, job, now, "failed", f"its group left the queue: cancelled sample job {row.job_id}")
            elif job.start_time and job.state is not VariantState.PENDING:
                return float(job.start_time)
        else:
            self._finished(row, job, now)
        return None

    def _adopt(self, obs: Observation, row: SampleRow, now: float) -> SampleRow:
        """A sample row without a job id (written by an older slurmxd before its sbatch): find the job by its
        comment; if there is none, the sample is given up (the variant keeps its declared estimate)."""
        tag = _sample_tag(row.sample_id)
        user = self._users.get(row.group_id)
        found = [j for j in obs.jobs.values() if j.comment.startswith(tag) and (user is None or j.user == user)]
        if found:
            job = min(found, key=lambda j: j.job_id)
            adopted = replace(row, job_id=job.job_id, state="submitted")
            self.store.put_sample(adopted, now)
            self._audit(row.group_id, "profile", f"sample {row.sample_id} found in squeue as job {job.job_id}")
            return adopted
        if row.created >= now:
            return row
        failed = replace(row, state="failed")
        self.store.put_sample(failed, now)
        self.profiler.abandon(row.sample_id)
        self._audit(row.group_id, "error", f"sample {row.sample_id} is not in the queue: {row.kind} keeps its "
                    "declared estimate")
        return failed

    def _timing(self, row: SampleRow, job: SlurmJob | None) -> tuple[float | None, float | None, str]:
        """(wall s, s per step, where from): the sample's own report in its comment, else its spool files (a
        daemon that may read the user's folder), else Slurm's whole seconds (squeue, or sacct once it is gone)."""
        assert row.job_id is not None
        limit = self._sample_limit(row, job)
        if job is not None:
            seconds, step_seconds = reported_timing(job.comment, limit)
            if seconds is not None:
                return seconds, step_seconds, "reported by the sample"
        spool, owner = group_spool(self.site, row.group_id), self._uids.get(row.group_id)
        seconds = sample_wall_seconds(spool, row.job_id, owner, limit_s=limit)
        if seconds is not None:
            return seconds, sample_step_seconds(spool, row.job_id, owner, limit_s=limit), "from its spool files"
        if job is not None:
            done = job.state is VariantState.COMPLETED and job.start_time and job.end_time
            return (float(job.end_time - job.start_time) if done else None), None, "Slurm's whole seconds"  # type: ignore[operator]
        try:
            records = self.adapter.accounting(job_ids=[row.job_id], since="now-7days")
        except SlurmError:
            records = []
        for record in records:
            if record.state is VariantState.COMPLETED:
                seconds, step_seconds = reported_timing(record.comment, float(record.elapsed_s) + 60.0)
                if seconds is not None:
                    return seconds, step_seconds, "reported by the sample"
                if record.elapsed_s > 0:
                    return float(record.elapsed_s), None, "sacct's whole seconds"
        return None, None, ""

    def _sample_limit(self, row: SampleRow, job: SlurmJob | None) -> float:
        """The longest a sample can have run: its time limit in Slurm (else the plan's), plus a minute of slack
        (Slurm's kill is not instantaneous). Timings beyond it are claims, not measurements."""
        if job is not None and job.time_limit_s:
            return float(job.time_limit_s) + 60.0
        request = self._requests.get(row.sample_id)
        return float(request.time_limit_rounded_s) + 60.0 if request is not None else MAX_ESTIMATE_S

    def _finished(self, row: SampleRow, job: SlurmJob | None, now: float) -> None:
        seconds, step_seconds, source = self._timing(row, job)
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
                    f"{seconds:.2f}s" + (f", {step_seconds:.4g} s/step" if step_seconds else "") + f" ({source})")

    def _cut(self, row: SampleRow, job: SlurmJob | None, now: float) -> None:
        """Cancel a sample that already shows its variant is long; its time so far is a lower bound."""
        assert row.job_id is not None
        if job is not None and job.state.is_active:
            self.adapter.cancel([row.job_id])
        started = float(job.start_time) if job is not None and job.start_time else row.created
        progress = read_progress(Path(group_spool(self.site, row.group_id)) / f"progress-{row.job_id}.json",
                                 self._uids.get(row.group_id))
        seconds = max(0.0, now - started)
        report = progress_report(progress, seconds)
        done = 0 if isinstance(report, str) else report.step  # a refused file: how far it got is unknown
        self.profiler.observe(row.sample_id, seconds, finished=False, steps_done=done)
        self.store.put_sample(replace(row, state="cut", seconds=seconds, steps_done=done), now)
        self._audit(row.group_id, "profile", f"cut sample {row.sample_id} (job {row.job_id}) after {seconds:.0f}s "
                    f"at step {done}: far slower than its sibling's")

    def _close(self, row: SampleRow, job: SlurmJob, now: float, state: str, why: str) -> None:
        self.adapter.cancel([job.job_id])
        self.store.put_sample(replace(row, state=state), now)
        self.profiler.abandon(row.sample_id)
        self._audit(row.group_id, "profile", why)

    # ------------------------------------------------------------------------------------------ progress
