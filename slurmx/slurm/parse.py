"""Pure parsers for Slurm's JSON and one-line text output, across Slurm 22.05, 24.11 and 26.05.

The versions differ in shape, not meaning: 22.05 (openapi v0.0.38) writes plain numbers and state strings,
24.11+ (data_parser v0.0.4x) wraps numbers as `{"set", "infinite", "number"}` and states as lists of flags.
Each field is read through one small normaliser so that the rest of slurmx sees a single shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from slurmx.core.model import Node, Partition, VariantState
from slurmx.core.resources import Resources, parse_gres
from slurmx.core.units import UnitError, parse_duration, parse_mem
from slurmx.slurm.errors import SlurmParseError
from slurmx.slurm.records import AccountingRecord, SlurmJob

__all__ = [
    "expand_hostlist",
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

try:  # orjson is several times faster on the 10,000-job listings a busy site returns
    import orjson

    def _loads(text: str) -> Any:
        return orjson.loads(text)
except ImportError:  # pragma: no cover - orjson is a declared dependency
    _loads = json.loads


def load_json(text: str, argv: Sequence[str]) -> dict[str, Any]:
    """Decode a `--json` answer and raise on the errors Slurm reports inside it."""
    try:
        data = _loads(text)
    except ValueError as exc:
        head = text.strip().splitlines()[0][:120] if text.strip() else "(empty output)"
        raise SlurmParseError(argv, 0, f"expected JSON ({exc}); output began: {head}") from None
    if not isinstance(data, dict):
        raise SlurmParseError(argv, 0, f"expected a JSON object, got {type(data).__name__}")
    # 22.05's sacct reports an empty result as the error "Nothing found"; that is an answer, not a failure.
    errors = [e for e in data.get("errors") or []
              if isinstance(e, dict) and e.get("description") != "Nothing found"]
    if errors:
        first = errors[0]
        text_ = first.get("description") or first.get("error") or str(first)
        raise SlurmParseError(argv, 0, f"Slurm reported: {text_}")
    return data


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
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _int(value: Any, default: int = 0) -> int:
    got = number(value)
    return int(got) if got is not None else default


def _epoch(value: Any) -> int | None:
    got = number(value)
    return int(got) if got else None  # Slurm writes 0 for "not yet"


def state_text(value: Any) -> str:
    """`"RUNNING"`, `["PENDING", "REQUEUED"]` or `{"current": [...]}` -> "PENDING+REQUEUED"."""
    if isinstance(value, dict):
        value = value.get("current", "")
    if isinstance(value, list):
        return "+".join(str(v) for v in value)
    return str(value or "")


def _primary_state(text: str) -> VariantState:
    return VariantState.from_slurm(text.split("+")[0] if text else "")


def parse_tres(text: str | None) -> Resources:
    """`cpu=2,mem=1G,node=1,billing=2,gres/gpu=2` -> Resources(cpus=2, mem_mb=1024, gres={'gpu': 2})."""
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
    return Resources(cpus, mem, gres)


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
    return Resources(cpus, mem, gres)


def _job_held(job: Mapping[str, Any]) -> bool:
    hold = job.get("hold")
    if isinstance(hold, bool):
        return hold
    reason = str(job.get("state_reason") or "")
    return reason.startswith("JobHeld") or (reason == "" and _int(job.get("priority")) == 0)


def _job(job: Mapping[str, Any]) -> SlurmJob:
    text = state_text(job.get("job_state"))
    state = _primary_state(text)
    held = _job_held(job) and state == VariantState.PENDING
    limit_min = number(job.get("time_limit"))
    return SlurmJob(
        job_id=int(job["job_id"]),
        name=str(job.get("name") or ""),
        user=str(job.get("user_name") or ""),
        user_id=_int(job.get("user_id"), -1),
        state=VariantState.HELD if held else state,
        state_text=text,
        reason=str(job.get("state_reason") or ""),
        partition=str(job.get("partition") or ""),
        qos=str(job.get("qos") or ""),
        comment=str(job.get("comment") or ""),
        nodes=str(job.get("nodes") or ""),
        request=parse_tres(job.get("tres_req_str")),
        allocated=parse_tres(job.get("tres_alloc_str")),
        priority=_int(job.get("priority")),
        nice=_int(job.get("nice")),
        held=held,
        restart_count=_int(job.get("restart_cnt")),
        time_limit_s=int(limit_min) * 60 if limit_min is not None else None,
        submit_time=_epoch(job.get("submit_time")),
        start_time=_epoch(job.get("start_time")),
        end_time=_epoch(job.get("end_time")),
        required_nodes=str(job.get("required_nodes") or ""),
    )


def parse_jobs(text: str, argv: Sequence[str] = ("squeue", "--json")) -> list[SlurmJob]:
    """`squeue --json` of any supported version -> jobs, in Slurm's order."""
    data = load_json(text, argv)
    try:
        return [_job(job) for job in data.get("jobs") or []]
    except (KeyError, TypeError, ValueError, UnitError) as exc:
        raise SlurmParseError(argv, 0, f"unexpected job record: {exc!r}") from None


