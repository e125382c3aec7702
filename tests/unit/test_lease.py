"""Leases: a managed variant waits under a begin time slurmxd keeps moving, so it runs by itself when slurmxd is gone.

Over a fake Slurm that keeps each job's begin time and applies `StartTime=` updates the way slurmctld does
(relative to its clock); the live behaviour (daemon killed, drain, bulk release, bypass) is in
tests/integration/test_failsafe_live.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from slurmx.core.arrays import task_key
from slurmx.core.config import SiteConfig, parse_site_config
from slurmx.core.model import Node, Partition, VariantState
from slurmx.core.resources import Resources
from slurmx.daemon.drain import drain, is_drained, resume
from slurmx.daemon.lease import LeasedSlurm, lease_renewals
from slurmx.daemon.loop import Daemon
from slurmx.daemon.store import Store
from slurmx.policies.base import make_policy
from slurmx.slurm.adapter import JobUpdate
from slurmx.slurm.errors import SlurmError
from slurmx.slurm.records import SlurmJob
from tests.spool import SPOOL, clear_spool, make_group_folders

NOW = 10_000.0
LEASE = 600


def site(state_dir: Path) -> SiteConfig:
    return parse_site_config({
        "cluster": {"name": "t"},
        "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"},
                      "gpu": {"partition": "gpu", "cpus": 1, "mem": "500M", "gres": "gpu:1"}},
        "daemon": {"lease": "10m", "state_dir": str(state_dir)},
        "submit": {"spool_dir": str(SPOOL)},
    })


def job(job_id: int, group: str, kind: str = "cpu", *, begin: float | None = NOW + LEASE,
        state: VariantState = VariantState.PENDING, held: bool = False, leased: bool = True) -> SlurmJob:
    comment = f"slurmx:1:g={group},v={kind},c=be,e=60" + (f",l={LEASE}" if leased else "")
    return SlurmJob(job_id=job_id, name=f"{group}@{kind}", user="alice", user_id=1000,
                    state=VariantState.HELD if held else state, state_text=state.value.upper(), reason="",
                    partition=kind, qos="be", comment=comment, nodes="c1" if state is VariantState.RUNNING else "",
                    request=Resources(1, 500, {"gpu": 1} if kind == "gpu" else {}), allocated=Resources(),
                    priority=1, nice=0, held=held, restart_count=0, time_limit_s=3600, submit_time=100 + job_id,
                    start_time=200 if state is VariantState.RUNNING else None, end_time=None,
                    begin_time=None if begin is None else int(begin))


class BeginTimeSlurm:
    """Jobs in a dict; `StartTime=now+N` moves a begin time on this fake's clock; every call recorded."""

    def __init__(self, jobs: Iterable[SlurmJob]) -> None:
        self.table = {j.job_id: j for j in jobs}
        self.calls: list[tuple[str, tuple[int, ...]]] = []
        self.now = NOW
        clear_spool()
        self.reads = 0

    def jobs(self, job_ids: Iterable[int] | None = None, user: str | None = None) -> list[SlurmJob]:
        self.reads += 1
        make_group_folders(SPOOL, self.table.values())  # what `slurmx submit` made before each first sbatch
        wanted = None if job_ids is None else set(job_ids)
        return [j for j in self.table.values() if wanted is None or j.job_id in wanted]

    def nodes(self) -> list[Node]:
        return [Node("c1", ("cpu",), Resources(4, 8000), Resources(), "IDLE"),
                Node("g1", ("gpu",), Resources(4, 8000, {"gpu": 2}), Resources(), "IDLE")]

    def partitions(self, kinds: Mapping[str, str] | None = None) -> list[Partition]:
        return [Partition("cpu", ("c1",), "cpu"), Partition("gpu", ("g1",), "gpu")]

    def update(self, job_ids: Iterable[int], change: JobUpdate) -> None:
        ids = tuple(job_ids)
        self.calls.append((" ".join(change.assignments()), ids))
        if change.begin is not None:
            offset = 0 if change.begin == "now" else int(change.begin.removeprefix("now+"))
            for i in ids:
                self.table[i] = replace(self.table[i], begin_time=int(self.now + offset))

    def update_each(self, changes: Sequence[tuple[int, JobUpdate]]) -> dict[int, SlurmError]:
        for job_id, change in changes:
            self.update([job_id], change)
        return {}

    def command_counts(self) -> Mapping[str, int]:
        """Like the CLI adapter's: every write call is one scontrol/scancel, every read one squeue/scontrol."""
        writes = [verb for verb, _ in self.calls]
        return {"squeue": self.reads, "scontrol": 2 * self.reads + sum(v != "cancel" for v in writes),
                "scancel": writes.count("cancel")}

    def hold(self, job_ids: Iterable[int]) -> None:
        self.calls.append(("hold", tuple(job_ids)))

    def release(self, job_ids: Iterable[int]) -> None:
        ids = tuple(job_ids)
        self.calls.append(("release", ids))
        for i in ids:
            self.table[i] = replace(self.table[i], held=False, state=VariantState.PENDING)

    def requeue(self, job_ids: Iterable[int], hold: bool = False) -> None:
        ids = tuple(job_ids)
        self.calls.append(("requeuehold" if hold else "requeue", ids))
        for i in ids:  # slurmctld keeps a requeued job back for its restart delay
            self.table[i] = replace(self.table[i], state=VariantState.PENDING, held=hold, nodes="",
                                    begin_time=int(self.now + 11))

    def cancel(self, job_ids: Iterable[int]) -> None:
        ids = tuple(job_ids)
        self.calls.append(("cancel", ids))
        for i in ids:
            self.table[i] = replace(self.table[i], state=VariantState.CANCELLED)

    def signal(self, job_ids: Iterable[int], signal: str, batch_only: bool = True) -> None:
        self.calls.append(("signal", tuple(job_ids)))


