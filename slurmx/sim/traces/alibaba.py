"""Alibaba GPU cluster trace v2023 ("openb", ATC '23 FGD): real CPU, memory and GPU requests and a QoS class.

Columns (upstream README): name, cpu_milli, memory_mib, num_gpu, gpu_milli (share of one GPU when
num_gpu = 1), gpu_spec, qos (LS, BE, Burstable, Guaranteed), pod_phase (Running, Succeeded, Failed, Pending),
creation_time, deletion_time, scheduled_time (seconds). A pod becomes one job with one variant: `gpu` when it
asks for GPUs, else `cpu`. The trace is what it is; every gap we fill is listed in `LoadedTrace.assumptions`.
`gpu_spec` names the GPU models a pod accepts ("V100M16|V100M32"): with `gpu_spec="constraint"` it becomes the
gpu variant's constraint, to run on the trace's own machines (`load_alibaba_nodes`), whose GPU model is each
node's feature (`sizing.partitions_from_machines`).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from pathlib import Path
from typing import Literal, NamedTuple

from slurmx.core.model import JobClass
from slurmx.core.placement import ANYWHERE, ConstraintError, Placement
from slurmx.core.resources import Resources
from slurmx.sim.traces.common import CsvRows, JobRow, LoadedTrace, ResourceCache, Row, assemble
from slurmx.sim.traces.options import checked_options

__all__ = ["ALIBABA_COLUMNS", "TraceNode", "load_alibaba", "load_alibaba_nodes"]

ALIBABA_COLUMNS = (
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "qos",
    "pod_phase", "creation_time", "deletion_time", "scheduled_time",
)  # fmt: skip
_PHASES = frozenset({"Running", "Succeeded", "Failed", "Pending"})


@checked_options
def load_alibaba(
    path: str | Path,
    *,
    limit: int | None = None,
    be_qos: Collection[str] = ("BE",),
    te_qos: Collection[str] = ("LS", "Burstable", "Guaranteed"),
    gpu_share: Literal["whole", "milli"] = "whole",
    user: str = "alibaba",
    gpu_spec: Literal["meta", "constraint"] = "meta",
) -> LoadedTrace:
    """Load an `openb_pod_list_*.csv`. `limit` keeps the first `limit` usable pods in file order.

    `gpu_share="whole"` gives a fractional-GPU pod a whole GPU (`gres gpu:1`); `"milli"` requests
    `gpu_milli:<num_gpu * gpu_milli>` instead, for a cluster model whose nodes count GPU thousandths.
    Pending pods never ran (no scheduled_time) and are skipped; the count is in `skipped`.
    `gpu_spec="meta"` keeps a pod's GPU models in `meta` only; `"constraint"` also makes them its gpu variant's
    constraint (a cluster without those node features then refuses such a pod at set-up, in one line).
    """
    qos_class = {q: JobClass.BE for q in be_qos} | {q: JobClass.TE for q in te_qos}
    expected_qos = ", ".join(sorted(qos_class))
    cache = ResourceCache()
    rows: list[JobRow] = []
    skipped = {"pending": 0, "zero_duration": 0}
    fractional_cpu = fractional_gpu = censored = failed = pinned = 0
    placements: dict[str, Placement] = {}
    for row in CsvRows(path, ALIBABA_COLUMNS):
        if limit is not None and len(rows) >= limit:
            break
        name = row.text("name") or row.fail("name", "a pod name", "")
        cpu_milli = row.whole("cpu_milli", low=0)
        mem_mib = row.whole("memory_mib", low=0)
        num_gpu = row.whole("num_gpu", low=0)
        gpu_milli = row.whole("gpu_milli", low=0)
        if gpu_milli > 1000:
            row.fail("gpu_milli", "thousandths of one GPU, 0 to 1000", str(gpu_milli))
        qos = row.text("qos")
        if qos not in qos_class:
            row.fail("qos", f"one of {expected_qos}", qos)
        phase = row.text("pod_phase")
        if phase not in _PHASES:
            row.fail("pod_phase", f"one of {', '.join(sorted(_PHASES))}", phase)
        created = row.number("creation_time", low=0, what="seconds")
        deleted = row.number("deletion_time", low=0, what="seconds")
        scheduled = row.optional_number("scheduled_time", low=0)
        if scheduled is None:
            skipped["pending"] += 1
            continue
        if deleted < scheduled:
            row.fail("deletion_time", f"a time >= scheduled_time {scheduled:g}", row.text("deletion_time"))
        if deleted == scheduled:
            skipped["zero_duration"] += 1
            continue
        cpus = math.ceil(cpu_milli / 1000)
        fractional_cpu += cpu_milli % 1000 != 0
        if num_gpu == 0:
            kind, request = "cpu", cache.get(cpus, mem_mib)
        elif gpu_share == "milli":
            kind, request = "gpu", cache.get(cpus, mem_mib, "gpu_milli", num_gpu * gpu_milli)
        else:
            kind, request = "gpu", cache.get(cpus, mem_mib, "gpu", num_gpu)
            fractional_gpu += 0 < gpu_milli < 1000
        censored += phase == "Running"
        failed += phase == "Failed"
        spec = row.text("gpu_spec") if "gpu_spec" in row.index else ""
        placement = ANYWHERE
        if spec and kind == "gpu" and gpu_spec == "constraint":
            placement = placements.get(spec) or placements.setdefault(spec, _constraint(row, spec))
            pinned += 1
        meta = {
            "qos": qos,
            "pod_phase": phase,
            "censored": phase == "Running",
            "cpu_milli": cpu_milli,
            "gpu_milli": gpu_milli,
            "gpu_spec": spec,
            "wait_s": scheduled - created,
        }
        rows.append(JobRow(created, name, user, kind, request, deleted - scheduled, None, qos_class[qos], meta,
                           placement=placement))
    jobs, base = assemble(rows)
    assumptions = [
        "submit time = creation_time; duration = deletion_time - scheduled_time (the time the pod held its resources)",
        f"{censored} pods were still Running at the end of the trace: their duration is a lower bound "
        "(right-censored; meta censored=True)",
        f"{failed} Failed pods are kept with the time they ran",
        f"QoS {', '.join(sorted(be_qos))} -> best-effort (BE); {', '.join(sorted(te_qos))} -> TE",
        f"CPU requests rounded up to whole CPUs (ceil(cpu_milli / 1000)); {fractional_cpu} pods asked for a "
        "fraction (exact value in meta cpu_milli)",
        "memory_mib read as MB (Slurm's MB are MiB)",
        f"no user column: every job belongs to user {user!r}",
        "one variant per pod: gpu when num_gpu > 0, else cpu (the trace has one configuration per pod)",
    ]
    if gpu_share == "whole":
        assumptions.append(
            f"{fractional_gpu} pods share a GPU (gpu_milli < 1000) and are given a whole GPU; gpu_milli is in meta"
        )
    else:
        assumptions.append("GPU requests are in GPU thousandths: gres gpu_milli = num_gpu * gpu_milli")
    if gpu_spec == "constraint":
        assumptions.append(f"{pinned} GPU pods name the GPU models they accept (gpu_spec): each is its constraint, "
                           "met by the nodes of those models")
    if skipped["pending"]:
        assumptions.append(f"{skipped['pending']} Pending pods never ran (no scheduled_time) and are skipped")
    if base:
        assumptions.append(f"submit times shifted by -{base:g} s so the first submission is at 0")
    return LoadedTrace(jobs, tuple(assumptions), f"alibaba:{path}", {k: v for k, v in skipped.items() if v})


def _constraint(row: Row, spec: str) -> Placement:
    """A pod's `gpu_spec` as a constraint ("V100M16|V100M32": any of these models); one line when unreadable."""
    try:
        return Placement(spec)
    except ConstraintError as exc:
        row.fail("gpu_spec", f"GPU models joined by | ({exc})", spec)


class TraceNode(NamedTuple):
    """A machine of a trace's cluster: its capacity and GPU model ('' for CPU-only nodes)."""

    name: str
    capacity: Resources
    gpu_model: str


@checked_options
def load_alibaba_nodes(path: str | Path) -> tuple[TraceNode, ...]:
    """The cluster of the v2023 trace (`openb_node_list_all_node.csv`: sn, cpu_milli, memory_mib, gpu, model).

    Lets a simulation run the pod list on the very cluster it came from (1,523 nodes, 6,212 GPUs); CPUs are
    whole (every node's cpu_milli is a multiple of 1000, rounded down otherwise).
    """
    nodes = []
    for row in CsvRows(path, ("sn", "cpu_milli", "memory_mib", "gpu", "model")):
        name = row.text("sn") or row.fail("sn", "a node name", "")
        cpus = row.whole("cpu_milli", low=0) // 1000
        capacity = Resources(cpus, row.whole("memory_mib", low=0), {"gpu": row.whole("gpu", low=0)})
        nodes.append(TraceNode(name, capacity, row.text("model")))
    return tuple(nodes)
