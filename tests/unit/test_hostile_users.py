"""The hostile-user harness (issue 31): bob does random sequences of what a Slurm user can do while alice's groups
run, and the real slurmxd `Daemon` (real policy, real Store, real group folders with real uids) cycles after each.

bob submits jobs with any tag values, rewrites his comments to any string (alice's group tags included), changes
his jobs' state, partition and QOS, plants files, folders, links, FIFOs and huge numbers in his folders and the
spool root, squats names alice's next group will want, and reuses his group ids. alice submits groups the way
`slurmx submit` does (her folder first, then held variants) and lets time pass. After every step:

- the cycle completes;
- no daemon action touches alice's jobs because of bob (a cancel of hers only after one of her own variants of that
  group was released; no job of bob's carrying the tag of alice's group is ever acted on; her group is trusted and
  never reported as rejected);
- the daemon's memos are bounded by what squeue shows (`_reported`, the owner memo, the store's group facts);
- in the "comments and files only" machine, alice's jobs see exactly the calls (and so the FIFO start order) a twin
  daemon makes over the same alice and no bob.

Four machines: FIFO with bob doing anything, FIFO with bob only writing (the twin check), FitGpp (preemption
intents written into group folders), and FIFO with the profiling stage on (it reads progress files).

Slurm here is `HostileSlurm`, a fake (the table of test_daemon's fake Slurm; jobs run when released and end after
their run time); everything else is real.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from slurmx.core import tag
from slurmx.core.config import SiteConfig, parse_site_config
from slurmx.core.model import VariantState
from slurmx.core.resources import Resources
from slurmx.daemon.loop import Daemon
from slurmx.daemon.store import Store
from slurmx.policies.base import declared, make_policy
from slurmx.slurm.records import AccountingRecord, SlurmJob
from tests.spool import SPOOL, clear_spool, make_folder
from tests.unit.test_daemon import FakeSlurm

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="real folder owners need root (os.chown)")

ALICE, BOB = 2001, 2002
NODE_OF = {"cpu": "c1", "gpu": "g1"}
MIN_JOB_AGE_S = 300  # how long squeue keeps a finished job (Slurm's MinJobAge)
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None  # the store's folder: no disk syncs per cycle
FINISHED = (VariantState.COMPLETED, VariantState.CANCELLED, VariantState.FAILED)


def site_for(spool: Path, policy: str, profile: bool = False) -> SiteConfig:
    """`profile`: the profiling stage on (it reads progress files in running groups' folders)."""
    return parse_site_config({
        "cluster": {"name": "t"},
        "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"},
                      "gpu": {"partition": "gpu", "cpus": 1, "mem": "500M", "gres": "gpu:1"}},
        "policy": {"name": policy},
        "preemption": {"grace": 10},
        "daemon": {"start_timeout": 30},
        "submit": {"spool_dir": str(spool)},
        "profile": {"enabled": profile, "sampling": {"qos": "slurmx-profile"}},
    })


class HostileSlurm(FakeSlurm):
    """A fake Slurm (test_daemon's, plus a clock): released jobs run at the next tick on their partition's node and
    end after their run time; finished jobs leave squeue after MinJobAge. Unlike its parent it makes no group folder
    on reads: here alice makes hers as `slurmx submit` does, and bob makes (or plants) whatever he likes."""

    def __init__(self, spool: Path, runs: dict[int, int]) -> None:
        super().__init__([], spool=spool)
        self.runs = runs  # job id -> seconds it runs once started

    def jobs(self, job_ids: Iterable[int] | None = None, user: str | None = None) -> list[SlurmJob]:
        self._check()
        wanted = None if job_ids is None else set(job_ids)
        return [j for j in self.table.values() if wanted is None or j.job_id in wanted]

    def accounting(self, job_ids: Iterable[int] | None = None, since: str = "now-1day") -> list[AccountingRecord]:
        return []

    def add(self, job: SlurmJob) -> None:
        self.table[job.job_id] = job

    def tick(self, now: int, seconds: int, run: Any = lambda job: True) -> None:
        """Start the released jobs `run` allows, let `seconds` pass, end what is done, forget the long finished."""
        for j in list(self.table.values()):
            if j.state is VariantState.PENDING and not j.held and run(j):
                self.table[j.job_id] = replace(j, state=VariantState.RUNNING, start_time=now,
                                               nodes=NODE_OF.get(j.partition, "c1"))
        later = now + seconds
        for j in list(self.table.values()):
            if j.state is VariantState.RUNNING and (j.start_time or 0) + self.runs.get(j.job_id, 120) <= later:
                self.table[j.job_id] = replace(j, state=VariantState.COMPLETED, end_time=later, exit_code=0)
            elif j.state in FINISHED and (j.end_time or now) + MIN_JOB_AGE_S <= later:
                del self.table[j.job_id]
            elif j.state in FINISHED and j.end_time is None:
                self.table[j.job_id] = replace(j, end_time=now)


