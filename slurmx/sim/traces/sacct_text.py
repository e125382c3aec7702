"""`sacct -P` (pipe-separated) accounting text, read into the one record shape the JSON reader gives.

The documented dump (one line per job allocation, `-X`, with a header):

    sacct -a -X -P -S 2026-10-01 -E 2026-11-01 \\
      -o JobID,JobName,User,Partition,QOS,Submit,Start,End,ElapsedRaw,State,AllocTRES,ReqTRES,Timelimit,ExitCode

Only JobID, Partition, Submit, Start, End, State and one of ReqTRES / AllocTRES are required; the others are
read when present. Why text as well as JSON: `sacct --json` writes about 10 KB per job, `-P` about 200 bytes,
so a month of a busy cluster is a file one can mail. A row that cannot be read is a `TraceError` naming the
file, the line and the column; times `Unknown`/`None` mean "not set" (a job that never started).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from slurmx.core.resources import Resources
from slurmx.core.units import UnitError, parse_duration
from slurmx.sim.traces.common import open_text
from slurmx.sim.traces.errors import TraceError
from slurmx.sim.traces.reading import READ_ERRORS, read_failure
from slurmx.slurm.export import SACCT_FIELDS
from slurmx.slurm.parse import parse_tres

__all__ = ["SACCT_FIELDS", "SACCT_REQUIRED", "AccountedJob", "read_sacct_text"]

SACCT_REQUIRED = ("JobID", "Partition", "Submit", "Start", "End", "State")
_UNSET = {"", "Unknown", "None", "N/A"}
_EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class AccountedJob:
    """One job allocation as accounting recorded it; times are epoch seconds, None when never set.

    `place` says where it was read (`row 12` of a text dump, `job 4711` of a JSON one) for error messages.
    """

    job_id: str
    name: str
    user: str
    partition: str
    qos: str
    state: str
    submit: float | None
    start: float | None
    end: float | None
    request: Resources
    nodes: int
    limit_s: float | None
    place: int


def _time(path: str, line: int, column: str, raw: str) -> float | None:
    text = raw.strip()
    if text in _UNSET:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise TraceError(path, f"expected a time like 2026-11-20T10:00:00 or Unknown, got {raw!r}", row=line,
                         column=column) from None
    return moment.timestamp() if moment.tzinfo else (moment - _EPOCH).total_seconds()


def _tres(path: str, line: int, column: str, raw: str) -> tuple[Resources, int]:
    """A TRES string and its node count (`node=2`; 1 when absent)."""
    try:
        request = parse_tres(raw.strip())
    except (ValueError, UnitError, OverflowError):
        request = None
    if request is None or min(request.cpus, request.mem_mb, *request.gres.values()) < 0:
        raise TraceError(path, f"expected a TRES list like cpu=2,mem=1G,node=1,gres/gpu=1, got {raw!r}", row=line,
                         column=column)
    nodes = 1
    for item in raw.split(","):
        key, _, value = item.partition("=")
        text = value.strip()
        if key.strip() != "node" or not text.isdigit():
            continue
        if not text.isascii() or len(text) > 7:  # no cluster has ten million nodes; int() of 5,000 digits raises
            raise TraceError(path, f"expected a node count below 10,000,000 in node=, got {text[:20]!r}", row=line,
                             column=column)
        nodes = max(1, int(text))
    return request, nodes


def _limit(path: str, line: int, raw: str) -> float | None:
    text = raw.strip()
    if text in _UNSET or text in {"UNLIMITED", "Partition_Limit", "INVALID"}:
        return None
    try:
        return float(parse_duration(text))
    except (UnitError, ValueError):
        raise TraceError(path, f"expected a time limit like 1-00:00:00 or UNLIMITED, got {raw!r}", row=line,
                         column="Timelimit") from None


def _lines(path: str) -> Iterator[tuple[int, str]]:
    try:
        with open_text(path) as fh:
            for number, line in enumerate(fh, start=1):
                yield number, line.rstrip("\r\n")
    except READ_ERRORS as exc:
        raise read_failure(path, exc) from None


def read_sacct_text(path: str | Path) -> Iterator[AccountedJob | tuple[str, int]]:
    """Each row of a `sacct -P` dump: an `AccountedJob`, or `("job step", line)` for a step row (dump with -X)."""
    where = str(path)
    rows = _lines(where)
    header: list[str] = []
    for _first, line in rows:
        if line.strip():
            header = [h.strip() for h in line.lstrip("\ufeff").split("|")]
            break
    if not header:
        raise TraceError(where, f"empty file; expected a `sacct -P` header like {'|'.join(SACCT_FIELDS)}")
    index = {name: i for i, name in enumerate(header)}
    for name in SACCT_REQUIRED:
        if name not in index:
            raise TraceError(where, f"expected this column in the header (dump with -o {','.join(SACCT_FIELDS)})",
                             row=1, column=name)
    tres_column = "ReqTRES" if "ReqTRES" in index else "AllocTRES" if "AllocTRES" in index else None
    if tres_column is None:
        raise TraceError(where, "expected ReqTRES or AllocTRES in the header", row=1, column="ReqTRES")
    for line_no, line in rows:
        if not line.strip():
            continue
        values = line.split("|")
        if len(values) != len(header):
            raise TraceError(where, f"expected {len(header)} fields like the header, got {len(values)} (a `|` in a "
                             "job name? dump with --delimiter set to a character names cannot hold)", row=line_no)

        def get(column: str, values: list[str] = values) -> str:
            return values[index[column]].strip() if column in index else ""

        job_id = get("JobID")
        if not job_id:
            raise TraceError(where, "expected a job id", row=line_no, column="JobID")
        if "." in job_id:
            yield ("job step", line_no)
            continue
        request, nodes = _tres(where, line_no, tres_column, get(tres_column))
        if request.cpus == 0 and tres_column == "ReqTRES" and "AllocTRES" in index:
            request, nodes = _tres(where, line_no, "AllocTRES", get("AllocTRES"))
        yield AccountedJob(
            job_id=job_id, name=get("JobName"), user=get("User"), partition=get("Partition"), qos=get("QOS"),
            state=get("State"), submit=_time(where, line_no, "Submit", get("Submit")),
            start=_time(where, line_no, "Start", get("Start")), end=_time(where, line_no, "End", get("End")),
            request=request, nodes=nodes, limit_s=_limit(where, line_no, get("Timelimit")), place=line_no)
