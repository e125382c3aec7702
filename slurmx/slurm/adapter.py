"""The Slurm adapter: one protocol for everything slurmx asks of Slurm, and its command-line implementation.

Every control call takes many job ids at once (one `scontrol hold 1,2,3` instead of three), because the daemon
acts on batches. Reads and idempotent controls are retried with exponential backoff while slurmctld is
unreachable; a submission is retried only when Slurm says it never reached the controller, so a retry can
never duplicate a job.
Long because the protocol and its one implementation are read side by side: each call's retry rule, its batching,
how an array task is named (`A_i`) and how a full squeue read streams sit next to the command they shape.
"""

from __future__ import annotations

import posixpath
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, TypeVar

from slurmx.core.arrays import is_task_key, job_text, split_key, task_key
from slurmx.core.model import Node, Partition
from slurmx.core.ownership import FolderOwner
from slurmx.core.userfiles import missing_spool_root, spool_root_problem
from slurmx.slurm.errors import (
    InvalidJobError,
    SlurmCommandError,
    SlurmError,
    SlurmParseError,
    SlurmUnavailable,
)
from slurmx.slurm.parse import parse_accounting, parse_jobs, parse_nodes, parse_partitions, parse_version
from slurmx.slurm.records import AccountingRecord, SlurmJob
from slurmx.slurm.squeue_narrow import NarrowRead, NarrowStream, narrow_argv, new_token, parse_narrow
from slurmx.slurm.stream_jobs import JobStream, NotStreamable
from slurmx.slurm.transport import CommandResult, Transport
from slurmx.slurm.versions import SlurmShape, shape_for, version_key

__all__ = ["CliSlurm", "FolderTaken", "JobUpdate", "RetryPolicy", "SlurmAdapter", "SpoolRootUnsafe",
           "spool_root_problem_via"]

T = TypeVar("T")

_UNAVAILABLE = re.compile(
    r"Unable to contact slurm controller|Connection refused|Socket timed out|Zero Bytes were transmitted"
    r"|Communication connection failure|Unable to connect to database|slurmdbd: Connection|"
    r"Slurm backup controller in standby mode|Transport endpoint is not connected",
    re.IGNORECASE,
)
_NEVER_SENT = re.compile(r"Unable to contact slurm controller \(connect failure\)|Connection refused", re.I)
_INVALID_JOB = re.compile(r"Invalid job id|Invalid job ID|Job has already finished|does not exist", re.I)
_NAMED_JOB = re.compile(r"\bjob (\d+(?:_\d+)?)\b", re.I)  # 24.11: "Invalid node name specified for job 7"
_FEW_JOBS = 100  # up to this many ids are named to squeue; more read the whole queue (argv stays short)
_FULL_BATCH = 500  # ids named to one `squeue --json --jobs` after a narrow read (`_jobs_narrow`)
_FULL_MAX = 5_000  # past this many, the narrow read is dropped and the whole queue read as JSON
_STDIN_WORD = re.compile(r"[^\s\"'#\\]+")  # what may go on one of scontrol's stdin lines as it is


