"""Pure parsers for Slurm's JSON and one-line text output, across Slurm 22.05, 24.11 and 26.05.

The versions differ in shape, not meaning: 22.05 (openapi v0.0.38) writes plain numbers and state strings,
24.11+ (data_parser v0.0.4x) wraps numbers as `{"set", "infinite", "number"}` and states as lists of flags.
Each field is read through one small normaliser so that the rest of slurmx sees a single shape.

Slurm's output is hostile input: job names and comments are whatever users typed. A record that cannot be read
(wrong types, numbers past 64 bits, a host list too large to expand) is left out with a warning naming it, so
one bad job never stops the daemon from scheduling the others; a listing is a SlurmParseError only when it is
not what the command answers at all, or when not one of its records can be read. Host lists: `hostlist`.

Long because squeue, scontrol and sacct are read through one set of version normalisers and one per-record
guard (`_each`, `_warn_once`): split by command, each part would import the others' private helpers.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Annotated, Any, TypeVar

import msgspec

from slurmx.core.arrays import task_key
from slurmx.core.interning import StringPool
from slurmx.core.model import Node, Partition, VariantState
from slurmx.core.resources import Resources, parse_gres
from slurmx.core.units import UnitError, parse_duration, parse_mem
from slurmx.slurm.array_tasks import expand_pending, parse_task_mask, parse_task_string
from slurmx.slurm.errors import SlurmError, SlurmParseError, command_text
from slurmx.slurm.gcpause import collector_paused
from slurmx.slurm.hostlist import check_hostlist, expand_hostlist
from slurmx.slurm.records import AccountingRecord, SlurmJob

__all__ = [
    "clear_caches",
    "expand_hostlist",  # re-exported: slurmx.daemon.observe imports it from here
    "load_json",
    "number",
    "parse_accounting",
    "parse_jobs",
    "parse_nodes",
    "parse_partitions",
    "parse_tres",
    "parse_version",
    "state_text",
]


log = logging.getLogger("slurmxd")

_I64_MAX = 2**63 - 1  # past this a number overflows SQLite's integers, later and far from here
_NO_VAL32 = 0xFFFFFFFE  # Slurm's NO_VAL: 22.05 writes some unset 32-bit numbers as they are
_WARNED_MAX = 100_000

# What reading one malformed record can raise; anything else is a bug in this module and propagates.
_BAD_RECORD = (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, RecursionError, SlurmError,
               msgspec.ValidationError)

_T = TypeVar("_T")
_R = TypeVar("_R")

_warned: set[tuple[str, object]] = set()


def _warn_once(key: tuple[str, object], message: str, *args: object) -> None:
    """Log a warning the first time in this process only: the daemon reads the queue every few seconds, and a
    job that stays bad must not write the same line each time (nor let its owner fill the log)."""
    if key in _warned:
        return
    if len(_warned) >= _WARNED_MAX:
        _warned.clear()
    _warned.add(key)
    log.warning(message, *args)


def _shown(value: object) -> str:
    """An id or name from a record as a log line shows it: short, one line, quoted unless plain."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if abs(value) <= _I64_MAX else f"(a {value.bit_length()}-bit number)"
    if isinstance(value, str) and re.fullmatch(r"[\w.@:+-]{1,64}", value):
        return value
    return repr(value)[:66] if isinstance(value, str | float | bool | None) else f"(a {type(value).__name__})"


def _each(records: Sequence[_R], convert: Callable[[_R], _T], label: Callable[[_R], str | None],
          argv: Sequence[str], what: str) -> list[_T]:
    """`convert` each record, leaving out with a warning each one that cannot be read.

    Why skip: one malformed job must not stop the daemon from scheduling all the others. Why raise when none can
    be read: then it is the shape of the output this version does not know, and an empty listing would read as
    "every job is gone".
    """
    out: list[_T] = []
    first = ""
    for i, record in enumerate(records):
        try:
            out.append(convert(record))
        except _BAD_RECORD as exc:
            name = label(record) or f"record {i + 1}"
            reason = exc.message if isinstance(exc, SlurmError) else " ".join(str(exc).split())
            reason = reason[:300] or type(exc).__name__
            first = first or f"{name}: {reason}"
            _warn_once((argv[0], name), "%s: skipped %s, which cannot be read: %s", command_text(argv), name, reason)
    if first and not out:
        raise SlurmParseError(argv, 0, f"unexpected {what} record: {first}")
    return out


