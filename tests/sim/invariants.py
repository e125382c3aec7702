"""An engine that checks the model world's placement invariants after every event and every decision (tests only).

Recomputed from the jobs, apart from the model cluster's own bookkeeping, so a bug in either shows: no node holds
more than its capacity, and what each node holds is what its running jobs hold there; every running variant is on
exactly its node count of distinct nodes of its partition, each one its placement admits (features, required and
excluded nodes), and an exclusive one is alone on each of its nodes and holds it whole.
"""

from __future__ import annotations

from slurmx.core.placement import ANYWHERE
from slurmx.policies.base import Policy
from slurmx.sim.cluster import SimulationInvariantError
from slurmx.sim.engine import Engine
from slurmx.sim.engine_state import GRACE, RUNNING


class CheckedEngine(Engine):
    """`Engine` with `check()` after each event handler and each policy decision; `checks` counts them."""

    checks = 0

    def check(self) -> None:
        self.checks += 1
        cluster = self.cluster
        held: dict[int, list[int]] = {}
        owners: dict[int, list[str]] = {}
        for j in self._jobs.values():
            if j.status not in (RUNNING, GRACE):
                continue
            assert j.kind is not None
            facts = j.facts[j.kind]
            where = f"t={self.now:g}: group {j.group_id} ({j.kind})"
            if len(j.nodes) != facts.node_count or len(set(j.nodes)) != facts.node_count:
                raise SimulationInvariantError(f"{where} runs on {j.nodes}, not {facts.node_count} distinct nodes")
            for index in j.nodes:
                node = cluster.nodes[index]
                if node.partition != cluster.kinds[j.kind]:
                    raise SimulationInvariantError(f"{where} runs on {node.name} outside its partition")
                placement = facts.placement
                if placement is not ANYWHERE and not placement.admits(node.name, node.features):
                    raise SimulationInvariantError(f"{where} runs on {node.name} ({','.join(node.features)}), "
                                                   f"which its placement ({placement.describe()}) does not admit")
                vec = node.capacity if placement.exclusive else j.alloc_vec
                total = held.setdefault(index, [0] * len(vec))
                total[:] = [a + b for a, b in zip(total, vec, strict=True)]
                owners.setdefault(index, []).append(j.group_id + ("!" if placement.exclusive else ""))
        for index, node in enumerate(cluster.nodes):
            total = held.get(index, [0] * len(node.capacity))
            if any(a > c for a, c in zip(total, node.capacity, strict=True)):
                raise SimulationInvariantError(f"t={self.now:g}: node {node.name} holds {total}, over its capacity "
                                               f"{list(node.capacity)} ({', '.join(owners[index])})")
            if total != node.allocated:
                raise SimulationInvariantError(f"t={self.now:g}: node {node.name}: its jobs hold {total}, the model "
                                               f"says {node.allocated}")
            here = owners.get(index, [])
            if len(here) > 1 and any(o.endswith("!") for o in here):
                raise SimulationInvariantError(f"t={self.now:g}: node {node.name} holds an exclusive job beside "
                                               f"others: {', '.join(here)}")

    def _on_finish(self, idx: int, version: int, t: float) -> bool:
        moved = super()._on_finish(idx, version, t)
        self.check()
        return moved

    def _on_grace_end(self, idx: int, version: int, t: float) -> bool:
        moved = super()._on_grace_end(idx, version, t)
        self.check()
        return moved

    def _on_arrival(self, idx: int, version: int, t: float) -> bool:
        moved = super()._on_arrival(idx, version, t)
        self.check()
        return moved

    def _on_profiled(self, idx: int, version: int, t: float) -> bool:
        moved = super()._on_profiled(idx, version, t)
        self.check()
        return moved

    def _on_tick(self, payload: int, version: int, t: float) -> bool:
        moved = super()._on_tick(payload, version, t)
        self.check()
        return moved

    def _schedule(self, now: float, policy: Policy) -> tuple[bool, bool]:
        got = super()._schedule(now, policy)
        self.check()
        return got
