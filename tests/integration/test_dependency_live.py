"""`--dependency` on groups and `--array` as groups, as sbatch users write them, on the real cluster.

A dependency on a group is satisfied by whichever variant ran (managed mode, slurmxd deciding; the daemon leaves a
group out until Slurm finds its dependency satisfied); `--array=1-3` is three groups that each run once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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


def test_a_group_waits_for_the_group_it_depends_on_whichever_variant_ran(
        cluster: Cluster, site_path: Path, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str,
        cleanup: list[int]) -> None:
    """sbatch's `afterok` on a group, with `--gpus` and `--mem-per-cpu`, under slurmxd: B starts only after A's
    variant completed, runs once, on the kinds with GPUs, with memory per CPU."""
    marks = shared_folder(cluster, f"{tag}-marks")
    daemon = DaemonProcess(daemon_site(cluster, tmp_path, "fifo"), tmp_path / "slurmxd.log")
    daemon.start()
    try:
        wait_log(daemon, "slurmxd started")
        first = cluster.shared / f"{tag}-a.sh"
        first.write_text(f"#!/bin/bash\nsleep 6\ndate +%s > {marks}/a-ended\n")
        a_id = _submit(site_path, "--mode", "managed", "--variants", "cpu,gpu", "--time=5", str(first))
        second = cluster.shared / f"{tag}-b.sh"
        second.write_text("#!/bin/bash\n#SBATCH --gpus=1 --mem-per-cpu=150M -c 2 --time=5\n"
                          f"if [ -f {marks}/a-ended ]; then echo saw-a; else echo early; fi >> {marks}/b-ran\n")
        b_id = _submit(site_path, "--mode", "managed", f"--dependency=afterok:{a_id}", str(second))
        b_now = find_group(slurm, b_id, spool_dir=spool_dir())
        assert b_now is not None and [v.kind for v in b_now.variants] == ["gpu"]
        waiting = slurm.jobs(job_ids=[v.job_id for v in b_now.variants])
        a_jobs = {v.job_id for v in (find_group(slurm, a_id, spool_dir=spool_dir()) or b_now).variants}
        for job in waiting:  # Slurm waits on A's variants, any of them: a cancelled loser does not count
            assert job.dependency and job.waits_on_dependency, job.dependency
            assert {int(t.split(":")[1].split("(")[0]) for t in job.dependency.split("?")} == a_jobs, job.dependency
        a = wait_until(lambda: _finished(slurm, a_id), 240, "group A to finish", every=2)
        b = wait_until(lambda: _finished(slurm, b_id), 240, "group B to finish", every=2)
    finally:
        daemon.stop()
    cleanup.extend(v.job_id for g in (a, b) for v in g.variants)
    assert a.state.value == "completed" and b.state.value == "completed", (a, b)
    assert (marks / "b-ran").read_text() == "saw-a\n"  # once, and after A's variant had completed
    record = wait_until(lambda: next(iter(slurm.accounting([b.variants[0].job_id], since="now-1hour")), None), 90,
                        "sacct to record B")
    assert (record.request.cpus, record.request.mem_mb) == (2, 300)
    a_ended = int((marks / "a-ended").read_text())
    store = Store(tmp_path / "state" / "slurmxd.sqlite")
    starts = [e for e in store.history(b_id) if e.event == "decide" and e.detail.startswith("start ")]
    assert starts, store.history(b_id)
    assert starts[0].t >= a_ended - 1, "slurmxd chose a variant of B while Slurm still held it on its dependency"
    assert "Traceback" not in daemon.text()


def test_an_array_is_one_group_whose_indices_each_run_once(
        cluster: Cluster, site_path: Path, slurm: CliSlurm, tag: str, cleanup: list[int]) -> None:
    """`--array=1-3` is one Slurm array per kind and one group (race mode: Slurm alone); its indices `g[1..3]` each
    run once, on one kind, reading their index and the array's size as array tasks do. (`--dependency` on an array
    group is not there yet: docs/daemon.md, Arrays.)"""
    marks = shared_folder(cluster, f"{tag}-marks")
    script = cluster.shared / f"{tag}-array.sh"
    script.write_text("#!/bin/bash\n#SBATCH --array=1-3 --time=5\n"
                      f'echo "$SLURMX_VARIANT $SLURM_ARRAY_TASK_COUNT" >> {marks}/ran-$SLURM_ARRAY_TASK_ID\n')
    group = _submit(site_path, "--mode", "race", "--variants", "cpu,gpu", str(script))
    assert ":" not in group, group  # one group, not one per index
    done = [wait_until(lambda g=f"{group}[{i}]": _finished(slurm, g), 240, f"index {i} to finish", every=2)
            for i in (1, 2, 3)]
    cleanup.extend(v.job_id for g in done for v in g.variants)
    for index in (1, 2, 3):
        lines = (marks / f"ran-{index}").read_text().splitlines()
        assert len(lines) == 1 and lines[0].split()[1] == "3", lines  # one variant ran, with the array's size
    assert all(g.state.value == "completed" for g in done)


def test_a_dependency_slurm_could_never_satisfy_is_refused_at_submission(site_path: Path, slurm: CliSlurm,
                                                                        cluster: Cluster, tag: str) -> None:
    failed = cluster.shared / f"{tag}-fails.sh"
    failed.write_text("#!/bin/bash\nexit 3\n")
    gid = _submit(site_path, "--mode", "race", "--variants", "cpu", str(failed))
    wait_until(lambda: _finished(slurm, gid), 120, "the failing group to end", every=2)
    before = {j.job_id for j in slurm.jobs()}
    proc = subprocess.run([sys.executable, "-m", "slurmx.cli", "--site", str(site_path), "submit",
                           f"--dependency=afterok:{gid}", str(failed)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"afterok:{gid}: the group already ended failed" in proc.stderr, proc.stderr
    assert {j.job_id for j in slurm.jobs()} <= before, "a refused submission queued a job"