def _note_replaced(records: Iterable[SlurmJob | AccountingRecord], text: str | bytes, argv: Sequence[str]) -> None:
    """Name each job whose name or comment held bytes that are not UTF-8 (the transports put U+FFFD there).

    The records are looked at first: the answer is scanned (is it all ASCII?) only when one of them shows U+FFFD,
    since a scan of a 100,000-group `squeue --json` (1 GB) alone costs about half a second.
    """
    suspects = [rec for rec in records if "\ufffd" in rec.name or "\ufffd" in rec.comment]
    if not suspects or text.isascii():
        return
    for rec in suspects:
        _warn_once(("utf-8", rec.job_id), "%s: job %d: name or comment is not UTF-8 (unreadable bytes shown as "
                   "U+FFFD)", command_text(argv), rec.job_id)


def _decode(decode: Callable[[str | bytes], _T], text: str | bytes, argv: Sequence[str]) -> _T:
    """`decode(text)`, with text that is not UTF-8 read as the transports read it (U+FFFD for each bad byte)
    and JSON nested past Python's recursion limit a SlurmParseError rather than a RecursionError."""
    try:
        try:
            return decode(text)
        except (UnicodeError, msgspec.DecodeError):
            if is_utf8(text):  # msgspec says bad UTF-8 as a UnicodeError up to 0.22, a DecodeError from 0.23
                raise
            raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
            return decode(raw.decode("utf-8", errors="replace"))
    except RecursionError:
        raise SlurmParseError(argv, 0, "JSON nested too deeply to read") from None


def is_utf8(text: str | bytes | memoryview) -> bool:
    """Whether `text` encodes (or is) valid UTF-8: asked only once a decode has failed, never on the common path."""
    try:
        if isinstance(text, str):
            text.encode("utf-8")
        else:
            str(text, "utf-8")
    except UnicodeError:
        return False
    return True


def _in_range(value: int) -> int:
    if -_I64_MAX - 1 <= value <= _I64_MAX:
        return value
    raise OverflowError(f"a {value.bit_length()}-bit number, past 64 bits")


def _bounded(res: Resources) -> Resources:
    for value in (res.cpus, res.mem_mb, *res.gres.values()):
        _in_range(value)
    return res


def _listed(data: Mapping[str, Any], key: str, argv: Sequence[str]) -> list[Any]:
    records = data.get(key) or []
    if not isinstance(records, list):
        raise SlurmParseError(argv, 0, f"expected a list of {key}, got {type(records).__name__}")
    return records


def _loads(text: str | bytes) -> Any:
    return msgspec.json.decode(text)


def load_json(text: str | bytes, argv: Sequence[str]) -> dict[str, Any]:
    """Decode a `--json` answer and raise on the errors Slurm reports inside it."""
    try:
        data = _decode(_loads, text, argv)
    except msgspec.DecodeError as exc:
        raw = text.decode(errors="replace") if isinstance(text, bytes) else text
        head = raw.strip().splitlines()[0][:120] if raw.strip() else "(empty output)"
        raise SlurmParseError(argv, 0, f"expected JSON ({exc}); output began: {head}") from None
    if not isinstance(data, dict):
        raise SlurmParseError(argv, 0, f"expected a JSON object, got {type(data).__name__}")
    _raise_reported_errors(data.get("errors") or [], argv)
    return data


def _raise_reported_errors(errors: Sequence[Any], argv: Sequence[str]) -> None:
    """Slurm puts failures inside the JSON; 22.05's sacct reports an empty result as the error
    "Nothing found", which is an answer, not a failure."""
    if not isinstance(errors, list):
        raise SlurmParseError(argv, 0, f"expected a list of errors, got {type(errors).__name__}")
    real = [e for e in errors if isinstance(e, dict) and e.get("description") != "Nothing found"]
    if real:
        first = real[0]
        text = first.get("description") or first.get("error") or str(first)
        raise SlurmParseError(argv, 0, f"Slurm reported: {text}")


