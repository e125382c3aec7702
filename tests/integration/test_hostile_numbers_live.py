"""A huge number in bob's own progress file, live: every other group is scheduled and the cycles keep counting.

bob's running job writes `progress-<job>.json` with a rate of 1 followed by 400 zeros (a valid JSON integer that
overflows a float). Once, that failed every slurmxd cycle for every user while his job ran. The profiler must refuse
the file in one audit line and go on: alice's groups, submitted while bob's job runs, all complete.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from slurmx.core.model import VariantState
from slurmx.daemon.store import Store
from slurmx.slurm import CliSlurm, RetryPolicy
from slurmx.slurm.transport import DockerExecTransport
from tests.integration.conftest import Cluster, spool_dir, wait_until
from tests.integration.test_daemon_helpers import DaemonProcess, daemon_site, jobs_of, submit_group, wait_finished

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bob(cluster: Cluster) -> CliSlurm:
    return CliSlurm(DockerExecTransport(cluster.container("login"), "bob"), RetryPolicy(retries=3, timeout_s=60))


@pytest.mark.long_behaviour
def test_a_huge_rate_in_bobs_progress_file_leaves_every_other_group_scheduled(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, bob: CliSlurm, tmp_path: Path, tag: str,
        cleanup: list[int]) -> None:
    site_file = daemon_site(cluster, tmp_path, "fifo")
    base = yaml.safe_load(site_file.read_text())
    base["profile"] = {"enabled": True, "sampling": {"qos": "slurmx-profile"}}  # progress files are read
    site_file.write_text(yaml.safe_dump(base))
    gid = f"{tag}-bob"
    progress = f"{spool_dir()}/{gid}/progress-$SLURM_JOB_ID.json"
    payload = (f"printf '{{\"step\": 5, \"total\": 10, \"rate\": 1%0400d}}' 0 > {progress}.tmp && "
               f"mv {progress}.tmp {progress}; sleep 40")
    hostile = submit_group(bob, tag, {"cpu": (60, payload)}, group_id=gid)
    cleanup.extend(hostile.jobs.values())
    store = Store(tmp_path / "state" / "slurmxd.sqlite")
    daemon = DaemonProcess(site_file, tmp_path / "slurmxd.log")
    daemon.start()
    try:
        wait_until(lambda: any("refused" in e.detail and "rate" in e.detail for e in store.history(gid)), 90,
                   "the profiler to refuse bob's progress file")
        [running] = jobs_of(admin, [hostile]).values()
        assert running.state is VariantState.RUNNING, running
        honest = [submit_group(slurm, tag, {"cpu": (5, "sleep 2"), "gpu": (5, "sleep 2")}) for _ in range(3)]
        cleanup.extend(j for g in honest for j in g.jobs.values())
        found = wait_finished(admin, honest, 120)
        assert daemon.proc is not None and daemon.proc.poll() is None, daemon.text()[-3000:]
    finally:
        daemon.stop()
    for group in honest:
        states = sorted(found[j].state.value for j in group.jobs.values())
        assert states == ["cancelled", "completed"], (group.group_id, states)
    text = daemon.text()
    assert not re.search(r"cycle \d+ failed", text), text[-3000:]
    assert "Traceback" not in text
    [refusal] = [e.detail for e in store.history(gid) if "refused" in e.detail]
    assert "beyond" in refusal and "steps/s" in refusal, refusal
