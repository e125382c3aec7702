"""The queue read narrow: `squeue --Format` of only the fields a `SlurmJob` holds, not `squeue --json`.

Why: at 100,000 pending groups `squeue --json` is about 1 GB (some 150 fields a job) and decoding it was the largest
single cost of a daemon cycle; the same jobs in these 27 fields are about 60 MB of text.

Each record is turned into the `_SqueueJob` the JSON read decodes into and converted by the same code
(`parse._jobs_of`), so the two reads give equal `SlurmJob`s by construction wherever the text says what the JSON
says. Where it does not, the record is named in `NarrowRead.full` and the caller reads those jobs from `squeue --json`:
- a job that is not plainly PENDING: a running or finished job's request (`tres_req_str`) has no `--Format` field
  (`tres-alloc` shows the allocation once it runs), and a state with a flag (`CANCELLED+COMPLETING`,
  `PENDING+REQUEUE_HOLD`) is shown by squeue as the flag alone;
- a job array's record (pending, or a task split off it): squeue's text merges an array's pending tasks into one
  line and drops its throttle (`%N`) there, so every record of an array that shows one is read from the JSON (one
  record for the array's pending indices however many, and its split-off tasks);
- a job named `(null)`: squeue prints an empty text field so (an empty comment, constraint or dependency is read
  as empty: a comment that is literally `(null)` therefore reads as empty too, and is no slurmx tag either way);
- a reason squeue replaced by the job's description, a time limit or a hold the text does not say plainly, and every
  job a malformed record names (below).

Names, comments and constraints are whatever users typed, separators and newlines included. Every field ends with
a token drawn fresh for each read (`new_token`), the record with another, and the free-text fields come last, each
record closed by its job id a second time. A record is read only when it splits into exactly the fields asked for and
opens and closes with the same job id, which no other record names: text that holds a separator (even one who saw
the token in `ps`) can add fields or split its own record, never change a field Slurm wrote before it, and every job
id such a record names is read again from `squeue --json` instead, so one job's text never forges another's record.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slurmx.slurm.errors import SlurmParseError
from slurmx.slurm.gcpause import collector_paused
from slurmx.slurm.parse import _BAD_RECORD, _note_replaced, _SqueueJob, _warn_once
from slurmx.slurm.parse import _job as parse_job
from slurmx.slurm.records import SlurmJob

__all__ = ["FIELDS", "NarrowRead", "NarrowStream", "narrow_argv", "new_token", "parse_narrow"]

# squeue's `--Format` names, in the order they are printed: first the fields that differ from job to job, then
# those a queue holds few combinations of (its "shape": converted once per distinct text, `_Shapes`), then the free
# text (name, comment, constraint), then the job id again: see the module docstring.
_OWN = ("JobId", "ArrayJobId", "ArrayTaskId", "SubmitTime", "EligibleTime")
_SHAPE = ("UserName", "UserId", "State", "Reason", "Partition", "QOS", "NodeList", "tres-alloc", "PriorityLong",
          "Nice", "RestartCnt", "TimeLimit", "ReqNodes", "ExcNodes", "exit_code", "Dependency", "NumNodes",
          "OverSubscribe")
FIELDS = (*_OWN, *_SHAPE, "Name", "Comment", "Feature", "JobId")
_COUNT = len(FIELDS)
_RUN_BYTES = 4 << 20  # read the records once this much is waiting: few passes, little held
_UNSET = "(null)"  # how squeue prints an empty string field (a comment, a constraint, a dependency)
_NO_TIME = frozenset({"N/A", "NONE", "Unknown", "0", ""})
_LIMIT = re.compile(r"(?:([0-9]{1,6})-)?(?:([0-9]{1,2}):)?([0-9]{1,2}):([0-9]{2})")
_EXIT = re.compile(r"([0-9]{1,3}):([0-9]{1,3})")
# A reason code as `--json` gives it. squeue shows the job's description instead when Slurm set one ("job requeued in
# held state", "ReqNodeNotAvail, UnavailableNodes:c1"): then only the JSON has the code.
_REASON = re.compile(r"[A-Za-z_]{1,64}")


def new_token() -> str:
    """A fresh separator token: a letter (squeue reads a leading digit as the field's width) and 128 random bits."""
    return "Q" + secrets.token_hex(16)


def narrow_argv(token: str, user: str | None = None) -> list[str]:
    """`squeue` listing every job (`--states=all`) in `FIELDS`, each field unbounded (`:0`) and closed by the token
    (`<token>f`, the last by `<token>e`). Run it with SLURM_TIME_FORMAT=%s and SLURM_BITSTR_LEN=0 (the transports
    do, for squeue)."""
    last = len(FIELDS) - 1
    fmt = ",".join(f"{name}:0{token}{'e' if i == last else 'f'}" for i, name in enumerate(FIELDS))
    argv = ["squeue", "--states=all", "--noheader", f"--Format={fmt}"]
    if user:
        argv.append(f"--user={user}")
    return argv


@dataclass(slots=True)
class NarrowRead:
    """What the narrow read gives: the jobs read whole, and the ids (as Slurm's commands name them: `7`, `80_2`,
    or an array's `80`) whose full record only `squeue --json` has."""

    jobs: list[SlurmJob] = field(default_factory=list)
    full: list[str] = field(default_factory=list)


def parse_narrow(text: str | bytes, token: str, *, says_hold: bool, shows_exclusive: bool = True,
                 argv: Sequence[str] = ("squeue", "--Format")) -> NarrowRead:
    """`narrow_argv(token)`'s answer -> the jobs it says in full, and the ids to read from `squeue --json`.

    `says_hold`: this Slurm's `--json` says `hold` (24.11+), which is a zero priority; 22.05's is read from the
    reason as `parse._job` does. `shows_exclusive`: its `--json` says `--exclusive` (26.05's does not, and the JSON
    read then never says exclusive: so neither does this). SlurmParseError when the answer is not this listing.
    """
    reader = NarrowStream(token, says_hold=says_hold, shows_exclusive=shows_exclusive, argv=argv)
    reader.feed(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    return reader.finish()


class NarrowStream:
    """`parse_narrow` of an answer fed chunk by chunk (`feed`, then `finish`): the records are read as whole ones
    arrive, so the answer is never held whole (82 MB at 100,000 groups, twice over as bytes and as text)."""

    def __init__(self, token: str, *, says_hold: bool, shows_exclusive: bool = True,
                 argv: Sequence[str] = ("squeue", "--Format"), run_bytes: int = _RUN_BYTES) -> None:
        self.argv = argv
        self._run_bytes = run_bytes
        self._sep, self._end = token + "f", token + "e\n"
        self._end_bytes = self._end.encode()
        self._buf = bytearray()
        self._by_id: dict[str, SlurmJob | None] = {}  # None: the JSON read says it
        self._names: dict[str, str] = {}  # the id to name to the JSON read, of a record not read here
        self._suspect: dict[str, None] = {}  # job ids a malformed or repeated record names, in order
        self._shapes = _Shapes(self._sep, says_hold, shows_exclusive, argv)

    def feed(self, chunk: bytes) -> None:
        self._buf += chunk
        if chunk and len(self._buf) < self._run_bytes:
            return
        cut = self._buf.rfind(self._end_bytes)
        if cut < 0:
            return
        cut += len(self._end_bytes)
        text = self._buf[:cut].decode("utf-8", errors="replace")  # the token is ASCII: never inside a character
        del self._buf[:cut]
        with collector_paused():
            self._records(text)

    def finish(self) -> NarrowRead:
        self.feed(b"")
        if self._buf.strip():
            head = " ".join(self._buf.decode("utf-8", errors="replace").split())[:120]
            raise SlurmParseError(self.argv, 0, f"expected squeue's --Format listing closed by its token; output "
                                                f"ended: {head!r}")
        out = NarrowRead()
        full: dict[str, None] = {}
        suspect = self._suspect
        for job_id, job in self._by_id.items():
            if job_id in suspect:
                continue
            if job is None:
                full[self._names[job_id]] = None
            else:
                out.jobs.append(job)
        full.update(suspect)
        out.full = list(full)
        return out

    def _records(self, raw: str) -> None:
        """Read every record of `raw` (whole records only)."""
        sep, end, argv = self._sep, self._end, self.argv
        by_id, names, suspect, shapes = self._by_id, self._names, self._suspect, self._shapes
        at, stop, count = 0, len(raw), _COUNT - 1
        jobs: list[SlurmJob] = []
        while at < stop:
            cut = raw.index(end, at)
            piece = raw[at:cut]
            at = cut + len(end)
            if piece.count(sep) != count:
                fields = piece.split(sep)
                named = [t for t in (fields[0], fields[-1]) if _is_id(t)]
                suspect.update(dict.fromkeys(named))
                _warn_once(("narrow", tuple(named)), "%s: a record does not split into its %d fields (a name, comment "
                           "or constraint holds the read's separator); job %s read from squeue --json instead",
                           " ".join(argv[:1]), _COUNT, " and ".join(named) or "(no id)")
                continue
            first, array_job_id, task, submit, eligible, rest = piece.split(sep, len(_OWN))
            shape, name, comment, features, last = rest.rsplit(sep, 4)
            if first != last or not _is_id(first):
                named = [t for t in (first, last) if _is_id(t)]
                suspect.update(dict.fromkeys(named))
                _warn_once(("narrow", tuple(named)), "%s: a record does not open and close with the same job id (a "
                           "name, comment or constraint holds the read's separator); job %s read from squeue --json "
                           "instead", " ".join(argv[:1]), " and ".join(named) or "(no id)")
                continue
            if first in by_id:
                suspect[first] = None
                continue
            template = shapes[shape]
            job = None
            if template and task == "N/A" and array_job_id == first and name != _UNSET:
                job = _job(template, first, submit, eligible, name, comment, features, argv)
            by_id[first] = job
            if job is None:
                names[first] = first if task == "N/A" else array_job_id
            else:
                jobs.append(job)
        if jobs:
            _note_replaced(jobs, raw, argv)


def _is_id(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 18


_INIT = tuple(f.name for f in dataclasses.fields(SlurmJob) if f.init)
_JOB_ID, _NAME, _COMMENT, _SUBMIT, _BEGIN, _FEATURES = (
    _INIT.index(name) for name in ("job_id", "name", "comment", "submit_time", "begin_time", "features"))


class _Shapes(dict[str, list[Any] | None]):
    """The shape fields' text -> a pending job's field values with them (a template to fill in), or None when only
    the JSON read can say a job of that shape. Converted by the JSON read's own code (`parse._job`), once each."""

    def __init__(self, sep: str, says_hold: bool, shows_exclusive: bool, argv: Sequence[str]) -> None:
        super().__init__()
        self.sep, self.says_hold, self.shows_exclusive, self.argv = sep, says_hold, shows_exclusive, argv

    def __missing__(self, text: str) -> list[Any] | None:
        template: list[Any] | None = None
        try:
            record = _record(text.split(self.sep), self.says_hold, self.shows_exclusive)
            if record is not None:
                job = parse_job(record)
                template = [getattr(job, name) for name in _INIT]
        except _BAD_RECORD as exc:
            reason = " ".join(str(exc).split())[:300] or type(exc).__name__
            _warn_once(("narrow", text[:200]), "%s: jobs read from squeue --json instead: %s", " ".join(self.argv[:1]),
                       reason)
        self[text] = template
        return template


def _job(template: list[Any], job_id: str, submit: str, eligible: str, name: str, comment: str, features: str,
         argv: Sequence[str]) -> SlurmJob | None:
    """A pending job of this shape with its own id, times and text, as `parse._job` would give it."""
    values = template.copy()
    try:
        values[_JOB_ID] = int(job_id)
        values[_SUBMIT] = _epoch(submit)
        values[_BEGIN] = _epoch(eligible)
    except ValueError:
        _warn_once(("narrow", job_id), "%s: job %s read from squeue --json instead: times %r, %r are not epoch "
                   "seconds", " ".join(argv[:1]), job_id, submit[:40], eligible[:40])
        return None
    values[_NAME] = name
    values[_COMMENT] = "" if comment == _UNSET else comment
    values[_FEATURES] = "" if features == _UNSET else features
    return SlurmJob(*values)


def _record(fields: list[str], says_hold: bool, shows_exclusive: bool) -> _SqueueJob | None:
    """The `_SqueueJob` the JSON read would decode a pending job of these shape fields into (its own fields left
    unset: `_job` puts them in); None when the text cannot say it all."""
    (user, uid, state, reason, partition, qos, nodes, tres, priority, nice, restarts, limit, required, excluded,
     exit_code, dependency, node_count, shared) = fields
    if state != "PENDING" or not _REASON.fullmatch(reason):
        return None
    prio = int(priority)
    if says_hold:
        if reason.startswith("JobHeld") and prio != 0:
            return None  # not the zero priority a hold sets: only the JSON says
        hold: bool | None = prio == 0
    else:
        hold = None  # 22.05: `parse._job` reads the reason and the priority, as for its JSON
    limit_min = _minutes(limit)
    code = _EXIT.fullmatch(exit_code)
    if limit_min == -1 or code is None:
        return None
    return _SqueueJob(
        job_id=1, user_name=user, user_id=int(uid), job_state=state, state_reason=reason, partition=partition,
        qos=qos, nodes=nodes, tres_req_str=_text(tres), tres_alloc_str="", priority=prio, nice=int(nice), hold=hold,
        restart_cnt=int(restarts), time_limit=limit_min, required_nodes=required, excluded_nodes=excluded,
        exit_code=(int(code[1]) << 8) | int(code[2]), dependency=_text(dependency), node_count=int(node_count),
        shared="none" if shows_exclusive and shared == "NO" else None)


def _text(value: str) -> str:
    return "" if value == _UNSET else value


def _epoch(value: str) -> int | None:
    return None if value in _NO_TIME else int(value)


def _minutes(text: str) -> int | None:
    """squeue's time limit (`UNLIMITED`, `30:00`, `1-00:00:00`) in minutes, as `--json` gives it; -1: not one of
    these (the JSON read says what it is)."""
    if text == "UNLIMITED":
        return None
    match = _LIMIT.fullmatch(text)
    if match is None:
        return -1
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) + seconds // 60