def number(value: Any) -> int | float | None:
    """A plain number (22.05) or `{"set", "infinite", "number"}` (24.11+) -> number; unset/infinite -> None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, dict):
        if value.get("infinite") or not value.get("set", True):
            return None
        return number(value.get("number"))
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    return None


def _int(value: Any, default: int = 0) -> int:
    if type(value) is int and -_I64_MAX - 1 <= value <= _I64_MAX:
        return value  # 22.05's plain numbers: most fields of a large listing, so no calls for them
    got = number(value)
    return _in_range(int(got)) if got is not None else default


def _epoch(value: Any) -> int | None:
    got = number(value)
    return _in_range(int(got)) if got else None  # Slurm writes 0 for "not yet"


def state_text(value: Any) -> str:
    """`"RUNNING"`, `["PENDING", "REQUEUED"]` or `{"current": [...]}` -> "PENDING+REQUEUED"."""
    if isinstance(value, dict):
        value = value.get("current", "")
    if isinstance(value, list):
        return "+".join(str(v) for v in value)
    return str(value or "")


def _primary_state(text: str) -> VariantState:
    return VariantState.from_slurm(text.split("+")[0] if text else "")


@functools.lru_cache(maxsize=8192)
def parse_tres(text: str | None) -> Resources:
    """`cpu=2,mem=1G,node=1,billing=2,gres/gpu=2` -> Resources(cpus=2, mem_mb=1024, gres={'gpu': 2}).

    Cached: a cluster's jobs come in a few hundred shapes, and Resources is immutable, so a listing of
    10,000 jobs parses each distinct TRES string once.
    """
    if not text:
        return Resources()
    cpus, mem, gres = 0, 0, {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        key = key.strip()
        if key == "cpu":
            cpus = int(value)
        elif key == "mem":
            mem = parse_mem(value)
        elif key.startswith("gres/") and ":" not in key:
            gres[key[len("gres/") :]] = int(value)
    return _bounded(Resources(cpus, mem, gres))


def parse_version(text: str) -> str:
    """`slurm 24.11.5` or `slurm-wlm 22.05.8` -> '24.11'."""
    match = re.search(r"(\d+)\.(\d+)(?:\.\d+)?", text)
    if not match:
        raise SlurmParseError(("scontrol", "--version"), 0, f"cannot read a Slurm version from {text.strip()!r}")
    return f"{int(match.group(1)):02d}.{int(match.group(2)):02d}"


def _tres_list(entries: Any) -> Resources:
    """sacct's `[{"type": "cpu", "count": 2}, {"type": "gres", "name": "gpu", "count": 1}, ...]`."""
    cpus, mem, gres = 0, 0, {}
    for entry in entries or []:
        kind, count = entry.get("type"), number(entry.get("count"))
        if count is None or count < 0:
            continue
        if kind == "cpu":
            cpus = int(count)
        elif kind == "mem":
            mem = int(count)
        elif kind == "gres" and entry.get("name"):
            gres[str(entry["name"]).split(":")[0]] = int(count)
    return _bounded(Resources(cpus, mem, gres))


# Numbers as the daemon can hold them: past 64 bits a job is unreadable (and left out), not a later overflow.
_I64 = Annotated[int, msgspec.Meta(ge=-_I64_MAX - 1, le=_I64_MAX)]
_F64 = Annotated[float, msgspec.Meta(gt=-(2.0**63), lt=2.0**63)]
_JobId = Annotated[int, msgspec.Meta(ge=1, le=_I64_MAX)]  # never 0 or negative: ids go into scontrol's argv


class _Number(msgspec.Struct, gc=False):
    """24.11+'s wrapped number."""

    set: bool = True
    infinite: bool = False
    number: _I64 | _F64 = 0


_Num = _I64 | _F64 | _Number | None


class _Signal(msgspec.Struct, gc=False):
    id: _Num = None


class _ExitCode(msgspec.Struct, gc=False):
    """24.11+'s exit code: `{"status": ["ERROR"], "return_code": {...}, "signal": {"id": {...}, ...}}`."""

    status: list[str] = []
    return_code: _Num = None
    signal: _Signal | None = None


