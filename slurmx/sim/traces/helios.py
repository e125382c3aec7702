"""SenseTime Helios (SC '21) `cluster_log.csv`: Slurm job logs of four GPU clusters (Venus, Earth, Saturn, Uranus).

Published header (HeliosData): job_id, user, vc, gpu_num, cpu_num, node_num, state, submit_time,
start_time, end_time, duration, queue; times are `YYYY-MM-DD HH:MM:SS` wall-clock strings, duration and
queue are seconds. Helios records CPUs but not memory, so memory is `mem_per_cpu_mb` per CPU (default from
the Helios node: 2 x Xeon Gold 6146, 48 hardware threads, 376 GB, i.e. about 8000 MB per thread).
"""

from __future__ import annotations

from pathlib import Path

from slurmx.core.model import JobClass
from slurmx.sim.traces.common import CsvRows, JobRow, LoadedTrace, ResourceCache, assemble, iso
from slurmx.sim.traces.options import checked_options

__all__ = ["HELIOS_COLUMNS", "load_helios"]

HELIOS_COLUMNS = (
    "job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state", "submit_time", "duration", "queue",
)  # fmt: skip


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
    cache = ResourceCache()
    rows: list[JobRow] = []
    skipped = {"zero_duration": 0}
    no_cpu = 0
    for row in CsvRows(path, HELIOS_COLUMNS):
        if limit is not None and len(rows) >= limit:
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
            skipped["zero_duration"] += 1
            continue
        if cpus == 0:
            no_cpu += 1
            cpus = 1
        mem = mem_per_cpu_mb * cpus
        kind, request = ("gpu", cache.get(cpus, mem, "gpu", gpus)) if gpus else ("cpu", cache.get(cpus, mem))
        meta = {"vc": row.text("vc"), "state": row.text("state"), "nodes": nodes, "wait_s": queue}
        rows.append(JobRow(submit, job_id, user, kind, request, duration, None, job_class, meta))
    jobs, base = assemble(rows)
    assumptions = [
        "submit time = submit_time; duration = duration (seconds); one variant per job: gpu if gpu_num > 0, else cpu",
        f"no memory column: {mem_per_cpu_mb} MB per CPU (Helios node: 376 GB for 48 hardware threads)",
        f"no job classes: every job is {job_class.value.upper()}; jobs of every final state are kept",
        "times are wall-clock strings without a zone, read as UTC",
    ]
    if jobs:
        assumptions.append(f"submit times are seconds since the first submission, {iso(base)}")
    if no_cpu:
        assumptions.append(f"{no_cpu} jobs record 0 CPUs and are given 1")
    if skipped["zero_duration"]:
        assumptions.append(f"{skipped['zero_duration']} jobs with duration 0 (never ran) are skipped")
    return LoadedTrace(jobs, tuple(assumptions), f"helios:{path}", {k: v for k, v in skipped.items() if v})
