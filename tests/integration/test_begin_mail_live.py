"""`--begin` in managed mode and mail, as `slurmx submit` users write them, on the real cluster.

A managed group with the user's `--begin` waits for it under slurmxd (the tag's `b=`; the begin time Slurm shows
is the lease's); with `--mail-type=END` only the variant that runs keeps it: every cancelled sibling is
`MailType=NONE`, set by slurmxd (managed) or by the winning variant (race) before it cancels.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from slurmx.core.tag import begin_floor
from slurmx.daemon.store import Store
from slurmx.slurm import CliSlurm
from slurmx.submit.groups import GroupStatus, find_group
from tests.integration.conftest import Cluster, spool_dir, wait_until
from tests.integration.test_daemon_helpers import DaemonProcess, daemon_site, shared_folder, wait_log

pytestmark = pytest.mark.integration


def _submit(site_path: Path, *words: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "slurmx.cli", "--site", str(site_path), "submit", "--parsable",
                           *words], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def _finished(slurm: CliSlurm, group_id: str) -> GroupStatus | None:
    group = find_group(slurm, group_id, since="now-1hour", spool_dir=spool_dir())
    return group if group is not None and group.finished else None


def _mail_type(admin: CliSlurm, job_id: int) -> str:
    """The job's MailType as `scontrol show job` prints it (it leaves the field out for NONE)."""
    result = admin.transport.run(["scontrol", "show", "job", "-o", str(job_id)])
    assert result.returncode == 0, result.stderr
    words = dict(w.split("=", 1) for w in result.stdout.split() if "=" in w)
    assert words.get("JobId") == str(job_id), result.stdout
    return words.get("MailType", "NONE")


def _script(cluster: Cluster, tag: str, marks: Path, body: str = "sleep 3") -> Path:
    script = cluster.shared / f"{tag}.sh"
    script.write_text(f"#!/bin/bash\ndate +%s >> {marks}/ran-$SLURMX_VARIANT\n{body}\n")
    return script


@pytest.mark.long_behaviour  # the lease and begin calls are those the failsafe tests run on every version
def test_a_managed_group_with_begin_starts_only_after_it_under_slurmxd(
        cluster: Cluster, site_path: Path, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str,
        cleanup: list[int]) -> None:
    """`--begin=now+40` in managed mode: the tag carries the user's time; slurmxd leaves the group alone (its
    leases renewed, never to a time before the user's) and starts one variant once the time has passed."""
    marks = shared_folder(cluster, f"{tag}-marks")
    daemon = DaemonProcess(daemon_site(cluster, tmp_path, "fifo"), tmp_path / "slurmxd.log")
    daemon.start()
    try:
        wait_log(daemon, "slurmxd started")
        gid = _submit(site_path, "--mode", "managed", "--variants", "cpu,gpu", "--begin=now+40", "--time=5",
                      str(_script(cluster, tag, marks)))
        group = find_group(slurm, gid, spool_dir=spool_dir())
        assert group is not None and len(group.variants) == 2
        cleanup.extend(v.job_id for v in group.variants)
        jobs = slurm.jobs(job_ids=[v.job_id for v in group.variants])
        floors = {begin_floor(j.comment, j.submit_time) for j in jobs}
        assert len(floors) == 1 and None not in floors, [j.comment for j in jobs]
        begin = max(f for f in floors if f is not None)
        assert all(j.submit_time and 35 <= begin - j.submit_time <= 45 for j in jobs), (begin, jobs)
        assert all(j.begin_time is not None and j.begin_time >= begin for j in jobs)  # the lease's, later
        done = wait_until(lambda: _finished(slurm, gid), 150, "the group to finish", every=2)
    finally:
        daemon.stop()
    assert done.state.value == "completed", done
    ran = [(path.name, int(line)) for path in marks.iterdir() for line in path.read_text().split()]
    assert len(ran) == 1 and ran[0][1] >= begin, (ran, begin)  # once, and not before the user's time
    starts = [e for e in Store(tmp_path / "state" / "slurmxd.sqlite").history(gid)
              if e.event == "decide" and e.detail.startswith("start ")]
    assert starts and starts[0].t >= begin, (starts, begin)
    assert "Traceback" not in daemon.text()


