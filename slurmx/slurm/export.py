"""Dump a long stretch of accounting (a month) for `slurmx whatif` without one huge query to slurmdbd.

One `sacct` over a month makes slurmdbd build the whole answer in memory and holds its database for as long as that
takes, on a daemon every job's end is waiting to write to; windows of a day (with a pause between them) keep each
query small and let other clients in between. A job that spans windows is listed by each of them: the first
listing is kept. The text form is the documented `sacct -P` field list (about 200 bytes a job, against 10 KB for
`--json`), which the loader reads as it reads JSON.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

__all__ = ["SACCT_FIELDS", "ExportError", "export_accounting", "parse_moment", "windows"]

# The documented `sacct -P` dump: what `slurmx whatif` reads (slurmx.sim.traces.sacct_text), one job per line.
SACCT_FIELDS = ("JobID", "JobName", "User", "Partition", "QOS", "Submit", "Start", "End", "ElapsedRaw", "State",
                "AllocTRES", "ReqTRES", "Timelimit", "ExitCode")

Format = Literal["text", "json"]


class ExportError(ValueError):
    """An export that cannot start (bad dates) or whose output Slurm did not write as expected."""


def parse_moment(text: str, flag: str) -> datetime:
    """`2026-10-01` or `2026-10-01T06:00:00` (local time, as sacct reads -S/-E)."""
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise ExportError(f"{flag} {text!r}: expected a date like 2026-10-01 or 2026-10-01T06:00:00") from None


def windows(since: datetime, until: datetime, hours: float = 24.0) -> Iterator[tuple[datetime, datetime]]:
    """[since, until) cut into windows of `hours`, the last one shorter."""
    if until <= since:
        raise ExportError(f"--until {until:%Y-%m-%dT%H:%M:%S} is not after --since {since:%Y-%m-%dT%H:%M:%S}")
    step = timedelta(hours=hours)
    start = since
    while start < until:
        end = min(start + step, until)
        yield start, end
        start = end


def _options(fmt: Format, start: datetime, end: datetime) -> list[str]:
    span = [f"--starttime={start:%Y-%m-%dT%H:%M:%S}", f"--endtime={end:%Y-%m-%dT%H:%M:%S}"]
    if fmt == "json":
        return ["--json", "--allusers", *span]
    return ["--allusers", "--allocations", "--parsable2", *span, f"--format={','.join(SACCT_FIELDS)}"]


def _text_rows(data: bytes, seen: set[str], header: list[str]) -> list[str]:
    lines = data.decode("utf-8", errors="replace").splitlines()
    if not lines:
        return []
    if not header:
        header.append(lines[0])
    elif lines[0] != header[0]:
        raise ExportError(f"sacct printed a header {lines[0]!r} unlike the first window's {header[0]!r}")
    kept = []
    for line in lines[1:]:
        job_id = line.split("|", 1)[0]
        if line.strip() and job_id not in seen:
            seen.add(job_id)
            kept.append(line)
    return kept


def _json_jobs(data: bytes, seen: set[str]) -> list[Any]:
    try:
        answer = json.loads(data)
        jobs = answer.get("jobs") or []
    except (ValueError, AttributeError):
        raise ExportError("sacct --json printed something that is not its JSON answer; try --format text") from None
    kept = []
    for job in jobs:
        key = str(job.get("job_id")) if isinstance(job, dict) else json.dumps(job)
        if key not in seen:
            seen.add(key)
            kept.append(job)
    return kept


def export_accounting(run: Callable[[Sequence[str]], bytes], since: datetime, until: datetime, out: Path,
                      fmt: Format = "text", hours: float = 24.0, pause: Callable[[], None] | None = None,
                      progress: Callable[[datetime, int], None] | None = None) -> int:
    """Run sacct (`run(options) -> stdout`) window by window into `out` (written whole or not at all); the number
    of jobs written. `pause` runs between windows, `progress(window end, jobs so far)` after each."""
    seen: set[str] = set()
    header: list[str] = []
    rows: list[str] = []
    jobs: list[Any] = []
    for i, (start, end) in enumerate(windows(since, until, hours)):
        if i and pause is not None:
            pause()
        data = run(_options(fmt, start, end))
        if fmt == "json":
            jobs += _json_jobs(data, seen)
        else:
            rows += _text_rows(data, seen, header)
        if progress is not None:
            progress(end, len(seen))
    partial = out.with_name(out.name + ".part")
    if fmt == "json":
        partial.write_text(json.dumps({"jobs": jobs, "errors": [], "warnings": []}) + "\n", encoding="utf-8")
    else:
        partial.write_text("\n".join([*(header or ["|".join(SACCT_FIELDS)]), *rows]) + "\n", encoding="utf-8")
    os.replace(partial, out)
    return len(seen)
