"""slurmxd resizing jobs on the real cluster: a running job resized through the grace protocol, and Synergy's
per-job CPUs and memory applied to a held variant before its release.

The first test drives the daemon's own cycle in this process with a scripted, stateless policy (resize the
running group while it is not of the wanted size); the second runs `slurmxd` with the registered synergy policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from slurmx.core.actions import Plan, Resize
from slurmx.core.config import load_site_config
from slurmx.core.model import ClusterView, GroupState, VariantState
from slurmx.daemon.loop import Daemon
from slurmx.daemon.store import Store
from slurmx.slurm import CliSlurm
from slurmx.slurm.adapter import JobUpdate
from tests.integration.conftest import Cluster, wait_until
from tests.integration.test_daemon_helpers import DaemonProcess, daemon_site, jobs_of, shared_folder, submit_group

_WORKER = """LOG={log}
echo "run cpus=$SLURM_CPUS_ON_NODE restart=${{SLURM_RESTART_COUNT:-0}}" >> "$LOG"
step=0
trap 'echo checkpointed >> "$LOG"; exit 99' USR2
while [ $step -lt {steps} ]; do sleep 1 & wait $!; step=$((step+1)); done
echo done >> "$LOG"
"""


@dataclass(frozen=True)
class ResizeRunning:
    """Resize `group_id` to (cpus, mem) whenever it runs at another size; nothing else (pure)."""

    name: ClassVar[str] = "test-resize-running"
    group_id: str
    cpus: int
    mem_mb: int

    def schedule(self, view: ClusterView, now: float) -> Plan:
        group = view.groups.get(self.group_id)
        running = group.running_variant() if group is not None else None
        if group is None or group.state is not GroupState.RUNNING or running is None:
            return Plan()
        if (running.request.cpus, running.request.mem_mb) == (self.cpus, self.mem_mb):
            return Plan()
        return Plan((Resize(self.group_id, self.cpus, self.mem_mb, reason="test: needs more"),))


def test_running_job_is_resized_through_grace_requeuehold_update_release(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    work = shared_folder(cluster, f"{tag}-work")
    log = work / "worker.log"
    group = submit_group(slurm, tag, {"cpu": (60, _WORKER.format(log=log, steps=25))}, cpus=1, mem="500M")
    job_id = group.jobs["cpu"]
    cleanup.append(job_id)
    admin.update([job_id], JobUpdate(begin="now"))  # an operator starts it (the lease is the daemon's otherwise)
    wait_until(lambda: jobs_of(admin, [group])[job_id].state is VariantState.RUNNING, 60, "the job to run")
    site = load_site_config(daemon_site(cluster, tmp_path, "fifo", kinds=("cpu",), grace=5))
    daemon = Daemon(site, admin, Store(tmp_path / "state.sqlite"), ResizeRunning(group.group_id, 2, 700))

    def resized_and_running() -> bool:
        daemon.cycle()
        job = jobs_of(admin, [group])[job_id]
        return job.state is VariantState.RUNNING and job.restart_count >= 1 and not daemon.store.intents()

    wait_until(resized_and_running, 120, "the job to run again at its new size", every=1.0)
    job = jobs_of(admin, [group])[job_id]
    assert (job.request.cpus, job.request.mem_mb, job.restart_count) == (2, 700, 1)
    wait_until(lambda: "run cpus=2 restart=1" in log.read_text(), 30, "the second run to log its CPUs")
    assert log.read_text().splitlines()[:3] == ["run cpus=1 restart=0", "checkpointed", "run cpus=2 restart=1"]
    details = [e.detail for e in daemon.store.history(group.group_id)]
    assert f"resized job {job_id} to cpus=2 mem=700M and released it" in details, details
    for _ in range(3):  # of the wanted size now: the policy asks for nothing, and nothing is requeued again
        daemon.cycle()
    assert jobs_of(admin, [group])[job_id].restart_count == 1


@pytest.mark.long_behaviour
def test_synergy_sizes_a_gpu_job_to_its_share_before_releasing_it(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    work = shared_folder(cluster, f"{tag}-work")
    log = work / "worker.log"
    # No profile: Synergy gives the job its GPU-proportional share of a gpu node (4 CPUs, 8000 MB, 2 GPUs).
    group = submit_group(slurm, tag, {"gpu": (20, _WORKER.format(log=log, steps=4))}, cpus=1, mem="500M")
    job_id = group.jobs["gpu"]
    cleanup.append(job_id)
    site = daemon_site(cluster, tmp_path, "synergy", kinds=("gpu",), params={"kind": "gpu"})
    daemon = DaemonProcess(site, tmp_path / "slurmxd.log")
    daemon.start()
    try:
        wait_until(lambda: jobs_of(admin, [group])[job_id].state is VariantState.COMPLETED, 120,
                   "the sized job to run and complete")
    finally:
        daemon.stop()
    job = jobs_of(admin, [group])[job_id]
    assert (job.request.cpus, job.request.mem_mb, job.restart_count) == (2, 4000, 0)
    assert log.read_text().splitlines() == ["run cpus=2 restart=0", "done"]
    decisions = [e.detail for e in Store(tmp_path / "state" / "slurmxd.sqlite").history(group.group_id)
                 if e.event == "decide"]
    assert decisions and " as cpus=2 mem=4000M" in decisions[0], decisions
    assert "Traceback" not in daemon.text()
