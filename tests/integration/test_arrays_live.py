"""Live: slurmx-style job arrays (one per kind, one tag) as slurmxd reads and acts on them (core/arrays.py).

Through the adapter as the daemon uses it: each index of the cpu and gpu arrays is one group g[i] owned by the
array's folder; a sparse array's whole index list arrives (squeue runs with SLURM_BITSTR_LEN=0); release, steer
and cancel act on one index by its key (`A_i`), which stays the same when Slurm splits the task off; Slurm's own
`%N` holds the indices slurmxd releases.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmx.core.arrays import index_group, task_key
from slurmx.core.config import load_site_config
from slurmx.core.model import VariantState
from slurmx.core.ownership import SpoolOwners
from slurmx.daemon.lease import LeasedSlurm
from slurmx.daemon.trust import sort_jobs
from slurmx.slurm import CliSlurm
from slurmx.slurm.adapter import JobUpdate
from slurmx.slurm.records import SlurmJob
from slurmx.submit.spec import parse_spec
from slurmx.submit.submitter import submit_groups
from tests.integration.conftest import Cluster, make_group_folder, spool_dir, wait_until
from tests.integration.test_daemon_helpers import DaemonProcess, daemon_site, shared_folder
from tests.unit.test_daemon import SITE

SCRIPT = "#!/bin/bash\nsleep 300\n"
SPARSE = sorted({i * i % 997 for i in range(1, 60)})  # a task string past libslurm's 64 bytes


@pytest.fixture
def arrays(slurm: CliSlurm, admin: CliSlurm, tag: str) -> Iterator[tuple[int, int]]:
    make_group_folder(slurm, tag)
    ids = []
    for kind, extra in (("cpu", []), ("gpu", ["--gres=gpu:1"])):
        ids.append(slurm.submit(SCRIPT, ["-H", "--qos=be", f"--partition={kind}", f"--job-name={tag}@{kind}",
                                         f"--comment=slurmx:1:g={tag},v={kind},c=be,h=0123456789ab", "--mem=100M",
                                         "--array=0-9%3", "--output=/dev/null", *extra]))
    yield ids[0], ids[1]
    admin.cancel(ids)


def _mine(slurm: CliSlurm, *array_ids: int) -> list[SlurmJob]:
    return [j for j in slurm.jobs(user="alice") if j.array_job_id in array_ids]


def test_each_index_of_the_kind_arrays_is_one_group_of_the_arrays_owner(slurm: CliSlurm, arrays: tuple[int, int],
                                                                        tag: str) -> None:
    cpu, gpu = arrays
    trusted, rejected = sort_jobs(SITE, _mine(slurm, cpu, gpu), SpoolOwners(spool_dir()))
    assert not rejected
    groups = {g.group_id: g for g in trusted}
    assert sorted(groups) == sorted(index_group(tag, i) for i in range(10))
    group = groups[index_group(tag, 7)]
    assert {k: j.job_id for k, j in group.jobs.items()} == {"cpu": task_key(cpu, 7), "gpu": task_key(gpu, 7)}
    assert group.user == "alice" and group.throttle == 3
    asked = slurm.jobs([task_key(cpu, 7), task_key(gpu, 9)])  # `squeue --jobs=A_7,B_9`: those two tasks alone
    assert sorted(j.job_id for j in asked) == sorted([task_key(cpu, 7), task_key(gpu, 9)])


def test_a_sparse_arrays_whole_index_list_arrives(slurm: CliSlurm, admin: CliSlurm, tag: str) -> None:
    # tagged: another tool's pending array stays one record (only a slurmx array is read index by index)
    array = slurm.submit(SCRIPT, ["-H", "--qos=be", "--partition=cpu", "--output=/dev/null", "--mem=100M",
                                  f"--comment=slurmx:1:g={tag},v=cpu,c=be,h=0123456789ab",
                                  f"--array={','.join(map(str, SPARSE))}%3"])
    try:
        assert sorted(j.array_task_id or 0 for j in _mine(slurm, array)) == SPARSE
    finally:
        admin.cancel([array])


def test_release_steer_and_cancel_act_on_one_index_by_its_key(slurm: CliSlurm, admin: CliSlurm,
                                                              arrays: tuple[int, int]) -> None:
    cpu, gpu = arrays
    admin.release([task_key(cpu, 4)])
    admin.update([task_key(gpu, 2)], JobUpdate(nodelist="g2"))
    admin.cancel([task_key(gpu, 4)])

    def settled() -> dict[int, SlurmJob] | None:
        jobs = {j.job_id: j for j in _mine(slurm, cpu, gpu)}
        run = jobs.get(task_key(cpu, 4))
        return jobs if run is not None and run.state is VariantState.RUNNING else None

    jobs = wait_until(settled, 60, f"index 4 of array {cpu} running")
    assert jobs[task_key(gpu, 2)].held and jobs[task_key(gpu, 2)].required_nodes == "g2"
    assert task_key(gpu, 4) not in jobs or not jobs[task_key(gpu, 4)].state.is_active  # gone, or shown cancelled
    others = [j for k, j in jobs.items() if k not in (task_key(cpu, 4), task_key(gpu, 2), task_key(gpu, 4))]
    assert len(others) == 17 and all(j.held for j in others)  # nothing else moved


def test_slurms_throttle_holds_the_indices_slurmxd_releases(slurm: CliSlurm, admin: CliSlurm,
                                                           arrays: tuple[int, int]) -> None:
    cpu, _ = arrays
    admin.release([task_key(cpu, i) for i in range(5)])

    def five_seen() -> list[SlurmJob] | None:
        jobs = [j for j in _mine(slurm, cpu) if (j.array_task_id or 0) < 5]
        running = [j for j in jobs if j.state is VariantState.RUNNING]
        return jobs if len(running) == 3 else None

    jobs = wait_until(five_seen, 60, "three of five released indices running")
    waiting = [j for j in jobs if j.state is not VariantState.RUNNING]
    assert len(waiting) == 2 and {j.reason for j in waiting} == {"JobArrayTaskLimit"}


@pytest.mark.long_behaviour
def test_slurmxd_runs_each_index_once_never_more_than_n_across_kinds(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tag: str, tmp_path: Path) -> None:
    """`--array=0-9%3` per kind, held as managed variants without a lease: slurmxd (FIFO) starts one kind of each
    index, cancels the other kind's same index, and never has more than 3 indices running, whatever their kind.
    A cpu index takes a whole cpu node (two of them), so FIFO puts the third index at a time on a gpu: without
    the throttle across kinds, 2 cpu and 3 gpu indices (Slurm's %3 per array) could run at once."""
    marks = shared_folder(cluster, f"{tag}-marks")
    make_group_folder(slurm, tag)
    arrays = {}
    for kind, extra in (("cpu", ["--cpus-per-task=4"]), ("gpu", ["--gres=gpu:1"])):
        script = f"#!/bin/bash\necho ran >> {marks}/$SLURM_ARRAY_TASK_ID.{kind}\nsleep 4\n"
        arrays[kind] = slurm.submit(script, [
            "-H", "--qos=be", f"--partition={kind}", f"--job-name={tag}@{kind}", "--mem=100M", "--array=0-9%3",
            f"--comment=slurmx:1:g={tag},v={kind},c=be,e=4,h=0123456789ab", "--output=/dev/null", *extra])
    daemon = DaemonProcess(daemon_site(cluster, tmp_path, "fifo"), tmp_path / "slurmxd.log")
    most = 0

    def all_done() -> bool:
        nonlocal most
        jobs = _mine(admin, *arrays.values())
        most = max(most, len({j.array_task_id for j in jobs if j.state is VariantState.RUNNING}))
        return bool(jobs) and not any(j.state.is_active for j in jobs)

    daemon.start()
    try:
        wait_until(all_done, 240, "every index to finish", every=0.5)
    finally:
        daemon.stop()
        admin.cancel(list(arrays.values()))
    ran = sorted(p.name for p in marks.iterdir())
    assert sorted(int(name.split(".")[0]) for name in ran) == list(range(10)), f"payloads that ran: {ran}"
    assert all((marks / name).read_text() == "ran\n" for name in ran), "an index ran more than once"
    assert 1 <= most <= 3, f"{most} indices ran at once ({ran})"
    assert "Traceback" not in daemon.text()


def test_a_lease_is_renewed_on_the_arrays_pending_record_whole_and_leaves_released_tasks_alone(
        slurm: CliSlurm, admin: CliSlurm, tag: str) -> None:
    """A leased array (begin in its lease's second half): slurmxd releases indices 0 and 1 (%1: 1 waits on the
    throttle, begin now), then one renewal pushes indices 2-5 together, still one pending record (nothing split
    off), and leaves index 1's begin time alone: `JobId=A` would have pushed it back too (live, 24.11). No group
    folder: a slurmxd another test runs on this cluster sets the array aside instead of leasing it itself."""
    array = slurm.submit(SCRIPT, ["--qos=be", "--partition=cpu", f"--job-name={tag}@cpu", "--mem=100M",
                                  "--begin=now+200", "--array=0-5%1", "--output=/dev/null",
                                  f"--comment=slurmx:1:g={tag},v=cpu,c=be,h=0123456789ab,l=600"])
    leased = LeasedSlurm(admin, lease_s=600)
    try:
        leased.jobs()
        leased.release([task_key(array, 0), task_key(array, 1)])
        wait_until(lambda: any(j.state is VariantState.RUNNING for j in _mine(admin, array)) or None, 60,
                   f"index 0 of {array} running")
        before = admin.command_counts().get("scontrol", 0)
        now = time.time()
        renewed = leased.renew(leased.jobs(), now)
        assert sorted(renewed) == [task_key(array, i) for i in range(2, 6)]
        assert admin.command_counts().get("scontrol", 0) == before + 1  # one update for the whole record
        jobs = {j.array_task_id: j for j in _mine(admin, array)}
        assert all(jobs[i].array_pending and (jobs[i].begin_time or 0) >= now + 590 for i in range(2, 6))
        assert not jobs[1].array_pending and (jobs[1].begin_time or 0) <= now + 5  # released: not pushed back
    finally:
        admin.cancel([array])


@pytest.mark.long_behaviour
def test_slurmx_submit_array_is_one_slurm_array_per_kind_and_runs_each_index_once(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tag: str, tmp_path: Path) -> None:
    """`slurmx submit --array=0-99%10` (managed, cpu and gpu; issue 32's acceptance): two sbatch calls, one array
    per kind, one group; under slurmxd (FIFO) every index runs exactly once, on one kind, with never more than 10
    indices running at once across the kinds, and the throttle is reached (the two cpu nodes hold 8 one-CPU
    indices, the gpus the rest)."""
    marks = shared_folder(cluster, f"{tag}-marks")
    site = load_site_config(daemon_site(cluster, tmp_path, "fifo"))
    site = site.model_copy(update={"transport": site.transport.model_copy(update={"docker_user": "alice"})})
    spec = parse_spec({"name": tag, "class": "be", "time": "10m", "mem": "100M", "variants": ["cpu", "gpu"],
                       "cpus": 1, "array": "0-99%10",
                       "command": f"echo ran >> {marks}/$SLURM_ARRAY_TASK_ID.$SLURMX_VARIANT\nsleep 3"})
    [group] = submit_groups(spec, site, slurm, mode="managed")
    arrays = dict(group.variants)
    daemon = DaemonProcess(daemon_site(cluster, tmp_path, "fifo"), tmp_path / "slurmxd.log")
    most = 0
    seen: set[int] = set()

    def all_done() -> bool:
        nonlocal most
        jobs = [j for j in admin.jobs(user="alice") if tag in j.comment]
        seen.update(j.array_job_id for j in jobs)
        most = max(most, len({j.array_task_id for j in jobs if j.state is VariantState.RUNNING}))
        return bool(jobs) and not any(j.state.is_active for j in jobs)

    daemon.start()
    try:
        wait_until(all_done, 600, "every index to finish", every=0.5)
    finally:
        daemon.stop()
        admin.cancel(list(arrays.values()))
    assert sorted(arrays) == ["cpu", "gpu"] and seen == set(arrays.values()), f"arrays {arrays}, seen {seen}"
    ran = sorted(p.name for p in marks.iterdir())
    assert sorted(int(name.split(".")[0]) for name in ran) == list(range(100)), f"payloads that ran: {ran}"
    assert all((marks / name).read_text() == "ran\n" for name in ran), "an index ran more than once"
    assert most == 10, f"{most} indices ran at once at most (the throttle is 10)"
    assert "Traceback" not in daemon.text()


def test_a_race_task_that_loses_cancels_itself_alone_even_with_the_arrays_job_id(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tag: str, tmp_path: Path) -> None:
    """The task of an array that starts last keeps the array's job id as its SLURM_JOB_ID, and `scancel <array job
    id>` cancels every task of the array. Index 1 (the last of `--array=0-1`) finds its index already won (a
    winner planted in its race folder, as the other kind's index 1 leaves it) and leaves: it must cancel itself
    alone (`A_1`) while index 0 goes on to complete (a map's item was lost this way: issue 33)."""
    marks = shared_folder(cluster, f"{tag}-marks")
    site = load_site_config(daemon_site(cluster, tmp_path, "fifo"))
    site = site.model_copy(update={"transport": site.transport.model_copy(update={"docker_user": "alice"})})
    spec = parse_spec({"name": tag, "class": "be", "time": "5m", "mem": "100M", "variants": ["cpu"], "cpus": 1,
                       "array": "0-1", "begin": "now+15",
                       "command": f"echo ran >> {marks}/$SLURM_ARRAY_TASK_ID\nsleep 15"})
    [group] = submit_groups(spec, site, slurm, mode="race")
    [(_, array)] = group.variants
    folder = Path(spool_dir()) / group.group_id
    owner = folder.stat()
    race = folder / "race-1"
    race.mkdir()
    (race / "winner").write_text("999999999_1\n")
    for path in (race, race / "winner"):
        os.chown(path, owner.st_uid, owner.st_gid)

    def ended() -> dict[int, SlurmJob] | None:
        jobs = {j.array_task_id or 0: j for j in _mine(admin, array)}
        return jobs if len(jobs) == 2 and not any(j.state.is_active for j in jobs.values()) else None

    try:
        jobs = wait_until(ended, 120, f"both tasks of array {array} to end")
    finally:
        admin.cancel([array])
    assert jobs[0].state is VariantState.COMPLETED, jobs
    assert jobs[1].state is VariantState.CANCELLED, jobs
    assert sorted(p.name for p in marks.iterdir()) == ["0"]