class _SqueueJob(msgspec.Struct, gc=False):
    """The ~20 of squeue's ~150 job fields slurmx reads. Declaring only these lets the decoder skip the rest
    without building Python objects for them: that is what makes 10,000 jobs parse in a fraction of a second.
    `gc=False`: these records hold only strings, numbers and lists of strings, so they can be in no reference
    cycle, and 20,000 of them need not be tracked by the garbage collector."""

    job_id: _JobId
    name: str = ""
    user_name: str = ""
    user_id: _Num = None
    job_state: str | list[str] = ""
    state_reason: str = ""
    partition: str = ""
    qos: str = ""
    comment: str = ""
    nodes: str = ""
    tres_req_str: str = ""
    tres_alloc_str: str = ""
    priority: _Num = None
    nice: _Num = None
    hold: bool | None = None
    restart_cnt: _Num = None
    time_limit: _Num = None
    submit_time: _Num = None
    eligible_time: _Num = None  # a pending job's begin time (`--begin`, StartTime): squeue has no begin_time
    start_time: _Num = None
    end_time: _Num = None
    required_nodes: str = ""
    excluded_nodes: str = ""
    exit_code: _I64 | _ExitCode | None = None
    dependency: str = ""
    features: str = ""  # `--constraint`, as the user wrote it
    node_count: _Num = None  # `-N` while pending, the nodes it holds once running
    # `--exclusive`: 22.05 writes "none" (or "shared", "user", "mcs", null), 24.11 a list of flags (["none"]);
    # 26.05 writes [] always (the field is "removed" in data_parser v0.0.45 and nothing replaces it in squeue).
    shared: str | list[str] | _I64 | None = None
    # Job arrays (core/arrays.py): the same names in 22.05 (plain numbers, null for unset) and 24.11+ (wrapped).
    array_job_id: _Num = None
    array_task_id: _Num = None  # unset on an array's pending record, which lists its indices in the task string
    array_max_tasks: _Num = None  # the throttle (`%N`); 0: none
    array_task_string: str = ""


class _SqueueAnswer(msgspec.Struct):
    jobs: list[_SqueueJob] = []
    errors: list[Any] = []


class _SqueueRawAnswer(msgspec.Struct):
    """The same answer with its jobs left undecoded, to read them one by one when one of them cannot be read."""

    jobs: list[msgspec.Raw] = []
    errors: list[Any] = []


class _JobIdOnly(msgspec.Struct):
    job_id: Any = None


_SQUEUE_DECODER = msgspec.json.Decoder(_SqueueAnswer)
_RAW_SQUEUE_DECODER = msgspec.json.Decoder(_SqueueRawAnswer)
_JOB_DECODER = msgspec.json.Decoder(_SqueueJob)
_JOB_ID_DECODER = msgspec.json.Decoder(_JobIdOnly)


def _num(value: _Num) -> int | None:
    if value.__class__ is _Number:  # 24.11+: the common case first (nine of these per job)
        return int(value.number) if value.set and not value.infinite else None
    if value is None:
        return None
    return int(value)  # type: ignore[arg-type]


def _exit_code(value: int | _ExitCode | None) -> int | None:
    """The batch script's exit code as a shell reports it: the code it exited with, 128 + N when signal N ended
    it, None when Slurm does not say. 22.05 gives the raw wait status (99 << 8 for `exit 99`, 15 for SIGTERM);
    24.11+ a status, the return code and the signal."""
    if value is None:
        return None
    if isinstance(value, int):
        return (value >> 8) & 0xFF if value & 0x7F == 0 else 128 + (value & 0x7F)
    if "SIGNALED" in value.status or "CORE_DUMPED" in value.status:
        signum = _num(value.signal.id) if value.signal is not None else None
        return 128 + signum if signum else None
    return _num(value.return_code)


@functools.lru_cache(maxsize=256)
def _states(text: str) -> tuple[VariantState, bool]:
    """A state text -> (its primary state, whether it is pending); a queue shows only a handful of texts."""
    state = _primary_state(text)
    return state, state is VariantState.PENDING


# One string object per distinct value of the fields a queue holds few values of (user, state, reason, partition,
# QOS): the decoder makes a new one for every job, 50 MB of copies at 100,000 groups. Bounded: a field can only
# hold what Slurm accepts, but a site with more distinct values than this simply keeps the rest unshared.
_shared = StringPool()


