"""Slurm job arrays as groups per index (core/arrays.py): keys, task strings, squeue records of 22.05-26.05, and
slurmxd's trust and view over the arrays recorded on the live 24.11 cluster (tests/fixtures/slurm/record_arrays.sh)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmx.core.actions import Plan, Start
from slurmx.core.arrays import (
    MAX_TASK_ID,
    folder_group,
    index_group,
    index_of,
    is_task_key,
    job_text,
    split_key,
    task_key,
)
from slurmx.core.model import GroupState, VariantState
from slurmx.core.ownership import FolderOwner
from slurmx.daemon.observe import StartMark, build_view
from slurmx.daemon.preemption import PreemptionError, intent_path, read_intent
from slurmx.daemon.trust import sort_jobs
from slurmx.slurm.adapter import CliSlurm, JobUpdate
from slurmx.slurm.array_tasks import expand_pending, parse_task_mask, parse_task_string
from slurmx.slurm.parse import parse_accounting, parse_jobs
from slurmx.slurm.records import SlurmJob
from slurmx.slurm.transport import CommandResult, DockerExecTransport, LocalTransport, ReplayTransport, SshTransport
from slurmx.slurm.versions import TESTED
from tests.unit.test_daemon import NODES, PARTITIONS, SITE, FakeSlurm, _apply, _enforcer, _obs, job, spool_owners
from tests.unit.test_slurm_hostile import _Client

FIXTURES = Path(__file__).parent.parent / "fixtures" / "slurm"
RECORDED = FIXTURES / "24.11" / "squeue-arrays.json"  # arrays 80 (cpu), 81 (gpu) of tag arrrec; 82 sparse; 74 gone
CUT = FIXTURES / "24.11" / "squeue-arrays-bitstr64.json"  # the same queue read with libslurm's 64-byte cut


# --- keys and group ids -------------------------------------------------------------------------------------------

@given(st.integers(1, 2**32 - 1), st.integers(0, MAX_TASK_ID))
def test_a_task_key_names_one_task_and_is_never_a_job_id(array_job_id: int, task_id: int) -> None:
    key = task_key(array_job_id, task_id)
    assert split_key(key) == (array_job_id, task_id) and is_task_key(key)
    assert key > 2**32 and key < 2**63  # past every 32-bit job id, inside SQLite's integers
    assert job_text(key) == f"{array_job_id}_{task_id}"


def test_keys_outside_slurms_ranges_are_refused_and_plain_ids_print_as_they_are() -> None:
    for bad in ((0, 1), (2**32, 1), (5, MAX_TASK_ID + 1), (5, -1)):
        with pytest.raises(ValueError, match="outside Slurm's ranges"):
            task_key(*bad)
    assert job_text(123) == "123" and not is_task_key(2**32 - 1)


@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,80}", fullmatch=True), st.integers(0, MAX_TASK_ID))
def test_an_index_group_names_its_array_and_index_and_no_tag_name_is_one(group: str, index: int) -> None:
    name = index_group(group, index)
    assert index_of(name) == (group, index) and folder_group(name) == group
    assert index_of(group) is None and folder_group(group) == group  # a plain name (any tag's g=) is no index group


# --- the task string ----------------------------------------------------------------------------------------------

def test_task_strings_as_squeue_wrote_them_live() -> None:
    assert parse_task_string("0,2,4-9%3") == ([0, 2, 4, 5, 6, 7, 8, 9], 3)
    assert parse_task_string("0-1,3-9%3")[0] == [0, 1, 3, 4, 5, 6, 7, 8, 9]
    assert parse_task_string("5") == ([5], 0)
    assert parse_task_string("0-99:4%10") == (list(range(0, 100, 4)), 10)  # Slurm's step form (xlate_array_task_str)


@pytest.mark.parametrize(("text", "says"), [
    ("1,4,9,16,25,27,31,34,36,49,64,81,92,100,121-122,144-145,159,...%3", "SLURM_BITSTR_LEN=0"),
    ("0-9%x", "throttle"), ("9-3", "not one Slurm writes"), ("0-4194304", "not one Slurm writes"),
    ("", "expected an index"), ("1,,2", "expected an index"), ("0-9:0", "not one Slurm writes")])
def test_a_task_string_slurm_would_not_write_or_cut_is_refused_in_one_line(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as info:
        parse_task_string(text)
    assert "\n" not in str(info.value)


def _slurm_format(indices: list[int]) -> str:
    """A sorted index set as libslurm's bit_fmt writes it: runs as `a-b`, lone indices as they are."""
    runs: list[str] = []
    start = prev = indices[0]
    for i in [*indices[1:], -2]:
        if i != prev + 1:
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            start = i
        prev = i
    return ",".join(runs)