def variant(job_id: int, group: str, kind: str, *, uid: int, now: int, qos: str = "be", comment: str | None = None,
            partition: str | None = None) -> SlurmJob:
    return SlurmJob(job_id=job_id, name=f"{group}@{kind}"[:100], user="alice" if uid == ALICE else "bob",
                    user_id=uid, state=VariantState.HELD, state_text="PENDING", reason="JobHeldUser",
                    partition=partition if partition is not None else kind, qos=qos,
                    comment=comment if comment is not None else f"slurmx:1:g={group},v={kind},c={qos},e=300",
                    nodes="", request=Resources(1, 500, {"gpu": 1} if kind == "gpu" else {}),
                    allocated=Resources(), priority=1, nice=0, held=True, restart_count=0, time_limit_s=3600,
                    submit_time=now, start_time=None, end_time=None)


def group_of(comment: str) -> str | None:
    """The group a comment names as the daemon reads it (None: not a readable tag)."""
    try:
        return tag.fields(comment).get("g")
    except tag.TagError:
        return None


# ------------------------------------------------------------------------------------------------ bob's inputs

NUMBER = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(["1e400", "1" + "0" * 400, "nan", "inf", "-0", "0", "1e15", "9" * 18, "9" * 19, "1.5",
                     "1e-400", "0x10", "٣٠٠", "²", "①", " 600", "600 ", ""]),
    st.text("0123456789٣²①.eE+-", min_size=1, max_size=25),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
VALID_NUMBER = st.sampled_from(["1", "0.000001", "60", "999999999999999999", "1e300"])  # what the grammar takes
WHOLE = st.sampled_from(["0", "1", "600", "999999999999999999"])
NAME_CHARS = st.characters(codec="utf-8", exclude_characters="/\0")
FILE_NAME = st.text(NAME_CHARS, min_size=1, max_size=30).filter(
    lambda s: s not in (".", "..") and len(s.encode()) < 200)
KIND = st.sampled_from(["cpu", "gpu", "tpu", "", "cpu,v=gpu"])
QOS = st.sampled_from(["be", "te", "normal", "slurmx-profile", ""])
PARTITION = st.sampled_from(["cpu", "gpu", "debug", ""])
BOB_STATE = st.sampled_from([VariantState.HELD, VariantState.PENDING, VariantState.RUNNING, VariantState.COMPLETED,
                             VariantState.CANCELLED, VariantState.FAILED])
PLANT = st.sampled_from(["file", "huge-progress", "nan-progress", "dir", "link-zero", "link-alice", "fifo",
                         "preempt-dir", "big-file"])