def _job(job: _SqueueJob) -> SlurmJob:
    raw_state = job.job_state
    text = _shared("+".join(raw_state) if raw_state.__class__ is list else raw_state)  # type: ignore[arg-type]
    state, pending = _states(text)
    priority = _num(job.priority) or 0
    if not pending:
        held = False
    elif job.hold is not None:  # 24.11+ says so; 22.05 only shows a zero priority and a JobHeld* reason
        held = job.hold
    else:
        held = job.state_reason.startswith("JobHeld") or (not job.state_reason and priority == 0)
    limit_min = _num(job.time_limit)
    if limit_min is not None and limit_min > _I64_MAX // 60:
        raise OverflowError(f"time_limit {limit_min} min is past 64 bits in seconds")
    user_id = _num(job.user_id)
    if job.nodes:
        check_hostlist(job.nodes)  # what the daemon will expand must be expandable: else the job is left out here
    return SlurmJob(
        job.job_id,
        job.name,
        _shared(job.user_name),
        -1 if user_id is None else user_id,
        VariantState.HELD if held else state,
        text,
        _shared(job.state_reason),
        _shared(job.partition),
        _shared(job.qos),
        job.comment,
        job.nodes,
        parse_tres(job.tres_req_str),
        parse_tres(job.tres_alloc_str),
        priority,
        _num(job.nice) or 0,
        held,
        _num(job.restart_cnt) or 0,
        limit_min * 60 if limit_min is not None else None,
        _num(job.submit_time) or None,
        None if pending else _num(job.start_time) or None,  # a pending job's is only an estimate
        None if pending else _num(job.end_time) or None,  # so is its end (24.11: begin time + an "infinite" limit)
        job.required_nodes,
        _exit_code(job.exit_code),
        _num(job.eligible_time) or None,
        job.dependency,
        job.excluded_nodes,
        job.features,
        _node_count(job.node_count),
        _whole_nodes(job.shared),
    )


def _jobs_of(job: _SqueueJob) -> list[SlurmJob]:
    """A record as slurmx reads it: one job, or one per index of an array's pending record (`array_tasks.py`)."""
    array_job_id = _num(job.array_job_id)
    if not array_job_id:
        return [_job(job)]
    out = _job(job)
    task_id = _num(job.array_task_id)
    if task_id is not None and task_id >= _NO_VAL32:
        task_id = None  # 22.05 may write NO_VAL for "unset"
    throttle = _num(job.array_max_tasks) or 0
    out.array_job_id, out.array_throttle = array_job_id, throttle if 0 < throttle < _NO_VAL32 else 0
    if task_id is not None:  # a task of its own: keyed by its index, whatever job id Slurm gave it
        out.job_id, out.array_task_id = task_key(array_job_id, task_id), task_id
        return [out]
    if not job.comment.startswith("slurmx"):
        return [out]  # another tool's array: slurmxd never acts on it, so it stays one record (a user's 0-99999
        # would otherwise be 100,000 records a cycle)
    if not job.array_task_string:
        raise ValueError(f"array {array_job_id}: a record with neither a task id nor a task string")
    indices, throttle = parse_task_string(job.array_task_string)
    if throttle:
        out.array_throttle = throttle
    return expand_pending(out, indices)


def _node_count(value: _Num) -> int:
    """Nodes the job asks for (or holds): 1 when Slurm does not say, or says something no job could ask for."""
    count = _num(value)
    return count if count is not None and 1 <= count < _NO_VAL32 else 1


def _whole_nodes(shared: str | list[str] | int | None) -> bool:
    """`--exclusive` (whole nodes): Slurm's JOB_SHARED_NONE, "none" in every version that says it. `user`, `mcs`
    and `topo` share nodes with other jobs (of the same user, label, segment): not whole nodes for the policy."""
    if shared.__class__ is list:
        return "none" in shared
    return shared == "none"


