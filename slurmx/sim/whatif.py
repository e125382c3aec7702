"""What-if on a site's own history: replay its Slurm accounting under other policies, beside what Slurm did.

The cluster is the site's own: a node listing (`scontrol show nodes --json`, or `sinfo --json` on 22.05) read by
the adapter's parser, each node in the partition the site config maps to a kind (the site config says which
partitions serve which kinds but not how many nodes they have, so the listing is needed). Jobs are the accounting
trace (`slurmx.sim.traces.sacct`); a job its kind cannot hold on any node is left out and counted, like every
other job the replay cannot serve. Each policy runs in the unchanged engine, event mode, with the site's grace.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmx.core.config import SiteConfig
from slurmx.core.model import Node
from slurmx.core.resources import Resources
from slurmx.policies.base import Policy, make_policy
from slurmx.sim import engine
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape, SimulationError
from slurmx.sim.config import EngineOptions
from slurmx.sim.jobs import SimJob
from slurmx.sim.metrics import SimResult
from slurmx.sim.traces import LoadedTrace, load_sacct
from slurmx.sim.whatif_stats import JobTimes, actual_times, compare, simulated_times
from slurmx.slurm.errors import SlurmError
from slurmx.slurm.parse import parse_nodes

__all__ = ["WhatIf", "WhatIfError", "cluster_from_nodes", "load_history", "read_nodes", "replay", "unstartable"]


class WhatIfError(ValueError):
    """A what-if that cannot run (unreadable node listing, no job left to replay); one line, with the fix."""


@dataclass(frozen=True)
class WhatIf:
    """The history, the cluster it ran on, and one simulated run per policy."""

    trace: LoadedTrace
    partitions: tuple[PartitionShape, ...]
    jobs: tuple[SimJob, ...]
    skipped: Mapping[str, int]
    notes: tuple[str, ...]
    actual: tuple[JobTimes, ...]
    runs: Mapping[str, tuple[SimResult, tuple[JobTimes, ...]]]
    failed: Mapping[str, str]  # policy -> why it could not replay this history (e.g. a kind of job it never starts)

    def document(self, moved: int = 10) -> dict[str, Any]:
        """Everything as one JSON-ready object: actual and each policy's statistics, and the moved jobs."""
        capacity = {(p.name, dim): amount for p in self.partitions for dim, amount in _capacity(p).items()}
        return {
            "source": self.trace.source,
            "jobs": {"replayed": len(self.jobs), "skipped": dict(sorted(self.skipped.items())),
                     "skipped_total": sum(self.skipped.values())},
            "assumptions": [*self.trace.assumptions, *self.notes],
            "cluster": [{"partition": p.name, "kind": p.kind, "nodes": [
                {"count": s.count, "capacity": str(s.capacity)} for s in p.nodes]} for p in self.partitions],
            **compare(self.actual, {name: times for name, (_, times) in self.runs.items()}, capacity, moved),
            "failed": dict(self.failed),
        }


def read_nodes(path: str | Path) -> list[Node]:
    """A node listing as `scontrol show nodes --json` (24.11+) or `sinfo --json` (22.05) print it."""
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise WhatIfError(f"--nodes {path}: cannot read ({exc.strerror or exc}); dump it with "
                          "`scontrol show nodes --json > nodes.json`") from None
    try:
        return parse_nodes(text)
    except SlurmError as exc:
        raise WhatIfError(f"--nodes {path}: not a node listing ({exc}); dump it with "
                          "`scontrol show nodes --json` (sinfo --json on 22.05)") from None


def _capacity(partition: PartitionShape) -> dict[str, int]:
    total: Counter[str] = Counter()
    for shape in partition.nodes:
        total["cpus"] += shape.count * shape.capacity.cpus
        total["mem_mb"] += shape.count * shape.capacity.mem_mb
        for name, count in shape.capacity.gres.items():
            total[f"gres/{name}"] += shape.count * count
    return dict(total)


def cluster_from_nodes(nodes: Sequence[Node], kinds: Mapping[str, str]) -> tuple[tuple[PartitionShape, ...],
                                                                               tuple[str, ...]]:
    """One partition per kind the site maps (`kinds`: partition -> kind), made of the listed nodes' capacities.

    A node in several mapped partitions serves the first of them in the site's order (the model gives a node one
    partition); a node in none is left out. Both are said in the returned notes. Each node keeps its features.
    """
    order = list(kinds)
    shapes: dict[str, Counter[tuple[Resources, tuple[str, ...]]]] = {p: Counter() for p in order}
    shared = unmapped = 0
    for node in nodes:
        mapped = [p for p in order if p in node.partitions]
        if not mapped:
            unmapped += 1
            continue
        shared += len(mapped) > 1
        shapes[mapped[0]][(node.capacity, node.features)] += 1
    partitions = []
    for name in order:
        if shapes[name]:
            groups = tuple(NodeShape(count, cap, f"{name}{i}-", features) for i, ((cap, features), count)
                           in enumerate(sorted(shapes[name].items(), key=lambda kv: str(kv[0]))))
            partitions.append(PartitionShape(name, kinds[name], groups))
    if not partitions:
        raise WhatIfError(f"the node listing has no node in the site's partitions ({', '.join(order)}); pass the "
                          "listing of this cluster, or a site config whose kinds name its partitions")
    notes = ["cluster = the node listing: " + ", ".join(
        f"{p.name} ({p.kind}) {sum(s.count for s in p.nodes)} nodes" for p in partitions)]
    if shared:
        notes.append(f"{shared} nodes are in several partitions of the site; each serves the first in the site's order")
    if unmapped:
        notes.append(f"{unmapped} listed nodes are in no partition of the site config and are left out")
    return tuple(partitions), tuple(notes)


