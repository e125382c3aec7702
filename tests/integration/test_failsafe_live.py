"""Fail-safe and unbypassable on the real cluster: groups run exactly once when slurmxd is killed, drained or
bypassed by an operator's bulk release, and a user cannot move a leased variant (site-config/job_submit.lua).

Groups are submitted through `slurmx submit`'s own code path (managed mode: leased variants carrying the job-side
guard); every payload appends one line to a mark file on shared storage, so "exactly once" is read from what ran.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from slurmx.core.config import SiteConfig, load_site_config
from slurmx.daemon.store import Store
from slurmx.slurm import CliSlurm
from slurmx.slurm.adapter import JobUpdate
from slurmx.submit.spec import parse_spec
from slurmx.submit.submitter import SubmittedGroup, submit_group
from tests.integration.conftest import Cluster, wait_until
from tests.integration.test_daemon_helpers import DaemonProcess, daemon_site, shared_folder, wait_log

pytestmark = pytest.mark.integration

GROUPS = 10


def _sites(cluster: Cluster, folder: Path, lease: str) -> tuple[SiteConfig, Path]:
    """(alice's site, for submitting; root's site file, for slurmxd) sharing one lease and one policy."""
    admin_path = daemon_site(cluster, folder, "fifo")
    data = yaml.safe_load(admin_path.read_text())
    data["daemon"]["lease"] = lease
    admin_path.write_text(yaml.safe_dump(data))
    user = yaml.safe_load((cluster.dir / "site.yaml").read_text())
    user["resources"] = data["resources"]
    user["policy"] = data["policy"]
    user["daemon"] = {**user.get("daemon", {}), "lease": lease}
    user_path = folder / "user-site.yaml"
    user_path.write_text(yaml.safe_dump(user))
    return load_site_config(user_path), admin_path


def _submit(site: SiteConfig, slurm: CliSlurm, marks: Path, name: str, seconds: int = 3) -> SubmittedGroup:
    spec = parse_spec({"name": name, "command": f"echo $SLURMX_VARIANT >> {marks}/{name}; sleep {seconds}",
                       "variants": ["cpu", "gpu"], "class": "be", "grace": "5s"}, "<test>")
    return submit_group(spec, site, slurm, mode="managed")


def _ran_once(marks: Path, groups: list[SubmittedGroup]) -> dict[str, list[str]]:
    """Group name -> the variants whose payload ran (one line per run)."""
    return {g.name: (marks / g.name).read_text().split() if (marks / g.name).exists() else [] for g in groups}


def _all_done(admin: CliSlurm, groups: list[SubmittedGroup]) -> bool:
    ids = [j for g in groups for j in g.job_ids()]
    jobs = admin.jobs(ids)
    return len(jobs) == len(ids) and not any(j.state.is_active for j in jobs)


def _assert_exactly_once(admin: CliSlurm, marks: Path, groups: list[SubmittedGroup]) -> None:
    ran = _ran_once(marks, groups)
    assert all(len(kinds) == 1 for kinds in ran.values()), f"payload runs per group: {ran}"
    jobs = {j.job_id: j for j in admin.jobs([j for g in groups for j in g.job_ids()])}
    for group in groups:
        states = sorted(jobs[j].state.value for j in group.job_ids())
        assert states.count("completed") == 1, f"{group.name}: {states}"


def test_groups_run_exactly_once_after_the_lease_when_slurmxd_is_killed(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    site, admin_site = _sites(cluster, tmp_path, "60s")
    marks = shared_folder(cluster, f"{tag}-marks")
    daemon = DaemonProcess(admin_site, tmp_path / "slurmxd.log")
    daemon.start()
    try:
        wait_log(daemon, "slurmxd started")
        groups = [_submit(site, slurm, marks, f"{tag}-{i:02d}") for i in range(GROUPS)]
        cleanup.extend(j for g in groups for j in g.job_ids())
        time.sleep(3)  # a cycle or two: some groups start, the others' leases are renewed
    finally:
        daemon.kill()  # SIGKILL: nothing is handed over, nothing is released; the leases simply run out
    killed = time.monotonic()
    wait_until(lambda: _all_done(admin, groups), 60 + 120, "every group to finish without slurmxd", every=3)
    _assert_exactly_once(admin, marks, groups)
    assert time.monotonic() - killed < 60 + 120


@pytest.mark.long_behaviour
def test_drain_hands_every_group_to_slurm_at_once_and_the_daemon_then_decides_nothing(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    site, admin_site = _sites(cluster, tmp_path, "20m")
    marks = shared_folder(cluster, f"{tag}-marks")
    groups = [_submit(site, slurm, marks, f"{tag}-{i:02d}") for i in range(GROUPS)]
    cleanup.extend(j for g in groups for j in g.job_ids())
    daemon = DaemonProcess(admin_site, tmp_path / "slurmxd.log")
    try:
        drained = subprocess.run([sys.executable, "-c", "from slurmx.cli import daemon_main; daemon_main()",
                                  "--site", str(admin_site), "drain"], capture_output=True, text=True, timeout=120,
                                 check=True)
        assert f"drained ({tmp_path / 'state'}): {2 * GROUPS} waiting managed variant(s)" in drained.stdout
        daemon.start()  # a daemon started on a drained state directory decides nothing
        wait_log(daemon, "drained: deciding nothing")
        started = time.monotonic()
        wait_until(lambda: _all_done(admin, groups), 180, "every drained group to finish", every=3)
        assert time.monotonic() - started < 180  # long before a 20-minute lease could have run out
    finally:
        daemon.stop()
    _assert_exactly_once(admin, marks, groups)
    store = tmp_path / "state" / "slurmxd.sqlite"
    assert not [e for e in Store(store).history(limit=10_000) if e.event == "decide"], "a drained daemon decided"


@pytest.mark.long_behaviour
def test_an_operators_bulk_release_runs_one_variant_per_group_and_a_user_cannot_move_a_lease(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    site, admin_site = _sites(cluster, tmp_path, "20m")
    marks = shared_folder(cluster, f"{tag}-marks")
    # The first group runs long enough for a daemon started afterwards to find it running.
    groups = [_submit(site, slurm, marks, f"{tag}-{i:02d}", 90 if i == 0 else 3) for i in range(GROUPS)]
    ids = [j for g in groups for j in g.job_ids()]
    cleanup.extend(ids)
    # The owner tries to start a variant the policy did not choose: refused by the site's job_submit.lua.
    victim = groups[0].variants[1][1]
    for change in (["update", f"JobId={victim}", "StartTime=now"], ["release", str(victim)]):
        refused = subprocess.run(["docker", "exec", "-u", "alice", cluster.container("login"), "scontrol", *change],
                                 capture_output=True, text=True, timeout=60, check=False)
        assert refused.returncode != 0, f"alice's `scontrol {' '.join(change)}` on a leased variant was accepted"
        assert "only slurmxd may change" in refused.stderr or cluster.version == "22.05", refused.stderr
    assert (admin.jobs([victim])[0].begin_time or 0) > time.time() + 600, "the refused edit moved the lease"
    # No daemon at all; an operator lets everything go in bulk, as after an outage: one variant per group runs.
    admin.update(ids, JobUpdate(begin="now"))
    rest = groups[1:]
    wait_until(lambda: _all_done(admin, rest), 180, "every released group to finish", every=3)
    assert not _all_done(admin, groups[:1]), "the long group ended before the daemon could see it run"
    # slurmxd, started now, finds the long group running though it never chose it: `slurmx explain` says so.
    daemon = DaemonProcess(admin_site, tmp_path / "slurmxd.log")
    daemon.start()
    try:
        wait_log(daemon, "runs though slurmxd did not start it")
    finally:
        daemon.stop()
    wait_until(lambda: _all_done(admin, groups), 150, "the long group to finish", every=3)
    _assert_exactly_once(admin, marks, groups)
    explained = subprocess.run([sys.executable, "-m", "slurmx.cli", "--site", str(admin_site), "explain",
                                groups[0].group_id], capture_output=True, text=True, timeout=60, check=True)
    assert "not the daemon's choice:" in explained.stdout, explained.stdout


def test_the_test_cluster_runs_the_sites_job_submit_plugin(cluster: Cluster) -> None:
    config = subprocess.run(["docker", "exec", cluster.container("login"), "scontrol", "show", "config"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert any(line.split("=", 1)[0].strip() == "JobSubmitPlugins" and "lua" in line for line in config.splitlines())
