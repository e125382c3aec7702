"""Parity: every registered policy decides the same on the simulator and on Slurm (the model slurmctld), view by
view and action by action."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmx.core.model import JobClass
from slurmx.policies import available_policies
from slurmx.sim.jobs import SimJob
from tests.parity.harness import differences, job, run_both


def _trace(kinds: tuple[str, ...]) -> list[SimJob]:
    """Ten groups over two minutes on two nodes per kind: queues form, a TE group arrives to a full cluster."""
    fast = {k: d for k, d in zip(kinds, (240, 60, 90), strict=False)}
    slow = {k: d for k, d in zip(kinds, (200, 180, 150), strict=False)}
    jobs = [job(f"g{i:02d}", 10 * i, fast if i % 2 else slow, cpus=2 + i % 3) for i in range(9)]
    jobs.append(job("te", 95, dict.fromkeys(kinds, 60), cpus=2, job_class=JobClass.TE))
    return jobs


@pytest.mark.parametrize("policy", available_policies())
def test_the_daemon_decides_as_the_simulator(policy: str, tmp_path: Path) -> None:
    kinds = ("cpu", "gpu", "accel") if policy in ACCEL else ("cpu", "gpu")
    runs = run_both(policy, _trace(kinds), kinds, tmp_path)
    assert runs.sim.records, "the trace made the policy do nothing"
    assert differences(runs) == []


ACCEL = {"accel_batch", "mmi", "lrtp", "sct", "jsq_plus", "rand"}
