"""A group is its folder owner's, live: bob's older job carrying alice's tag takes nothing of hers.

bob cannot rewrite a comment to a `slurmx:` tag himself (the guard refuses it, tests/integration/test_security_live.py);
here root forces it, as a site whose guard is not installed would let bob do. His job then has the lowest job id
of alice's group, the rule that once handed him the group: slurmxd must still schedule alice's variants, report
his job, never act on it; her `slurmx status`, `slurmx cancel` and `--dependency` must ignore it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmx.core.model import VariantState
from slurmx.slurm import CliSlurm, RetryPolicy
from slurmx.slurm.adapter import JobUpdate
from slurmx.slurm.transport import DockerExecTransport
from slurmx.submit.dependency import resolve_dependency
from slurmx.submit.groups import cancel_group, find_group
from tests.integration.conftest import Cluster, spool_dir
from tests.integration.test_daemon_helpers import DaemonProcess, daemon_site, submit_group, wait_finished

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bob(cluster: Cluster) -> CliSlurm:
    return CliSlurm(DockerExecTransport(cluster.container("login"), "bob"), RetryPolicy(retries=3, timeout_s=60))


def _older_job_of_bob(bob: CliSlurm, tag: str) -> int:
    return bob.submit("#!/bin/bash\nsleep 1\n", ["--hold", "--partition=gpu", "--gres=gpu:1", "--qos=be",
                                                  "--output=/dev/null", f"--job-name={tag}-bob@gpu"])


def test_an_older_job_rewritten_to_alices_tag_takes_nothing_of_her_group(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, bob: CliSlurm, tmp_path: Path, tag: str,
        cleanup: list[int]) -> None:
    site = daemon_site(cluster, tmp_path, "fifo")
    older = _older_job_of_bob(bob, tag)  # a lower job id than any of alice's
    cleanup.append(older)
    gid = f"{tag}-0a1b2c"
    alice = submit_group(slurm, tag, {"cpu": (5, "sleep 2"), "gpu": (5, "sleep 2")}, group_id=gid)
    cleanup.extend(alice.jobs.values())
    admin.update([older], JobUpdate(comment=f"slurmx:1:g={gid},v=gpu,c=be,e=5"))  # forced by root
    assert older < min(alice.jobs.values())
    # Her tools, before the daemon runs: bob's job is not her variant, and her dependency waits on hers alone.
    group = find_group(slurm, gid, spool_dir=spool_dir())
    assert group is not None and group.valid and group.owner_uid == 2001
    assert sorted(v.job_id for v in group.variants) == sorted(alice.jobs.values())
    seen = find_group(admin, gid, spool_dir=spool_dir())  # root sees every user's jobs: bob's is set apart
    assert seen is not None and seen.foreign == (older,)
    resolved = resolve_dependency(f"afterok:{gid}", lambda g: find_group(slurm, g, spool_dir=spool_dir()))
    assert str(older) not in resolved and all(str(j) in resolved for j in alice.jobs.values())
    daemon = DaemonProcess(site, tmp_path / "slurmxd.log")
    daemon.start()
    try:
        found = wait_finished(admin, [alice], 120)
    finally:
        daemon.stop()
    assert sorted(found[j].state.value for j in alice.jobs.values()) == ["cancelled", "completed"]
    [bobs] = admin.jobs([older])
    assert bobs.state is VariantState.HELD, "slurmxd acted on bob's job as alice's variant"
    text = daemon.text()
    assert f"job(s) {older} of bob(2002) carry the tag of group {gid}, whose folder belongs to uid 2001" in text


def test_cancel_run_by_root_cancels_the_owners_jobs_only(
        slurm: CliSlurm, admin: CliSlurm, bob: CliSlurm, tag: str, cleanup: list[int]) -> None:
    older = _older_job_of_bob(bob, tag)
    cleanup.append(older)
    gid = f"{tag}-0d1e2f"
    alice = submit_group(slurm, tag, {"cpu": (5, "sleep 60")}, group_id=gid)
    cleanup.extend(alice.jobs.values())
    admin.update([older], JobUpdate(comment=f"slurmx:1:g={gid},v=gpu,c=be,e=5"))
    group = find_group(admin, gid, spool_dir=spool_dir())
    assert group is not None
    assert cancel_group(admin, group) == list(alice.jobs.values())
    states = {j.job_id: j.state for j in admin.jobs([older, *alice.jobs.values()])}
    assert states[older] is VariantState.HELD and states[alice.jobs["cpu"]] is VariantState.CANCELLED
