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

import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from slurmx.slurm.errors import SlurmParseError
from slurmx.slurm.gcpause import collector_paused
from slurmx.slurm.parse import _BAD_RECORD, _jobs_of, _note_replaced, _SqueueJob, _warn_once
from slurmx.slurm.records import SlurmJob

__all__ = ["FIELDS", "NarrowRead", "narrow_argv", "new_token", "parse_narrow"]

# squeue's `--Format` names, in the order they are printed. The free text (name, comment, constraint) comes last,
# then the job id again: see the module docstring.
FIELDS = ("JobId", "ArrayJobId", "ArrayTaskId", "UserName", "UserId", "State", "Reason", "Partition", "QOS",
          "NodeList", "tres-alloc", "PriorityLong", "Nice", "RestartCnt", "TimeLimit", "SubmitTime", "EligibleTime",
          "ReqNodes", "ExcNodes", "exit_code", "Dependency", "NumNodes", "OverSubscribe", "Name", "Comment",
          "Feature", "JobId")
_COUNT = len(FIELDS)
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
    raw = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    sep, end = token + "f", token + "e\n"
    pieces = raw.split(end)
    if pieces[-1].strip():
        head = " ".join(pieces[-1].split())[:120]
        raise SlurmParseError(argv, 0, f"expected squeue's --Format listing closed by its token; output ended: "
                                       f"{head!r}")
    del pieces[-1]
    records: list[list[str]] = []
    suspect: dict[str, None] = {}  # job ids a malformed record names, in order
    seen: dict[str, int] = {}
    for piece in pieces:
        fields = piece.split(sep)
        first, last = fields[0].lstrip("\n"), fields[-1]
        if len(fields) != _COUNT or first != last or not first.isascii() or not first.isdigit() or len(first) > 18:
            named = [t for t in (first, last) if t.isascii() and t.isdigit() and len(t) <= 18]
            suspect.update(dict.fromkeys(named))
            _warn_once(("narrow", tuple(named)), "%s: a record does not split into its %d fields (a name, comment or "
                       "constraint holds the read's separator); job %s read from squeue --json instead",
                       " ".join(argv[:1]), _COUNT, " and ".join(named) or "(no id)")
            continue
        fields[0] = first
        seen[first] = seen.get(first, 0) + 1
        records.append(fields)
    suspect.update(dict.fromkeys(job_id for job_id, n in seen.items() if n > 1))
    return _convert(records, suspect, says_hold, shows_exclusive, raw, argv)


def _convert(records: list[list[str]], suspect: dict[str, None], says_hold: bool, shows_exclusive: bool,
             raw: str, argv: Sequence[str]) -> NarrowRead:
    out = NarrowRead()
    full: dict[str, None] = {}
    with collector_paused():
        for fields in records:
            job_id = fields[0]
            if job_id in suspect:
                continue
            try:
                record = _record(fields, says_hold, shows_exclusive)
                jobs = None if record is None else _jobs_of(record)
            except _BAD_RECORD as exc:
                reason = " ".join(str(exc).split())[:300] or type(exc).__name__
                _warn_once(("narrow", job_id), "%s: job %s read from squeue --json instead: %s", " ".join(argv[:1]),
                           job_id, reason)
                jobs = None
            if jobs is None:
                full[_slurm_name(fields)] = None
            else:
                out.jobs += jobs
    full.update(suspect)
    out.full = list(full)
    if out.jobs:
        _note_replaced(out.jobs, raw, argv)
    return out


def _slurm_name(fields: list[str]) -> str:
    """What to name to `squeue --json --jobs` for this record: an array's job id (the whole array), else the job's."""
    return fields[0] if fields[2] == "N/A" else fields[1]


def _record(fields: list[str], says_hold: bool, shows_exclusive: bool) -> _SqueueJob | None:
    """The `_SqueueJob` the JSON read would decode this record into; None when the text cannot say it all."""
    (job_id, _array_job_id, task, user, uid, state, reason, partition, qos, nodes, tres, priority, nice, restarts,
     limit, submit, eligible, required, excluded, exit_code, dependency, node_count, shared, name, comment,
     features, _) = fields
    if state != "PENDING" or task != "N/A" or name == _UNSET or not _REASON.fullmatch(reason):
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
        job_id=int(job_id), name=name, user_name=user, user_id=int(uid), job_state=state, state_reason=reason,
        partition=partition, qos=qos, comment=_text(comment), nodes=nodes, tres_req_str=_text(tres),
        tres_alloc_str="", priority=prio, nice=int(nice), hold=hold, restart_cnt=int(restarts), time_limit=limit_min,
        submit_time=_epoch(submit), eligible_time=_epoch(eligible), required_nodes=required,
        excluded_nodes=excluded, exit_code=(int(code[1]) << 8) | int(code[2]), dependency=_text(dependency),
        features=_text(features), node_count=int(node_count),
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
