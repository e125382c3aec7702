"""Parallel Workloads Archive Standard Workload Format (SWF): 18 whitespace-separated fields per job.

The fields (Feitelson's definition): 1 job number, 2 submit time, 3 wait time, 4 run time, 5 allocated
processors, 6 average CPU time, 7 used memory (KB per processor), 8 requested processors, 9 requested time,
10 requested memory (KB per processor), 11 status, 12 user id, 13 group id, 14 executable, 15 queue,
16 partition, 17 preceding job, 18 think time; -1 means unknown. Header lines start with `;` and carry
`Key: value` pairs (UnixStartTime, MaxNodes, MaxProcs, `Partition: 8 hybrid`, ...), returned in
`LoadedTrace.info`.

HPC jobs span nodes: with a node size (`cpus_per_node`, else the header's MaxProcs / MaxNodes) a job of more
processors than a node has runs on ceil(processors / node size) nodes, ceil(processors / nodes) on each, as
Slurm's `-n` on whole nodes. Memory fields are per processor by the format, but some logs write a job's or a
node's total there (a 16-CPU METACENTRUM job would hold 418 GB): a per-processor value above
`max_mem_per_cpu_mb` is read as the job's total instead, and how many jobs were read each way is stated.

No field names a machine type or node feature (15 queue and 16 partition are numbers for the log's own queues),
so every job runs anywhere in its partition: no constraint is read from an SWF log.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from slurmx.core.model import JobClass
from slurmx.sim.traces.common import (
    JobRow,
    LoadedTrace,
    ResourceCache,
    TraceError,
    assemble,
    open_text,
)
from slurmx.sim.traces.options import checked_like, checked_options
from slurmx.sim.traces.reading import READ_ERRORS, read_failure
from slurmx.sim.traces.streaming import TraceStream, ascending

__all__ = ["SWF_FIELDS", "header_machine", "in_submit_order", "load_swf", "stream_swf"]

SWF_FIELDS = (
    "job_number", "submit_time", "wait_time", "run_time", "allocated_processors", "average_cpu_time",
    "used_memory", "requested_processors", "requested_time", "requested_memory", "status", "user_id",
    "group_id", "executable", "queue", "partition", "preceding_job", "think_time",
)  # fmt: skip
_HEADER_RE = re.compile(r"^;\s*([A-Za-z][\w ]*?)\s*:\s*(.*?)\s*$")
_PARTITION_RE = re.compile(r"^(\d{1,9})\s+(.*)$")
_GPU_NAME_RE = re.compile(r"hybrid|gpu", re.IGNORECASE)
_NO_LIMIT = 2**31 - 1  # some logs write INT_MAX for "no requested time"
_HUGE = float(2**53)  # beyond this a float is no longer an exact whole number: no count, id or time in a log


@dataclass(frozen=True)
class SwfOptions:
    """How an SWF log becomes jobs (the loaders' options; see `load_swf`)."""

    limit: int | None = None
    mem_per_cpu_mb: int = 4096
    gpu_partitions: Collection[int] | None = None
    cpus_per_gpu: int = 4
    te_partitions: Collection[int] = ()
    cpus_per_node: int | None = None
    max_mem_per_cpu_mb: int = 32768


@dataclass
class _Tally:
    """What a pass over the log has read and counted so far: the header, then every choice made per job."""

    header: dict[str, str] = field(default_factory=dict)
    partitions: dict[int, str] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=lambda: {"no_run_time": 0, "cancelled_before_start": 0,
                                                             "no_processors": 0})
    mem_from: dict[str, int] = field(default_factory=lambda: {"requested": 0, "used": 0, "assumed": 0,
                                                              "job_total": 0})
    node_size: int | None = None
    wide: int = 0
    sub_second: int = 0  # jobs whose run time is 0: under a second, run for one
    gpu_parts: set[int] | None = None
    rows: int = 0

    def info(self) -> dict[str, str]:
        return dict(self.header) | {f"Partition {n}": name for n, name in self.partitions.items()}

    def skips(self) -> dict[str, int]:
        """The reasons jobs were skipped for, with their counts (those that happened)."""
        return {k: v for k, v in self.skipped.items() if v}


