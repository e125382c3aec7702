"""Parity: a policy's memo (`Plan.memo` handed back as the next `ClusterView.memo`) travels the same way through the
simulator and through the daemon, because the cycle carries it, not either backend."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from slurmx.core.actions import Plan, Start
from slurmx.core.model import ClusterView
from slurmx.policies.base import Capabilities
from tests.parity.harness import differences, run_both
from tests.parity.test_parity import _trace

KINDS = ("cpu", "gpu")


class MemoProbe:
    """Counts its decisions in its memo and starts the oldest groups that fit, one when the count it was handed is
    even and two when it is odd, so a memo lost or doubled by one backend changes what that backend starts."""

    name: ClassVar[str] = "memo-probe"
    capabilities: ClassVar[Capabilities] = Capabilities(max_nodes=1, places_constraints=False)

    def __init__(self) -> None:
        self.seen: list[object] = []

    def schedule(self, view: ClusterView, now: float) -> Plan:
        self.seen.append(view.memo)
        count = view.memo if isinstance(view.memo, int) else 0
        starts: list[Start] = []
        used: set[str] = set()
        for group in view.pending_groups():
            variant = group.variants[0]
            node = next((n for n in view.fitting_node_names(variant.kind, variant.request) if n not in used), None)
            if node is not None and len(starts) < 1 + count % 2:
                used.add(node)
                starts.append(Start(group.group_id, variant.kind, (node,), variant.request, reason="probe"))
        return Plan(tuple(starts), memo=count + 1)


def test_the_memo_travels_alike_through_both_backends(tmp_path: Path) -> None:
    probes: list[MemoProbe] = []

    def make() -> MemoProbe:
        probes.append(MemoProbe())
        return probes[-1]

    runs = run_both("fifo", _trace(KINDS), KINDS, tmp_path, make=make)  # type: ignore[arg-type]
    sim, slurm = probes
    assert sim.seen[0] is None and sim.seen[1:] == list(range(1, len(sim.seen)))
    assert slurm.seen == sim.seen
    assert len({r.group_id for r in runs.sim.records if r.action == "Start"}) >= 5
    assert differences(runs) == []


def test_allox_with_its_books_in_the_memo_decides_alike_through_both_backends(tmp_path: Path) -> None:
    runs = run_both("allox", _trace(KINDS), KINDS, tmp_path, params={"books": True, "n_max": 50})
    assert runs.sim.records, "the trace made the policy do nothing"
    assert differences(runs) == []