def test_only_the_variant_that_runs_keeps_its_mail_in_race_mode(
        cluster: Cluster, site_path: Path, slurm: CliSlurm, admin: CliSlurm, tag: str, cleanup: list[int]) -> None:
    """Race mode, no daemon: whichever variant runs keeps `MailType=END`; each sibling cancelled (by the winner,
    or by itself when it lost) is `MailType=NONE`."""
    marks = shared_folder(cluster, f"{tag}-marks")
    gid = _submit(site_path, "--mode", "race", "--variants", "cpu,gpu", "--time=5", "--mail-type=END",
                  "--mail-user=alice", str(_script(cluster, tag, marks)))
    done = wait_until(lambda: _finished(slurm, gid), 90, "the group to finish", every=2)
    cleanup.extend(v.job_id for v in done.variants)
    assert done.state.value == "completed", done
    mail = {v.job_id: (v.state.value, _mail_type(admin, v.job_id)) for v in done.variants}
    assert sorted(m for _, m in mail.values()) == ["END", "NONE"], mail
    assert all((state == "completed") is (m == "END") for state, m in mail.values()), mail


def test_only_the_variant_slurmxd_starts_keeps_its_mail(
        cluster: Cluster, site_path: Path, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str,
        cleanup: list[int]) -> None:
    """Managed mode under slurmxd: the variant it started keeps `MailType=END`; the sibling it cancelled is
    `MailType=NONE`, set before the cancel."""
    marks = shared_folder(cluster, f"{tag}-marks")
    daemon = DaemonProcess(daemon_site(cluster, tmp_path, "fifo"), tmp_path / "slurmxd.log")
    daemon.start()
    try:
        wait_log(daemon, "slurmxd started")
        gid = _submit(site_path, "--mode", "managed", "--variants", "cpu,gpu", "--time=5", "--mail-type=END",
                      str(_script(cluster, tag, marks)))
        done = wait_until(lambda: _finished(slurm, gid), 120, "the group to finish", every=2)
    finally:
        daemon.stop()
    cleanup.extend(v.job_id for v in done.variants)
    assert done.state.value == "completed", done
    mail = {v.job_id: (v.state.value, _mail_type(admin, v.job_id)) for v in done.variants}
    assert sorted(m for _, m in mail.values()) == ["END", "NONE"], mail
    assert all((state == "completed") is (m == "END") for state, m in mail.values()), mail
    assert "Traceback" not in daemon.text()


@pytest.mark.long_behaviour  # 81 s of waiting on a lease; Slurm's begin itself is read on every version
def test_without_slurmxd_a_managed_group_runs_once_after_the_later_of_lease_and_begin(
        cluster: Cluster, site_path: Path, slurm: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    """No daemon at all: the 60 s lease would let Slurm start the variants at 60 s; the user's `--begin=now+75`
    holds them to 75 s, and the job-side guard lets exactly one do the work."""
    site = yaml.safe_load(site_path.read_text())
    site["daemon"] = {**site.get("daemon", {}), "lease": "60s"}
    short = tmp_path / "site.yaml"
    short.write_text(yaml.safe_dump(site))
    marks = shared_folder(cluster, f"{tag}-marks")
    gid = _submit(short, "--mode", "managed", "--variants", "cpu,gpu", "--begin=now+75", "--time=5",
                  str(_script(cluster, tag, marks)))
    group = find_group(slurm, gid, spool_dir=spool_dir())
    assert group is not None
    cleanup.extend(v.job_id for v in group.variants)
    jobs = slurm.jobs(job_ids=[v.job_id for v in group.variants])
    begin = max(begin_floor(j.comment, j.submit_time) or 0 for j in jobs)
    assert all(j.begin_time is not None and j.begin_time >= begin for j in jobs), (begin, jobs)
    done = wait_until(lambda: _finished(slurm, gid), 150, "the group to finish", every=2)
    assert done.state.value == "completed", done
    ran = [(path.name, int(line)) for path in marks.iterdir() for line in path.read_text().split()]
    assert len(ran) == 1 and ran[0][1] >= begin, (ran, begin)