def parse_jobs(text: str | bytes, argv: Sequence[str] = ("squeue", "--json")) -> list[SlurmJob]:
    """`squeue --json` of any supported version -> jobs, in Slurm's order; unreadable jobs left out (`_each`)."""
    with collector_paused():
        try:
            answer = _decode(_SQUEUE_DECODER.decode, text, argv)
        except msgspec.ValidationError:  # some job (or the answer) in a shape this version cannot read
            jobs = _jobs_one_by_one(text, argv)
        except msgspec.DecodeError as exc:
            load_json(text, argv)  # not JSON: its one-line message
            raise SlurmParseError(argv, 0, f"expected JSON ({exc})") from None
        else:
            _raise_reported_errors(answer.errors, argv)
            try:
                jobs = _all_jobs(answer.jobs)  # the common case: every job readable
            except _BAD_RECORD:
                jobs = _flat(_each(answer.jobs, _jobs_of, lambda job: f"job {job.job_id}", argv, "job"))
        _note_replaced(jobs, text, argv)
        return jobs


def _all_jobs(records: list[_SqueueJob]) -> list[SlurmJob]:
    """Every record read; an array's pending record expands to its indices (`_jobs_of`), the others are one job."""
    jobs: list[SlurmJob] = []
    append = jobs.append
    for record in records:
        if record.array_task_string or _num(record.array_job_id):
            jobs += _jobs_of(record)
        else:
            append(_job(record))
    return jobs


def _flat(lists: list[list[SlurmJob]]) -> list[SlurmJob]:
    return [job for jobs in lists for job in jobs]


def _flat_records(lists: list[list[AccountingRecord]]) -> list[AccountingRecord]:
    return [record for records in lists for record in records]


def _jobs_one_by_one(text: str | bytes, argv: Sequence[str]) -> list[SlurmJob]:
    """The slow path, taken only when a job cannot be decoded: each job decoded on its own, bad ones left out."""
    try:
        answer = _decode(_RAW_SQUEUE_DECODER.decode, text, argv)
    except msgspec.DecodeError as exc:
        load_json(text, argv)  # not an object, or Slurm reported an error: its one-line message
        raise SlurmParseError(argv, 0, f"unexpected squeue answer: {exc}") from None
    _raise_reported_errors(answer.errors, argv)
    return _flat(_each(answer.jobs, lambda raw: _jobs_of(_JOB_DECODER.decode(raw)), _raw_job_label, argv, "job"))


def _raw_job_label(raw: msgspec.Raw) -> str | None:
    try:
        job_id = _JOB_ID_DECODER.decode(raw).job_id
    except (msgspec.DecodeError, RecursionError):
        return None
    return None if job_id is None else f"job {_shown(job_id)}"


def _dict_label(kind: str, key: str) -> Callable[[Any], str | None]:
    def label(record: Any) -> str | None:
        value = record.get(key) if isinstance(record, dict) else None
        return None if value is None else f"{kind} {_shown(value)}"
    return label


def _node(raw: Mapping[str, Any]) -> Node:
    if raw.get("name") is None:
        raise KeyError("name")
    state = state_text(raw.get("state"))
    flags = raw.get("state_flags")  # 22.05 keeps flags apart: "idle" + ["DRAIN"]
    if flags:
        state = "+".join([state, *map(str, flags)])
    partitions = raw.get("partitions") or []
    if isinstance(partitions, str):
        partitions = [p for p in partitions.split(",") if p]
    features = raw.get("features") or []
    if isinstance(features, str):
        features = [f for f in features.split(",") if f]
    capacity = _node_resources(_int(raw.get("cpus")), _int(raw.get("real_memory")), _gres(raw.get("gres")))
    allocated = _node_resources(_int(raw.get("alloc_cpus")), _int(raw.get("alloc_memory")),
                                _gres(raw.get("gres_used")))
    return Node(str(raw["name"]), tuple(partitions), capacity, allocated, state.upper(), tuple(features))


@functools.lru_cache(maxsize=8192)
def _node_resources(cpus: int, mem_mb: int, gres: str) -> Resources:
    """Cached like `parse_tres`: a site's nodes come in a few shapes and load levels, so a listing of 1,000 nodes
    parses each GRES string and builds each `Resources` once (uncached it cost 2x `json.loads` of the listing)."""
    return _bounded(Resources(cpus, mem_mb, _gres_counts(gres)))


@functools.lru_cache(maxsize=1024)
def _gres_counts(text: str) -> Mapping[str, int]:
    """One parse per distinct GRES string: busy nodes differ in memory far more often than in GRES."""
    return MappingProxyType(parse_gres(text))