@given(st.sets(st.integers(0, 5000), min_size=1, max_size=300), st.integers(0, 1000))
def test_any_index_set_slurm_writes_reads_back_with_its_throttle(indices: set[int], throttle: int) -> None:
    ordered = sorted(indices)
    text = _slurm_format(ordered) + (f"%{throttle}" if throttle else "")
    assert parse_task_string(text) == (ordered, throttle)


# --- squeue records -----------------------------------------------------------------------------------------------

def _recorded() -> list[SlurmJob]:
    return parse_jobs(RECORDED.read_bytes())


def test_the_recorded_arrays_read_one_job_per_index_keyed_before_and_after_the_split() -> None:
    jobs = {job_text(j.job_id): j for j in _recorded()}
    cpu = sorted(j.array_task_id or 0 for j in jobs.values() if j.array_job_id == 80)
    gpu = sorted(j.array_task_id or 0 for j in jobs.values() if j.array_job_id == 81)
    assert cpu == [0, 1, 2, 4, 5, 6, 7, 8, 9]  # index 3 was cancelled before it split: no record at all
    assert gpu == list(range(10))
    released, steered, pending = jobs["80_1"], jobs["81_2"], jobs["80_7"]
    assert released.state is VariantState.RUNNING and released.nodes  # split off (job 83) by the release
    assert steered.held and steered.required_nodes == "g2"  # split off (job 84) by the update, still held
    assert pending.held and pending.array_task_id == 7 and pending.comment == released.comment
    assert {j.array_throttle for j in jobs.values() if j.array_job_id in (80, 81)} == {3}
    assert len(_recorded()) == len(jobs)  # one key per task


def test_an_array_cancelled_whole_is_every_listed_index_cancelled() -> None:
    gone = [j for j in _recorded() if j.array_job_id == 74]
    assert gone and all(j.state is VariantState.CANCELLED for j in gone)
    assert sorted(j.array_task_id or 0 for j in gone) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]


def test_a_task_string_cut_at_64_bytes_leaves_its_array_out_named(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="slurmxd"):
        jobs = parse_jobs(CUT.read_bytes())
    assert not [j for j in jobs if j.array_job_id == 82]
    assert {j.array_job_id for j in jobs} == {74, 80, 81}  # the other arrays are read all the same
    assert "SLURM_BITSTR_LEN=0" in caplog.text and "skipped job 82" in caplog.text


def test_22_05_writes_the_same_fields_as_plain_numbers() -> None:
    """openapi v0.0.38 (22.05) writes array_job_id/array_max_tasks as numbers, array_task_id null when unset."""
    data = json.loads((FIXTURES / "22.05" / "squeue.json").read_text())
    base = data["jobs"][0]
    pending = {**base, "job_id": 40, "array_job_id": 40, "array_task_id": None, "array_max_tasks": 2,
               "array_task_string": "0-2%2"}
    split = {**base, "job_id": 41, "array_job_id": 40, "array_task_id": 5, "array_max_tasks": 2,
             "array_task_string": ""}
    jobs = parse_jobs(json.dumps({**data, "jobs": [pending, split]}))
    assert [job_text(j.job_id) for j in jobs] == ["40_0", "40_1", "40_2", "40_5"]
    assert {j.array_throttle for j in jobs} == {2}


def test_plain_jobs_are_unchanged_in_every_version() -> None:
    for version in TESTED:
        jobs = parse_jobs((FIXTURES / version / "squeue.json").read_bytes())
        assert jobs and all(j.array_job_id == 0 and j.array_task_id is None and j.job_id < 2**32 for j in jobs)


def test_expansion_copies_the_record_and_puts_in_key_and_index() -> None:
    template = replace(job(7, "a"), array_job_id=7, array_throttle=4)
    out = expand_pending(template, [0, 5])
    assert [(j.job_id, j.array_task_id) for j in out] == [(task_key(7, 0), 0), (task_key(7, 5), 5)]
    assert replace(out[1], job_id=7, array_task_id=None, array_pending=False) == template and out[1].array_pending


# --- acting on one index ------------------------------------------------------------------------------------------