def leased(fake: BeginTimeSlurm, restart_delay: int = 11) -> LeasedSlurm:
    return LeasedSlurm(fake, lease_s=LEASE, restart_delay_s=restart_delay, clock=lambda: fake.now)  # type: ignore[arg-type]


def test_a_waiting_leased_variant_looks_held_and_one_whose_lease_ran_out_looks_pending() -> None:
    fake = BeginTimeSlurm([job(1, "a"), job(2, "b", begin=NOW - 5), job(3, "c", leased=False, begin=NOW + 60)])
    states = {j.job_id: (j.state, j.held) for j in leased(fake).jobs()}
    assert states == {1: (VariantState.HELD, True), 2: (VariantState.PENDING, False),
                      3: (VariantState.PENDING, False)}  # not leased: a begin time is the user's own business


class FreshRecordsSlurm(BeginTimeSlurm):
    """Hands out a new record per read, as `CliSlurm` does (it parses every answer anew)."""

    fresh_records = True

    def jobs(self, job_ids: Iterable[int] | None = None, user: str | None = None) -> list[SlurmJob]:
        return [replace(j) for j in super().jobs(job_ids, user)]


def test_a_lease_is_marked_on_fresh_records_in_place_and_on_a_copy_of_records_the_adapter_keeps() -> None:
    records = [job(1, "a"), job(2, "b", begin=NOW - 5), job(3, "c", leased=False, begin=NOW + 60)]
    kept, fresh = BeginTimeSlurm(records), FreshRecordsSlurm([replace(j) for j in records])
    from_kept, from_fresh = leased(kept).jobs(), leased(fresh).jobs()
    assert from_kept == from_fresh  # the same marks either way
    assert [(j.state, j.held) for j in from_kept] == [(VariantState.HELD, True), (VariantState.PENDING, False),
                                                       (VariantState.PENDING, False)]
    assert kept.table[1].state is VariantState.PENDING and not kept.table[1].held  # the adapter's own: untouched
    assert from_kept[1] is kept.table[2]  # nothing to mark: not copied


def test_hold_and_release_of_a_leased_variant_move_its_begin_time_and_never_hold_it() -> None:
    fake = BeginTimeSlurm([job(1, "a", begin=NOW - 5), job(2, "b", leased=False)])
    slurm = leased(fake)
    slurm.jobs()
    slurm.hold([1, 2])
    assert fake.calls == [("hold", (2,)), (f"StartTime=now+{LEASE}", (1,))]
    fake.calls.clear()
    slurm.release([1, 2])
    assert fake.calls == [("release", (2,)), ("StartTime=now", (1,))]


