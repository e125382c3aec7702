"""Slurm's own backfill, live, beside the simulator's model of it (`fifo` under `cadence: slurm`, built from the
cluster's `scontrol show config` as `slurmx whatif --policy slurm` builds it): the same start order, and the job
only backfill can start waits for a backfill pass on both sides.

Plain sbatch jobs, no slurmxd, on the cpu partition (c1 and c2, 4 CPUs each), in this order:
A (2 CPUs, 40 s, limit 2 min) starts on c1 and B (4 CPUs, 40 s, limit 2 min) on c2; H (both nodes whole, 5 s)
waits for both, reserved at their limits; S (2 CPUs, 10 s, limit 1 min) fits beside A and ends before that
reservation: only a backfill pass starts it, never the main scheduler (H blocks the partition); L (2 CPUs, 10 s,
limit 5 min) would delay H, so it starts after H. The simulator replays the same submissions with the run times
Slurm measured and the time limits as estimates.

Not in the suite yet (the file name keeps it out of collection; run it by name:
`SLURMX_TEST_SLURM=24.11 .venv/bin/pytest -s tests/integration/backfill_fidelity_check.py`). On 24.11, 19 of 21 runs
matched. In two, both without backfill debug logging, Slurm never backfilled S and started it after H; each time
a backfill pass had started A at the instant of its submission and the main scheduler B a second later. The
info-level log gives no reason, and with DebugFlags=Backfill the ten runs all matched. It joins the suite once that
divergence is explained: by the model, or by a condition of the test.
"""

from __future__ import annotations

import time

import pytest

from slurmx.core.resources import Resources
from slurmx.policies.base import make_policy
from slurmx.policies.slurm_model import slurm_model
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape
from slurmx.sim.engine import Engine
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.slurm import CliSlurm
from slurmx.slurm.scheduler_config import backfill_settings, parse_show_config
from tests.integration.conftest import Cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.long_behaviour]

# name -> (nodes, CPUs per node, sleep s, limit min)
JOBS = {"A": (1, 2, 40, 2), "B": (1, 4, 40, 2), "H": (2, 4, 5, 1), "S": (1, 2, 10, 1), "L": (1, 2, 10, 5)}


def _cpu_partition_idle(admin: CliSlurm) -> bool | None:
    busy = [j for j in admin.jobs() if j.partition == "cpu" and j.state.is_active]
    return True if not busy else None


def test_slurms_backfill_and_its_model_start_the_same_jobs_in_the_same_order_on_the_pass_cadence(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, cleanup: list[int], tag: str) -> None:
    config = admin.transport.run(["scontrol", "show", "config"])
    settings = backfill_settings(parse_show_config(config.stdout))
    assert settings.backfill and settings.interval_s == 5  # the test cluster's slurm.conf
    wait_until(lambda: _cpu_partition_idle(admin), 300, "the cpu partition to be idle", every=2.0)

    ids: dict[str, int] = {}
    for name, (nodes, cpus, sleep_s, limit) in JOBS.items():
        ids[name] = slurm.submit(f"#!/bin/bash\nsleep {sleep_s}\n", [
            "--partition=cpu", f"--nodes={nodes}", "--ntasks-per-node=1", f"--cpus-per-task={cpus}",
            "--mem=1000M", f"--time={limit}", f"--job-name={tag}-{name}", "--output=/dev/null"])
        cleanup.append(ids[name])
        time.sleep(1.0)  # distinct submit seconds: the queue order is the submission order
    by_id = {v: k for k, v in ids.items()}

    def done() -> dict[str, tuple[int, int, int]] | None:
        found = {by_id[j.job_id]: j for j in admin.jobs(list(ids.values()))}
        if len(found) < len(ids) or any(j.state.is_active for j in found.values()):
            return None
        return {name: (j.submit_time or 0, j.start_time or 0, j.end_time or 0) for name, j in found.items()}

    live = wait_until(done, 300, "the five jobs to end", every=2.0)
    assert all(start and end for _, start, end in live.values()), live
    t0 = min(submit for submit, _, _ in live.values())
    live_order = sorted(live, key=lambda n: (live[n][1], ids[n]))

    jobs = [SimJob(name, "alice", float(submit - t0), {"cpu": SimVariant(
        "cpu", Resources(JOBS[name][1], 1000), float(max(1, end - start)), float(JOBS[name][3] * 60),
        nodes=JOBS[name][0])}) for name, (submit, start, end) in live.items()]
    cluster_model = ModelCluster([PartitionShape("cpu", "cpu", (NodeShape(2, Resources(4, 8000), "c"),))])
    policy, _ = slurm_model(settings)
    modelled = {r.job_id: r.first_start for r in Engine(cluster_model, policy, jobs).run().jobs}
    every = {r.job_id: r.first_start for r in Engine(cluster_model, make_policy("fifo", {"backfill": "easy"}),
                                                     jobs).run().jobs}
    model_order = sorted(modelled, key=lambda n: (modelled[n] or 0.0, ids[n]))

    print("starts after the first submission, live / model:", ", ".join(
        f"{n} {live[n][1] - t0} / {modelled[n]:g}" for n in live_order))
    assert live_order == model_order == ["A", "B", "S", "H", "L"], (live, modelled)
    live_wait_s = live["S"][1] - live["S"][0]
    model_wait_s = (modelled["S"] or 0.0) - (live["S"][0] - t0)
    # Neither side's main scheduler starts S (it stops at H); a pass does, within bf_interval of its submission
    # (live: plus Slurm's start latency, in whole seconds). The passes' phase is each side's own: the model's
    # fall on multiples of bf_interval from the first submission, Slurm's every bf_interval after its last one.
    assert 0 < model_wait_s <= settings.interval_s, modelled
    assert 0 <= live_wait_s <= settings.interval_s + 3, live
    # The model with a pass at every decision would have started it at once: the cadence is what matches.
    assert every["S"] == live["S"][0] - t0
