"""Crash safety on the real cluster: slurmxd SIGKILLed at random moments (and slurmctld restarted) during a
workload, restarted each time; every group must complete exactly once and nothing may be left held.

The sizes are parameters so CI stays fast: `make test` runs the defaults below; `make test-daemon-crash` runs the
issue's full count (40 groups, 20 kills, 2 slurmctld restarts) through the environment variables
SLURMX_CRASH_GROUPS, SLURMX_CRASH_KILLS and SLURMX_CRASH_CTLD_RESTARTS.
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from pathlib import Path

import pytest

from slurmx.core.model import VariantState
from slurmx.daemon.store import Store
from slurmx.slurm import CliSlurm
from tests.integration.conftest import Cluster, wait_until
from tests.integration.test_daemon_helpers import (
    DaemonProcess,
    Submitted,
    daemon_site,
    shared_folder,
    submit_group,
    wait_finished,
)

GROUPS = int(os.environ.get("SLURMX_CRASH_GROUPS", "12"))
KILLS = int(os.environ.get("SLURMX_CRASH_KILLS", "6"))
CTLD_RESTARTS = int(os.environ.get("SLURMX_CRASH_CTLD_RESTARTS", "1"))
SEED = int(os.environ.get("SLURMX_CRASH_SEED", "9"))


def _restart_slurmctld(cluster: Cluster, admin: CliSlurm) -> None:
    subprocess.run(["docker", "restart", cluster.container("ctld")], check=True, capture_output=True, timeout=120)
    wait_until(admin.ping, 120, "slurmctld to answer after its restart")


@pytest.mark.long_behaviour
def test_daemon_killed_at_random_moments_completes_every_group_exactly_once(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    rng = random.Random(SEED)
    site = daemon_site(cluster, tmp_path, "allox", start_timeout=45)
    marks = shared_folder(cluster, f"{tag}-marks")
    groups: list[Submitted] = []
    for i in range(GROUPS):
        gid = f"{tag}-{i:02d}"
        cpu_s, gpu_s = rng.choice([(4, 2), (2, 2), (6, 1)])
        groups.append(submit_group(slurm, tag, {
            kind: (seconds * 4, f"echo ran >> {marks}/{gid}.{kind}.ran; sleep {seconds}")
            for kind, seconds in (("cpu", cpu_s), ("gpu", gpu_s))}, group_id=gid))
    cleanup.extend(j for g in groups for j in g.jobs.values())
    daemon = DaemonProcess(site, tmp_path / "slurmxd.log")
    restarts_at = set(rng.sample(range(KILLS), min(CTLD_RESTARTS, KILLS)))
    daemon.start()
    try:
        for k in range(KILLS):
            # Past its start-up checks, then a random moment: mid-observe, mid-release, mid-cancel, idle.
            wait_until(lambda: daemon.text().count("slurmxd started") >= daemon.lives, 60,
                       "the daemon to enter its loop", every=0.2)
            time.sleep(rng.uniform(0.2, 3.0))
            if k in restarts_at:  # slurmctld goes away under a running daemon, which must wait and resume
                _restart_slurmctld(cluster, admin)
                time.sleep(rng.uniform(0.5, 2.0))
            daemon.kill()
            daemon.start()
        found = wait_finished(admin, groups, 300)
        wait_until(lambda: not Store(tmp_path / "state" / "slurmxd.sqlite").intents(), 30,
                   "the daemon to close its last intents")
    finally:
        daemon.stop()
    assert daemon.lives == KILLS + 1
    # Every killed life was in its loop (the last one may have found nothing left to do).
    assert daemon.text().count("slurmxd started") >= KILLS
    for group in groups:
        states = {kind: found[job_id].state for kind, job_id in group.jobs.items()}
        completed = [k for k, s in states.items() if s is VariantState.COMPLETED]
        assert len(completed) == 1, f"{group.group_id}: {states}"
        assert all(s is VariantState.CANCELLED for k, s in states.items() if k not in completed), states
        ran = sorted(p.name for p in marks.glob(f"{group.group_id}.*.ran"))
        assert ran == [f"{group.group_id}.{completed[0]}.ran"], f"payloads that ran: {ran}"
        assert (marks / ran[0]).read_text() == "ran\n", f"{group.group_id} ran more than once"
    assert not any(j.state is VariantState.HELD for j in found.values()), "a held variant was left behind"
    assert all(j.restart_count == 0 for j in found.values()), "a job was requeued (preempted) under AlloX"
    assert "Traceback" not in daemon.text()