def test_the_adapter_names_an_index_as_slurm_does_in_every_command() -> None:
    ok = CommandResult(("scontrol",), 0, "", "")
    transport = ReplayTransport({("scontrol",): ok, ("scancel",): ok})
    slurm = CliSlurm(transport)
    slurm.release([task_key(80, 4), 12])
    slurm.cancel([task_key(81, 4)])
    slurm.update([task_key(80, 4)], JobUpdate(nodelist="c1"))
    assert [argv for argv, _ in transport.calls] == [
        ("scontrol", "release", "80_4,12"), ("scancel", "81_4"),
        ("scontrol", "update", "JobId=80_4", "ReqNodeList=c1")]


def test_a_refused_update_of_one_index_is_told_by_its_key() -> None:
    refused = CommandResult(("scontrol",), 1, "", "slurm_update error: Invalid node name specified for job 80_4\n")
    transport = ReplayTransport({("scontrol",): refused})
    failed = CliSlurm(transport).update_each([(task_key(80, 4), JobUpdate(nodelist="zz")), (9, JobUpdate(nice=1))])
    assert task_key(80, 4) in failed


# --- trust and the view: index i of every kind array is group g[i] -------------------------------------------------

def test_index_i_of_the_cpu_and_gpu_arrays_is_one_group_owned_by_the_arrays_folder() -> None:
    jobs = [j for j in _recorded() if j.array_job_id in (80, 81)]
    owners = spool_owners(jobs)
    asked: list[str] = []

    def owner_of(group: str) -> FolderOwner | None:
        asked.append(group)
        return owners(group)

    trusted, rejected = sort_jobs(SITE, jobs, owner_of)
    groups = {g.group_id: g for g in trusted}
    assert not rejected and set(asked) == {"arrrec"}
    assert sorted(groups) == sorted(index_group("arrrec", i) for i in range(10))
    assert set(groups["arrrec[0]"].jobs) == {"cpu", "gpu"} and set(groups["arrrec[3]"].jobs) == {"gpu"}
    assert groups["arrrec[1]"].jobs["cpu"].job_id == task_key(80, 1)
    assert {g.throttle for g in trusted} == {3} and {g.user_id for g in trusted} == {2001}


def test_another_users_array_with_the_same_tag_is_foreign_index_by_index() -> None:
    jobs = [j for j in _recorded() if j.array_job_id in (80, 81)]
    forged = [replace(j, user="bob", user_id=2002, array_job_id=90, job_id=task_key(90, j.array_task_id or 0))
              for j in jobs if j.array_job_id == 81]
    trusted, rejected = sort_jobs(SITE, [*jobs, *forged], spool_owners(jobs))
    assert len(trusted) == 10 and all(g.user == "alice" for g in trusted)
    assert {r.group_id for r in rejected} == {index_group("arrrec", i) for i in range(10)}
    assert "90_2 of bob(2002)" in next(r.reason for r in rejected if r.group_id == "arrrec[2]")


def test_two_arrays_of_one_kind_with_one_tag_leave_each_index_alone_named() -> None:
    jobs = [j for j in _recorded() if j.array_job_id in (80, 81)]
    again = [replace(j, array_job_id=95, job_id=task_key(95, j.array_task_id or 0)) for j in jobs
             if j.array_job_id == 80 and j.state.is_active]
    _, rejected = sort_jobs(SITE, [*jobs, *again], spool_owners(jobs))
    reason = next(r.reason for r in rejected if r.group_id == "arrrec[0]")
    assert reason == "two active jobs (80_0, 95_0) claim variant cpu"


def test_the_view_shows_each_index_as_a_group_with_its_kinds_as_variants() -> None:
    jobs = [replace(j, array_throttle=0) for j in _recorded() if j.array_job_id in (80, 81)]  # no %N here
    obs = build_view(SITE, jobs, NODES, PARTITIONS, 2e9, owner_of=spool_owners(jobs))
    groups = obs.view.groups
    assert len(groups) == 10
    assert groups["arrrec[1]"].state is GroupState.RUNNING
    waiting = groups["arrrec[0]"]
    assert [(v.kind, job_text(v.job_id or 0)) for v in waiting.variants] == [("cpu", "80_0"), ("gpu", "81_0")]
    assert [v.kind for v in groups["arrrec[3]"].variants] == ["gpu"]  # its cpu index was cancelled
    assert waiting.user == "alice" and waiting.state is not GroupState.RUNNING


# --- squeue is read with the whole task string ---------------------------------------------------------------------

