"""Issue 16 on the real cluster, with a second user (bob) attacking alice's groups: folders he plants where her
jobs would look, files he plants where slurmxd reads, a name Slurm prints as invalid UTF-8, a copy of her tag.
Issue 31: the site guard (site-config/job_submit.lua, installed as the repo has it) refuses every change bob makes
to a job with a slurmx tag but a sample's own report, and any slurmx tag he writes after submission.

The wake-socket rate limit is tested with real sockets and real credentials in tests/unit/test_daemon_resilience.py
(the daemon's socket lives on the host, which the cluster's users cannot reach); a node list of 10^12 names cannot
be made in a real slurm.conf, so its parser test replays it (tests/unit/test_slurm_hostile.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from slurmx.core.config import load_site_config
from slurmx.core.model import VariantState
from slurmx.daemon.store import Store
from slurmx.slurm import CliSlurm, RetryPolicy
from slurmx.slurm.records import SlurmJob
from slurmx.slurm.transport import DockerExecTransport
from slurmx.submit import submitter
from slurmx.submit.spec import parse_spec
from slurmx.submit.submitter import submit_group as slurmx_submit
from tests.integration.conftest import REPO, Cluster, wait_until
from tests.integration.test_daemon_helpers import DaemonProcess, daemon_site, jobs_of, submit_group, wait_finished

pytestmark = pytest.mark.integration
ALICE_UID = 2001


@pytest.fixture(scope="module")
def bob(cluster: Cluster) -> CliSlurm:
    return CliSlurm(DockerExecTransport(cluster.container("login"), "bob"), RetryPolicy(retries=3, timeout_s=60))


def as_bob(bob: CliSlurm, *argv: str) -> None:
    result = bob.transport.run(list(argv))
    assert result.returncode == 0, (argv, result.stderr)


def finished(slurm: CliSlurm, ids: list[int]) -> list[SlurmJob] | None:
    jobs = slurm.jobs(job_ids=ids)
    return jobs if len(jobs) == len(ids) and all(j.state.is_finished for j in jobs) else None


def test_a_group_folder_bob_planted_is_never_adopted_and_nothing_of_his_runs(
        site_path: Path, slurm: CliSlurm, bob: CliSlurm, tag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    site = load_site_config(site_path)
    spool = Path(site.submit.spool_dir)
    marks = spool / f"{tag}-marks"  # bob's mark folder: anything of his that runs as alice writes here
    as_bob(bob, "mkdir", "-m", "777", "--", str(marks))
    predicted = f"{tag}-aaaaaa"  # the id bob guessed (a test seam: the real one is random)
    folder = spool / predicted
    for sub in ("pylib", "checkpoint"):
        as_bob(bob, "mkdir", "-p", "-m", "777", "--", str(folder / sub))
    as_bob(bob, "cp", "/dev/null", str(folder / "pylib" / "sitecustomize.py"))
    (folder / "pylib" / "sitecustomize.py").write_text(
        f"import os\nopen({str(marks / 'sitecustomize')!r}, 'w').write(str(os.getuid()))\n")
    (folder / "hook.sh").write_text(f"id -u > {marks}/hook\n")
    os.chown(folder / "hook.sh", 2002, 2002)
    (folder / "checkpoint" / "state").write_text("bob's state\n")
    os.chown(folder / "checkpoint" / "state", 2002, 2002)
    ids = iter([predicted, f"{tag}-bbbbbb"])
    monkeypatch.setattr(submitter, "new_group_id", lambda _name: next(ids))
    spec = parse_spec({"name": tag, "time": "5m", "command":
                       'python3 -c "import sys" && ls "$SLURMX_CHECKPOINT_DIR" > "$SLURMX_SPOOL_DIR/seen" && '
                       'id -u > "$SLURMX_SPOOL_DIR/ran"'})
    group = slurmx_submit(spec, site, slurm, mode="pick", pick="cpu")
    assert group.group_id == f"{tag}-bbbbbb", "the taken folder was adopted"
    wait_until(lambda: finished(slurm, group.job_ids()), 180, "alice's job to finish")
    [job] = slurm.jobs(job_ids=group.job_ids())
    assert job.state is VariantState.COMPLETED
    own = Path(group.spool_dir)
    info = own.stat()
    assert (info.st_uid, info.st_mode & 0o777) == (ALICE_UID, 0o700)
    assert (own / "ran").read_text() == f"{ALICE_UID}\n"
    assert (own / "seen").read_text() == ""  # her checkpoint folder is her own and empty, not bob's
    assert sorted(p.name for p in marks.iterdir()) == [], "bob's code ran in alice's job"


def test_a_checkpoint_folder_of_bob_is_refused_with_one_line_and_the_job_can_run_again(
        site_path: Path, slurm: CliSlurm, bob: CliSlurm, tag: str) -> None:
    site = load_site_config(site_path)
    shared = Path(site.submit.spool_dir) / f"{tag}-ckpt"
    as_bob(bob, "mkdir", "-m", "755", "--", str(shared))
    spec = parse_spec({"name": tag, "time": "5m", "checkpoint_dir": str(shared),
                       "command": 'id -u > "$SLURMX_SPOOL_DIR/ran"'})
    group = slurmx_submit(spec, site, slurm, mode="pick", pick="cpu")
    wait_until(lambda: finished(slurm, group.job_ids()), 180, "the refusing job to end")
    [job] = slurm.jobs(job_ids=group.job_ids())
    assert job.state is VariantState.FAILED
    out = (Path(group.spool_dir) / f"cpu-{job.job_id}.out").read_text()
    assert out.strip() == (f"slurmx: job {job.job_id} refuses to run: {shared} is owned by uid 2002, not by you "
                           f"(uid {ALICE_UID}); nothing ran. Fix or remove it, then run the job again (scontrol "
                           f"requeue {job.job_id}, or slurmx submit)")
    assert not (Path(group.spool_dir) / "ran").exists()
    as_bob(bob, "rmdir", "--", str(shared))  # fixed: the same spec runs
    again = slurmx_submit(spec, site, slurm, mode="pick", pick="cpu")
    wait_until(lambda: finished(slurm, again.job_ids()), 180, "the job to run again")
    assert (Path(again.spool_dir) / "ran").read_text() == f"{ALICE_UID}\n"


@pytest.mark.long_behaviour
def test_files_bob_plants_where_the_daemon_reads_never_stop_it_scheduling_alice(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, bob: CliSlurm, tmp_path: Path, tag: str,
        cleanup: list[int]) -> None:
    site_file = daemon_site(cluster, tmp_path, "fifo")
    base = yaml.safe_load(site_file.read_text())
    base["profile"] = {"enabled": True, "sampling": {"qos": "slurmx-profile"}}
    site_file.write_text(yaml.safe_dump(base))
    spool = Path(base["submit"]["spool_dir"])
    hostile = []
    for plant in ("fifo", "zero", "sparse"):
        gid = f"{tag}-{plant}"
        folder = spool / gid
        as_bob(bob, "mkdir", "-m", "700", "--", str(folder))
        # bob's group with samples queued the way `slurmx submit` queues them (10,000 steps, one variant: 100 and
        # 200 steps, ten minutes), whose timing files in his folder are a FIFO, a link to /dev/zero or 10 GB.
        samples = [bob.submit("#!/bin/bash\nsleep 1\n", [
            "--hold", "--qos=slurmx-profile", "--time=10", "--partition=cpu", "--cpus-per-task=1", "--mem=500M",
            f"--comment=slurmx-sample:g={gid},v=cpu,s={index},n={steps}", "--output=/dev/null",
            f"--job-name={gid}@cpu~s{index}"]) for index, steps in ((0, 100), (1, 200))]
        for job_id in samples:
            path = str(folder / f"profile-{job_id}.json")
            if plant == "fifo":
                as_bob(bob, "mkfifo", "--", path)
            elif plant == "zero":
                as_bob(bob, "ln", "-s", "/dev/zero", path)
            else:
                as_bob(bob, "truncate", "-s", "10G", path)
        cleanup.extend(samples)
        hostile.append(submit_group(bob, tag, {"cpu": (5, "sleep 1")}, group_id=gid, comment_extra=",n=10000"))
    # A job name that squeue prints as invalid UTF-8 (bytes 0xff 0xfe).
    bad_name = bob.submit("#!/bin/bash\nsleep 1\n", ["--hold", "--partition=cpu", "--output=/dev/null",
                                                      "--job-name=bad\udcff\udcfename"])
    honest = [submit_group(slurm, tag, {"cpu": (5, "sleep 2"), "gpu": (5, "sleep 2")}) for _ in range(3)]
    cleanup.extend([bad_name, *(j for g in hostile for j in g.jobs.values())])
    store = Store(tmp_path / "state" / "slurmxd.sqlite")
    daemon = DaemonProcess(site_file, tmp_path / "slurmxd.log")
    daemon.start()
    try:
        found = wait_finished(admin, honest, 240)
        wait_until(lambda: all(any(" took " in e.detail for e in store.history(g.group_id)) for g in hostile), 180,
                   "a sample of each of bob's groups to be read")
        assert daemon.proc is not None and daemon.proc.poll() is None, daemon.text()[-3000:]
    finally:
        daemon.stop()
    for group in honest:
        states = sorted(found[j].state.value for j in group.jobs.values())
        assert states == ["cancelled", "completed"], (group.group_id, states)
    for group in hostile:  # the planted file is no reading: Slurm's own clock is
        notes = [e.detail for e in store.history(group.group_id)]
        assert any(n.endswith("(Slurm's whole seconds)") or n.endswith("(sacct's whole seconds)") for n in notes), \
            (group.group_id, notes)
    assert "Traceback" not in daemon.text()
    assert jobs_of(admin, hostile)  # bob's groups are still known to Slurm: nothing was lost


def test_a_forged_tag_is_set_aside_and_the_rightful_group_completes(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, bob: CliSlurm, tmp_path: Path, tag: str,
        cleanup: list[int]) -> None:
    site = daemon_site(cluster, tmp_path, "fifo")
    alice = submit_group(slurm, tag, {"cpu": (5, "sleep 2"), "gpu": (5, "sleep 2")}, group_id=f"{tag}-alice")
    # Bob copies her tag from squeue's comment column onto a held job of his own.
    forged = submit_group(bob, tag, {"gpu": (5, "sleep 1")}, group_id=f"{tag}-alice")
    plain = slurm.submit("#!/bin/bash\nsleep 1\n", ["--hold", "--partition=cpu", "--output=/dev/null",
                                                     f"--job-name={tag}-plain"])
    cleanup.extend([*forged.jobs.values(), plain])
    forged_lease = admin.jobs([forged.jobs["gpu"]])[0].begin_time  # never renewed nor moved by slurmxd
    daemon = DaemonProcess(site, tmp_path / "slurmxd.log")
    daemon.start()
    try:
        found = wait_finished(admin, [alice], 120)
    finally:
        daemon.stop()
    assert sorted(found[j].state.value for j in alice.jobs.values()) == ["cancelled", "completed"]
    others = {j.job_id: j for j in admin.jobs([*forged.jobs.values(), plain])}
    forged_job = others[forged.jobs["gpu"]]
    assert forged_job.state is VariantState.PENDING and forged_job.begin_time == forged_lease, "bob's job was acted on"
    assert others[plain].state is VariantState.HELD, "a job outside any group was touched"
    text = daemon.text()
    assert f"carry the tag of group {tag}-alice, whose folder belongs to uid 2001" in text and "bob(2002)" in text
    store = Store(tmp_path / "state" / "slurmxd.sqlite")
    events = [e.event for e in store.history(f"{tag}-alice")]
    assert events[:1] == ["ignore"] and "started" in events


DAEMON_UID = 2100  # slurmxd's account on the test cluster, a daemon uid of the plugin (as docker-slurm/cluster adds)


@pytest.fixture(scope="module")
def repo_guard(cluster: Cluster, bob: CliSlurm, admin: CliSlurm) -> None:
    """The repo's job_submit.lua in the controller: a cluster brought up before the plugin changed runs the old one
    until replaced. Slurm reloads the script when its mtime moves; a tag bob may not write tells the new one runs."""
    plugin = (REPO / "site-config" / "job_submit.lua").read_text().replace(
        "  [0] = true,\n", f"  [0] = true,\n  [{DAEMON_UID}] = true,  -- slurmxd, the test cluster's account\n", 1)
    ctld = cluster.container("ctld")
    current = subprocess.run(["docker", "exec", ctld, "cat", "/etc/slurm/job_submit.lua"], capture_output=True,
                             text=True, timeout=60, check=True).stdout
    if current != plugin:
        (cluster.dir / "etc" / "job_submit.lua").write_text(plugin)  # what a restarted controller copies
        with tempfile.NamedTemporaryFile("w", suffix=".lua") as handle:
            handle.write(plugin)
            handle.flush()
            subprocess.run(["docker", "cp", handle.name, f"{ctld}:/etc/slurm/job_submit.lua"], check=True,
                           timeout=60)
        subprocess.run(["docker", "exec", ctld, "chmod", "644", "/etc/slurm/job_submit.lua"], check=True, timeout=60)
        subprocess.run(["docker", "exec", ctld, "touch", "/etc/slurm/job_submit.lua"], check=True, timeout=60)
    probe = bob.submit("#!/bin/bash\nsleep 1\n", ["--hold", "--partition=cpu", "--output=/dev/null",
                                                   "--comment=probe"])
    try:
        wait_until(lambda: scontrol(bob, "update", f"JobId={probe}", "Comment=slurmx:1:g=probe,v=cpu").returncode
                   != 0 or None, 60, "the controller to run the repo's job_submit.lua", every=2.0)
    finally:
        admin.cancel([probe])


def scontrol(user: CliSlurm, *argv: str) -> subprocess.CompletedProcess[str]:
    result = user.transport.run(["scontrol", *argv])
    return subprocess.CompletedProcess(argv, result.returncode, result.stdout, result.stderr)


def shown(admin: CliSlurm, job_id: int) -> dict[str, str]:
    """`scontrol show job -o` as key => value (the values these tests compare hold no spaces)."""
    text = scontrol(admin, "show", "job", "-o", str(job_id)).stdout
    return dict(re.findall(r"(?:^| )([A-Za-z:/]+)=(\S*)", text))


WATCHED = ("Comment", "NumCPUs", "MinMemoryNode", "MinCPUsNode", "Requeue", "Dependency", "ReqNodeList",
           "Partition", "TimeLimit", "Priority", "StartTime", "QOS", "Nice", "ExcNodeList", "TresPerNode")


def assert_refused(cluster: Cluster, admin: CliSlurm, bob: CliSlurm, job_id: int, *change: str,
                   field: str) -> None:
    """bob's `scontrol update JobId=<job> <change>` fails, says which field (22.05 does not pass the plugin's line
    on for updates), and leaves the job as it was."""
    before = {k: v for k, v in shown(admin, job_id).items() if k in WATCHED}
    refused = scontrol(bob, "update", f"JobId={job_id}", *change)
    assert refused.returncode != 0, f"bob's `scontrol update {' '.join(change)}` of job {job_id} was accepted"
    if cluster.version != "22.05":
        assert "only slurmxd may change" in refused.stderr and f"({field})" in refused.stderr, refused.stderr
        assert len([line for line in refused.stderr.splitlines() if "slurmx: job" in line]) == 1, refused.stderr
    after = {k: v for k, v in shown(admin, job_id).items() if k in WATCHED}
    assert after == before, (change, before, after)


def bobs_sample(bob: CliSlurm, gid: str) -> int:
    """A profiling sample queued the way `slurmx submit` queues one: held, under the profiling QOS."""
    return bob.submit("#!/bin/bash\nsleep 1\n", [
        "--hold", "--qos=slurmx-profile", "--time=10", "--partition=cpu", "--cpus-per-task=1", "--mem=500M",
        f"--comment=slurmx-sample:g={gid},v=cpu,s=0,n=100", "--output=/dev/null", "--no-requeue",
        f"--job-name={gid}@cpu~s0"])


@pytest.mark.usefixtures("repo_guard")
def test_bob_cannot_rewrite_a_comment_into_alices_group(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, bob: CliSlurm, tag: str, cleanup: list[int]) -> None:
    alice = submit_group(slurm, tag, {"cpu": (5, "sleep 1")}, group_id=f"{tag}-alice")
    plain = bob.submit("#!/bin/bash\nsleep 1\n", ["--hold", "--partition=cpu", "--output=/dev/null",
                                                   "--comment=an older job of mine"])
    own = submit_group(bob, tag, {"cpu": (5, "sleep 1")})
    cleanup.extend([*alice.jobs.values(), plain, *own.jobs.values()])
    forged = f"slurmx:1:g={tag}-alice,v=cpu,c=be,e=5,l=600"
    for job_id in (plain, own.jobs["cpu"]):
        before = shown(admin, job_id)["Comment"]
        refused = scontrol(bob, "update", f"JobId={job_id}", f"Comment={forged}")
        assert refused.returncode != 0, f"bob rewrote job {job_id}'s comment into alice's group"
        assert "slurmx" in refused.stderr or cluster.version == "22.05", refused.stderr
        assert shown(admin, job_id)["Comment"] == before
    # His own plain job's comment stays his to change, as long as it is no slurmx tag.
    assert scontrol(bob, "update", f"JobId={plain}", "Comment=still-mine").returncode == 0
    assert shown(admin, plain)["Comment"] == "still-mine"


@pytest.mark.usefixtures("repo_guard")
def test_a_held_sample_cannot_be_grown_requeued_or_kept_waiting_but_reports(
        cluster: Cluster, admin: CliSlurm, bob: CliSlurm, tag: str, cleanup: list[int]) -> None:
    sample = bobs_sample(bob, f"{tag}-b")
    blocker = bob.submit("#!/bin/bash\nsleep 1\n", ["--hold", "--partition=cpu", "--output=/dev/null"])
    cleanup.extend([sample, blocker])
    assert_refused(cluster, admin, bob, sample, "NumCPUs=4", "MinMemoryNode=7000", field="min_cpus")
    assert_refused(cluster, admin, bob, sample, "MinMemoryNode=7000", field="pn_min_memory")
    assert_refused(cluster, admin, bob, sample, "Requeue=1", field="requeue")
    assert_refused(cluster, admin, bob, sample, f"Dependency=afterok:{blocker}", field="dependency")
    assert_refused(cluster, admin, bob, sample, "TimeLimit=60", field="time_limit")
    assert_refused(cluster, admin, bob, sample, "QOS=normal", field="qos")
    # What slurmx itself does as the user passes the real bindings: the sample appends what it measured (the hook's
    # `scontrol update Comment=<comment>,t=...`), so no field it leaves alone reads as a change.
    comment = shown(admin, sample)["Comment"]
    appended = scontrol(bob, "update", f"JobId={sample}", f"Comment={comment},t=1.500000,ps=0.015")
    assert appended.returncode == 0, appended.stderr
    assert shown(admin, sample)["Comment"] == f"{comment},t=1.500000,ps=0.015"
    assert_refused(cluster, admin, bob, sample, f"Comment={comment},t=1.500000,ps=0.015,t=9", field="comment")


@pytest.mark.usefixtures("repo_guard")
def test_a_leased_or_released_variant_cannot_be_resteered_resized_or_moved(
        cluster: Cluster, admin: CliSlurm, bob: CliSlurm, tag: str, cleanup: list[int]) -> None:
    leased = submit_group(bob, tag, {"cpu": (5, "sleep 1")})
    gid = f"{tag}-r"
    released = bob.submit("#!/bin/bash\nsleep 1\n", [  # slurmxd let it go (begin now) and it waits for a node
        "--hold", "--partition=gpu", "--gres=gpu:1", "--qos=be", "--mem=500M", "--output=/dev/null",
        f"--comment=slurmx:1:g={gid},v=gpu,c=be,e=5,l=600", f"--job-name={gid}@gpu"])
    cleanup.extend([*leased.jobs.values(), released])
    for job_id in (leased.jobs["cpu"], released):
        assert_refused(cluster, admin, bob, job_id, "ReqNodeList=g2", field="req_nodes")
        assert_refused(cluster, admin, bob, job_id, "ExcNodeList=c1", field="exc_nodes")
        assert_refused(cluster, admin, bob, job_id, "NumCPUs=2", field="min_cpus")
        assert_refused(cluster, admin, bob, job_id, "MinMemoryNode=7000", field="pn_min_memory")
        assert_refused(cluster, admin, bob, job_id, "Requeue=0", field="requeue")
    assert_refused(cluster, admin, bob, leased.jobs["cpu"], "Partition=gpu", field="partition")
    assert_refused(cluster, admin, bob, released, "Partition=cpu", field="partition")
    assert_refused(cluster, admin, bob, released, "Gres=gpu:2", field="tres_per_node")
    # slurmxd's account (root here) still may: the guard binds users, not the daemon.
    assert scontrol(admin, "update", f"JobId={released}", "ReqNodeList=g2").returncode == 0
    assert shown(admin, released)["ReqNodeList"] == "g2"