@dataclass(frozen=True, slots=True)
class JobUpdate:
    """Fields `scontrol update` may change on a job; None leaves a field alone."""

    partition: str | None = None
    gres: str | None = None  # "gpu:1", "" clears
    cpus: int | None = None
    mem_mb: int | None = None
    priority: int | None = None
    nice: int | None = None
    nodelist: str | None = None  # "" clears
    comment: str | None = None
    begin: str | None = None  # StartTime: "now", "now+600", an ISO time
    mail_none: bool = False  # MailType=NONE: a sibling cancelled for the one that runs mails nobody (Slurm mails END)

    def assignments(self) -> list[str]:
        """`Key=value` words in the order Slurm accepts them one by one (partition before the GRES it allows)."""
        words = []
        if self.partition is not None:
            words.append(f"Partition={self.partition}")
        if self.gres is not None:
            words.append(f"Gres={self.gres}")
        if self.cpus is not None:
            words.append(f"NumCPUs={self.cpus}")
        if self.mem_mb is not None:
            words.append(f"MinMemoryNode={self.mem_mb}")  # scontrol wants plain MB here, not 700M
        if self.priority is not None:
            words.append(f"Priority={self.priority}")
        if self.nice is not None:
            words.append(f"Nice={self.nice}")
        if self.comment is not None:
            words.append(f"Comment={self.comment}")
        if self.begin is not None:
            words.append(f"StartTime={self.begin}")
        if self.mail_none:
            words.append("MailType=NONE")
        return words


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long to keep trying while slurmctld is unreachable: `retries` more attempts, doubling the wait."""

    retries: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    timeout_s: float = 30.0


class FolderTaken(SlurmCommandError):
    """The folder to create exists already."""


class SpoolRootUnsafe(SlurmCommandError):
    """The folder a group folder would be made in is not root's, not sticky, or a link; `message` says the fix."""


def spool_root_problem_via(transport: Transport, root: str, timeout: float = 30.0) -> str:
    """`spool_root_problem` of `root` as the host behind `transport` sees it ('' when safe).

    One `stat` of the path itself (never following a link) where the folders are made: the submit host may be a
    login node over SSH or a container, whose spool need not be this host's.
    """
    argv = ["stat", "-c", "%u %f", "--", root]
    result = transport.run(argv, timeout=timeout)
    words = result.stdout.split()
    if result.returncode != 0 or len(words) != 2 or not words[0].isdigit():
        said = " ".join((result.stderr.strip() or result.stdout.strip() or f"exit {result.returncode}").split())
        if "No such file" in said:
            return missing_spool_root(root)
        return missing_spool_root(root, f"`stat` said: {said[:200]}")
    try:
        mode = int(words[1], 16)
    except ValueError:
        return missing_spool_root(root, f"`stat` printed {result.stdout.strip()[:80]!r}")
    return spool_root_problem(root, int(words[0]), mode)


class SlurmAdapter(Protocol):
    """What slurmx needs from Slurm. Implementations: `CliSlurm` (any transport); pyslurm (optional)."""

    def version(self) -> str: ...
    def submit(self, script: str, options: Sequence[str]) -> int: ...
    def jobs(self, job_ids: Iterable[int] | None = None, user: str | None = None) -> list[SlurmJob]: ...
    def nodes(self) -> list[Node]: ...
    def partitions(self, kinds: Mapping[str, str] | None = None) -> list[Partition]: ...
    def accounting(self, job_ids: Iterable[int] | None = None, since: str = "now-1day") -> list[AccountingRecord]: ...
    def hold(self, job_ids: Iterable[int]) -> None: ...
    def release(self, job_ids: Iterable[int]) -> None: ...
    def requeue(self, job_ids: Iterable[int], hold: bool = False) -> None: ...
    def signal(self, job_ids: Iterable[int], signal: str, batch_only: bool = True) -> None: ...
    def cancel(self, job_ids: Iterable[int]) -> None: ...
    def update(self, job_ids: Iterable[int], change: JobUpdate) -> None: ...
    def update_each(self, changes: Sequence[tuple[int, JobUpdate]]) -> dict[int, SlurmError]: ...
    def command_counts(self) -> Mapping[str, int]: ...
    def make_private_folder(self, path: str, files: Mapping[str, str]) -> None: ...
    def folder_owners(self, paths: Sequence[str]) -> dict[str, FolderOwner | None]: ...


def _ids(job_ids: Iterable[int]) -> list[str]:
    """Distinct ids in first-seen order, as Slurm wants them: an array task's key as `A_i` (`core/arrays.py`)."""
    return [job_text(j) for j in dict.fromkeys(int(j) for j in job_ids)]


