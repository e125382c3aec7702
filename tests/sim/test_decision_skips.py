"""The engine skips a decision only when the policy's plan would be empty, and its incremental view is the view a
from-scratch build gives: checked by asking the policy anyway, on a view rebuilt from scratch, at every skip, and by
comparing whole runs with skipping off and the naive view on."""

from __future__ import annotations

import numpy as np
import pytest

from slurmx.core.model import ClusterView
from slurmx.core.placement import Placement
from slurmx.core.resources import Resources
from slurmx.policies import make_policy
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape
from slurmx.sim.config import EngineOptions
from slurmx.sim.engine import Engine
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.metrics import SimResult

STRICT = make_policy("fifo")


def mixed_cluster() -> ModelCluster:
    return ModelCluster([
        PartitionShape("cpu", "cpu", (NodeShape(6, Resources(8, 8192), "c"), NodeShape(2, Resources(16, 4096), "b",
                                                                                          ("big",)))),
        PartitionShape("gpu", "gpu", (NodeShape(2, Resources(8, 8192, {"gpu": 2}), "g"),)),
    ])


def queued_workload(seed: int, n: int = 400) -> list[SimJob]:
    """A queue that grows: one- and multi-node jobs, memory-bound ones, a feature constraint, whole nodes, a GPU
    variant beside a CPU one, and whole-second times so that finishes and arrivals share instants."""
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.integers(0, 4 * n, n)).astype(float)
    big = Placement("big")
    out = []
    for i in range(n):
        cpus = int(rng.choice([1, 2, 4, 8]))
        mem = int(rng.choice([256, 1024, 4096]))
        nodes = int(rng.choice([1, 1, 1, 2, 3]))
        duration = float(rng.integers(5, 200))
        variants = {"cpu": SimVariant("cpu", Resources(cpus, mem), duration, nodes=nodes)}
        if i % 7 == 0:
            variants["cpu"] = SimVariant("cpu", Resources(cpus, mem), duration, placement=big)
        elif i % 11 == 0:
            variants["cpu"] = SimVariant("cpu", Resources(1, 256), duration,
                                         placement=Placement(exclusive=True))
        if i % 4 == 0:
            variants["gpu"] = SimVariant("gpu", Resources(2, 1024, {"gpu": 1}), duration / 2)
        out.append(SimJob(f"j{i}", f"u{i % 5}", float(submit[i]), variants))
    return out


class CheckedSkips(Engine):
    """Asks the policy anyway at every scheduling point the engine skips, on a view built from scratch, and fails
    unless that plan is empty."""

    skips = 0

    def _nothing_to_decide(self, now: float) -> bool:
        skip = super()._nothing_to_decide(now)
        if skip:
            fresh = ClusterView(now, self.cluster.rebuild_views(), self.cluster.partitions,
                                {gid: self._group_view(j) for gid, j in self._visible.items()}, self.cluster.kinds)
            plan = self._between.schedule(fresh, now)
            assert plan.actions == (), f"t={now:g}: a skipped decision would have planned {plan.actions}"
            self.skips += 1
        return skip


class NeverSkips(Engine):
    def _nothing_to_decide(self, now: float) -> bool:
        return False


def records(result: SimResult) -> list[tuple[str, float | None, float, str | None]]:
    return [(r.job_id, r.first_start, r.finish, r.kind) for r in result.jobs]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_skipped_decision_would_have_planned_nothing(seed: int) -> None:
    engine = CheckedSkips(mixed_cluster(), STRICT, queued_workload(seed))
    result = engine.run()
    assert engine.skips > 50 and result.stats.policy_calls_skipped == engine.skips


@pytest.mark.parametrize("policy", [{}, {"backfill": "easy"}, {"backfill": "easy", "backfill_depth": 3}])
@pytest.mark.parametrize("seed", [4, 5])
def test_skips_and_the_incremental_view_leave_the_schedule_of_a_from_scratch_run_unchanged(
        policy: dict[str, object], seed: int) -> None:
    jobs = queued_workload(seed)
    fifo = make_policy("fifo", policy)
    ours = Engine(mixed_cluster(), fifo, jobs).run()
    scratch = NeverSkips(mixed_cluster(), fifo, jobs, EngineOptions(view="naive")).run()
    assert records(ours) == records(scratch)
    assert ours.stats.policy_calls + ours.stats.policy_calls_skipped == scratch.stats.policy_calls
    if not policy:  # strict FIFO waits for room its oldest group fits in
        assert ours.stats.policy_calls_skipped > 50