def test_a_requeued_leased_victim_is_leased_at_once_and_released_only_after_the_restart_delay() -> None:
    fake = BeginTimeSlurm([job(1, "a", state=VariantState.RUNNING, begin=NOW - 100)])
    slurm = leased(fake, restart_delay=11)
    slurm.jobs()
    slurm.requeue([1], hold=True)
    assert fake.calls == [("requeue", (1,)), (f"StartTime=now+{LEASE}", (1,))]  # never a hold that outlives us
    assert fake.table[1].begin_time == NOW + LEASE
    fake.calls.clear()
    fake.now += 4
    slurm.release([1])
    assert fake.calls == [("StartTime=now+8", (1,))]  # 11 s after the requeue, not before
    fake.now += 20
    fake.calls.clear()
    slurm.release([1])
    assert fake.calls == [("StartTime=now", (1,))]


def test_a_leased_variant_slurm_really_holds_is_released_too() -> None:
    fake = BeginTimeSlurm([job(1, "a", held=True)])
    slurm = leased(fake)
    slurm.jobs()
    slurm.release([1])
    assert fake.calls == [("StartTime=now", (1,)), ("release", (1,))]


def test_renewals_push_leases_in_their_second_half_and_take_back_lapsed_ones_unless_the_group_runs() -> None:
    jobs = [job(1, "fresh", begin=NOW + 500), job(2, "due", begin=NOW + 200), job(3, "lapsed", begin=NOW - 50),
            job(4, "runs", begin=NOW - 50), job(5, "runs", "gpu", state=VariantState.RUNNING, begin=NOW - 60),
            job(6, "started", begin=NOW), job(7, "plain", leased=False, begin=NOW - 50),
            job(8, "done", begin=NOW - 50), replace(job(9, "done", "gpu"), state=VariantState.COMPLETED)]
    assert lease_renewals(jobs, NOW, LEASE, skip=[6]) == [2, 3]


def test_the_daemon_starts_a_leased_variant_by_its_begin_time_and_renews_the_other_leases(tmp_path: Path) -> None:
    fake = BeginTimeSlurm([job(1, "a", begin=NOW + 100), job(2, "a", "gpu", begin=NOW + 100),
                           job(3, "b", begin=NOW + 100), job(4, "b", "gpu", begin=NOW + 100)])
    daemon = Daemon(site(tmp_path), fake, Store(":memory:"), make_policy("fifo", {}), clock=lambda: fake.now,  # type: ignore[arg-type]
                    restart_delay_s=11)
    daemon.cycle()
    verbs = [c[0] for c in fake.calls]
    assert "release" not in verbs and "hold" not in verbs
    started = [ids for verb, ids in fake.calls if verb == "StartTime=now"]
    assert started and all(len(ids) >= 1 for ids in started)
    started_ids = {i for ids in started for i in ids}
    renewed = {i for verb, ids in fake.calls if verb == f"StartTime=now+{LEASE}" for i in ids}
    assert started_ids and not started_ids & renewed
    assert renewed == {1, 2, 3, 4} - started_ids  # every variant not started stays the daemon's for a new lease
    assert all(fake.table[i].begin_time == NOW + LEASE for i in renewed)


def test_drain_lets_every_waiting_leased_variant_start_and_a_drained_daemon_decides_nothing(tmp_path: Path) -> None:
    fake = BeginTimeSlurm([job(1, "a"), job(2, "a", "gpu"), job(3, "b", leased=False),
                           job(4, "c", state=VariantState.RUNNING, begin=NOW - 9)])
    assert drain(tmp_path, fake) == [1, 2]  # type: ignore[arg-type]
    assert fake.calls == [("StartTime=now", (1, 2))] and is_drained(tmp_path)
    fake.calls.clear()
    daemon = Daemon(site(tmp_path), fake, Store(":memory:"), make_policy("fifo", {}), clock=lambda: fake.now)  # type: ignore[arg-type]
    report = daemon.cycle()
    assert fake.calls == [] and not report.plan.actions  # no renewal takes the groups back while drained
    assert resume(tmp_path) and not is_drained(tmp_path) and not resume(tmp_path)
    daemon.cycle()
    assert fake.calls  # resumed: the daemon decides (and renews) again