def load_history(path: str | Path, site: SiteConfig, limit: int | None = None) -> LoadedTrace:
    """The accounting dump, with the site's partitions as kinds and its TE QOS as the TE class."""
    pairs = [f"{k.partition}={name}" for name, k in site.resources.items()]
    return load_sacct(path, kinds=pairs, te_qos=site.qos_for("te"), limit=limit)


def _servable(jobs: Sequence[SimJob], partitions: Sequence[PartitionShape]) -> tuple[list[SimJob], Counter[str]]:
    largest = {p.kind: [s.capacity for s in p.nodes] for p in partitions}
    kept, skipped = [], Counter[str]()
    for job in jobs:
        (kind, variant), = job.variants.items()
        if kind not in largest:
            skipped[f"kind {kind}: no node of the listing serves it"] += 1
        elif not any(variant.request.fits_in(cap) for cap in largest[kind]):
            skipped[f"larger than any {kind} node"] += 1
        elif variant.nodes > sum(s.count for p in partitions if p.kind == kind for s in p.nodes):
            skipped[f"on more nodes than the {kind} listing has"] += 1
        else:
            kept.append(job)
    return kept, skipped


def unstartable(make: Callable[[], Policy], partitions: Sequence[PartitionShape], jobs: Sequence[SimJob]) \
        -> dict[str, int]:
    """Job shapes (kind, class, request) `policy` does not start even alone on the empty cluster, with how many jobs
    have each shape.

    Why: a policy that cannot start a kind of job (AlloX and multi-GPU jobs) is otherwise found only by the
    engine's stall check, after the whole history has been replayed around it (minutes on a month); one
    one-job run per distinct shape (a fresh policy from `make` each) finds it in a second.
    """
    shapes: dict[tuple[str, str, Resources, int], list[SimJob]] = {}
    for job in jobs:
        ((kind, variant),) = job.variants.items()
        shapes.setdefault((kind, job.job_class.value, variant.request, variant.nodes), []).append(job)
    refused = {}
    for (kind, job_class, request, nodes), same in shapes.items():
        probe = dataclasses.replace(same[0], job_id="probe", submit_time=0.0)
        try:
            engine.Engine(ModelCluster(partitions), make(), [probe], EngineOptions()).run()
        except SimulationError:
            wide = f" on each of {nodes} nodes" if nodes > 1 else ""
            refused[f"{kind} {job_class.upper()} {request}{wide}"] = len(same)
    return refused


def replay(trace: LoadedTrace, nodes: Sequence[Node], site: SiteConfig, policies: Sequence[str],
           progress: Callable[[str], None] | None = None,
           models: Mapping[str, Callable[[], Policy]] | None = None) -> WhatIf:
    """Run each policy on the history (site's params for the site's own policy, defaults for the others; a name
    in `models` is built by its factory: the model of Slurm's own scheduling, `--policy slurm`)."""
    kinds = {k.partition: name for name, k in site.resources.items()}
    partitions, notes = cluster_from_nodes(nodes, kinds)
    grace = site.preemption.grace_s
    jobs, unfit = _servable([dataclasses.replace(j, grace_s=grace) for j in trace.jobs], partitions)
    if not jobs:
        skipped = ", ".join(f"{n} {reason}" for reason, n in {**trace.skipped, **unfit}.items()) or "none"
        raise WhatIfError(f"{trace.source.removeprefix('sacct:')}: no job left to replay (left out: {skipped}); "
                          "dump a longer window, or check the site's partitions")
    runs, failed = {}, {}
    for name in policies:
        if progress is not None:
            progress(name)
        params = site.policy.params if name == site.policy.name else {}
        make = (models or {}).get(name) or functools.partial(make_policy, name, params, f"--policy {name}")
        refused = unstartable(make, partitions, jobs)
        if refused:
            worst = sorted(refused.items(), key=lambda kv: -kv[1])
            more = f"; and {len(worst) - 3} more shapes" if len(worst) > 3 else ""
            failed[name] = (f"never starts {sum(refused.values()):,} of the jobs, even alone on the empty cluster: "
                            + "; ".join(f"{n:,} like {shape}" for shape, n in worst[:3]) + more)
            continue
        try:
            result = engine.Engine(ModelCluster(partitions), make(), jobs, EngineOptions()).run()
        except SimulationError as exc:  # one policy that cannot serve this history must not hide the others
            failed[name] = str(exc)
            continue
        runs[name] = (result, simulated_times(result, jobs))
    notes += (f"each policy runs in the simulator's event mode; preemption grace {grace} s (the site's)",)
    return WhatIf(trace, partitions, tuple(jobs), {**trace.skipped, **unfit}, notes, actual_times(jobs), runs,
                  failed)