def clear_caches() -> None:
    """Forget every parsed TRES and node shape (benchmarks time a cold first listing)."""
    parse_tres.cache_clear()
    _shared.clear()
    _node_resources.cache_clear()
    _gres_counts.cache_clear()


def _gres(text: Any) -> str:
    """Drop the `(null)` type 22.05 prints (`gpu:(null):1(IDX:0)`)."""
    return str(text or "").replace("(null):", "")


class _NodeFields(msgspec.Struct, gc=False):
    """The node fields slurmx reads; every other one is skipped by the decoder. `Any`: their shapes differ by
    version and the normalisers below read each one."""

    name: Any = None
    state: Any = None
    state_flags: Any = None
    partitions: Any = None
    features: Any = None
    cpus: Any = None
    real_memory: Any = None
    gres: Any = None
    alloc_cpus: Any = None
    alloc_memory: Any = None
    gres_used: Any = None


class _NodesAnswer(msgspec.Struct):
    nodes: list[_NodeFields] | None = None
    errors: Any = None


class _SacctFields(msgspec.Struct, gc=False):
    """The accounting fields slurmx reads (see `_NodeFields`)."""

    job_id: Any = None
    name: Any = None
    user: Any = None
    state: Any = None
    partition: Any = None
    qos: Any = None
    nodes: Any = None
    comment: Any = None
    time: Any = None
    tres: Any = None
    exit_code: Any = None
    steps: list[_SacctStep] | None = None
    restart_cnt: Any = None
    array: Any = None  # {"job_id", "task_id", "task": "0x3F5" on an array's pending record, ...}


class _SacctStep(msgspec.Struct, gc=False):
    tres: Any = None


class _SacctAnswer(msgspec.Struct):
    jobs: list[_SacctFields] | None = None
    errors: Any = None


_NODES_DECODER = msgspec.json.Decoder(_NodesAnswer)
_SACCT_DECODER = msgspec.json.Decoder(_SacctAnswer)


def _typed_records(decoder: msgspec.json.Decoder[Any], text: str | bytes, argv: Sequence[str],
                   key: str) -> list[dict[str, Any]]:
    """The records under `key`, each holding only the fields slurmx reads (as a dict, for the normalisers).

    Why: the decoder skips every other field without building it, so a large listing costs little memory.
    Anything this typed read refuses goes through `load_json`, which says in one line what is wrong.
    """
    try:
        with collector_paused():
            answer = _decode(decoder.decode, text, argv)
    except (msgspec.DecodeError, msgspec.ValidationError):
        data = load_json(text, argv)
        return _listed(data, key, argv)  # some record is not an object: read one by one
    errors = answer.errors
    _raise_reported_errors([] if errors is None else errors, argv)
    return [msgspec.structs.asdict(r) for r in getattr(answer, key) or []]


def parse_nodes(text: str | bytes, argv: Sequence[str] = ("scontrol", "show", "nodes", "--json")) -> list[Node]:
    """`scontrol show nodes --json` (24.11+) or `sinfo --json` (22.05) -> nodes; unreadable ones left out."""
    records = _typed_records(_NODES_DECODER, text, argv, "nodes")
    return _each(records, _node, _dict_label("node", "name"), argv, "node")


def _key_values(line: str) -> dict[str, str]:
    """`A=1 B=x y C=3` -> {'A': '1', 'B': 'x y', 'C': '3'} (values may hold spaces, keys never do)."""
    fields: dict[str, str] = {}
    key = None
    for token in line.split(" "):
        name, sep, value = token.partition("=")
        if sep and name and re.fullmatch(r"[A-Za-z][\w/.:-]*", name):
            key = name
            fields[key] = value
        elif key is not None:
            fields[key] += " " + token
    return fields


def parse_partitions(text: str, kinds: Mapping[str, str] | None = None) -> list[Partition]:
    """`scontrol show partition -o` (same text in every version) -> partitions.

    `kinds` maps partition name -> slurmx resource kind, from the site config.
    """
    by_partition = kinds or {}
    lines = [line.strip() for line in text.splitlines() if line.startswith("PartitionName=")]
    argv = ("scontrol", "show", "partition", "-o")
    return _each(lines, lambda line: _partition(line, by_partition), _partition_label, argv, "partition")