def _fake_clients(folder: Path) -> None:
    for name in ("squeue", "sbatch"):
        script = folder / name
        script.write_text('#!/bin/sh\necho "${SLURM_BITSTR_LEN-unset}"\n')
        script.chmod(0o755)


def test_squeue_runs_with_slurm_bitstr_len_0_and_sbatch_without(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """libslurm cuts a task string at SLURM_BITSTR_LEN bytes (64 unless set); sbatch would copy the variable into
    the user's job, so it is set for squeue alone."""
    _fake_clients(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_BITSTR_LEN", raising=False)
    local = LocalTransport()
    assert local.run(["squeue", "--json"]).stdout.strip() == "0"
    assert local.run(["sbatch", "--parsable"], stdin="#!/bin/sh\n").stdout.strip() == "unset"


def test_docker_and_ssh_pass_it_to_squeue_on_the_far_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docker = tmp_path / "docker"
    docker.write_text('#!/bin/sh\necho "$@"\n')
    docker.chmod(0o755)
    transport = DockerExecTransport("login", "alice", docker=str(docker))
    assert transport.run(["squeue", "--json"]).stdout.split() == \
        ["exec", "-i", "-u", "alice", "--env=SLURM_BITSTR_LEN=0", "--env=SLURM_TIME_FORMAT=%s", "login", "squeue",
         "--json"]
    assert "--env" not in transport.run(["scancel", "80_4"]).stdout
    sent: list[str] = []
    client = _Client()
    monkeypatch.setattr(client.channel, "exec_command", sent.append)
    ssh = SshTransport("login.example")
    monkeypatch.setattr(ssh, "_connect", lambda shown: client)
    ssh.run(["squeue", "--json"])
    assert sent == ["env SLURM_BITSTR_LEN=0 SLURM_TIME_FORMAT=%s squeue --json"]


# --- %N across kinds: never more than N indices of the array group running, whatever their kind -------------------

def _throttled_view(jobs: list[SlurmJob], starts: dict[str, StartMark] | None = None) -> list[str]:
    obs = build_view(SITE, jobs, NODES, PARTITIONS, 2e9, owner_of=spool_owners(jobs), starts=starts)
    return sorted(obs.view.groups)


def _running(job: SlurmJob, node: str) -> SlurmJob:
    return replace(job, state=VariantState.RUNNING, held=False, nodes=node, start_time=1000)


def test_the_view_holds_an_array_group_to_its_throttle_lowest_indices_first() -> None:
    jobs = [j for j in _recorded() if j.array_job_id in (80, 81)]  # %3; index 1 of the cpu array runs
    assert _throttled_view(jobs) == ["arrrec[0]", "arrrec[1]", "arrrec[2]"]


def test_the_throttle_counts_running_indices_of_every_kind() -> None:
    jobs = [_running(j, "g1") if (j.array_job_id, j.array_task_id) == (81, 5) else j
            for j in _recorded() if j.array_job_id in (80, 81)]
    assert _throttled_view(jobs) == ["arrrec[0]", "arrrec[1]", "arrrec[5]"]  # cpu 1 and gpu 5 run: room for one
    full = [_running(j, "c1") if (j.array_job_id, j.array_task_id) == (80, 8) else j for j in jobs]
    assert _throttled_view(full) == ["arrrec[1]", "arrrec[5]", "arrrec[8]"]  # three run: no waiting index enters


def test_a_released_index_slurm_has_not_started_takes_its_room() -> None:
    jobs = [replace(j, state=VariantState.PENDING, held=False) if (j.array_job_id, j.array_task_id) == (81, 6)
            else j for j in _recorded() if j.array_job_id in (80, 81)]  # released: pending, no longer held
    mark = {"arrrec[6]": StartMark("gpu", task_key(81, 6), ("g1",), 1000.0)}
    assert _throttled_view(jobs, mark) == ["arrrec[0]", "arrrec[1]", "arrrec[6]"]


def test_groups_of_other_arrays_and_plain_groups_are_not_held_by_it() -> None:
    jobs = [j for j in _recorded() if j.array_job_id in (80, 81)]
    other = [replace(j, comment=j.comment.replace("g=arrrec", "g=other"), array_job_id=j.array_job_id + 100,
                     job_id=task_key(j.array_job_id + 100, j.array_task_id or 0), array_throttle=0) for j in jobs]
    view = _throttled_view([*jobs, *other, job(5, "plain")])
    assert len([g for g in view if g.startswith("other[")]) == 10 and "plain" in view
    assert [g for g in view if g.startswith("arrrec[")] == ["arrrec[0]", "arrrec[1]", "arrrec[2]"]


# --- slurmxd's Start and sibling cancel on one index -----------------------------------------------------------------

def test_a_start_of_an_index_group_releases_that_index_and_cancels_the_losing_kinds_index(tmp_path: Path) -> None:
    """The enforcer acts by key; the adapter names each key `A_i` (test above), so Slurm acts on one task."""
    jobs = [j for j in _recorded() if j.array_job_id in (80, 81)]
    fake = FakeSlurm(jobs)
    now = [2e9]
    enforcer, store = _enforcer(tmp_path, fake, now)
    _apply(enforcer, Plan((Start("arrrec[0]", "gpu", ("g1",)),)), _obs(fake, store, now[0]), now[0])
    chosen, loser = task_key(81, 0), task_key(80, 0)
    assert fake.calls[-1] == ("release", (chosen,))
    fake.run(chosen, "g1")
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    # index 0's cpu task lost to its gpu task; index 1's gpu task to its cpu task, which runs in the recording
    verb, ids = fake.calls[-1]
    assert (verb, set(ids)) == ("cancel", {loser, task_key(81, 1)})
    untouched = {j.job_id for j in jobs} - {chosen, loser, task_key(81, 1)}
    assert not {i for _, ids in fake.calls for i in ids} & untouched  # no other index was acted on
    said = " ".join(row[4] for row in enforcer.flush())
    assert "(job 81_0)" in said and str(chosen) not in said  # the audit names a task as Slurm does, not by its key


# --- sacct: each index's outcome by its key ------------------------------------------------------------------------

def test_sacct_reads_each_index_of_an_array_by_its_key() -> None:
    """Recorded once the arrays were cancelled: a task split off (80_1, released) is a record of its own; the
    pending record lists the indices it still held as a hex bitmap (0x3F5: 0, 2, 4-9); a task split off but never
    started (81_2, only steered) has no record, and index 3 (cancelled before it split) none either."""
    records = {job_text(r.job_id): r for r in parse_accounting((FIXTURES / "24.11" / "sacct-arrays.json").read_bytes())}
    assert sorted(k for k in records if k.startswith("80_")) == [f"80_{i}" for i in (0, 1, 2, 4, 5, 6, 7, 8, 9)]
    assert sorted(k for k in records if k.startswith("81_")) == [f"81_{i}" for i in (0, 1, 3, 4, 5, 6, 7, 8, 9)]
    assert all(r.state is VariantState.CANCELLED and r.comment.startswith("slurmx:1:g=arrrec,") for r in
               records.values())
    assert records["80_7"].array_job_id == 80 and records["80_7"].array_task_id == 7


def test_sacct_of_22_05_and_a_mask_slurm_would_not_write() -> None:
    data = json.loads((FIXTURES / "22.05" / "sacct.json").read_text())
    base = data["jobs"][0]
    pending = {**base, "job_id": 40, "array": {"job_id": 40, "task_id": None, "task": "0x5"}}
    task = {**base, "job_id": 41, "array": {"job_id": 40, "task_id": 7, "task": None}}
    bad = {**base, "job_id": 42, "array": {"job_id": 42, "task_id": None, "task": "0-9"}}
    records = parse_accounting(json.dumps({**data, "jobs": [pending, task, bad]}))
    assert [job_text(r.job_id) for r in records] == ["40_0", "40_2", "40_7"]  # 42 left out, named in the log
    assert parse_task_mask("0x3F5") == [0, 2, 4, 5, 6, 7, 8, 9]
    for text in ("3F5", "0x", "0xZZ", ""):
        with pytest.raises(ValueError, match="hex bitmap"):
            parse_task_mask(text)


# --- files per index: the job side and slurmxd name an array task's files `A_i` ----------------------------------

HOOK = Path(__file__).resolve().parents[2] / "slurmx" / "hooks" / "hook.sh"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMX_"))}
    return {**env, **extra}


@pytest.mark.parametrize(("given", "name"), [
    ({"SLURM_JOB_ID": "83", "SLURM_ARRAY_JOB_ID": "80", "SLURM_ARRAY_TASK_ID": "1"}, "80_1"),
    ({"SLURM_JOB_ID": "83", "SLURM_ARRAY_TASK_ID": "1"}, "83"),  # today's group per index sets the index alone
    ({"SLURM_JOB_ID": "83", "SLURM_ARRAY_JOB_ID": "80", "SLURM_ARRAY_TASK_ID": "1;x"}, "83"),
    ({"SLURM_JOB_ID": "83"}, "83")])
def test_the_job_side_names_an_array_tasks_files_by_its_index(given: dict[str, str], name: str,
                                                             monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from slurmx.hooks import _env as job_env

    for key in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"):
        monkeypatch.delenv(key, raising=False)
    for key, value in given.items():
        monkeypatch.setenv(key, value)
    assert job_env.job_id() == name
    shown = subprocess.run(["bash", "-c", f"source {HOOK}; _slurmx_job; echo; _slurmx_handler_marker"],
                           env=_env(SLURMX_SPOOL_DIR=str(tmp_path), **given), capture_output=True, text=True,
                           check=True).stdout.split()
    assert shown == [name, f"{tmp_path}/handler-{name}"]


def test_slurmxd_writes_and_reads_an_index_tasks_intent_as_the_hook_names_it(tmp_path: Path) -> None:
    key = task_key(80, 4)
    path = intent_path(tmp_path, key)
    assert path.name == "preempt-80_4"
    path.write_text("preempt grace=60 deadline=2000000060 t0=2000000000 signal=USR2 reason=-\n")
    assert read_intent(path).job_id == key
    wrong = tmp_path / "preempt-0_4"
    wrong.write_text(path.read_text())
    with pytest.raises(PreemptionError, match="outside Slurm's ranges"):
        read_intent(wrong)


def test_slurmxd_reads_the_progress_an_index_task_writes_in_its_arrays_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job side of task 4 of array 80 (Slurm gave it job id 83) writes `progress-80_4.json` in the array's
    folder; slurmxd's profiling stage finds it for group `arr[4]`, not an elapsed-time fallback."""
    from slurmx.core.config import parse_site_config
    from slurmx.daemon.profiling import ProfilingStage
    from slurmx.daemon.store import Store
    from slurmx.hooks.progress import write_progress

    folder = tmp_path / "arr"
    folder.mkdir(mode=0o700)
    for key, value in {"SLURMX_SPOOL_DIR": str(folder), "SLURM_JOB_ID": "83", "SLURM_ARRAY_JOB_ID": "80",
                       "SLURM_ARRAY_TASK_ID": "4", "SLURM_RESTART_COUNT": "0"}.items():
        monkeypatch.setenv(key, value)
    written = write_progress(40, 100)
    assert written is not None and written.name == "progress-80_4.json"
    site = parse_site_config({"cluster": {"name": "t"}, "submit": {"spool_dir": str(tmp_path)},
                              "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"}}})
    running = replace(job(1, "arr"), job_id=task_key(80, 4), array_job_id=80, array_task_id=4, user_id=os.getuid(),
                      state=VariantState.RUNNING, held=False, nodes="c1", start_time=1000)
    obs = build_view(site, [running], NODES, PARTITIONS, 1100.0, owner_of=lambda g: FolderOwner(os.getuid()))
    stage = ProfilingStage(site, FakeSlurm([running]), Store(tmp_path / "s.sqlite"))  # type: ignore[arg-type]
    stage._uids["arr[4]"] = os.getuid()
    seen: list[tuple[str, Any]] = []
    monkeypatch.setattr(stage.profiler, "on_progress", lambda group, kind, report: seen.append((group, report)))
    stage._progress(obs.view.groups["arr[4]"], 1100.0)
    assert len(seen) == 1 and seen[0][0] == "arr[4]"
    assert getattr(seen[0][1], "step", None) == 40 and not stage._refused


def test_expansion_refuses_an_index_no_key_can_hold() -> None:
    template = replace(job(7, "a"), array_job_id=7)
    for bad in ([-1], [0, MAX_TASK_ID + 1]):
        with pytest.raises(ValueError, match="outside"):
            expand_pending(template, bad)


def test_another_tools_pending_array_stays_one_record_whatever_its_size() -> None:
    """slurmxd never acts on an untagged array: a user's `sbatch --array=0-99999` must not cost 100,000 records."""
    answer = json.loads(RECORDED.read_bytes())
    for record in answer["jobs"]:
        record["comment"] = ""
        if record.get("array_task_string"):
            record["array_task_string"] = "0-99999%5"
    jobs = parse_jobs(json.dumps(answer))
    assert len(jobs) == len(answer["jobs"])  # one job per record, no index expanded