def _rows(path: str | Path, opts: SwfOptions, tally: _Tally) -> Iterator[JobRow]:
    """The log's usable jobs in file order, counting in `tally` what was skipped and assumed (the header is
    complete in it once the first job is yielded)."""
    cache = ResourceCache()
    tally.node_size = opts.cpus_per_node
    if opts.gpu_partitions is not None:
        tally.gpu_parts = set(opts.gpu_partitions)
    header, partitions, skipped, mem_from = tally.header, tally.partitions, tally.skipped, tally.mem_from
    gpu_parts: set[int] | None = tally.gpu_parts
    node_size = tally.node_size
    try:
        with open_text(path) as fh:
            for line_no, line in enumerate(fh, start=1):
                if line.startswith(";"):
                    match = _HEADER_RE.match(line)
                    if match:
                        key, value = match.group(1), match.group(2)
                        part = _PARTITION_RE.match(value) if key == "Partition" else None
                        if part:
                            partitions[int(part.group(1))] = part.group(2)
                        elif key not in header:
                            header[key] = value
                    continue
                fields = line.split()
                if not fields:
                    continue
                if opts.limit is not None and tally.rows >= opts.limit:
                    break
                if gpu_parts is None:  # the header is complete once the first job line appears
                    gpu_parts = tally.gpu_parts = {n for n, name in partitions.items() if _GPU_NAME_RE.search(name)}
                    machine = header_machine(header)
                    node_size = tally.node_size = node_size or (machine[1] if machine is not None else None)
                if len(fields) != 18:
                    raise TraceError(path, f"expected the 18 SWF fields, got {len(fields)}", row=line_no)
                try:
                    v = list(map(float, fields))
                except ValueError:
                    _bad_field(path, line_no, fields)
                if not sum(map(abs, v)) < _HUGE:  # nan, inf (1e400) and absurd magnitudes, in one pass over C floats
                    _check_magnitudes(path, line_no, fields, v)
                run = v[3]
                if run < 0:  # -1: unknown (the archive's convention); 0 is a run of under a second
                    skipped["no_run_time"] += 1
                    continue
                if run == 0:
                    if v[10] == 5:  # cancelled with no run time: cancelled before it started
                        skipped["cancelled_before_start"] += 1
                        continue
                    run = 1.0
                    tally.sub_second += 1
                procs = int(v[4]) if v[4] > 0 else int(v[7])
                if procs <= 0:
                    skipped["no_processors"] += 1
                    continue
                nodes = -(-procs // node_size) if node_size and procs > node_size else 1
                per_node = -(-procs // nodes)
                tally.wide += nodes > 1
                kb = v[9] if v[9] > 0 else v[6]
                if kb > 0 and kb / 1024 > opts.max_mem_per_cpu_mb:  # not per processor: the job's total
                    mem_mb, source = round(kb / 1024 / nodes), "job_total"
                elif kb > 0:
                    mem_mb, source = round(kb * per_node / 1024), "requested" if v[9] > 0 else "used"
                else:
                    mem_mb, source = opts.mem_per_cpu_mb * per_node, "assumed"
                mem_from[source] += 1
                partition = int(v[15])
                if partition in gpu_parts:
                    gpus = -(-per_node // opts.cpus_per_gpu)
                    kind, request = "gpu", cache.get(per_node, mem_mb, "gpu", gpus)
                else:
                    kind, request = "cpu", cache.get(per_node, mem_mb)
                estimate = v[8] if 0 < v[8] < _NO_LIMIT else None
                job_class = JobClass.TE if partition in opts.te_partitions else JobClass.BE
                meta = {
                    "status": int(v[10]),
                    "wait_s": v[2],
                    "queue": int(v[14]),
                    "partition": partition,
                    "partition_name": partitions.get(partition, ""),
                }
                tally.rows += 1
                yield JobRow(v[1], f"swf-{int(v[0])}", f"u{int(v[11])}", kind, request, run, estimate, job_class,
                             meta, nodes)
    except READ_ERRORS as exc:
        raise read_failure(path, exc) from None


def _assumptions(opts: SwfOptions, tally: _Tally, base: float) -> tuple[str, ...]:
    """What the pass had to assume, with its counts (complete once the log has been read to its end)."""
    gpu_names = ", ".join(f"{p} ({tally.partitions.get(p, '?')})" for p in sorted(tally.gpu_parts or ()))
    node_size, mem_from, skipped = tally.node_size, tally.mem_from, tally.skipped
    assumptions = [
        "submit time = field 2 (seconds from the log's UnixStartTime); duration = run time (field 4)",
        "the requested time (field 9) is the scheduler's estimate of the duration",
        "processors = allocated processors (field 5, the size the run time was measured at), else requested (8)",
        (f"nodes of {node_size} processor{'s' * (node_size != 1)} "
         f"({'given' if opts.cpus_per_node else 'header MaxProcs / MaxNodes'}): "
         f"{tally.wide} jobs span several nodes, ceil(processors / nodes) on each" if node_size else
         "no node size (no cpus_per_node, no MaxProcs and MaxNodes in the header): every job on one node"),
        f"memory per processor from requested memory for {mem_from['requested']} jobs, used memory for "
        f"{mem_from['used']}; {mem_from['job_total']} jobs give more than {opts.max_mem_per_cpu_mb} MB per "
        f"processor, read as the job's total; {mem_from['assumed']} jobs have neither and get "
        f"{opts.mem_per_cpu_mb} MB per processor",
        f"partitions run on GPU nodes: {gpu_names or 'none'}; their jobs get ceil(processors per node / "
        f"{opts.cpus_per_gpu}) GPUs per node",
        f"job class: TE for partitions {sorted(opts.te_partitions)}, BE otherwise (SWF has no classes)",
        "user = u<field 12>",
    ]
    if tally.sub_second:
        assumptions.append(f"{tally.sub_second} jobs with run time 0 (under a second, as the archive defines it) "
                           "run for 1 s")
    if skipped["no_run_time"]:
        assumptions.append(f"{skipped['no_run_time']} jobs with an unknown run time (-1) are skipped")
    if skipped["cancelled_before_start"]:
        assumptions.append(f"{skipped['cancelled_before_start']} jobs cancelled (status 5) with run time 0, i.e. "
                           "before they started, are skipped")
    if skipped["no_processors"]:
        assumptions.append(f"{skipped['no_processors']} jobs with no processor count are skipped")
    if base:
        assumptions.append(f"submit times shifted by -{base:g} s so the first submission is at 0")
    return tuple(assumptions)


@checked_options
def load_swf(
    path: str | Path,
    *,
    limit: int | None = None,
    mem_per_cpu_mb: int = 4096,
    gpu_partitions: Collection[int] | None = None,
    cpus_per_gpu: int = 4,
    te_partitions: Collection[int] = (),
    cpus_per_node: int | None = None,
    max_mem_per_cpu_mb: int = 32768,
) -> LoadedTrace:
    """Load an SWF log (plain or `.gz`). `limit` keeps the first N usable jobs in file order.

    Processors are the allocated count (field 5: the run time was measured at that size), else the requested
    one (field 8); memory is the requested memory (field 10), else the used memory (7), else `mem_per_cpu_mb`
    per processor (default: CEA Curie's thin nodes, 64 GB for 16 cores). Jobs of `gpu_partitions` get a `gpu`
    variant with ceil(processors per node / cpus_per_gpu) GPUs per node (Curie's hybrid nodes: 8 cores and
    2 GPUs); when None, partitions whose header name contains "hybrid" or "gpu" are taken. The requested time
    (field 9) becomes the scheduler's estimate. Jobs with no run time (cancelled before start) are skipped and
    counted. `cpus_per_node` (else MaxProcs / MaxNodes from the header) splits wide jobs over nodes.
    """
    opts = SwfOptions(limit, mem_per_cpu_mb, gpu_partitions, cpus_per_gpu, te_partitions, cpus_per_node,
                      max_mem_per_cpu_mb)
    tally = _Tally()
    jobs, base = assemble(list(_rows(path, opts, tally)))
    return LoadedTrace(jobs, _assumptions(opts, tally, base), f"swf:{path}", tally.skips(), tally.info())


@checked_like(load_swf)
def stream_swf(path: str | Path, **options: Any) -> TraceStream | None:
    """`load_swf`'s jobs as a stream (same options, same jobs, same assumptions), or None when the log's job
    lines are not in submit order (a stream must be; `load_swf` sorts them): a first pass reads field 2 only."""
    if not in_submit_order(path):
        return None
    opts, tally = SwfOptions(**options), _Tally()
    return TraceStream(_rows(path, opts, tally), lambda base: _assumptions(opts, tally, base or 0.0), tally.skips,
                       tally.info)


def in_submit_order(path: str | Path) -> bool:
    """Whether every job line's submit time (field 2) is at least the one before (a cheap pass: no job built)."""
    return ascending(_submit_times(path))


def _submit_times(path: str | Path) -> Iterator[float]:
    """Field 2 of each job line, up to the first that does not parse: the loader names it when it reads it."""
    try:
        with open_text(path) as fh:
            for line in fh:
                if line.startswith(";"):
                    continue
                fields = line.split(None, 2)
                if len(fields) < 2:
                    continue
                try:
                    yield float(fields[1])
                except ValueError:
                    return
    except READ_ERRORS as exc:
        raise read_failure(path, exc) from None


def header_machine(header: Mapping[str, str]) -> tuple[int, int] | None:
    """(nodes, processors per node) from the header's MaxNodes and MaxProcs, when both are whole and the
    processors divide evenly over the nodes; None otherwise (absent, or a machine of mixed nodes)."""
    procs, nodes = (header.get(key, "") for key in ("MaxProcs", "MaxNodes"))
    if not all(text.isascii() and text.isdigit() and len(text) <= 9 for text in (procs, nodes)):
        return None  # absent, or no machine's size
    if int(nodes) > 0 and int(procs) > 0 and int(procs) % int(nodes) == 0:
        return int(nodes), int(procs) // int(nodes)
    return None


def _bad_field(path: str | Path, line: int, fields: list[str]) -> NoReturn:
    """Name the first field of a job line that is not a number (only called once a line failed to parse)."""
    for i, text in enumerate(fields):
        try:
            float(text)
        except ValueError:
            raise TraceError(
                path, f"expected a number (-1 if unknown), got {text!r}", row=line, column=SWF_FIELDS[i]
            ) from None
    raise TraceError(path, "expected 18 numbers", row=line)  # unreachable: some field failed to parse


def _check_magnitudes(path: str | Path, line: int, fields: list[str], values: list[float]) -> None:
    """Name the first field that is nan, infinite or too large; a line whose sum alone overflowed passes."""
    for i, value in enumerate(values):
        if not abs(value) < _HUGE:
            raise TraceError(
                path,
                f"expected a number of magnitude below 2^53 (-1 if unknown), got {fields[i]!r}",
                row=line,
                column=SWF_FIELDS[i],
            )
