"""Slurm's own accounting (`sacct --json` of 22.05/24.11/26.05, or `sacct -P` text) as a replayable trace.

What a site asks first is "what would this policy have done to my cluster last month?", so each job keeps what
it really asked for, when it was submitted, and how long it really ran (end - start). Partitions become resource
kinds through `kinds` (`partition=kind`, from the site config; a partition's own name otherwise) and the QOS
`te_qos` makes a job TE. What Slurm actually did (submit, start, end as epoch seconds) stays in each job's meta,
so the replay is compared with the accounting itself. Nothing is dropped silently: every job left out is
counted under its reason in `skipped` (never started, still running, a step row, an unmapped partition, a
record the JSON reader could not read). A job on several nodes keeps its node count, with its request split
evenly over them (rounded up), as Slurm's accounting gives only the job's total.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator
from pathlib import Path

import msgspec

from slurmx.core.model import JobClass
from slurmx.core.resources import Resources
from slurmx.sim.traces.common import JobRow, LoadedTrace, assemble, iso, open_text
from slurmx.sim.traces.errors import TraceError
from slurmx.sim.traces.options import checked_options
from slurmx.sim.traces.reading import READ_ERRORS, read_failure
from slurmx.sim.traces.sacct_text import SACCT_FIELDS, AccountedJob, read_sacct_text
from slurmx.slurm.errors import SlurmError
from slurmx.slurm.hostlist import expand_hostlist
from slurmx.slurm.parse import parse_accounting

__all__ = ["load_sacct", "partition_kinds"]


class _Count(msgspec.Struct):
    jobs: list[msgspec.Raw] | None = None


def partition_kinds(path: str | Path, pairs: Collection[str]) -> dict[str, str]:
    """`["cpu=cpu", "compute=cpu"]` -> {partition: kind}; a pair without `=` is a TraceError naming it."""
    kinds: dict[str, str] = {}
    for pair in pairs:
        partition, sep, kind = pair.partition("=")
        if not sep or not partition.strip() or not kind.strip():
            raise TraceError(path, f"option kinds: expected PARTITION=KIND, got {pair!r}")
        kinds[partition.strip()] = kind.strip()
    return kinds


def _read_json(path: str) -> Iterator[AccountedJob | tuple[str, int]]:
    try:
        with open_text(path) as fh:
            text = fh.read()
    except READ_ERRORS as exc:
        raise read_failure(path, exc) from None
    try:
        total = len(msgspec.json.decode(text, type=_Count).jobs or [])
        records = parse_accounting(text)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        raise TraceError(path, "not a `sacct --json` answer (expected an object with a jobs list); dump with "
                         "sacct --json, or use sacct -P text") from None
    except SlurmError as exc:
        raise TraceError(path, f"not readable as `sacct --json`: {exc}") from None
    for _ in range(total - len(records)):
        yield ("unreadable record (warning logged)", 0)
    for i, rec in enumerate(records, start=1):
        try:
            nodes = len(expand_hostlist(rec.nodes)) if rec.nodes and rec.nodes != "None assigned" else 1
        except (ValueError, SlurmError):
            nodes = 1
        request = rec.request if rec.request.cpus else rec.allocated
        yield AccountedJob(
            job_id=str(rec.job_id), name=rec.name, user=rec.user, partition=rec.partition, qos=rec.qos,
            state=rec.state_text, submit=rec.submit_time, start=rec.start_time, end=rec.end_time, request=request,
            nodes=max(nodes, 1), limit_s=None, place=i)


def _is_json(path: str) -> bool:
    try:
        with open_text(path) as fh:
            return fh.read(4096).lstrip("\ufeff \t\r\n").startswith("{")
    except READ_ERRORS as exc:
        raise read_failure(path, exc) from None


@checked_options
def load_sacct(
    path: str | Path,
    *,
    limit: int | None = None,
    kinds: Collection[str] = (),
    te_qos: str = "te",
) -> LoadedTrace:
    """Load a `sacct --json` or `sacct -P` dump (told apart by the first character). `limit` keeps the first N
    usable jobs in file order; `kinds` maps partitions to resource kinds as `PARTITION=KIND` strings.
    """
    where = str(path)
    mapping = partition_kinds(where, kinds)
    is_json = _is_json(where)
    rows: list[JobRow] = []
    skipped: Counter[str] = Counter()
    shortest = 0
    for item in _read_json(where) if is_json else read_sacct_text(where):
        if isinstance(item, tuple):
            skipped[item[0]] += 1
            continue
        if limit is not None and len(rows) >= limit:
            break
        reason = _reason(item, mapping)
        if reason:
            skipped[reason] += 1
            continue
        assert item.submit is not None and item.start is not None and item.end is not None
        if item.end < item.start:
            raise TraceError(where, f"job {item.job_id} ends before it starts", row=item.place or None)
        run_s = float(item.end - item.start)
        if run_s < 1:
            shortest += 1
            run_s = 1.0
        req = _per_node(item.request, item.nodes)
        request = req if req.cpus else Resources(1, req.mem_mb, req.gres)  # a job holds at least one CPU
        job_class = JobClass.TE if item.qos == te_qos else JobClass.BE
        meta = {"partition": item.partition, "qos": item.qos, "state": item.state, "name": item.name,
                "submit_epoch": item.submit, "start_epoch": item.start, "end_epoch": item.end}
        kind = mapping.get(item.partition, item.partition)
        rows.append(JobRow(float(item.submit), item.job_id, item.user, kind, request, run_s, None, job_class, meta,
                           item.nodes))
    jobs, base = assemble(rows)
    fmt = "sacct --json" if is_json else "sacct -P"
    assumptions = [
        f"{fmt}: submit time = Submit, run time = End - Start, request = the job's requested TRES (allocated "
        "where the request names no CPUs); the scheduler knows each run time (no estimates)",
        f"class: QOS {te_qos!r} is TE, every other QOS BE; kind: "
        + (", ".join(f"partition {p} -> {k}" for p, k in mapping.items()) or "the partition's own name"),
    ]
    if not is_json:
        assumptions.append(f"-P fields read: {', '.join(SACCT_FIELDS)}; times without a zone are read as UTC")
    if jobs:
        assumptions.append(f"submit times are seconds since the first submission, {iso(base)}")
    if shortest:
        assumptions.append(f"{shortest} jobs ran under a second (Slurm's resolution) and are given 1 s")
    return LoadedTrace(jobs, tuple(assumptions), f"sacct:{path}", dict(skipped))


def _per_node(total: Resources, nodes: int) -> Resources:
    """A job's total request over its nodes, each amount rounded up (Slurm's accounting gives the total)."""
    if nodes <= 1:
        return total
    return Resources(-(-total.cpus // nodes), -(-total.mem_mb // nodes),
                     {name: -(-count // nodes) for name, count in total.gres.items()})


def _reason(job: AccountedJob, kinds: dict[str, str]) -> str:
    """Why `job` cannot be replayed, or "" when it can."""
    state = job.state.split()[0].split("+")[0] if job.state else "UNKNOWN"
    if job.submit is None:
        return f"no submit time ({state})"
    if job.start is None:
        return f"never started ({state})"
    if job.end is None:
        return "running when dumped (no end time)"
    if kinds and job.partition not in kinds:
        return f"partition {job.partition or '(none)'} has no kind in the site config"
    return ""
