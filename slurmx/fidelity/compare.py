"""The same workload through the simulator, and the two runs side by side: average JCT, makespan, start order.

The simulator runs the site's policy on a model of the live cluster (its nodes, as Slurm reports their capacity),
in event mode, with `checkpoint: lose` (a `sleep` payload requeued by a preemption starts over, as on Slurm).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from slurmx.core.config import SiteConfig
from slurmx.core.model import Node, Partition
from slurmx.cycle import DecisionLog
from slurmx.policies import make_policy
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape
from slurmx.sim.config import EngineOptions
from slurmx.sim.engine import Engine
from slurmx.sim.jobs import SimJob

__all__ = ["Comparison", "Outcome", "compare", "latency_options", "model_of", "sim_outcome"]


@dataclass(frozen=True)
class Outcome:
    """One run of the workload: per group (id -> submit, first start, end, kind), from time 0."""

    groups: dict[str, tuple[float, float, float, str]]

    @property
    def mean_jct_s(self) -> float:
        return sum(end - submit for submit, _, end, _ in self.groups.values()) / len(self.groups)

    @property
    def makespan_s(self) -> float:
        return max(end for _, _, end, _ in self.groups.values()) - min(s for s, _, _, _ in self.groups.values())

    @property
    def mean_wait_s(self) -> float:
        return sum(start - submit for submit, start, _, _ in self.groups.values()) / len(self.groups)

    def start_order(self) -> list[str]:
        return sorted(self.groups, key=lambda g: (self.groups[g][1], g))


@dataclass(frozen=True)
class Comparison:
    sim: Outcome
    live: Outcome

    def rows(self) -> list[tuple[str, float, float, float]]:
        """(metric, simulator, live, live vs simulator in %)."""
        pairs = [("average JCT (s)", self.sim.mean_jct_s, self.live.mean_jct_s),
                 ("makespan (s)", self.sim.makespan_s, self.live.makespan_s),
                 ("average wait (s)", self.sim.mean_wait_s, self.live.mean_wait_s)]
        return [(name, s, v, (v / s - 1) * 100 if s else 0.0) for name, s, v in pairs]

    def same_start_order(self) -> bool:
        return self.sim.start_order() == self.live.start_order()

    def first_order_difference(self) -> int | None:
        for i, (a, b) in enumerate(zip(self.sim.start_order(), self.live.start_order(), strict=True)):
            if a != b:
                return i
        return None

    def same_kinds(self) -> float:
        """The share of groups that ran the same variant kind in both runs."""
        same = sum(self.sim.groups[g][3] == self.live.groups[g][3] for g in self.sim.groups)
        return same / len(self.sim.groups)


def model_of(site: SiteConfig, nodes: Iterable[Node], partitions: Iterable[Partition]) -> ModelCluster:
    """The live cluster as the simulator models it: every node of each site kind's partition, as Slurm sizes it."""
    by_name = {n.name: n for n in nodes}
    members = {p.name: p.nodes for p in partitions}
    shapes = []
    for kind, cfg in site.resources.items():
        names = [n for n in members.get(cfg.partition, ()) if n in by_name]
        if names:
            shapes.append(PartitionShape(cfg.partition, kind, tuple(
                NodeShape(1, by_name[n].capacity, f"{n}-") for n in names)))
    return ModelCluster(shapes)


def sim_outcome(site: SiteConfig, cluster: ModelCluster, jobs: Sequence[SimJob],
                decisions: DecisionLog | None = None, options: EngineOptions | None = None) -> Outcome:
    """The simulator's run: by default event mode without latency (`latency_options`: with the live ones)."""
    policy = make_policy(site.policy.name, site.policy.params)
    result = Engine(cluster, policy, jobs, options or EngineOptions(checkpoint="lose"), decisions=decisions).run()
    return Outcome({r.job_id: (r.submit, r.first_start if r.first_start is not None else r.finish, r.finish,
                               r.kind or "") for r in result.jobs})


def compare(sim: Outcome, live: Outcome) -> Comparison:
    return Comparison(sim, live)


def latency_options(interval_s: float, start_latency_s: float, requeue_delay_s: float | None = None) -> EngineOptions:
    """The simulator with the live run's latencies: a decision every cycle (`tick` at the daemon's interval, so an
    arrival or a finish waits for the next cycle), Slurm's measured start latency after each release, and the
    victims' measured time from the grace signal to their requeue (their hook exits on the signal)."""
    return EngineOptions(checkpoint="lose", mode="tick", period_s=interval_s, start_latency_s=start_latency_s,
                         requeue_delay_s=requeue_delay_s)
