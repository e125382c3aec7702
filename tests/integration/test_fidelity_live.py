"""The same arrivals decided live (slurmxd's cycle on the real cluster) and in the simulator: the same decisions.

Each workload is built so that timing cannot reorder decisions: the groups arrive together (the first decision is
on the same view on both sides) and their durations lie at least 6 s apart (Slurm's start latency and the 1 s
cycle shift every finish by a second or two, never past the next one). The decision logs are then compared as
the sequence of applied starts (group, kind) and preemptions (victim), in decision order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmx.core.config import load_site_config
from slurmx.core.model import JobClass
from slurmx.core.resources import Resources
from slurmx.cycle import DecisionLog
from slurmx.cycle.log import APPLIED
from slurmx.fidelity.compare import model_of, sim_outcome
from slurmx.fidelity.live import run_live
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.slurm import CliSlurm
from tests.integration.conftest import Cluster
from tests.integration.test_daemon_helpers import daemon_site

pytestmark = [pytest.mark.integration, pytest.mark.long_behaviour]


def _group(i: int, submit: float, cpu_s: int, gpu_s: int | None, cpus: int = 2,
           job_class: JobClass = JobClass.BE) -> SimJob:
    variants = {"cpu": SimVariant("cpu", Resources(cpus, 500), cpu_s, cpu_s)}
    if gpu_s is not None:
        variants["gpu"] = SimVariant("gpu", Resources(1, 500, {"gpu": 1}), gpu_s, gpu_s)
    return SimJob(f"fx{i:02d}", "alice", submit, variants, job_class=job_class, grace_s=5)


def _sequence(log: DecisionLog, names: dict[str, str]) -> list[tuple[str, str, str]]:
    """(action, workload group, kind or '') of every applied start and preemption, in decision order."""
    out = []
    for r in log.records:
        if r.outcome.status == APPLIED and r.action in ("Start", "Preempt"):
            out.append((r.action, names.get(r.group_id, r.group_id), r.kind))
    return out


def _both(cluster: Cluster, admin: CliSlurm, tmp_path: Path, policy: str, jobs: list[SimJob],
          kinds: tuple[str, ...]) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]], list[str]]:
    site = load_site_config(daemon_site(cluster, tmp_path, policy, kinds=kinds, grace=5))
    site = site.model_copy(update={"profile": site.profile.model_copy(update={"enabled": False})})
    sim_log, live_log = DecisionLog(), DecisionLog()
    sim = sim_outcome(site, model_of(site, admin.nodes(), admin.partitions()), jobs, sim_log)
    groups = run_live(site, admin, jobs, tmp_path / "state", timeout=600, decisions=live_log)
    names = {g.group_id: g.job_id for g in groups}
    kinds_ran = [f"{g.job_id}:{g.kind}/{sim.groups[g.job_id][3]}" for g in groups]
    return _sequence(sim_log, {}), _sequence(live_log, names), kinds_ran


def test_fifo_live_starts_the_groups_in_the_simulators_order(cluster: Cluster, admin: CliSlurm,
                                                             tmp_path: Path) -> None:
    jobs = [_group(i, 0.0, 6 + 6 * i, None, cpus=3) for i in range(4)]  # 2 cpu nodes x 4 CPUs: one job each
    sim, live, kinds = _both(cluster, admin, tmp_path, "fifo", jobs, ("cpu",))
    assert len(sim) == 4
    assert live == sim, kinds


def test_allox_live_picks_the_simulators_variants_in_its_order(cluster: Cluster, admin: CliSlurm,
                                                               tmp_path: Path) -> None:
    durations = [(40, 10), (16, 14), (52, 12), (22, 20), (64, 28), (34, 32)]  # every other group gains on a GPU
    jobs = [_group(i, 0.0, c, g) for i, (c, g) in enumerate(durations)]
    sim, live, kinds = _both(cluster, admin, tmp_path, "allox", jobs, ("cpu", "gpu"))
    assert len(sim) == 6
    assert live == sim, kinds
    assert all(k.split(":")[1].split("/")[0] == k.split("/")[1] for k in kinds), kinds


def test_fitgpp_live_preempts_the_simulators_victim(cluster: Cluster, admin: CliSlurm, tmp_path: Path) -> None:
    jobs = [_group(i, 0.0, 30 + 6 * i, None, cpus=c) for i, c in enumerate((3, 1, 2, 2))]  # fill c1 and c2
    jobs.append(_group(9, 12.0, 10, None, cpus=1, job_class=JobClass.TE))
    sim, live, kinds = _both(cluster, admin, tmp_path, "fitgpp", jobs, ("cpu",))
    assert any(a[0] == "Preempt" for a in sim), sim
    assert live == sim, kinds
