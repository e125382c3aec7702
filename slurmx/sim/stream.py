"""A trace read as the run goes: an SWF or Helios log in submit order streamed into the engine, so memory follows
the jobs in the system, not the log. `stream_workload` says whether a run's trace can be; the caller loads it whole
(`config.load_workload`) when it cannot. From Python: `stream_workload(config)`, then `runner.run_streamed`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slurmx.sim.cluster import PartitionShape
from slurmx.sim.config import SimConfig, Workload, swf_header_machine
from slurmx.sim.holding import Holder, PartitionsHolder
from slurmx.sim.jobs import SimJob
from slurmx.sim.sizing import HeldStream

if TYPE_CHECKING:
    from slurmx.sim.traces.streaming import TraceStream

__all__ = ["StreamedWorkload", "stream_workload"]


@dataclass
class StreamedWorkload:
    """A trace read as the run goes (an SWF or Helios log in submit order): the cluster's partitions and the jobs
    to run, one at a time; `workload()` gives the provenance once the run has read the trace through."""

    source: str  # as `load_workload` names it: "trace:<path>"
    partitions: tuple[PartitionShape, ...]
    stream: TraceStream
    held: HeldStream | None  # the jobs the cluster can hold (the others counted as they pass)

    @property
    def jobs(self) -> Iterable[SimJob]:
        return self.held if self.held is not None else self.stream

    def workload(self) -> Workload:
        read = Workload([], self.source, self.stream.assumptions, self.stream.skipped, self.stream.info,
                        count=self.stream.read)
        if self.held is None:
            return read
        return read.on_cluster(self.held.machine.notes(self.held.skipped), self.held.skipped)


def stream_workload(config: SimConfig, trace: str | None = None) -> StreamedWorkload | None:
    """The run's trace as a stream when it can be one: an SWF log in submit order, read by the built-in loader,
    on the config's partitions or the machine its header describes, or a Helios log in submit order on the
    config's partitions; None otherwise (the caller loads it whole).
    The jobs, their checks and the result are the same either way; only memory differs."""
    workload = config.workload
    path = trace if trace is not None else (workload.trace if workload is not None else None)
    if path is None or (workload is not None and workload.loader is not None):
        return None
    spec = config.cluster.from_trace
    if spec is not None and spec.swf_header is None:
        return None  # a cluster sized from the whole trace needs every job first
    # The trace readers are imported only here: a run that imports the runner may read no trace at all.
    from slurmx.sim.traces import detect_format

    fmt = workload.format if workload is not None and workload.format is not None else detect_format(path)
    params = dict(workload.params) if workload is not None else {}
    if fmt == "swf":
        from slurmx.sim.traces.swf import stream_swf

        stream = stream_swf(path, **params)
    elif fmt == "helios" and spec is None:
        from slurmx.sim.traces.helios import stream_helios

        stream = stream_helios(path, **params)
    else:
        return None
    if stream is None:
        return None
    abort = config.cluster.oversized == "abort"
    if spec is None or spec.swf_header is None:
        holder: Holder = PartitionsHolder(config.cluster.shapes())
    else:
        holder = swf_header_machine(config, spec.swf_header, stream.info)
    return StreamedWorkload(f"trace:{path}", holder.partitions, stream, HeldStream(stream, holder, abort))