def _update_ids(job_ids: Iterable[int]) -> list[str]:
    """`_ids` for `scontrol update`, with the tasks of one array named together as `A_[0-5,9]`: Slurm updates an
    array's pending record whole when the list holds every index still in it (live, 24.11), where naming each
    `A_i` splits every one off into a record of its own. A list that holds only some of them splits those, as
    `A_i` each would; a lone task stays `A_i`."""
    plain: list[str] = []
    tasks: dict[int, list[int]] = {}
    for job_id in dict.fromkeys(int(j) for j in job_ids):
        if is_task_key(job_id):
            array_job_id, task_id = split_key(job_id)
            if array_job_id not in tasks:
                plain.append(f"{array_job_id}_")  # its place in the list; filled in below
            tasks.setdefault(array_job_id, []).append(task_id)
        else:
            plain.append(str(job_id))
    out = []
    for text in plain:
        if not text.endswith("_"):
            out.append(text)
            continue
        indices = sorted(tasks[int(text[:-1])])
        out.append(f"{text}{indices[0]}" if len(indices) == 1 else f"{text}[{_ranges(indices)}]")
    return out


def _ranges(indices: Sequence[int]) -> str:
    """Sorted distinct indices as Slurm's range list: [0, 1, 2, 5] -> `0-2,5`."""
    parts = []
    start = prev = indices[0]
    for index in [*indices[1:], -2]:
        if index != prev + 1:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = index
        prev = index
    return ",".join(parts)


def _key(text: str) -> int:
    """The id `_ids` wrote as `text`, back."""
    array_job_id, sep, task_id = text.partition("_")
    return task_key(int(array_job_id), int(task_id)) if sep else int(text)