def _partition(line: str, kinds: Mapping[str, str]) -> Partition:
    fields = _key_values(line)
    name = fields["PartitionName"]
    nodes = fields.get("Nodes", "")
    max_time = fields.get("MaxTime", "UNLIMITED")
    try:
        max_time_s = None if max_time in {"UNLIMITED", "NONE", ""} else parse_duration(max_time)
    except UnitError:
        max_time_s = None
    return Partition(
        name=name,
        nodes=tuple(expand_hostlist(nodes)) if nodes not in {"", "(null)"} else (),
        kind=kinds.get(name),
        max_time_s=max_time_s,
        default=fields.get("Default") == "YES",
    )


def _partition_label(line: str) -> str:
    return f"partition {_shown(line.split(' ', 1)[0].removeprefix('PartitionName='))}"


def _max_rss_mb(steps: Any) -> int | None:
    best: int | None = None
    for step in steps or []:
        tres = step.tres if isinstance(step, _SacctStep) else step.get("tres")
        for entry in ((tres or {}).get("requested") or {}).get("max") or []:
            if entry.get("type") == "mem":
                count = number(entry.get("count"))
                if count is not None and count >= 0:
                    best = max(best or 0, _in_range(int(count)) // (1024 * 1024))
    return best


def _comment(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("job") or "")
    return str(value or "")


def _record(job: Mapping[str, Any]) -> AccountingRecord:
    text = state_text(job.get("state"))
    times = job.get("time") or {}
    tres = job.get("tres") or {}
    exit_code = job.get("exit_code") or {}
    code = number(exit_code.get("return_code")) if isinstance(exit_code, dict) else None
    job_id = number(job["job_id"])
    if not isinstance(job_id, int) or not 1 <= job_id <= _I64_MAX:
        raise ValueError(f"job_id is {_shown(job['job_id'])}, not a job id")
    return AccountingRecord(
        job_id=job_id,
        name=str(job.get("name") or ""),
        user=str(job.get("user") or ""),
        state=_primary_state(text),
        state_text=text,
        partition=str(job.get("partition") or ""),
        qos=str(job.get("qos") or ""),
        nodes=str(job.get("nodes") or ""),
        comment=_comment(job.get("comment")),
        request=_tres_list(tres.get("requested")),
        allocated=_tres_list(tres.get("allocated")),
        submit_time=_epoch(times.get("submission")),
        start_time=_epoch(times.get("start")),
        end_time=_epoch(times.get("end")),
        elapsed_s=_int(times.get("elapsed")),
        exit_code=None if code is None else _in_range(int(code)),
        max_rss_mb=_max_rss_mb(job.get("steps")),
        restart_count=_int(job.get("restart_cnt")),
    )


def _records(job: Mapping[str, Any]) -> list[AccountingRecord]:
    """A job's record; an array task's keyed by its index (core/arrays.py), an array's pending record (`task`, a
    hex bitmap) one per index it still held. A task split off but never started has no record (live, 24.11)."""
    record = _record(job)
    array = job.get("array")
    if not isinstance(array, dict):
        return [record]
    array_job_id = number(array.get("job_id"))
    if not array_job_id:
        return [record]
    task_id = number(array.get("task_id"))
    if task_id is not None and 0 <= task_id < _NO_VAL32:
        return [dataclasses.replace(record, job_id=task_key(int(array_job_id), int(task_id)),
                                    array_job_id=int(array_job_id), array_task_id=int(task_id))]
    indices = parse_task_mask(str(array.get("task") or ""))
    return [dataclasses.replace(record, job_id=task_key(int(array_job_id), i), array_job_id=int(array_job_id),
                                array_task_id=i) for i in indices]


def parse_accounting(text: str | bytes, argv: Sequence[str] = ("sacct", "--json")) -> list[AccountingRecord]:
    """`sacct --json` -> one record per job (steps folded in; an array's per index); unreadable ones left out."""
    jobs = _typed_records(_SACCT_DECODER, text, argv, "jobs")
    records = _flat_records(_each(jobs, _records, _dict_label("job", "job_id"), argv, "accounting"))
    _note_replaced(records, text, argv)
    return records
