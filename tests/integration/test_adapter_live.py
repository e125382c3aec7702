"""Every adapter operation against a real Slurm cluster (the version under SLURMX_TEST_SLURM)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from slurmx.core.model import VariantState
from slurmx.core.resources import Resources
from slurmx.slurm import CliSlurm, InvalidJobError, JobUpdate, SlurmCommandError
from slurmx.slurm.records import SlurmJob

from .conftest import Cluster, wait_until

pytestmark = pytest.mark.integration

# A job that records each grace signal and each (re)start, so the test can see the hook-side effect for real.
SIGNAL_SCRIPT = """#!/bin/bash
out={out}
echo "start restart=${{SLURM_RESTART_COUNT:-0}}" >> "$out"
trap 'echo "got USR2" >> "$out"' USR2
for i in $(seq 600); do sleep 1; done
"""


def job(slurm: CliSlurm, job_id: int) -> SlurmJob | None:
    found = slurm.jobs(job_ids=[job_id])
    return found[0] if found else None


def in_state(slurm: CliSlurm, job_id: int, *states: VariantState) -> SlurmJob | None:
    current = job(slurm, job_id)
    return current if current is not None and current.state in states else None


def test_version_is_the_one_under_test(slurm: CliSlurm, cluster: Cluster) -> None:
    assert slurm.version() == cluster.version


def test_nodes_carry_partitions_and_gres(slurm: CliSlurm) -> None:
    nodes = {n.name: n for n in slurm.nodes()}
    assert sorted(nodes) == ["a1", "c1", "c2", "g1", "g2"]
    assert nodes["g1"].capacity.gres_count("gpu") == 2
    assert nodes["g2"].partitions == ("gpu",)
    assert nodes["a1"].capacity.gres_count("accel") == 1
    assert nodes["c1"].capacity == Resources(4, 8000)
    assert all(n.is_usable for n in nodes.values())


def test_partitions_expand_their_node_lists(slurm: CliSlurm) -> None:
    parts = {p.name: p for p in slurm.partitions({"gpu": "gpu"})}
    assert parts["cpu"].nodes == ("c1", "c2") and parts["cpu"].default
    assert parts["gpu"].nodes == ("g1", "g2") and parts["gpu"].kind == "gpu"
    assert parts["accel"].nodes == ("a1",)


def test_held_release_signal_requeue_cancel(slurm: CliSlurm, admin: CliSlurm, cluster: Cluster, tag: str,
                                            cleanup: list[int]) -> None:
    out = cluster.shared / f"{tag}.log"
    job_id = slurm.submit(SIGNAL_SCRIPT.format(out=out), [
        "--hold", f"--job-name={tag}@gpu", "--partition=gpu", "--gres=gpu:1", "--mem=200M", "--qos=be",
        "--requeue", "--output=/dev/null", f"--comment=slurmx:g={tag},v=gpu"])
    cleanup.append(job_id)
    held = job(slurm, job_id)
    assert held is not None and held.state == VariantState.HELD and held.held
    assert held.slurmx_tags == {"g": tag, "v": "gpu"}
    assert held.request.gres_count("gpu") == 1

    admin.release([job_id])  # a job with a slurmx tag is slurmxd's account's to release (site-config/job_submit.lua)
    running = wait_until(lambda: in_state(slurm, job_id, VariantState.RUNNING), 60, "job to run")
    assert running.nodes in {"g1", "g2"} and running.allocated.gres_count("gpu") == 1
    wait_until(lambda: out.exists() and "start restart=0" in out.read_text(), 30, "job output")

    slurm.signal([job_id], "USR2", batch_only=True)
    wait_until(lambda: "got USR2" in out.read_text(), 30, "the batch shell's trap to fire")
    assert job(slurm, job_id).state == VariantState.RUNNING  # type: ignore[union-attr]  # trap kept it alive

    slurm.requeue([job_id])
    wait_until(lambda: in_state(slurm, job_id, VariantState.PENDING, VariantState.REQUEUED), 60,
               "requeued job to be pending")
    again = wait_until(lambda: in_state(slurm, job_id, VariantState.RUNNING), 120, "requeued job to run again")
    assert again.restart_count == 1
    wait_until(lambda: "start restart=1" in out.read_text(), 30, "second start")

    slurm.cancel([job_id])
    wait_until(lambda: in_state(slurm, job_id, VariantState.CANCELLED) or job(slurm, job_id) is None, 60,
               "cancel")


def test_requeuehold_keeps_job_held_until_released(slurm: CliSlurm, cluster: Cluster, tag: str,
                                                   cleanup: list[int]) -> None:
    job_id = slurm.submit("#!/bin/bash\nsleep 600\n", [
        f"--job-name={tag}", "--partition=cpu", "--mem=100M", "--output=/dev/null", "--requeue"])
    cleanup.append(job_id)
    wait_until(lambda: in_state(slurm, job_id, VariantState.RUNNING), 60, "job to run")
    slurm.requeue([job_id], hold=True)
    held = wait_until(lambda: in_state(slurm, job_id, VariantState.HELD), 60, "requeuehold")
    assert held.held
    time.sleep(3)
    assert in_state(slurm, job_id, VariantState.HELD), "a requeue-held job must not start by itself"
    slurm.release([job_id])
    wait_until(lambda: in_state(slurm, job_id, VariantState.RUNNING), 120, "released job to run")


def test_many_ids_in_one_call(slurm: CliSlurm, tag: str, cleanup: list[int]) -> None:
    ids = [slurm.submit("#!/bin/bash\nsleep 300\n", ["--hold", f"--job-name={tag}", "--partition=cpu",
                                                     "--mem=100M", "--output=/dev/null"]) for _ in range(3)]
    cleanup.extend(ids)
    assert all(j.state == VariantState.HELD for j in slurm.jobs(job_ids=ids))
    slurm.release(ids)
    slurm.hold(ids)  # released jobs may start at once; those still pending go back on hold
    states = {j.job_id: j.state for j in slurm.jobs(job_ids=ids)}
    assert set(states) == set(ids)
    slurm.cancel(ids)
    wait_until(lambda: all(j.state == VariantState.CANCELLED for j in slurm.jobs(job_ids=ids)), 60,
               "all three cancelled")


def test_update_pending_job(slurm: CliSlurm, admin: CliSlurm, tag: str, cleanup: list[int]) -> None:
    job_id = slurm.submit("#!/bin/bash\nsleep 300\n", [
        "--hold", f"--job-name={tag}", "--partition=cpu", "--mem=100M", "--output=/dev/null"])
    cleanup.append(job_id)
    # As slurmxd's account: a user may not write a slurmx tag after submission (site-config/job_submit.lua).
    admin.update([job_id], JobUpdate(partition="gpu", gres="gpu:1", cpus=2, mem_mb=700, nice=5,
                                     comment=f"slurmx:g={tag},v=gpu", nodelist="g2"))
    updated = job(slurm, job_id)
    assert updated is not None
    assert updated.partition == "gpu"
    assert updated.request.gres_count("gpu") == 1
    assert updated.request.cpus == 2
    assert updated.nice == 5
    assert updated.slurmx_tags["v"] == "gpu"
    assert updated.required_nodes == "g2"
    # Slurm refuses a priority on a held job (hold is priority 0): release first, as the daemon does.
    admin.release([job_id])
    admin.update([job_id], JobUpdate(priority=4242))
    assert job(slurm, job_id).priority == 4242  # type: ignore[union-attr]


def test_unprivileged_priority_raise_is_refused(slurm: CliSlurm, tag: str, cleanup: list[int]) -> None:
    job_id = slurm.submit("#!/bin/bash\nsleep 60\n", ["--hold", f"--job-name={tag}", "--output=/dev/null"])
    cleanup.append(job_id)
    with pytest.raises(SlurmCommandError) as err:
        slurm.update([job_id], JobUpdate(priority=99999))
    assert "\n" not in str(err.value) and "scontrol update" in str(err.value)


def test_unknown_job_id_is_a_typed_error(slurm: CliSlurm) -> None:
    with pytest.raises(InvalidJobError) as err:
        slurm.hold([987654])
    assert "987654" in str(err.value) or "Invalid job id" in str(err.value)


def test_sacct_sees_finished_job(slurm: CliSlurm, tag: str) -> None:
    job_id = slurm.submit("#!/bin/bash\necho done\n", [
        f"--job-name={tag}", "--partition=accel", "--gres=accel:1", "--mem=100M", "--output=/dev/null"])
    # Slurm 22.05's sacct briefly shows a just-finished job under the name "allocation" until slurmdbd has the
    # whole record: wait for the complete record, as the daemon's reconciliation does.
    record = wait_until(lambda: next((r for r in slurm.accounting([job_id], since="now-10minutes")
                                      if r.state == VariantState.COMPLETED and r.name == tag), None), 90,
                        "the complete sacct record")
    assert record.exit_code == 0
    assert record.allocated.gres_count("accel") == 1
    assert record.nodes == "a1"


def test_retries_while_slurmctld_is_down(cluster: Cluster, slurm: CliSlurm) -> None:
    """Stop the real slurmctld, ask for jobs, start it again: the call waits it out instead of failing."""
    ctld = cluster.container("ctld")
    subprocess.run(["docker", "stop", "-t", "5", ctld], check=True, capture_output=True)
    restarter = subprocess.Popen(["sh", "-c", f"sleep 4; docker start {ctld}"], stdout=subprocess.DEVNULL)
    try:
        patient = CliSlurm(slurm.transport, type(slurm.retry)(retries=8, backoff_s=1.0, timeout_s=30))
        started = time.monotonic()
        jobs = patient.jobs()
        assert time.monotonic() - started >= 3, "the controller was down, so the first attempts must have failed"
        assert isinstance(jobs, list)
    finally:
        restarter.wait(timeout=60)
        wait_until(lambda: slurm.ping(), 60, "slurmctld back")


def test_doctor_finds_every_field_slurmx_reads_in_this_release_s_output(slurm: CliSlurm, cluster: Cluster,
                                                                        site_path: object, tag: str,
                                                                        cleanup: list[int]) -> None:
    """`slurmx doctor`'s conformance probe on the live release: squeue (with a job in it), the node listing and
    sacct each carry every field slurmx's parsers read."""
    import sys

    job_id = slurm.submit("#!/bin/bash\ntrue\n", ["--hold", f"--job-name={tag}", "--partition=cpu", "--mem=100M",
                                                  "--output=/dev/null"])
    cleanup.append(job_id)
    done = subprocess.run([sys.executable, "-m", "slurmx.cli", "--site", str(site_path), "doctor"],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "COLUMNS": "400"})  # one finding per line
    assert done.returncode == 0, done.stdout + done.stderr
    found = [line for line in done.stdout.splitlines() if "fields slurmx reads are there" in line]
    assert [line.split()[1] for line in found] == ["squeue", "sinfo" if cluster.version == "22.05" else "scontrol",
                                                   "sacct"], done.stdout
