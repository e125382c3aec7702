"""The sample lifecycle of slurmxd's profiling stage: submit as the group's user, follow, cut, close.

Crash safety: a sample's row is written (state `submitting`) before its `sbatch`; a daemon restarted before the
job id was recorded finds the job by its `slurmx-sample:` comment in squeue instead of submitting it twice, and one
restarted later replays finished samples from the store into a fresh profiler (the sample plan is deterministic).
"""

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from slurmx.core.config import SiteConfig
from slurmx.core.model import GroupState, VariantState
from slurmx.core.spool import group_spool
from slurmx.daemon.observe import Observation
from slurmx.daemon.store import SampleRow, Store
from slurmx.profile.profiler import Profiler
from slurmx.profile.readings import read_spool_json, sample_step_seconds, sample_wall_seconds
from slurmx.profile.sampling import SAMPLE_TAG, SampleRequest, SamplingParams
from slurmx.slurm import CliSlurm, SlurmAdapter, SlurmError
from slurmx.slurm.errors import SlurmUnavailable
from slurmx.slurm.records import SlurmJob
from slurmx.slurm.transport import CommandResult, Transport

__all__ = ["WAITING", "AuditRow", "RunAsUser", "SampleLifecycle", "SubmitAs", "read_progress", "submit_as_user"]

log = logging.getLogger("slurmxd")

AuditRow = tuple[float, int, str, str, str]
SubmitAs = Callable[[str, str, Sequence[str]], int]  # (user, script, sbatch options) -> job id
_OPEN = ("submitting", "submitted", "cutting")
WAITING = (GroupState.PENDING, GroupState.REQUEUED)
VISIBLE_AFTER_S = 30.0  # a sample missing from squeue this soon after sbatch was submitted after the snapshot


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
    """sbatch as the group's user over the daemon's own transport. An adapter without a transport (pyslurm) cannot
    run a command as another user, so it submits nothing: a sample is the user's code and never runs as the
    daemon's own user (the group keeps its declared estimates)."""
    transport = getattr(adapter, "transport", None)
    retry = getattr(adapter, "retry", None)

    def submit(user: str, script: str, options: Sequence[str]) -> int:
        if transport is None:
            raise SlurmError(["sbatch"], None, f"cannot submit as {user}: this Slurm adapter has no transport to run "
                             "runuser over, and a sample never runs as the daemon's own user")
        return CliSlurm(RunAsUser(transport, user), retry).submit(script, options)

    return submit

def _sample_tag(request_id: str) -> str:
    group_id, kind, index = request_id.rsplit(".", 2)
    return f"{SAMPLE_TAG}g={group_id},v={kind},s={index},"


def read_progress(path: Path, owner: int | None) -> Mapping[str, object] | None:
    """A job's progress file from its group's folder: the user's file, so read as hostile (`read_spool_json`)."""
    return read_spool_json(path, owner)


class SampleLifecycle:
    """Submitting and following samples: the half of `ProfilingStage` that talks to Slurm about samples."""

    site: SiteConfig
    adapter: SlurmAdapter
    store: Store
    dry_run: bool
    params: SamplingParams
    profiler: Profiler
    submit: SubmitAs
    qos_missing: bool
    _users: dict[str, str]
    _uids: dict[str, int]  # group -> its submitter's uid (Slurm's UserId): who its spool files must belong to
    _qos: dict[str, str]
    _requests: dict[str, SampleRequest]
    _scripts: dict[tuple[str, str], str]
    _rows: list[AuditRow]
    _cycle: int
    _now: float

    def _audit(self, group_id: str, event: str, detail: str) -> None:
        self._rows.append((self._now, self._cycle, group_id, event, detail))

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
                if group is None or group.state not in WAITING:
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
        owner = self._uids.get(row.group_id)
        seconds = sample_wall_seconds(spool, row.job_id, owner)
        step_seconds = sample_step_seconds(spool, row.job_id, owner)
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
        progress = read_progress(Path(group_spool(self.site, row.group_id)) / f"progress-{row.job_id}.json",
                                 self._uids.get(row.group_id))
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
