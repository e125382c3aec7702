"""SenseTime Helios (SC '21) `cluster_log.csv`: Slurm job logs of four GPU clusters (Venus, Earth, Saturn, Uranus).

Published header (HeliosData): job_id, user, vc, gpu_num, cpu_num, node_num, state, submit_time,
start_time, end_time, duration, queue; times are `YYYY-MM-DD HH:MM:SS` wall-clock strings, duration and
queue are seconds. Helios records CPUs but not memory, so memory is `mem_per_cpu_mb` per CPU (default from
the Helios node: 2 x Xeon Gold 6146, 48 hardware threads, 376 GB, i.e. about 8000 MB per thread).
No column names a GPU model or node feature (`vc` is a tenant's quota, not a machine type): jobs run anywhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmx.core.model import JobClass
from slurmx.sim.traces.common import CsvRows, JobRow, LoadedTrace, ResourceCache, TraceError, assemble, iso
from slurmx.sim.traces.options import checked_like, checked_options
from slurmx.sim.traces.streaming import TraceStream, ascending

__all__ = ["HELIOS_COLUMNS", "load_helios", "stream_helios"]

HELIOS_COLUMNS = (
    "job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state", "submit_time", "duration", "queue",
)  # fmt: skip


@dataclass
class _Tally:
    """What a read skipped and assumed, counted as rows go by."""

    zero_duration: int = 0
    no_cpu: int = 0

    def skips(self) -> dict[str, int]:
        return {"zero_duration": self.zero_duration} if self.zero_duration else {}


def _rows(path: str | Path, limit: int | None, mem_per_cpu_mb: int, job_class: JobClass,
          tally: _Tally) -> Iterator[JobRow]:
    """The log's usable jobs in file order, counting in `tally` what was skipped and assumed."""
    cache = ResourceCache()
    kept = 0
    for row in CsvRows(path, HELIOS_COLUMNS):
        if limit is not None and kept >= limit:
            break
        job_id = row.text("job_id") or row.fail("job_id", "a job id", "")
        user = row.text("user") or row.fail("user", "a user id", "")
        gpus = row.whole("gpu_num", low=0)
        cpus = row.whole("cpu_num", low=0)
        nodes = row.whole("node_num", low=0)
        submit = row.timestamp("submit_time")
        duration = row.number("duration", low=0, what="seconds")
        queue = row.number("queue", low=0, what="seconds")
        if duration == 0:
            tally.zero_duration += 1
            continue
        if cpus == 0:
            tally.no_cpu += 1
            cpus = 1
        mem = mem_per_cpu_mb * cpus
        kind, request = ("gpu", cache.get(cpus, mem, "gpu", gpus)) if gpus else ("cpu", cache.get(cpus, mem))
        meta = {"vc": row.text("vc"), "state": row.text("state"), "nodes": nodes, "wait_s": queue}
        kept += 1
        yield JobRow(submit, job_id, user, kind, request, duration, None, job_class, meta)


def _assumptions(mem_per_cpu_mb: int, job_class: JobClass, tally: _Tally, base: float | None) -> tuple[str, ...]:
    """What the loader assumed; `base`: the first submission's wall time (None when no job was read)."""
    assumptions = [
        "submit time = submit_time; duration = duration (seconds); one variant per job: gpu if gpu_num > 0, else cpu",
        f"no memory column: {mem_per_cpu_mb} MB per CPU (Helios node: 376 GB for 48 hardware threads)",
        f"no job classes: every job is {job_class.value.upper()}; jobs of every final state are kept",
        "times are wall-clock strings without a zone, read as UTC",
    ]
    if base is not None:
        assumptions.append(f"submit times are seconds since the first submission, {iso(base)}")
    if tally.no_cpu:
        assumptions.append(f"{tally.no_cpu} jobs record 0 CPUs and are given 1")
    if tally.zero_duration:
        assumptions.append(f"{tally.zero_duration} jobs with duration 0 (never ran) are skipped")
    return tuple(assumptions)


@checked_options
def load_helios(
    path: str | Path,
    *,
    limit: int | None = None,
    mem_per_cpu_mb: int = 8000,
    job_class: JobClass = JobClass.BE,
) -> LoadedTrace:
    """Load a Helios `cluster_log.csv`. `limit` keeps the first N usable jobs in file order.

    GPU jobs (gpu_num > 0) get a `gpu` variant, the others a `cpu` variant; gpu_num and cpu_num are the job's
    totals over its node_num nodes (kept in meta). Jobs that never ran (duration 0) are skipped and counted.
    """
    tally = _Tally()
    jobs, base = assemble(list(_rows(path, limit, mem_per_cpu_mb, job_class, tally)))
    return LoadedTrace(jobs, _assumptions(mem_per_cpu_mb, job_class, tally, base if jobs else None),
                       f"helios:{path}", tally.skips())


def _usable_submit_times(path: str | Path, limit: int | None) -> Iterator[float]:
    """The submit times of the rows the loader keeps (duration > 0), up to `limit` of them. A row that does not
    parse ends the pass: the loader names it when it reads it, in its own order (and, past `limit`, never)."""
    kept = 0
    try:
        for row in CsvRows(path, ("submit_time", "duration")):
            if limit is not None and kept >= limit:
                return
            submit, duration = row.timestamp("submit_time"), row.number("duration", low=0, what="seconds")
            if duration > 0:
                kept += 1
                yield submit
    except TraceError:
        return


@checked_like(load_helios)
def stream_helios(path: str | Path, **options: Any) -> TraceStream | None:
    """`load_helios`'s jobs as a stream (same options, same jobs, same assumptions), or None when the log's
    rows are not in submit order (a stream must be; `load_helios` sorts them): a first pass reads that column."""
    limit, mem_per_cpu_mb, job_class = (options.get("limit"), options.get("mem_per_cpu_mb", 8000),
                                        options.get("job_class", JobClass.BE))
    if not ascending(_usable_submit_times(path, limit)):
        return None
    tally = _Tally()
    return TraceStream(_rows(path, limit, mem_per_cpu_mb, job_class, tally),
                       lambda base: _assumptions(mem_per_cpu_mb, job_class, tally, base), tally.skips)
