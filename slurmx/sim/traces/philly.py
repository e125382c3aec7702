"""Microsoft Philly (2017): the Pollux/Sia-derived CSV and the raw `cluster_job_log` (JSON) of msr-fiddle.

Neither format has CPU or memory requests, so each GPU brings `cpus_per_gpu` CPUs and `mem_per_gpu_mb` of
memory; the defaults are Synergy's GPU-proportional share on the 8-GPU / 24-CPU / 500 GB servers it used for
its Philly runs (3 CPUs and 62.5 GB per GPU, `../shared/papers/synergy.md` §1.1, §4.1). Philly has no job
classes either: every job is best-effort unless `job_class` says otherwise. Neither names a GPU model or node
feature (the raw log's machines are addresses): jobs run anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from slurmx.core.model import JobClass
from slurmx.sim.traces.common import (
    CsvRows,
    JobRow,
    LoadedTrace,
    ResourceCache,
    TraceError,
    assemble,
    iso,
    open_text,
    parse_datetime,
)
from slurmx.sim.traces.options import checked_options
from slurmx.sim.traces.reading import READ_ERRORS, read_failure

__all__ = ["PHILLY_CSV_COLUMNS", "load_philly_csv", "load_philly_job_log"]

PHILLY_CSV_COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")
_CPUS_PER_GPU = 3
_MEM_PER_GPU_MB = 64000  # 62.5 GB


def _per_gpu_assumptions(cpus_per_gpu: int, mem_per_gpu_mb: int, job_class: JobClass) -> list[str]:
    return [
        f"no CPU or memory columns: each GPU comes with {cpus_per_gpu} CPUs and {mem_per_gpu_mb} MB "
        "(Synergy's GPU-proportional share on 8-GPU / 24-CPU / 500 GB servers)",
        f"no job classes: every job is {job_class.value.upper()}",
        "times are wall-clock strings without a zone, read as UTC; the daylight-saving change of 2017-11-05 "
        "can make an interval spanning it off by one hour",
    ]


@checked_options
def load_philly_csv(
    path: str | Path,
    *,
    limit: int | None = None,
    cpus_per_gpu: int = _CPUS_PER_GPU,
    mem_per_gpu_mb: int = _MEM_PER_GPU_MB,
    job_class: JobClass = JobClass.BE,
) -> LoadedTrace:
    """Load the Philly-derived CSV (`timestamp,duration,num_gpus,gpu_time,cluster`). `limit`: first N rows.

    The CSV has no user column; the virtual cluster (`cluster`) stands in for the user, so per-user
    fairness becomes per-VC fairness. Job ids are `philly-<row>` in file order.
    """
    cache = ResourceCache()
    rows: list[JobRow] = []
    for row in CsvRows(path, PHILLY_CSV_COLUMNS):
        if limit is not None and len(rows) >= limit:
            break
        submit = row.timestamp("timestamp")
        duration = row.number("duration", what="seconds")
        if duration <= 0:
            row.fail("duration", "seconds > 0", row.text("duration"))
        gpus = row.whole("num_gpus", low=1)
        vc = row.text("cluster") or row.fail("cluster", "a virtual-cluster id", "")
        request = cache.get(cpus_per_gpu * gpus, mem_per_gpu_mb * gpus, "gpu", gpus)
        rows.append(
            JobRow(submit, f"philly-{row.line - 1}", f"vc-{vc}", "gpu", request, duration, None, job_class, {"vc": vc})
        )
    jobs, base = assemble(rows)
    assumptions = [
        "submit time = timestamp; duration = duration (seconds); one gpu variant per job",
        "no user column: the virtual cluster stands in for the user (user = vc-<cluster>)",
        *_per_gpu_assumptions(cpus_per_gpu, mem_per_gpu_mb, job_class),
        "short jobs may have been filtered out of this derived CSV relative to the raw log",
    ]
    if jobs:
        assumptions.append(f"submit times are seconds since the first submission, {iso(base)}")
    return LoadedTrace(jobs, tuple(assumptions), f"philly-csv:{path}",
                       info={"first_submission_epoch": f"{base:.0f}"} if jobs else {})


def _json_array_items(path: str | Path, chunk_chars: int = 1 << 20) -> Iterator[tuple[int, Any]]:
    """Stream the elements of a top-level JSON array, so a multi-GB log is never held in memory at once.

    Yields (1-based position, element). A syntax error is a `TraceError` naming the element position.
    """
    decoder = json.JSONDecoder()
    with open_text(path) as fh:
        buf, pos, eof, started, n = "", 0, False, False, 0

        def more() -> bool:
            nonlocal buf, pos, eof
            if eof:
                return False
            try:
                data = fh.read(chunk_chars)
            except READ_ERRORS as exc:
                raise read_failure(path, exc) from None
            eof = not data
            buf, pos = buf[pos:] + data, 0
            return bool(data)

        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                if buf[pos] == "," and not started:
                    break
                pos += 1
            if pos >= len(buf):
                if more():
                    continue
                raise TraceError(path, "unexpected end of file; expected a JSON array of jobs ending in ]", row=n + 1)
            if not started:
                if buf[pos] != "[":
                    raise TraceError(path, f"expected a JSON array of jobs starting with [, got {buf[pos]!r}", row=1)
                started, pos = True, pos + 1
                continue
            if buf[pos] == "]":
                return
            try:
                item, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as exc:
                if more():
                    continue
                raise TraceError(path, f"invalid JSON: {exc.msg}", row=n + 1) from None
            except ValueError:  # not a JSONDecodeError: an integer past Python's 4300-digit limit
                raise TraceError(
                    path, "a number with thousands of digits; no job value is that long", row=n + 1
                ) from None
            except RecursionError:
                message = "JSON nested too deeply; a job is an object of strings, lists and placement objects"
                raise TraceError(path, message, row=n + 1) from None
            if end == len(buf) and not eof and more():  # a number may continue into the next chunk
                continue
            n += 1
            pos = end
            yield n, item


def _attempt_time(path: str | Path, n: int, key: str, value: Any) -> float | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TraceError(path, f"expected a time string or null, got {value!r}", row=n, column=key)
    try:
        return parse_datetime(value)
    except ValueError:
        raise TraceError(path, f"expected a time like 2017-10-07 01:12:09, got {value!r}", row=n, column=key) from None


def _require(path: str | Path, n: int, job: Mapping[str, Any], key: str, kind: type) -> Any:
    value = job.get(key)
    if not isinstance(value, kind):
        raise TraceError(path, f"expected a {kind.__name__}, got {value!r}", row=n, column=key)
    return value


def _placed_gpus(path: str | Path, n: int, where: str, detail: Any) -> int:
    """GPUs of an attempt's `detail`: a list of {"ip": machine, "gpus": [names]}; any other shape is an error."""
    shape = 'a list of placements like [{"ip": "m47", "gpus": ["gpu0"]}]'
    if not isinstance(detail, list):
        raise TraceError(path, f"expected {shape}, got {type(detail).__name__}", row=n, column=where)
    count = 0
    for i, placement in enumerate(detail):
        if not isinstance(placement, dict):
            got = type(placement).__name__
            raise TraceError(path, f"expected {shape}, got {got}", row=n, column=f"{where}[{i}]")
        gpus = placement.get("gpus")
        if not isinstance(gpus, list | None):
            got = type(gpus).__name__
            raise TraceError(
                path, f'expected a list of GPU names like ["gpu0"], got {got}', row=n, column=f"{where}[{i}].gpus"
            )
        count += len(gpus or ())
    return count