def test_a_variant_running_without_the_daemon_choosing_it_is_reported_once_and_explained(tmp_path: Path) -> None:
    from slurmx.daemon.explain import explain

    fake = BeginTimeSlurm([job(1, "a", state=VariantState.RUNNING, begin=NOW - 30), job(2, "a", "gpu"),
                           job(3, "r", state=VariantState.RUNNING, begin=NOW - 30, leased=False)])
    store = Store(":memory:")
    daemon = Daemon(site(tmp_path), fake, store, make_policy("fifo", {}), clock=lambda: fake.now)  # type: ignore[arg-type]
    daemon.cycle()
    daemon.cycle()
    unchosen = [e for e in store.history() if e.event == "unchosen"]
    assert [(e.group_id, e.detail.split(" runs ")[0]) for e in unchosen] == [("a", "cpu job 1")]  # not race group r
    assert ("cancel", (2,)) in fake.calls  # and its sibling still goes: one variant does the work
    lines = explain("a", store.history("a"))
    assert any(line.strip().startswith("not the daemon's choice: cpu job 1 runs though slurmxd did not start it")
               for line in lines)


def test_the_metrics_count_each_cycles_slurm_commands_and_lease_renewals(tmp_path: Path) -> None:
    fake = BeginTimeSlurm([job(i, f"g{i}", begin=NOW + 100) for i in range(1, 6)])
    daemon = Daemon(site(tmp_path), fake, Store(":memory:"), make_policy("fifo", {}), clock=lambda: fake.now)  # type: ignore[arg-type]
    daemon.cycle()
    first = dict(fake.command_counts())
    fake.now += 400  # the leases pushed in the first cycle are in their second half again
    daemon.cycle()
    text = daemon.metrics.render()

    def sample(name: str) -> float:
        line = next(row for row in text.splitlines() if row.startswith(name + " ") or row.startswith(name + "{"))
        return float(line.rsplit(" ", 1)[1])

    total = dict(fake.command_counts())
    assert sample('slurmxd_slurm_commands_total{command="scontrol"}') == total["scontrol"]
    assert sample('slurmxd_slurm_commands_total{command="squeue"}') == total["squeue"]
    assert sample("slurmxd_cycle_slurm_commands") == sum(total.values()) - sum(first.values())
    # c1 has 4 CPUs: FIFO starts groups 1-4, job 5 waits and its lease is renewed in both cycles (the starts that
    # time out in the second cycle are held again through the same begin-time push, but that is no renewal).
    assert fake.calls.count((f"StartTime=now+{LEASE}", (5,))) == 2
    assert sample('slurmxd_actions_total{outcome="ok",type="lease_renew"}') == 2


def test_a_variant_slurm_requeued_itself_is_not_started_before_its_restart_delay_ends() -> None:
    requeued = replace(job(1, "a", begin=NOW + 8), restart_count=1)  # RequeueExit: Slurm's delay, not a lease
    fake = BeginTimeSlurm([requeued])
    slurm = leased(fake, restart_delay=11)
    assert slurm.jobs()[0].state is VariantState.HELD
    slurm.release([1])
    assert fake.calls == [("StartTime=now+9", (1,))]


def test_a_forged_leased_job_is_never_renewed_nor_started(tmp_path: Path) -> None:
    """Bob's job carrying alice's group tag is set aside: the daemon does not even keep its lease going."""
    forged = replace(job(9, "a", "gpu", begin=NOW + 100), user="bob", user_id=1001)
    fake = BeginTimeSlurm([job(1, "a", begin=NOW + 100), forged, job(3, "b", "gpu", begin=NOW + 100)])
    daemon = Daemon(site(tmp_path), fake, Store(":memory:"), make_policy("fifo", {}), clock=lambda: fake.now)  # type: ignore[arg-type]
    daemon.cycle()
    assert fake.calls and all(9 not in ids for _, ids in fake.calls)
    assert fake.table[9].begin_time == NOW + 100


