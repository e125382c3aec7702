"""Parity: every registered policy decides the same on the simulator and on Slurm (the model slurmctld), view by
view and action by action."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmx.core.model import JobClass
from slurmx.core.placement import Placement
from slurmx.policies import available_policies
from slurmx.sim.jobs import SimJob
from tests.parity.harness import differences, job, model_cluster, run_both


def _trace(kinds: tuple[str, ...]) -> list[SimJob]:
    """Ten groups over two minutes on two nodes per kind: queues form, a TE group arrives to a full cluster."""
    fast = {k: d for k, d in zip(kinds, (240, 60, 90), strict=False)}
    slow = {k: d for k, d in zip(kinds, (200, 180, 150), strict=False)}
    jobs = [job(f"g{i:02d}", 10 * i, fast if i % 2 else slow, cpus=2 + i % 3) for i in range(9)]
    jobs.append(job("te", 95, dict.fromkeys(kinds, 60), cpus=2, job_class=JobClass.TE))
    return jobs


# Every policy on two kinds and on three: none is told apart by its name (each places on the kinds the view has).
KINDS = [("cpu", "gpu"), ("cpu", "gpu", "accel")]


@pytest.mark.parametrize("kinds", KINDS, ids=len)
@pytest.mark.parametrize("policy", available_policies())
def test_the_daemon_decides_as_the_simulator(policy: str, kinds: tuple[str, ...], tmp_path: Path) -> None:
    runs = run_both(policy, _trace(kinds), kinds, tmp_path)
    assert runs.sim.records, "the trace made the policy do nothing"
    assert differences(runs) == []


FEATURES = (("a",), ("a", "b"), ("b",))  # node i of each kind: c0-001 a, c1-001 a+b, c2-001 b (and g*, a*)


def _placed_trace(kinds: tuple[str, ...]) -> list[SimJob]:
    """Twelve groups on three nodes per kind: plain ones, and ones on two nodes, pinned to feature b, kept off
    the first node of each kind, holding whole nodes, and two nodes with feature b."""
    jobs = _trace(kinds)[:6]
    every = dict.fromkeys(kinds, 90)
    off_first = tuple(f"{k[0]}0-001" for k in kinds)
    jobs += [job("wide", 15, every, cpus=2, nodes=2), job("pinned", 25, every, cpus=3, placement=Placement("b")),
             job("off", 35, every, cpus=2, placement=Placement(excluded=off_first)),
             job("whole", 45, every, placement=Placement(exclusive=True)),
             job("wideb", 55, every, cpus=1, nodes=2, placement=Placement("b")),
             job("te2", 95, dict.fromkeys(kinds, 60), cpus=2, job_class=JobClass.TE, nodes=2)]
    return jobs


@pytest.mark.parametrize("kinds", KINDS, ids=len)
@pytest.mark.parametrize("policy", available_policies())
def test_constrained_and_multi_node_groups_decide_alike(policy: str, kinds: tuple[str, ...], tmp_path: Path) -> None:
    runs = run_both(policy, _placed_trace(kinds), kinds, tmp_path, cluster=model_cluster(kinds, features=FEATURES))
    started = {r.group_id for r in runs.sim.records if r.action == "Start"}
    assert {"wide", "pinned", "off", "whole", "wideb"} <= started, "a constrained or wide group never started"
    assert differences(runs) == []