class CliSlurm:
    """The adapter over Slurm's own command-line clients (squeue, sacct, scontrol, sbatch, scancel)."""

    # Every read parses Slurm's answer anew: the records a call returns are its caller's alone, to mark in place
    # (`daemon/lease.py` marks 200,000 waiting leases a cycle at 100,000 groups without copying them).
    fresh_records: ClassVar[bool] = True
    def __init__(self, transport: Transport, retry: RetryPolicy | None = None,
                 sleep: Callable[[float], None] = time.sleep, *, narrow_queue: bool = False) -> None:
        """`narrow_queue`: a whole-queue read is narrow (`squeue_narrow.py`) on Slurm 24.11+, whose `--json` can be
        asked for the jobs the narrow form cannot say in full; 22.05's `--json` ignores `--jobs`: JSON there."""
        self.transport = transport
        self.narrow_queue = narrow_queue
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._version: str | None = None
        self._shape: SlurmShape | None = None
        self._counts: Counter[str] = Counter()
        self._safe_roots: set[str] = set()  # spool roots found root-owned and sticky by make_private_folder

    def command_counts(self) -> Mapping[str, int]:
        """Slurm commands run so far, by command name (`squeue`, `scontrol`, ...), each retry counted: the load
        this adapter put on slurmctld, for metrics."""
        return dict(self._counts)

    # ------------------------------------------------------------------------------------------ plumbing

    def _run(self, argv: Sequence[str], stdin: str | None = None) -> CommandResult:
        self._counts[argv[0]] += 1
        return self.transport.run(argv, stdin=stdin, timeout=self.retry.timeout_s)

    def _call(self, argv: Sequence[str], stdin: str | None = None, *, retry: bool = True,
              retry_if: re.Pattern[str] = _UNAVAILABLE, check: bool = True) -> CommandResult:
        """Run one command; classify failures into the error tree; back off while Slurm is unreachable.

        `check=False` returns a failed result (unless Slurm is unreachable) for the caller to read."""
        delay = self.retry.backoff_s
        attempts = self.retry.retries + 1 if retry else 1
        for attempt in range(attempts):
            try:
                result = self._run(argv, stdin)
            except SlurmUnavailable:
                if attempt + 1 >= attempts or retry_if is _NEVER_SENT:
                    raise
            else:
                if result.returncode == 0:
                    return result
                error = self._classify(argv, result)
                if not check and not isinstance(error, SlurmUnavailable):
                    return result
                if not isinstance(error, SlurmUnavailable) or attempt + 1 >= attempts:
                    raise error
                if not retry_if.search(result.stderr + result.stdout):
                    raise error
            self._sleep(delay)
            delay = min(delay * 2, self.retry.max_backoff_s)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _classify(argv: Sequence[str], result: CommandResult) -> SlurmError:
        text = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()
        message = next((line for line in text if "error" in line.lower()), text[0])
        if len(text) > 1 and message != text[-1]:
            message = f"{message} ({text[-1]})"
        whole = "\n".join(text)
        if _UNAVAILABLE.search(whole):
            return SlurmUnavailable(argv, result.returncode, message)
        if _INVALID_JOB.search(whole):
            return InvalidJobError(argv, result.returncode, message)
        return SlurmCommandError(argv, result.returncode, message)

    # ------------------------------------------------------------------------------------------ reads

    def _jobs_streamed(self, argv: Sequence[str]) -> list[SlurmJob] | None:
        """squeue's answer decoded as it arrives, never held whole (`stream_jobs.py`: at 100,000 groups it is about
        1 GB), on a transport that can hand stdout on; None when it cannot or the read failed in any way (the
        usual read then runs: it retries, names the error, and reads any shape whole)."""
        stream = getattr(self.transport, "stream", None)
        if stream is None:
            return None
        reader = JobStream(argv)
        self._counts[argv[0]] += 1
        try:
            result: CommandResult = stream(argv, reader.feed, timeout=self.retry.timeout_s)
        except SlurmError:
            return None
        if result.returncode != 0:
            return None
        try:
            return reader.finish()
        except NotStreamable:
            return None

    def _narrow_streamed(self, argv: Sequence[str], reader: NarrowStream) -> NarrowRead | None:
        """The narrow read's records read as they arrive (`_jobs_streamed`'s way); None when it cannot be."""
        stream = getattr(self.transport, "stream", None)
        if stream is None:
            return None
        self._counts[argv[0]] += 1
        try:
            result: CommandResult = stream(argv, reader.feed, timeout=self.retry.timeout_s)
            return reader.finish() if result.returncode == 0 else None
        except SlurmError:
            return None

    def version(self) -> str:
        """Slurm's major.minor on the far side of the transport ('22.05'); cached. UnsupportedSlurm below 22.05."""
        if self._version is None:
            version = parse_version(self._call(["scontrol", "--version"]).stdout)
            self._shape = shape_for(version)[0]
            self._version = version
        return self._version

    def shape(self) -> SlurmShape:
        """How this Slurm is read (`slurmx.slurm.versions`): the nearest known shape at or below its version."""
        self.version()
        assert self._shape is not None  # set with the version
        return self._shape

    def jobs(self, job_ids: Iterable[int] | None = None, user: str | None = None) -> list[SlurmJob]:
        """Jobs squeue knows (pending, running and recently finished), optionally only these ids / this user.

        Filtering happens here as well as in squeue: 22.05's `--json` ignores squeue's filter options. A few ids
        go to squeue as `--jobs` (one id is then a one-job RPC to slurmctld, and the answer is that job alone).
        """
        if job_ids is not None and not isinstance(job_ids, list | tuple | set | frozenset):
            job_ids = list(job_ids)
        if job_ids is not None and not job_ids:
            return []
        argv = ["squeue", "--json", "--states=all"]  # finished jobs too, until MinJobAge forgets them
        if user:
            argv.append(f"--user={user}")
        if job_ids is not None and len(job_ids) <= _FEW_JOBS:
            argv.append("--jobs=" + ",".join(_ids(job_ids)))
        try:
            if job_ids is None and self.narrow_queue and version_key(self.version()) >= (24, 11):
                jobs = self._jobs_narrow(user)
            else:
                streamed = self._jobs_streamed(argv) if job_ids is None else None
                jobs = parse_jobs(self._call(argv).data, argv) if streamed is None else streamed
        except InvalidJobError:
            if job_ids is None:
                raise
            return []  # 24.11: squeue --jobs of jobs Slurm no longer knows exits 1, "Invalid job id specified"
        if job_ids is not None:
            wanted = {int(j) for j in job_ids}
            jobs = [j for j in jobs if j.job_id in wanted]
        if user:
            jobs = [j for j in jobs if j.user == user]
        return jobs

    def _jobs_narrow(self, user: str | None) -> list[SlurmJob]:
        """Every job (of `user`): the narrow listing, then `squeue --json` of the jobs it cannot say in full (running
        and finished ones, flagged states, malformed records); the whole queue as JSON when those are very many.

        The second read comes a moment after the first: a job it no longer shows has left the queue and is left
        out; one that changed state in between is given as the second read shows it."""
        token = new_token()
        argv = narrow_argv(token, user)
        shown = version_key(self.version()) < (26, 5)  # 26.05's --json never says --exclusive (parse._whole_nodes)
        read = self._narrow_streamed(argv, NarrowStream(token, says_hold=True, shows_exclusive=shown, argv=argv))
        if read is None:
            read = parse_narrow(self._call(argv).data, token, says_hold=True, shows_exclusive=shown, argv=argv)
        if len(read.full) > _FULL_MAX:
            whole = ["squeue", "--json", "--states=all", *([f"--user={user}"] if user else [])]
            streamed = self._jobs_streamed(whole)
            return parse_jobs(self._call(whole).data, whole) if streamed is None else streamed
        jobs = read.jobs
        have = {job.job_id for job in jobs}
        for at in range(0, len(read.full), _FULL_BATCH):
            ids = read.full[at:at + _FULL_BATCH]
            full = ["squeue", "--json", "--states=all", "--jobs=" + ",".join(ids)]
            try:
                more = parse_jobs(self._call(full).data, full)
            except InvalidJobError:
                continue  # 24.11: every one of them left the queue since ("Invalid job id specified")
            jobs += [job for job in more if job.job_id not in have]
            have.update(job.job_id for job in more)
        return jobs

    def nodes(self) -> list[Node]:
        """Every node with capacity, allocation and state (`scontrol show nodes --json`; 22.05: `sinfo --json`)."""
        argv = list(self.shape().nodes_argv)
        return parse_nodes(self._call(argv).data, argv)

    def partitions(self, kinds: Mapping[str, str] | None = None) -> list[Partition]:
        """Partitions with their nodes; `kinds` maps partition -> slurmx resource kind."""
        return parse_partitions(self._call(["scontrol", "show", "partition", "-o"]).stdout, kinds)

    def accounting(self, job_ids: Iterable[int] | None = None, since: str = "now-1day") -> list[AccountingRecord]:
        """Finished and running jobs from slurmdbd (`sacct --json`)."""
        argv = ["sacct", "--json", "--allusers", f"--starttime={since}"]
        ids = _ids(job_ids) if job_ids is not None else None
        if ids is not None:
            if not ids:
                return []
            argv.append("--jobs=" + ",".join(ids))
        records = parse_accounting(self._call(argv).data, argv)
        if ids is not None:
            wanted = {int(i) for i in ids}
            records = [r for r in records if r.job_id in wanted]
        return records

    def accounting_dump(self, options: Sequence[str]) -> bytes:
        """`sacct OPTIONS` as it printed it, for `slurmx sacct-export`; retried while slurmdbd is unreachable."""
        return self._call(["sacct", *options]).data

    # ------------------------------------------------------------------------------------------ writes

    def make_private_folder(self, path: str, files: Mapping[str, str]) -> None:
        """Create `path` owner-only (0700) as the user Slurm's commands run as, with `files` (name -> text) in it.

        Run through the transport, so the folder belongs to the submitting user wherever the spool lives (this
        host, a login node over SSH, a container). Its parent, the spool root every user writes, is checked there
        first (once per adapter): SpoolRootUnsafe unless it is root's, sticky and not a link. Raises FolderTaken
        when `path` already exists (it may be another user's plant: the caller picks another name), SlurmError
        for anything else.
        """
        root = posixpath.dirname(path) or "/"
        if root not in self._safe_roots:
            self._counts["stat"] += 1
            problem = spool_root_problem_via(self.transport, root, self.retry.timeout_s)
            if problem:
                raise SpoolRootUnsafe(["stat", root], None, problem)
            self._safe_roots.add(root)
        argv = ["mkdir", "-m", "700", "--", path]
        result = self._run(argv)
        if result.returncode != 0:
            if "exists" in result.stderr:
                raise FolderTaken(argv, result.returncode, f"{path} already exists")
            raise self._classify(argv, result)
        for name, text in files.items():  # noclobber in a folder only the user can write: nothing to race with
            argv = ["sh", "-c", 'umask 077 && set -C && cat > "$1"', "slurmx-write", f"{path}/{name}"]
            result = self._run(argv, stdin=text)
            if result.returncode != 0:
                raise self._classify(argv, result)


    def folder_owners(self, paths: Sequence[str]) -> dict[str, FolderOwner | None]:
        """Who owns each of `paths` as the submit host sees it (one `stat`, links not followed): a group folder's
        owner is its group's (core/ownership.py). None for a path that is missing or not a plain folder."""
        owners: dict[str, FolderOwner | None] = dict.fromkeys(paths)
        if not paths:
            return owners
        argv = ["stat", "-c", "%u|%U|%F|%n", "--", *paths]
        self._counts["stat"] += 1
        result = self.transport.run(argv, timeout=self.retry.timeout_s)  # a missing path only fails its own line
        for line in result.stdout.splitlines():
            uid, _, rest = line.partition("|")
            name, _, rest = rest.partition("|")
            kind, _, path = rest.partition("|")
            if path in owners and kind == "directory" and uid.isdigit():
                owners[path] = FolderOwner(int(uid), "" if name == "UNKNOWN" else name)
        return owners

    def submit(self, script: str, options: Sequence[str]) -> int:
        """`sbatch --parsable OPTIONS` with the script on stdin -> job id."""
        if not script.startswith("#!"):
            raise SlurmCommandError(["sbatch"], None, "a batch script must start with '#!' (e.g. #!/bin/bash)")
        argv = ["sbatch", "--parsable", *options]
        out = self._call(argv, stdin=script, retry_if=_NEVER_SENT).stdout.strip()
        first = out.splitlines()[-1].split(";")[0].strip() if out else ""
        if not first.isdigit():
            raise SlurmParseError(argv, 0, f"sbatch printed no job id: {out[:120]!r}")
        return int(first)

    def _control(self, verb: Sequence[str], job_ids: Iterable[int], *, idempotent: bool = True) -> None:
        ids = _ids(job_ids)
        if ids:
            self._call(["scontrol", *verb, ",".join(ids)], retry_if=_UNAVAILABLE if idempotent else _NEVER_SENT)

    def hold(self, job_ids: Iterable[int]) -> None:
        self._control(["hold"], job_ids)

    def release(self, job_ids: Iterable[int]) -> None:
        self._control(["release"], job_ids)

    def requeue(self, job_ids: Iterable[int], hold: bool = False) -> None:
        """Put running (or just finished) jobs back in the queue; `hold` keeps them held until released."""
        # Not idempotent: a retry after a lost answer could requeue a job that already restarted.
        self._control(["requeuehold" if hold else "requeue"], job_ids, idempotent=False)

    def signal(self, job_ids: Iterable[int], signal: str, batch_only: bool = True) -> None:
        """Send a signal to the batch shell only (`--batch`), or to the batch shell and every step (`--full`)."""
        ids = _ids(job_ids)
        if ids:
            scope = "--batch" if batch_only else "--full"
            # Not idempotent either: a retry after a lost answer would deliver the signal twice.
            self._call(["scancel", f"--signal={signal.removeprefix('SIG')}", scope, *ids], retry_if=_NEVER_SENT)

    def cancel(self, job_ids: Iterable[int]) -> None:
        ids = _ids(job_ids)
        if ids:
            self._call(["scancel", *ids])

    def update(self, job_ids: Iterable[int], change: JobUpdate) -> None:
        """Apply `change` to every job, one field per call: Slurm validates a combined update against the job's
        old partition, so `Partition=gpu Gres=gpu:1` together fails where the two in turn succeed. An array's
        tasks go as one `A_[...]` (`_update_ids`)."""
        job_list = list(job_ids)
        ids = _update_ids(job_list)
        if not ids:
            return
        for word in change.assignments():
            self._call(["scontrol", "update", f"JobId={','.join(ids)}", word])
        if change.nodelist is not None:
            for job_id in _ids(job_list):  # Slurm rejects ReqNodeList on a list of jobs
                self._call(["scontrol", "update", f"JobId={job_id}", f"ReqNodeList={change.nodelist}"])

    def update_each(self, changes: Sequence[tuple[int, JobUpdate]]) -> dict[int, SlurmError]:
        """Apply each job's own change in one `scontrol` process (its commands on stdin) -> the jobs Slurm
        refused, each with its error; raises only when the command could not run (Slurm unreachable, transport).

        Jobs with the same change share a `JobId=a,b,c` line, one line per field as in `update`; ReqNodeList
        takes one line per job. scontrol applies every line even when one fails, exits 1, and names the job in
        each error ("Invalid node name specified for job 7"), so a failure is told per job. A value that could
        not go on a stdin line as it is (blanks, quotes) is applied by `update` in its own process instead.
        """
        by_change: dict[JobUpdate, list[str]] = {}
        for job_id, change in changes:
            by_change.setdefault(change, []).append(job_text(int(job_id)))
        lines: list[tuple[str, list[str]]] = []  # (line, its jobs)
        failed: dict[int, SlurmError] = {}
        for change, ids in by_change.items():
            ids = list(dict.fromkeys(ids))
            words = change.assignments()
            if not all(_STDIN_WORD.fullmatch(w) for w in [*words, f"ReqNodeList={change.nodelist or ''}"]):
                for one in ids:
                    try:
                        self.update([_key(one)], change)
                    except SlurmUnavailable:
                        raise
                    except SlurmError as exc:
                        failed[_key(one)] = exc
                continue
            lines += [(f"update JobId={','.join(ids)} {word}", ids) for word in words]
            if change.nodelist is not None:
                lines += [(f"update JobId={j} ReqNodeList={change.nodelist}", [j]) for j in ids]
        if lines:
            failed.update(self._scontrol_lines(lines))
        return failed

    def _scontrol_lines(self, lines: Sequence[tuple[str, list[str]]]) -> dict[int, SlurmError]:
        """Run `lines` through one scontrol; a failure no error line ties to a job reruns each line on its own."""
        argv = ["scontrol"]
        result = self._call(argv, stdin="".join(line + "\n" for line, _ in lines), check=False)
        if result.returncode == 0:
            return {}
        ours = {j for _, ids in lines for j in ids}
        failed: dict[int, SlurmError] = {}
        untold = False
        for text in result.stderr.splitlines():
            named = [j for j in _NAMED_JOB.findall(text) if j in ours]
            for job_id in named:
                one = CommandResult(tuple(argv), result.returncode, "", text)
                failed.setdefault(_key(job_id), self._classify(["scontrol", "update", f"JobId={job_id}"], one))
            untold = untold or (not named and bool(text.strip()))
        if failed and not untold:
            return failed
        for line, ids in lines:  # which line failed is not said: learn it one line at a time (updates repeat safely)
            words = line.split(" ")
            again = self._call(["scontrol", *words], check=False)
            if again.returncode != 0:
                for job_id in ids:
                    failed.setdefault(_key(job_id), self._classify(["scontrol", *words], again))
        return failed

    def ping(self) -> bool:
        """True when slurmctld answers (no retries: this is the probe the daemon backs off on)."""
        try:
            self._call(["scontrol", "ping"], retry=False)
        except SlurmError:
            return False
        return True