def test_a_variant_the_daemon_released_is_not_taken_back_by_the_next_renewal() -> None:
    """A resize or a Release lets a leased job go without a Start intent: the renewal must leave it released."""
    fake = BeginTimeSlurm([job(1, "a"), job(2, "b")])
    slurm = leased(fake)
    slurm.jobs()
    slurm.release([1])
    assert slurm.renew(slurm.jobs(), fake.now, []) == []  # job 2's lease is fresh; job 1 was let go
    fake.now += 400
    assert slurm.renew(slurm.jobs(), fake.now, []) == [2]
    slurm.hold([1])  # held again (a start that timed out): from now on renewed like any other
    fake.now += 400
    assert 1 in slurm.renew(slurm.jobs(), fake.now, [])


def test_a_lease_found_run_out_at_its_renewal_is_counted_as_expired(tmp_path: Path) -> None:
    # c1 has 4 CPUs: FIFO starts groups 1-4; group 5's lease ran out 50 s ago (slurmxd was away), so the daemon
    # takes it back and counts it; the next cycle's renewal of the same lease is on time and counts nothing.
    fake = BeginTimeSlurm([*(job(i, f"g{i}", begin=NOW + 100) for i in range(1, 5)), job(5, "g5", begin=NOW - 50)])
    daemon = Daemon(site(tmp_path), fake, Store(":memory:"), make_policy("fifo", {}), clock=lambda: fake.now)  # type: ignore[arg-type]
    daemon.cycle()
    assert (f"StartTime=now+{LEASE}", (5,)) in fake.calls
    assert daemon.metrics.registry.get_sample_value("slurmxd_leases_expired_total") == 1
    fake.now += 400
    daemon.cycle()
    assert fake.calls.count((f"StartTime=now+{LEASE}", (5,))) == 2
    assert daemon.metrics.registry.get_sample_value("slurmxd_leases_expired_total") == 1


def task(array_job_id: int, index: int, group: str, kind: str = "cpu", *, pending_record: bool = True,
         state: VariantState = VariantState.PENDING, begin: float | None = NOW + 200) -> SlurmJob:
    """Index `index` of a leased kind array tagged `group`: in its pending record, or a task of its own."""
    return replace(job(task_key(array_job_id, index), group, kind, state=state, begin=begin),
                   array_job_id=array_job_id, array_task_id=index, array_pending=pending_record)


def test_an_arrays_pending_record_is_renewed_whole_and_one_running_index_settles_only_its_own_index() -> None:
    cpu = [task(80, i, "g") for i in range(2, 6)]
    jobs = [*cpu, task(80, 0, "g", pending_record=False, state=VariantState.RUNNING, begin=NOW - 60),
            task(80, 1, "g", pending_record=False, begin=NOW),  # released by this daemon: not renewed
            task(95, 0, "g", "gpu"), task(95, 3, "g", "gpu"), task(95, 4, "g", "gpu"),
            task(95, 5, "g", "gpu", pending_record=False, begin=NOW + 500)]  # a task of its own whose lease is fresh
    due = lease_renewals(jobs, NOW, LEASE, skip=[task_key(80, 1)])
    # gpu index 0 waits beside a running cpu index 0, so it is not due, but it is still in the gpu array's pending
    # record and is named with it: naming only 3 and 4 would split both off (Slurm splits named subsets).
    assert sorted(due) == sorted([*(task_key(80, i) for i in range(2, 6)), *(task_key(95, i) for i in (0, 3, 4))])


def test_a_renewal_names_each_arrays_tasks_in_one_update() -> None:
    fake = BeginTimeSlurm([task(80, i, "g") for i in range(4)] + [job(7, "plain", begin=NOW + 100)])
    slurm = leased(fake)
    assert sorted(slurm.renew(slurm.jobs(), NOW)) == sorted([7, *(task_key(80, i) for i in range(4))])
    assert [(word, sorted(ids)) for word, ids in fake.calls] == \
        [(f"StartTime=now+{LEASE}", sorted([7, *(task_key(80, i) for i in range(4))]))]