class HostileUsers(RuleBasedStateMachine):
    """alice and bob on one cluster; the real daemon between every two steps (see the module docstring)."""

    POLICY = "fifo"
    PROFILE = False
    BOB_CONSUMES = True  # False: bob only writes comments, fields and files; nothing of his ever runs (fairness)

    def __init__(self) -> None:
        super().__init__()
        self.now = [10_000]
        self.runs: dict[int, int] = {}
        self.fake = HostileSlurm(SPOOL, self.runs)  # clears the spool: a fresh cluster per example
        os.chmod(SPOOL, 0o1777)
        self.tmp = Path(tempfile.mkdtemp(prefix="slurmx-hostile-", dir=SCRATCH))
        self.store = Store(self.tmp / "s.sqlite")
        self.daemon = Daemon(site_for(SPOOL, self.POLICY, self.PROFILE), self.fake, self.store,  # type: ignore[arg-type]
                             make_policy(self.POLICY), clock=lambda: float(self.now[0]))
        self.twin: tuple[HostileSlurm, Daemon] | None = None
        if not self.BOB_CONSUMES:  # the same alice, no bob: what FIFO does for her on its own
            twin_spool = self.tmp / "spool"
            twin_spool.mkdir(mode=0o1777)
            os.chmod(twin_spool, 0o1777)
            twin_fake = HostileSlurm(twin_spool, self.runs)
            self.twin = (twin_fake, Daemon(site_for(twin_spool, self.POLICY, self.PROFILE), twin_fake,  # type: ignore[arg-type]
                                           Store(self.tmp / "twin.sqlite"), make_policy(self.POLICY),
                                           clock=lambda: float(self.now[0])))
        self.next_id = 100
        self.alice_groups: list[str] = []
        self.alice_jobs: dict[int, str] = {}  # job id -> group
        self.alice_counter = 0
        self.bob_groups: list[str] = []
        self.bob_jobs: list[int] = []
        self.released_groups: set[str] = set()  # alice's groups of which the daemon released a variant
        self.seen_calls = 0
        self.twin_seen = 0
        self.alice_calls: list[tuple[str, int]] = []  # this cycle's calls on alice's jobs, one per job


    def teardown(self) -> None:
        self.store.close()
        if self.twin is not None:
            self.twin[1].store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        clear_spool()

    # -------------------------------------------------------------------------------------------- helpers

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _alice_future(self, ahead: int) -> str:
        return f"train-{self.alice_counter + ahead:06x}"

    def _bob_folders(self) -> set[str]:
        """Names at the spool root that are plain folders of bob's: groups the daemon would trust as his."""
        names = set()
        for entry in SPOOL.iterdir():
            info = entry.lstat()
            if stat.S_ISDIR(info.st_mode) and info.st_uid == BOB:
                names.add(entry.name)
        return names

    def _bob_tags(self) -> set[str]:
        return {g for i in self.bob_jobs if i in self.fake.table for g in [group_of(self.fake.table[i].comment)]
                if g is not None}

    def _may_tag(self, comment: str) -> bool:
        """Without consumption, bob never names a group the daemon would trust as his (it would run)."""
        return self.BOB_CONSUMES or group_of(comment) not in self._bob_folders()

    def _pick(self, data: st.DataObject, names: list[str]) -> str:
        return data.draw(st.sampled_from(names)) if names else "none"

    def _group_name(self, data: st.DataObject) -> str:
        return data.draw(st.one_of(
            st.sampled_from(self.alice_groups or ["train-000000"]),
            st.sampled_from(self.bob_groups or ["bob-0"]),
            st.sampled_from([self._alice_future(k) for k in range(3)]),
            st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,12}", fullmatch=True),
            st.text(NAME_CHARS, max_size=12)))

    def _comment(self, data: st.DataObject) -> str:
        group = self._group_name(data)
        fields = [f"g={group}", f"v={data.draw(KIND)}", f"c={data.draw(st.sampled_from(['be', 'te', 'xx']))}"]
        for key in data.draw(st.lists(st.sampled_from(["e", "gr", "n", "l", "h", "p", "zz"]), max_size=4)):
            fields.append(f"{key}={data.draw(NUMBER)}")
        head = data.draw(st.sampled_from(["slurmx:1:", "slurmx:", "slurmx:2:", "slurmx:99999999999999999999:"]))
        return data.draw(st.one_of(
            st.just(head + ",".join(fields)),
            st.just(f"slurmx:1:g={group},v=cpu,c=be"),
            st.text(max_size=40).map(lambda s: "slurmx:" + s),
            st.text(max_size=40),
            st.just("slurmx:1:" + ",".join(fields * 60))))  # past the 1024-character cap

    # -------------------------------------------------------------------------------------------- alice

    @initialize()
    def start(self) -> None:
        self.alice_submit_with(300, 2, "be")

    def alice_submit_with(self, run_s: int, kinds: int, qos: str) -> None:
        """As `slurmx submit`: a fresh group id (one bob squatted is taken by no one else: it picks the next), her
        folder, then the held variants."""
        while True:
            self.alice_counter += 1
            group = self._alice_future(0)
            if not os.path.lexists(SPOOL / group):
                break
        make_folder(SPOOL, group, ALICE)
        self.alice_groups.append(group)
        for kind in ("cpu", "gpu")[:kinds]:
            job = variant(self._id(), group, kind, uid=ALICE, now=self.now[0], qos=qos)
            self.runs[job.job_id] = run_s
            self.alice_jobs[job.job_id] = group
            self.fake.add(job)
            if self.twin is not None:
                make_folder(self.twin[0].spool, group, ALICE)
                self.twin[0].add(job)

    @rule(run_s=st.integers(10, 900), kinds=st.integers(1, 2), te=st.booleans())
    def alice_submits(self, run_s: int, kinds: int, te: bool) -> None:
        preempting = declared(self.POLICY).te_preempts_be  # TE groups make a difference only there
        self.alice_submit_with(run_s, kinds, "te" if te and preempting else "be")

    @rule(seconds=st.integers(1, 400))
    def time_passes(self, seconds: int) -> None:
        bob_runs = self.BOB_CONSUMES
        self.fake.tick(self.now[0], seconds, lambda j: bob_runs or j.user_id == ALICE)
        if self.twin is not None:
            self.twin[0].tick(self.now[0], seconds)
        self.now[0] += seconds

    # -------------------------------------------------------------------------------------------- bob

    @rule(data=st.data(), kinds=st.integers(1, 3), own=st.booleans(), qos=QOS)
    def bob_submits(self, data: st.DataObject, kinds: int, own: bool, qos: str) -> None:
        """A group of his own (folder first, when he may run), or jobs carrying any comment."""
        if own and self.BOB_CONSUMES:
            group = data.draw(st.one_of(st.sampled_from(self.bob_groups or ["bob-0"]),
                                        st.from_regex(r"bob-[0-9]{1,3}", fullmatch=True)))
            if os.path.lexists(SPOOL / group) and group not in self._bob_folders():
                return  # someone else's name: his submit would refuse it
            make_folder(SPOOL, group, BOB)
            if group not in self.bob_groups:
                self.bob_groups.append(group)  # reused after it ended, too
            proper = data.draw(st.booleans())  # as his `slurmx submit` would: it runs and competes with alice
            if proper:
                qos = data.draw(st.sampled_from(["be", "te"]))
            number = VALID_NUMBER if proper else NUMBER
            comments = [f"slurmx:1:g={group},v={k},c={qos or 'be'},e={data.draw(number)},gr={data.draw(WHOLE)},"
                        f"n={data.draw(WHOLE)}" for k in ("cpu", "gpu", "cpu")[:2 if proper else kinds]]
        else:
            proper = False
            comments = [self._comment(data) for _ in range(kinds)]
        for i, comment in enumerate(comments):
            if not self._may_tag(comment):
                continue
            kind = ("cpu", "gpu", "cpu")[i]
            job = variant(self._id(), "bob", kind, uid=BOB, now=self.now[0], qos=qos, comment=comment,
                          partition=kind if proper else data.draw(PARTITION))
            self.runs[job.job_id] = data.draw(st.integers(1, 600))
            self.bob_jobs.append(job.job_id)
            self.fake.add(job)

    @precondition(lambda self: bool(self.bob_jobs))
    @rule(data=st.data())
    def bob_rewrites_a_comment(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(self.bob_jobs))
        comment = self._comment(data)
        if job_id in self.fake.table and self._may_tag(comment):
            self.fake.table[job_id] = replace(self.fake.table[job_id], comment=comment)

    @precondition(lambda self: bool(self.bob_jobs))
    @rule(data=st.data(), state=BOB_STATE, partition=PARTITION, qos=QOS)
    def bob_updates_a_job(self, data: st.DataObject, state: VariantState, partition: str, qos: str) -> None:
        """`scontrol update` of his own job (and, through the fake, any state Slurm could give it)."""
        job_id = data.draw(st.sampled_from(self.bob_jobs))
        if job_id not in self.fake.table:
            return
        if not self.BOB_CONSUMES and state in (VariantState.PENDING, VariantState.RUNNING):
            state = VariantState.HELD
        job = self.fake.table[job_id]
        running = state is VariantState.RUNNING
        self.fake.table[job_id] = replace(
            job, state=state, held=state is VariantState.HELD, partition=partition, qos=qos,
            nodes=NODE_OF.get(partition, "c1") if running else "",
            start_time=self.now[0] if running else job.start_time,
            end_time=self.now[0] if state in FINISHED else None)

    @rule(data=st.data(), what=PLANT, at_root=st.booleans())
    def bob_plants(self, data: st.DataObject, what: str, at_root: bool) -> None:
        """Files, folders, links, FIFOs and huge numbers in his own folders or in the spool root."""
        mine = sorted(self._bob_folders())
        folder = SPOOL if at_root or not mine else SPOOL / data.draw(st.sampled_from(mine))
        job_ids = [*self.bob_jobs[-5:], *list(self.alice_jobs)[-3:], 1]
        job_id = data.draw(st.sampled_from(job_ids))
        name = data.draw(st.one_of(
            st.sampled_from([f"progress-{job_id}.json", f"profile-{job_id}.json", f"preempt-{job_id}",
                             f"profile-start-{job_id}", *(self._alice_future(k) for k in range(1, 3)),
                             *self.alice_groups[-2:], *self.bob_groups[-2:]]),
            FILE_NAME))
        path = folder / name
        if os.path.lexists(path):
            return
        if what in ("dir", "preempt-dir") and folder == SPOOL and not self.BOB_CONSUMES and name in self._bob_tags():
            return  # a folder for a group his jobs name would make it his, and it would run
        if what == "file":
            path.write_bytes(data.draw(st.binary(max_size=64)))
        elif what == "big-file":
            path.write_bytes(b"9" * 200_000)
        elif what == "huge-progress":
            path.write_text('{"step": 5, "total": 10, "time": 1e400, "rate": 1' + "0" * 400 + "}")
        elif what == "nan-progress":
            path.write_text('{"step": NaN, "total": Infinity, "time": -Infinity, "rate": NaN}')
        elif what in ("dir", "preempt-dir"):
            path.mkdir()
        elif what == "link-zero":
            path.symlink_to("/dev/zero")
        elif what == "link-alice":
            path.symlink_to(SPOOL / (self.alice_groups[-1] if self.alice_groups else "x"))
        else:
            os.mkfifo(path)
        os.lchown(path, BOB, BOB)

    # -------------------------------------------------------------------------------------------- the daemon

    @invariant()
    def the_daemon_cycles_and_bob_moves_nothing_of_alices(self) -> None:
        table = self.fake.table
        active_alice = {g for i, g in self.alice_jobs.items() if i in table and table[i].state.is_active}
        self.daemon.cycle()  # completes, whatever bob did
        obs = self.daemon.backend.obs
        assert obs is not None
        for rejected in obs.rejected:
            mine = [i for i in rejected.job_ids if i in self.alice_jobs]
            assert not mine, f"alice's jobs {mine} reported as rejected: {rejected.reason}"
        assert active_alice <= set(obs.groups), f"alice's groups {active_alice - set(obs.groups)} not scheduled"
        for group in active_alice:
            assert obs.groups[group].user_id == ALICE
        self._check_calls()
        self._check_bounded()
        if self.twin is not None:
            self.twin[1].cycle()
            self._check_twin()

    def _check_calls(self) -> None:
        calls = self.fake.calls[self.seen_calls:]
        self.seen_calls = len(self.fake.calls)
        for verb, ids in calls:
            for job_id in ids:
                job = self.fake.table.get(job_id)
                if job_id in self.alice_jobs:
                    group = self.alice_jobs[job_id]
                    if verb == "release":
                        self.released_groups.add(group)
                    if verb == "cancel":
                        assert group in self.released_groups, \
                            f"alice's job {job_id} cancelled though no variant of {group} was started"
                    self.alice_calls.append((verb, job_id))
                elif job is not None and job.user_id == BOB:
                    named = group_of(job.comment)
                    assert named not in self.alice_groups, \
                        f"{verb} on bob's job {job_id}, which carries the tag of alice's group {named}"

    def _check_bounded(self) -> None:
        table = self.fake.table
        groups = {g for j in table.values() for g in [group_of(j.comment)] if g is not None}
        assert len(self.daemon._reported) <= len(table)
        assert len(self.daemon.backend.owners) <= len(groups)
        facts = self.store.group_facts()
        assert sum(len(rows) for rows in facts.values()) <= len(groups)

    def _check_twin(self) -> None:
        assert self.twin is not None
        twin_fake = self.twin[0]
        without_bob = sorted((verb, i) for verb, ids in twin_fake.calls[self.twin_seen:] for i in ids)
        self.twin_seen = len(twin_fake.calls)
        with_bob, self.alice_calls = sorted(self.alice_calls), []
        # Cycle by cycle the same calls on alice's jobs (so the same starts, in the same cycles); within one cycle
        # the order across groups follows squeue's and is no decision.
        assert with_bob == without_bob, \
            f"bob's comments and files changed what the daemon does to alice: {with_bob}, without bob {without_bob}"


CI = settings(max_examples=50, stateful_step_count=60, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


class BobDoesAnything(HostileUsers):
    """FIFO; bob's jobs run when released (by the daemon or by himself)."""


class BobOnlyWrites(HostileUsers):
    """FIFO; bob writes comments, fields and files, nothing of his runs: alice's starts are the twin's."""

    BOB_CONSUMES = False


class BobUnderFitGpp(HostileUsers):
    """FitGpp (preemption: intent files in group folders); alice submits TE and BE groups."""

    POLICY = "fitgpp"


class BobUnderProfiling(HostileUsers):
    """FIFO with the profiling stage on: it reads the progress files bob plants in his running groups' folders."""

    PROFILE = True


TestBobDoesAnything = BobDoesAnything.TestCase
TestBobDoesAnything.settings = CI
TestBobOnlyWrites = BobOnlyWrites.TestCase
TestBobOnlyWrites.settings = CI
TestBobUnderFitGpp = BobUnderFitGpp.TestCase
TestBobUnderFitGpp.settings = settings(CI, max_examples=30)
TestBobUnderProfiling = BobUnderProfiling.TestCase
TestBobUnderProfiling.settings = settings(CI, max_examples=20)