def _node(raw: Mapping[str, Any]) -> Node:
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
    capacity = Resources(_int(raw.get("cpus")), _int(raw.get("real_memory")), parse_gres(_gres(raw.get("gres"))))
    allocated = Resources(_int(raw.get("alloc_cpus")), _int(raw.get("alloc_memory")),
                          parse_gres(_gres(raw.get("gres_used"))))
    return Node(str(raw["name"]), tuple(partitions), capacity, allocated, state.upper(), tuple(features))


def _gres(text: Any) -> str:
    """Drop the `(null)` type 22.05 prints (`gpu:(null):1(IDX:0)`)."""
    return str(text or "").replace("(null):", "")


def parse_nodes(text: str, argv: Sequence[str] = ("scontrol", "show", "nodes", "--json")) -> list[Node]:
    """`scontrol show nodes --json` (24.11+) or `sinfo --json` (22.05) -> nodes."""
    data = load_json(text, argv)
    try:
        return [_node(raw) for raw in data.get("nodes") or []]
    except (KeyError, TypeError, ValueError, UnitError) as exc:
        raise SlurmParseError(argv, 0, f"unexpected node record: {exc!r}") from None


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


def expand_hostlist(expr: str) -> list[str]:
    """Slurm hostlist `c[1-2],g[01-02,5],login` -> ['c1', 'c2', 'g01', 'g02', 'g5', 'login']."""
    names: list[str] = []
    for part in _split_hostlist(expr):
        match = re.fullmatch(r"(.*?)\[([^\]]+)\](.*)", part)
        if not match:
            if part:
                names.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for rng in ranges.split(","):
            lo, _, hi = rng.partition("-")
            width = len(lo)
            for i in range(int(lo), int(hi or lo) + 1):
                names.extend(expand_hostlist(f"{prefix}{i:0{width}d}{suffix}"))
    return names


def _split_hostlist(expr: str) -> Iterator[str]:
    depth, start = 0, 0
    for i, ch in enumerate(expr):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            yield expr[start:i].strip()
            start = i + 1
    yield expr[start:].strip()


def parse_partitions(text: str, kinds: Mapping[str, str] | None = None) -> list[Partition]:
    """`scontrol show partition -o` (same text in every version) -> partitions.

    `kinds` maps partition name -> slurmx resource kind, from the site config.
    """
    by_partition = kinds or {}
    partitions = []
    for line in text.splitlines():
        if not line.startswith("PartitionName="):
            continue
        fields = _key_values(line.strip())
        name = fields["PartitionName"]
        nodes = fields.get("Nodes", "")
        max_time = fields.get("MaxTime", "UNLIMITED")
        try:
            max_time_s = None if max_time in {"UNLIMITED", "NONE", ""} else parse_duration(max_time)
        except UnitError:
            max_time_s = None
        partitions.append(Partition(
            name=name,
            nodes=tuple(expand_hostlist(nodes)) if nodes not in {"", "(null)"} else (),
            kind=by_partition.get(name),
            max_time_s=max_time_s,
            default=fields.get("Default") == "YES",
        ))
    return partitions


def _max_rss_mb(steps: Any) -> int | None:
    best: int | None = None
    for step in steps or []:
        for entry in ((step.get("tres") or {}).get("requested") or {}).get("max") or []:
            if entry.get("type") == "mem":
                count = number(entry.get("count"))
                if count is not None and count >= 0:
                    best = max(best or 0, int(count) // (1024 * 1024))
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
    return AccountingRecord(
        job_id=int(job["job_id"]),
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
        exit_code=number(exit_code.get("return_code")) if isinstance(exit_code, dict) else None,  # type: ignore[arg-type]
        max_rss_mb=_max_rss_mb(job.get("steps")),
        restart_count=_int(job.get("restart_cnt")),
    )


def parse_accounting(text: str, argv: Sequence[str] = ("sacct", "--json")) -> list[AccountingRecord]:
    """`sacct --json` -> one record per job (steps folded in)."""
    data = load_json(text, argv)
    try:
        return [_record(job) for job in data.get("jobs") or []]
    except (KeyError, TypeError, ValueError, UnitError) as exc:
        raise SlurmParseError(argv, 0, f"unexpected accounting record: {exc!r}") from None