@checked_options
def load_philly_job_log(
    path: str | Path,
    *,
    limit: int | None = None,
    duration: Literal["attempts", "span"] = "attempts",
    cpus_per_gpu: int = _CPUS_PER_GPU,
    mem_per_gpu_mb: int = _MEM_PER_GPU_MB,
    job_class: JobClass = JobClass.BE,
) -> LoadedTrace:
    """Load the raw Philly `cluster_job_log`: a JSON array of {status, vc, jobid, attempts, submitted_time, user}.

    `duration="attempts"` sums the attempts' run times (Synergy's choice); `"span"` is last end - first start.
    The GPU count is that of the last attempt with placement detail. Jobs with no usable attempt, or still
    running when the snapshot was taken (last end_time null), are skipped and counted in `skipped`.
    """
    cache = ResourceCache()
    rows: list[JobRow] = []
    skipped = {"no_attempts": 0, "running_at_snapshot": 0, "no_times": 0, "no_gpus": 0, "zero_duration": 0}
    for n, job in _json_array_items(path):
        if limit is not None and len(rows) >= limit:
            break
        if not isinstance(job, dict):
            raise TraceError(path, f"expected a job object, got {type(job).__name__}", row=n)
        job_id = str(_require(path, n, job, "jobid", str))
        user = str(_require(path, n, job, "user", str))
        attempts = _require(path, n, job, "attempts", list)
        submitted = _attempt_time(path, n, "submitted_time", job.get("submitted_time"))
        if submitted is None:
            raise TraceError(path, "expected a time string, got null", row=n, column="submitted_time")
        if not attempts:
            skipped["no_attempts"] += 1
            continue
        spans, gpus, machines = [], 0, 0
        for a, attempt in enumerate(attempts):
            if not isinstance(attempt, dict):
                raise TraceError(path, "expected an attempt object", row=n, column=f"attempts[{a}]")
            start = _attempt_time(path, n, f"attempts[{a}].start_time", attempt.get("start_time"))
            end = _attempt_time(path, n, f"attempts[{a}].end_time", attempt.get("end_time"))
            spans.append((start, end))
            detail = attempt.get("detail")
            count = _placed_gpus(path, n, f"attempts[{a}].detail", detail) if detail is not None else 0
            if count:
                gpus, machines = count, len(detail or ())
        if spans[-1][1] is None and spans[-1][0] is not None:
            skipped["running_at_snapshot"] += 1
            continue
        timed = [(s, e) for s, e in spans if s is not None and e is not None]
        if not timed:
            skipped["no_times"] += 1
            continue
        if not gpus:
            skipped["no_gpus"] += 1
            continue
        run = sum(e - s for s, e in timed) if duration == "attempts" else timed[-1][1] - timed[0][0]
        if run <= 0:
            skipped["zero_duration"] += 1
            continue
        vc = str(job.get("vc", ""))
        meta = {"vc": vc, "status": str(job.get("status", "")), "attempts": len(attempts), "machines": machines}
        request = cache.get(cpus_per_gpu * gpus, mem_per_gpu_mb * gpus, "gpu", gpus)
        rows.append(JobRow(submitted, job_id, user, "gpu", request, run, None, job_class, meta))
    jobs, base = assemble(rows)
    how = "the sum of its attempts' run times" if duration == "attempts" else "last end_time - first start_time"
    assumptions = [
        f"submit time = submitted_time; duration = {how}; GPUs = those of the last placed attempt",
        "attempts without a start or end time are left out of the duration (logging errors per the README)",
        *_per_gpu_assumptions(cpus_per_gpu, mem_per_gpu_mb, job_class),
    ]
    if jobs:
        assumptions.append(f"submit times are seconds since the first submission, {iso(base)}")
    for reason, count in skipped.items():
        if count:
            assumptions.append(f"{count} jobs skipped: {reason.replace('_', ' ')}")
    return LoadedTrace(jobs, tuple(assumptions), f"philly-log:{path}", {k: v for k, v in skipped.items() if v})
