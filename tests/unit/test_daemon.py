"""slurmxd without Slurm: the store, trust rules, the view, crash-safe enforcement and the checks, over a fake
Slurm that records every call and changes job states the way slurmctld does."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slurmx.core.actions import Plan, Preempt, Resize, Start
from slurmx.core.config import SiteConfig, parse_site_config
from slurmx.core.model import GroupState, Node, Partition, VariantState
from slurmx.core.ownership import SpoolOwners
from slurmx.core.resources import Resources
from slurmx.cycle import Outcome
from slurmx.cycle.run import apply_plan
from slurmx.daemon.backend import SlurmBackend
from slurmx.daemon.checks import coexistence_warnings, operator_problem, parse_config
from slurmx.daemon.enforce import Enforcer
from slurmx.daemon.explain import explain
from slurmx.daemon.loop import AlreadyRunning, Daemon, acquire_lock
from slurmx.daemon.observe import StartMark, build_view
from slurmx.daemon.store import MIGRATIONS, GroupFact, Store, StoreError
from slurmx.daemon.trust import sort_jobs
from slurmx.policies.base import make_policy
from slurmx.slurm.adapter import JobUpdate
from slurmx.slurm.errors import SlurmCommandError, SlurmError, SlurmUnavailable
from slurmx.slurm.records import SlurmJob
from slurmx.slurm.wrappers import CountingSlurm
from tests.spool import SPOOL, clear_spool, make_folder, make_group_folders

SITE: SiteConfig = parse_site_config({
    "cluster": {"name": "t"},
    "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"},
                  "gpu": {"partition": "gpu", "cpus": 1, "mem": "500M", "gres": "gpu:1"}},
    "preemption": {"grace": 10},
    "daemon": {"start_timeout": 30},
    "submit": {"spool_dir": str(SPOOL)},
})


def job(job_id: int, group: str | None, kind: str = "cpu", *, user: str = "alice", uid: int = 1000,
        state: VariantState = VariantState.HELD, qos: str = "be", partition: str | None = None,
        nodes: str = "", est: float = 60, restarts: int = 0, exit_code: int | None = None) -> SlurmJob:
    request = Resources(1, 500, {"gpu": 1} if kind == "gpu" else {})
    comment = f"slurmx:g={group},v={kind},c=be,e={est:g}" if group else ""
    return SlurmJob(job_id=job_id, name=f"{group}@{kind}", user=user, user_id=uid, state=state,
                    state_text=state.value.upper(), reason="", partition=partition or kind, qos=qos, comment=comment,
                    nodes=nodes, request=request, allocated=Resources(), priority=1, nice=0,
                    held=state is VariantState.HELD, restart_count=restarts, time_limit_s=3600,
                    submit_time=100 + job_id, start_time=None, end_time=None, exit_code=exit_code)


def spool_owners(jobs: Iterable[SlurmJob], folders: Mapping[str, int] | None = None) -> SpoolOwners:
    """Real group folders in a fresh spool: `folders` (group -> uid) first, then one per other tagged group, as its
    earliest job's submitter made it; the daemon's own lookup over them."""
    clear_spool()
    for group, uid in (folders or {}).items():
        make_folder(SPOOL, group, uid)
    make_group_folders(SPOOL, jobs)
    return SpoolOwners(str(SPOOL))


NODES = [Node("c1", ("cpu",), Resources(4, 8000), Resources(), "IDLE"),
         Node("g1", ("gpu",), Resources(4, 8000, {"gpu": 2}), Resources(), "IDLE")]
PARTITIONS = [Partition("cpu", ("c1",), "cpu"), Partition("gpu", ("g1",), "gpu")]


class FakeSlurm:
    """Jobs in a dict; every control call recorded as (verb, ids) and applied like slurmctld would."""

    def __init__(self, jobs: Iterable[SlurmJob], store: Store | None = None, spool: Path = SPOOL) -> None:
        self.table = {j.job_id: j for j in jobs}
        self.spool = spool
        if spool == SPOOL:
            clear_spool()  # a fresh spool per fake: group ids repeat across tests
        self.calls: list[tuple[str, tuple[int, ...]]] = []
        self.store = store
        self.intents_at_release: list[list[str]] = []
        self.down = False
        self.refuse: set[int] = set()
        self.broken: SlurmError | None = None

    def _check(self) -> None:
        if self.down:
            raise SlurmUnavailable(["squeue"], 1, "Unable to contact slurm controller")

    def jobs(self, job_ids: Iterable[int] | None = None, user: str | None = None) -> list[SlurmJob]:
        self._check()
        make_group_folders(self.spool, self.table.values())  # what `slurmx submit` made before each first sbatch
        wanted = None if job_ids is None else set(job_ids)
        return [j for j in self.table.values() if wanted is None or j.job_id in wanted]

    def nodes(self) -> list[Node]:
        self._check()
        return list(NODES)

    def partitions(self, kinds: Mapping[str, str] | None = None) -> list[Partition]:
        return list(PARTITIONS)

    def _set(self, ids: Iterable[int], **change: Any) -> tuple[int, ...]:
        ids = tuple(ids)
        for i in ids:
            self.table[i] = replace(self.table[i], **change)
        return ids

    def release(self, job_ids: Iterable[int]) -> None:
        if self.store is not None:
            self.intents_at_release.append([i.step for i in self.store.intents("start")])
        self.calls.append(("release", self._set(job_ids, state=VariantState.PENDING, held=False)))

    def hold(self, job_ids: Iterable[int]) -> None:
        self.calls.append(("hold", self._set(job_ids, state=VariantState.HELD, held=True)))

    def cancel(self, job_ids: Iterable[int]) -> None:
        self.calls.append(("cancel", self._set(job_ids, state=VariantState.CANCELLED, held=False)))

    def signal(self, job_ids: Iterable[int], signal: str, batch_only: bool = True) -> None:
        self.calls.append(("signal", tuple(job_ids)))

    def requeue(self, job_ids: Iterable[int], hold: bool = False) -> None:
        ids = tuple(job_ids)
        for i in ids:
            self.table[i] = replace(self.table[i], state=VariantState.HELD if hold else VariantState.PENDING,
                                    held=hold, restart_count=self.table[i].restart_count + 1, nodes="")
        self.calls.append(("requeuehold" if hold else "requeue", ids))

    def update(self, job_ids: Iterable[int], change: JobUpdate) -> None:
        ids = tuple(job_ids)
        self.calls.append((f"update {' '.join(change.assignments()) or 'nodelist=' + str(change.nodelist)}", ids))
        for i in ids:
            old = self.table[i].request
            self.table[i] = replace(self.table[i], request=Resources(
                old.cpus if change.cpus is None else change.cpus, old.mem_mb if change.mem_mb is None
                else change.mem_mb, old.gres))

    def update_each(self, changes: Sequence[tuple[int, JobUpdate]]) -> dict[int, SlurmError]:
        """One call, as the adapter makes one scontrol process; jobs in `refuse` fail, the others apply."""
        if self.broken is not None:
            raise self.broken
        self.calls.append((f"update_each {' '.join(f'{j}:{c.nodelist}' for j, c in changes)}",
                           tuple(j for j, _ in changes)))
        return {j: SlurmCommandError(["scontrol"], 1, f"Invalid node name specified for job {j}")
                for j, _ in changes if j in self.refuse}

    def command_counts(self) -> Mapping[str, int]:
        return {}

    def verbs(self) -> list[str]:
        return [c[0] for c in self.calls]

    def run(self, job_id: int, node: str) -> None:
        self._set([job_id], state=VariantState.RUNNING, nodes=node, start_time=200)


# ------------------------------------------------------------------------------------------------ store


def test_store_migrates_to_the_latest_schema_and_keeps_intents_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = Store(path)
    assert store.version == len(MIGRATIONS) == 7
    store.put_intent("start:g", "start", "g", "releasing", {"job_id": 7}, now=5.0)
    store.put_intent("start:g", "start", "g", "released", {"job_id": 7}, now=6.0)
    store.audit([(1.0, 1, "g", "decide", "start cpu")])
    store.close()
    again = Store(path)
    [intent] = again.intents()
    assert (intent.step, intent.data, intent.created, intent.updated) == ("released", {"job_id": 7}, 5.0, 6.0)
    assert [e.detail for e in again.history("g")] == ["start cpu"]
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_two_processes_opening_a_new_store_at_once_both_open_it(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The interleaving is forced (a fake: both read version 0 before either migrated, which real processes hit
    only by timing, as slurmxd and a test reading its store did): the second finds the work done and opens."""
    path = tmp_path / "s.sqlite"
    first = Store(path)
    real = Store.version.fget
    assert real is not None
    reads = [0]

    def stale_first(store: Store) -> int:  # the first read, before the other process's migration committed
        return reads.pop() if reads else int(real(store))

    monkeypatch.setattr(Store, "version", property(stale_first))
    second = Store(path)
    assert real(second) == len(MIGRATIONS)
    second.put_intent("start:g", "start", "g", "releasing", {}, now=1.0)
    assert [i.key for i in first.intents()] == ["start:g"]


def test_store_refuses_a_newer_schema_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    Store(path).close()
    sqlite3.connect(path).execute("PRAGMA user_version = 99")
    with pytest.raises(StoreError, match="schema version 99 is newer than this slurmx"):
        Store(path)


def test_one_daemon_per_state_dir(tmp_path: Path) -> None:
    lock = acquire_lock(tmp_path)
    with pytest.raises(AlreadyRunning, match="another slurmxd"):
        acquire_lock(tmp_path)
    lock.close()
    acquire_lock(tmp_path).close()


# ------------------------------------------------------------------------------------------------ trust


def test_trust_ignores_untagged_jobs_and_rejects_bad_qos_and_wrong_partition() -> None:
    jobs = [job(1, "ok"), job(2, "ok", "gpu"), job(3, None),
            job(6, "qos", qos="normal"), job(7, "part", partition="gpu"), job(8, "../x")]
    trusted, rejected = sort_jobs(SITE, jobs, spool_owners(jobs))
    assert [t.group_id for t in trusted] == ["ok"]
    reasons = {r.group_id: r.reason for r in rejected}
    assert "neither the TE nor the BE QOS" in reasons["qos"]
    assert "in partition gpu, not cpu" in reasons["part"]
    assert "plain name" in next(r.reason for r in rejected if r.job_ids == (8,))
    assert 3 not in {i for r in rejected for i in r.job_ids}


def test_a_forged_tag_sets_aside_only_the_forgery_and_the_rightful_group_goes_on() -> None:
    jobs = [job(4, "alice-g"), job(5, "alice-g", "gpu"), job(9, "alice-g", "gpu", user="bob", uid=1001)]
    trusted, rejected = sort_jobs(SITE, jobs, spool_owners(jobs, {"alice-g": 1000}))
    [group] = trusted
    assert (group.group_id, group.user_id, dict(group.jobs)) == ("alice-g", 1000, {"cpu": jobs[0], "gpu": jobs[1]})
    [forged] = rejected
    assert forged.job_ids == (9,)
    assert forged.reason == ("job(s) 9 of bob(1001) carry the tag of group alice-g, whose folder belongs to uid 1000: "
                             "set aside and never acted on; the group goes on without them")


def test_a_finished_forgery_is_not_even_reported_and_never_stalls_the_group() -> None:
    jobs = [job(4, "alice-g"), job(9, "alice-g", "gpu", user="bob", uid=1001, state=VariantState.CANCELLED)]
    trusted, rejected = sort_jobs(SITE, jobs, spool_owners(jobs, {"alice-g": 1000}))
    assert [(t.group_id, list(t.jobs)) for t in trusted] == [("alice-g", ["cpu"])] and rejected == []


def test_an_older_job_rewritten_to_anothers_tag_does_not_take_the_group() -> None:
    """bob's job 3 predates alice's group; he rewrote its comment to her tag. The lowest job id is his, the folder
    hers: the group stays hers, with her variants, and his job is the one set aside."""
    jobs = [job(30, "g", "gpu"), job(3, "g", user="bob", uid=1001), job(12, "g")]
    trusted, rejected = sort_jobs(SITE, jobs, spool_owners(jobs, {"g": 1000}))
    assert [(t.user, t.user_id, sorted(j.job_id for j in t.jobs.values())) for t in trusted] == \
        [("alice", 1000, [12, 30])]
    assert [r.job_ids for r in rejected] == [(3,)] and "bob(1001)" in rejected[0].reason


def test_a_group_without_a_plain_folder_is_nobodys_and_is_reported(tmp_path: Path) -> None:
    jobs = [job(1, "nofolder"), job(2, "linked"), job(3, "filed")]
    owners = spool_owners([])
    (SPOOL / "linked").symlink_to(tmp_path)  # a link to a folder is not the group's folder
    (SPOOL / "filed").write_text("")
    trusted, rejected = sort_jobs(SITE, jobs, owners)
    assert trusted == []
    assert sorted(r.group_id for r in rejected) == ["filed", "linked", "nofolder"]
    assert all("owner cannot be verified" in r.reason for r in rejected)


def test_class_comes_from_the_qos_not_the_comment() -> None:
    trusted, _ = sort_jobs(SITE, [job(1, "g", qos="te")], spool_owners([job(1, "g")]))  # the comment says c=be
    assert trusted[0].job_class.value == "te"


# ------------------------------------------------------------------------------------------------ view


def test_released_variant_shows_running_on_its_nodes_and_finished_groups_leave_the_view() -> None:
    jobs = [job(1, "a", state=VariantState.PENDING), job(2, "a", "gpu"),
            job(3, "done", state=VariantState.COMPLETED), job(4, "done", "gpu")]
    obs = build_view(SITE, jobs, NODES, PARTITIONS, 300.0, owner_of=spool_owners(jobs),
                     starts={"a": StartMark("cpu", 1, ("c1",), 250.0)})
    assert set(obs.view.groups) == {"a"}
    group = obs.view.groups["a"]
    assert group.state is GroupState.RUNNING
    assert group.running_variant() is not None and group.running_variant().nodes == ("c1",)  # type: ignore[union-attr]
    assert obs.view.nodes["c1"].free == Resources(3, 7500)


def test_a_group_submitted_between_the_clock_read_and_squeue_is_not_submitted_in_the_future() -> None:
    """Slurm records whole seconds: a job submitted at 101.02, read by a cycle whose clock said 100.95, shows 101."""
    owners = spool_owners([job(1, "a")])
    obs = build_view(SITE, [job(1, "a"), job(2, "a", "gpu")], NODES, PARTITIONS, 100.95, owner_of=owners)
    assert obs.view.groups["a"].submit_time == 100.95
    assert build_view(SITE, [job(1, "a")], NODES, PARTITIONS, 300.0, owner_of=owners).view.groups["a"].submit_time \
        == 101


# ------------------------------------------------------------------------------------------------ enforce


def _enforcer(tmp_path: Path, fake: FakeSlurm, now: list[float]) -> tuple[Enforcer, Store]:
    store = fake.store or Store(tmp_path / "s.sqlite")
    fake.store = store
    return Enforcer(fake, store, SITE, clock=lambda: now[0]), store  # type: ignore[arg-type]


def _apply(enforcer: Enforcer, plan: Plan, obs: Any, now: float) -> list[Outcome]:
    """A plan through slurmxd's own path (the `SlurmBackend` handler table, `cycle.apply_plan`) on the test's
    snapshot `obs`."""
    backend = SlurmBackend(enforcer.site, CountingSlurm(enforcer.adapter), enforcer.store, enforcer)
    backend.obs = obs
    return apply_plan(backend, plan, now)


def _obs(fake: FakeSlurm, store: Store, now: float) -> Any:
    from slurmx.daemon.enforce import grace_marks, start_marks

    return build_view(SITE, fake.jobs(), NODES, PARTITIONS, now, owner_of=SpoolOwners(str(fake.spool)),
                      facts=store.group_facts(),
                      starts=start_marks(store), grace=grace_marks(store), user_nodes=store.user_nodes(()))


def test_start_writes_intent_first_releases_in_one_call_then_cancels_siblings(tmp_path: Path) -> None:
    fake = FakeSlurm([job(1, "a"), job(2, "a", "gpu"), job(3, "b"), job(4, "b", "gpu")])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    plan = Plan((Start("a", "gpu", ("g1",)), Start("b", "cpu")))
    _apply(enforcer, plan, _obs(fake, store, now[0]), now[0])
    assert fake.intents_at_release == [["releasing", "releasing"]]  # on disk before Slurm acts
    assert fake.calls == [("update_each 2:g1", (2,)), ("release", (2, 3))]
    assert [i.step for i in store.intents("start")] == ["released", "released"]
    fake.run(2, "g1")
    fake.run(3, "c1")
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    assert fake.calls[-1] == ("cancel", (1, 4))
    assert store.intents() == []


def test_a_refused_steer_is_said_for_its_job_only_and_every_start_is_still_released(tmp_path: Path) -> None:
    fake = FakeSlurm([job(1, "a"), job(3, "b"), job(5, "c")])
    fake.refuse = {3}
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    plan = Plan((Start("a", "cpu", ("c1",)), Start("b", "cpu", ("c1",)), Start("c", "cpu", ("c1",))))
    _apply(enforcer, plan, _obs(fake, store, now[0]), now[0])
    assert fake.calls == [("update_each 1:c1 3:c1 5:c1", (1, 3, 5)), ("release", (1, 3, 5))]
    errors = [(row[2], row[4]) for row in enforcer.log if row[3] == "error"]
    assert errors == [("b", "steer job 3: scontrol: exit 1: Invalid node name specified for job 3")]


def test_a_steering_command_that_cannot_run_is_said_for_each_job_and_the_starts_are_still_released(
        tmp_path: Path) -> None:
    from slurmx.slurm.errors import TransportError

    fake = FakeSlurm([job(1, "a"), job(3, "b")])
    fake.broken = TransportError(["scontrol"], None, "docker exec into login: container not running")
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    _apply(enforcer, Plan((Start("a", "cpu", ("c1",)), Start("b", "cpu", ("c1",)))), _obs(fake, store, now[0]), now[0])
    assert fake.calls == [("release", (1, 3))]
    assert [row[2] for row in enforcer.log if row[3] == "error"] == ["a", "b"]


def test_a_hundred_pinned_starts_take_at_most_five_scontrol_processes(tmp_path: Path) -> None:
    from slurmx.slurm.adapter import CliSlurm, RetryPolicy
    from slurmx.slurm.transport import CommandResult, ReplayTransport

    fake = FakeSlurm([job(i, f"g{i}") for i in range(1, 101)])
    store = Store(tmp_path / "s.sqlite")
    transport = ReplayTransport({("scontrol",): CommandResult((), 0, "", "")})
    adapter = CliSlurm(transport, RetryPolicy(retries=0))
    enforcer = Enforcer(adapter, store, SITE, clock=lambda: 1000.0)
    plan = Plan(tuple(Start(f"g{i}", "cpu", ("c1",)) for i in range(1, 101)))
    _apply(enforcer, plan, _obs(fake, store, 1000.0), 1000.0)
    scontrols = [argv for argv, _ in transport.calls if argv[0] == "scontrol"]
    assert len(scontrols) <= 5 and adapter.command_counts() == {"scontrol": len(scontrols)}
    steered = "".join(stdin or "" for _, stdin in transport.calls)
    assert steered.splitlines() == [f"update JobId={i} ReqNodeList=c1" for i in range(1, 101)]
    assert [i.step for i in store.intents("start")] == ["released"] * 100


def test_start_with_an_allotment_sizes_held_jobs_before_the_release_one_update_per_size(tmp_path: Path) -> None:
    fake = FakeSlurm([job(1, "a"), job(3, "b"), job(5, "c")])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    plan = Plan((Start("a", "cpu", ("c1",), Resources(3, 1500)), Start("b", "cpu", (), Resources(3, 1500)),
                 Start("c", "cpu", (), Resources(1, 500))))  # c: what it asks for already
    _apply(enforcer, plan, _obs(fake, store, now[0]), now[0])
    assert fake.calls == [("update NumCPUs=3 MinMemoryNode=1500", (1, 3)), ("update_each 1:c1", (1,)),
                          ("release", (1, 3, 5))]
    assert [fake.table[i].request for i in (1, 3, 5)] == [Resources(3, 1500), Resources(3, 1500), Resources(1, 500)]
    assert [i.data["size"] for i in store.intents("start")] == [[3, 1500], [3, 1500], None]


def test_start_replayed_from_releasing_sizes_the_job_again(tmp_path: Path) -> None:
    fake = FakeSlurm([job(1, "a")])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    store.put_intent("start:a", "start", "a", "releasing", {"kind": "cpu", "job_id": 1, "nodes": [], "size": [2, 900],
                                                            "released_at": now[0]}, now[0])  # killed right here
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    assert fake.verbs() == ["update NumCPUs=2 MinMemoryNode=900", "release"]


def test_a_variant_that_finished_between_snapshots_still_cancels_its_siblings(tmp_path: Path) -> None:
    fake = FakeSlurm([job(1, "a"), job(2, "a", "gpu")])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    _apply(enforcer, Plan((Start("a", "gpu"),)), _obs(fake, store, now[0]), now[0])
    fake._set([2], state=VariantState.COMPLETED)
    obs = _obs(fake, store, now[0])
    assert "a" not in obs.view.groups  # never offered to the policy again
    enforcer.follow_up(obs, now[0])
    assert fake.calls[-1] == ("cancel", (1,))


def test_start_that_does_not_run_in_time_is_held_again_and_replay_releases_again(tmp_path: Path) -> None:
    fake = FakeSlurm([job(1, "a")])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    store.put_intent("start:a", "start", "a", "releasing", {"kind": "cpu", "job_id": 1, "nodes": ["c1"],
                                                            "released_at": now[0]}, now[0])  # killed right here
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    assert fake.verbs() == ["update_each 1:c1", "release"]
    now[0] += 31
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    assert fake.verbs()[-2:] == ["hold", "update nodelist="]
    assert store.intents() == [] and fake.table[1].state is VariantState.HELD


@pytest.mark.parametrize(("required", "excluded", "nodes", "steered"), [
    ("", "", "c1", True), ("c1", "", "c1", True), ("g1", "", "c1", False), ("", "c1", "c1", False),
    ("", "g1", "c1", True),
    ("c[1-2]", "", "c1", False),  # -w c1,c2 is a 2-node job: both nodes, never one of them
    ("c[1-2]", "", "c1,c2", True), ("c1", "", "c1,c2", True),  # -w c1 -N 2: c1 and one more
    ("c1", "", "c2,g1", False), ("", "c2", "c1,c2", False), ("", "g[1-2]", "c1,c2", True)])
def test_steering_narrows_the_users_node_list_and_never_replaces_it(
        tmp_path: Path, required: str, excluded: str, nodes: str, steered: bool) -> None:
    """`-w`/`-x` are the user's: slurmxd steers a job (one node, or N for a multi-node Start) to the policy's
    nodes only when they hold every node of `-w` and none of `-x`; else it releases the job unsteered (Slurm runs it
    where the user asked) and says so."""
    count = nodes.count(",") + 1
    fake = FakeSlurm([replace(job(1, "a"), required_nodes=required, excluded_nodes=excluded, node_count=count)])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    _apply(enforcer, Plan((Start("a", "cpu", tuple(nodes.split(","))),)), _obs(fake, store, now[0]), now[0])
    assert fake.verbs() == ([f"update_each 1:{nodes}", "release"] if steered else ["release"])
    notes = [row[4] for row in enforcer.log if "outside what its user asked for" in row[4]]
    assert len(notes) == (0 if steered else 1)


def test_the_users_node_list_is_the_one_first_seen_not_slurmxds_own_steering(tmp_path: Path) -> None:
    """A requeued job keeps the ReqNodeList slurmxd gave it; its next start is narrowed against what its user
    asked for (nothing here), not against slurmxd's own earlier steering."""
    fake = FakeSlurm([job(1, "a")])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    _apply(enforcer, Plan((Start("a", "cpu", ("c1",)),)), _obs(fake, store, now[0]), now[0])
    fake.run(1, "c1")
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    fake.table[1] = replace(fake.table[1], state=VariantState.HELD, held=True, nodes="", required_nodes="c1")
    _apply(enforcer, Plan((Start("a", "cpu", ("c2",)),)), _obs(fake, store, now[0]), now[0])
    assert fake.verbs()[-2:] == ["update_each 1:c2", "release"]


def test_a_start_that_times_out_gives_the_user_their_own_node_list_back(tmp_path: Path) -> None:
    fake = FakeSlurm([replace(job(1, "a"), required_nodes="c1", node_count=2)])  # -w c1 -N 2
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    _apply(enforcer, Plan((Start("a", "cpu", ("c1", "c2")),)), _obs(fake, store, now[0]), now[0])
    assert fake.verbs() == ["update_each 1:c1,c2", "release"]
    fake.table[1] = replace(fake.table[1], required_nodes="c[1-2]")  # as Slurm shows it once steered
    now[0] += 31
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    assert fake.verbs()[-2:] == ["hold", "update nodelist=c1"]


def test_preempt_signals_then_requeues_held_at_the_deadline_exactly_once(tmp_path: Path) -> None:
    fake = FakeSlurm([job(1, "v", state=VariantState.RUNNING, nodes="c1"), job(2, "te", qos="te")])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    _apply(enforcer, Plan((Preempt("v", 10, beneficiary="te"),)), _obs(fake, store, now[0]), now[0])
    assert fake.calls == [("signal", (1,))]
    obs = _obs(fake, store, now[0])
    assert obs.view.groups["v"].grace_deadline == 1010.0 and obs.view.groups["v"].preempted_for == "te"
    now[0] = 1009.0
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    assert fake.verbs() == ["signal"]  # still in its grace period
    now[0] = 1010.0
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    assert fake.verbs() == ["signal", "requeuehold"]
    [intent] = store.intents("preempt")
    assert intent.step == "requeued"
    now[0] = 1011.0
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    assert fake.verbs() == ["signal", "requeuehold"]  # never a second requeue


def test_preempt_replayed_after_a_crash_before_the_signal_signals_with_a_fresh_grace(tmp_path: Path) -> None:
    fake = FakeSlurm([job(1, "v", state=VariantState.RUNNING, nodes="c1")])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    store.put_intent("preempt:1", "preempt", "v", "signalling",
                     {"job_id": 1, "grace_s": 10, "beneficiary": None, "nodes": ["c1"], "restart_count": 0,
                      "t0": 900.0, "deadline": 910.0, "reason": "r"}, 900.0)
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    assert fake.verbs() == ["signal"]
    [intent] = store.intents("preempt")
    assert (intent.step, intent.data["deadline"]) == ("signalled", 1010.0)
    enforcer.follow_up(_obs(fake, store, now[0] + 5), now[0] + 5)
    assert fake.verbs() == ["signal"]


def test_a_requeue_lost_in_a_crash_is_counted_not_repeated(tmp_path: Path) -> None:
    fake = FakeSlurm([job(1, "v", state=VariantState.HELD, restarts=1)])  # Slurm did requeue it
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    store.remember_groups([GroupFact("v", 1000, 1, frozenset({1}), 50.0)], 60.0)
    store.put_intent("preempt:1", "preempt", "v", "signalled",
                     {"job_id": 1, "grace_s": 10, "beneficiary": None, "nodes": ["c1"], "restart_count": 0,
                      "t0": 980.0, "deadline": 990.0, "reason": "r"}, 980.0)
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    assert fake.calls == []
    assert [f.preemptions for f in store.group_facts()["v"]] == [1]


def _facts_daemon(tmp_path: Path, fake: FakeSlurm, now: list[float], policy: str = "fifo") -> Daemon:
    store = Store(tmp_path / "s.sqlite")
    return Daemon(SITE, fake, store, make_policy(policy), clock=lambda: now[0])  # type: ignore[arg-type]


def test_facts_are_one_groups_of_one_owner_and_die_when_it_closes(tmp_path: Path) -> None:
    """A group id used again (after the group closed, or by another uid) inherits neither the original submit time
    (a jump in the FIFO queue) nor the preemption count (immunity under a preemption cap)."""
    fake = FakeSlurm([job(1, "v", state=VariantState.RUNNING, nodes="c1")])
    now = [1000.0]
    daemon = _facts_daemon(tmp_path, fake, now)
    daemon.cycle()
    [fact] = daemon.store.group_facts()["v"]
    assert (fact.owner_uid, fact.first_job, fact.job_ids, fact.submit_time) == (1000, 1, frozenset({1}), 101.0)
    daemon.store.count_preemption("v", 1000.0)
    fake.table[1] = replace(fake.table[1], state=VariantState.COMPLETED)  # the group closes
    now[0] = 1010.0
    daemon.cycle()
    assert daemon.store.group_facts() == {}
    # The same id again, by the same owner: new jobs, new facts (its own submit time, no preemption).
    fake.table[40] = replace(job(40, "v", state=VariantState.PENDING), submit_time=2000)
    now[0] = 2001.0
    daemon.cycle()
    [fresh] = daemon.store.group_facts()["v"]
    assert (fresh.first_job, fresh.submit_time, fresh.preemptions) == (40, 2000.0, 0)


def test_a_fact_is_not_read_for_a_group_of_another_owner_or_other_jobs(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.remember_groups([GroupFact("v", 1000, 1, frozenset({1, 2}), 50.0)], 60.0)
    store.count_preemption("v", 70.0)
    jobs = [replace(job(7, "v", uid=1001, user="bob", state=VariantState.PENDING), submit_time=900)]
    view = build_view(SITE, jobs, NODES, PARTITIONS, 1000.0, owner_of=spool_owners(jobs),
                      facts=store.group_facts()).view
    assert (view.groups["v"].submit_time, view.groups["v"].preemptions) == (900.0, 0)  # bob's own group: not alice's
    mine = [replace(job(9, "v", state=VariantState.PENDING), submit_time=900)]
    view = build_view(SITE, mine, NODES, PARTITIONS, 1000.0, owner_of=spool_owners(mine),
                      facts=store.group_facts()).view
    assert (view.groups["v"].submit_time, view.groups["v"].preemptions) == (900.0, 0)  # her jobs, but new ones
    kept = [replace(job(2, "v", state=VariantState.PENDING), submit_time=900)]
    view = build_view(SITE, kept, NODES, PARTITIONS, 1000.0, owner_of=spool_owners(kept),
                      facts=store.group_facts()).view
    assert (view.groups["v"].submit_time, view.groups["v"].preemptions) == (50.0, 1)  # the same group: its facts


def test_resize_of_a_pending_group_updates_its_waiting_variants_in_place(tmp_path: Path) -> None:
    fake = FakeSlurm([job(1, "a"), job(2, "a", "gpu")])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    _apply(enforcer, Plan((Resize("a", 3, 900),)), _obs(fake, store, now[0]), now[0])
    assert fake.calls == [("update NumCPUs=3 MinMemoryNode=900", (1, 2))]
    assert store.intents() == []


def test_resize_of_a_running_job_signals_requeues_held_updates_then_releases(tmp_path: Path) -> None:
    fake = FakeSlurm([job(1, "v", state=VariantState.RUNNING, nodes="c1")])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    resize = Plan((Resize("v", 2, 700, reason="synergy: more cpus"),))
    _apply(enforcer, resize, _obs(fake, store, now[0]), now[0])
    assert fake.calls == [("signal", (1,))]
    [intent] = store.intents("resize")
    assert (intent.key, intent.step, intent.data["deadline"], intent.data["restart_count"]) == \
        ("resize:1", "signalled", 1010.0, 0)
    _apply(enforcer, resize, _obs(fake, store, now[0]), now[0])  # the policy repeats itself: nothing new
    now[0] = 1009.0
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    assert fake.verbs() == ["signal"]  # still in its grace period
    now[0] = 1010.0
    stale = _obs(fake, store, now[0])  # the snapshot this cycle's plan is computed from: still running
    enforcer.follow_up(stale, now[0])
    assert fake.calls[1:] == [("requeuehold", (1,)), ("update NumCPUs=2 MinMemoryNode=700", (1,)), ("release", (1,))]
    assert store.intents() == []
    assert (fake.table[1].state, fake.table[1].request) == (VariantState.PENDING, Resources(2, 700))
    _apply(enforcer, Plan((Resize("v", 4, 900), Preempt("v", 10))), stale, now[0])
    assert len(fake.calls) == 4  # what this cycle's follow-up just requeued is not touched again on a stale view
    assert any(row[4] == "resized job 1 to cpus=2 mem=700M and released it" for row in enforcer.log)


@pytest.mark.parametrize(("state", "held", "verbs"), [
    (VariantState.HELD, True, ["update NumCPUs=2 MinMemoryNode=700", "release"]),  # killed before the update
    (VariantState.PENDING, False, ["hold", "update NumCPUs=2 MinMemoryNode=700", "release"]),  # after the release
    (VariantState.RUNNING, False, []),  # released and running again: done
])
def test_resize_replayed_after_the_requeue_finishes_without_a_second_requeue(
        tmp_path: Path, state: VariantState, held: bool, verbs: list[str]) -> None:
    fake = FakeSlurm([replace(job(1, "v", state=state, restarts=1), held=held)])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    store.put_intent("resize:1", "resize", "v", "requeued",
                     {"job_id": 1, "cpus": 2, "mem_mb": 700, "grace_s": 10, "restart_count": 0, "t0": 980.0,
                      "deadline": 990.0, "reason": "r", "requeued_at": 990.0}, 980.0)
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    assert fake.verbs() == verbs and store.intents() == []


def test_resize_leaves_a_job_of_that_size_and_one_that_finished_in_its_grace(tmp_path: Path) -> None:
    fake = FakeSlurm([job(1, "v", state=VariantState.RUNNING, nodes="c1")])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    _apply(enforcer, Plan((Resize("v", 1, 500),)), _obs(fake, store, now[0]), now[0])
    assert fake.calls == [] and store.intents() == []  # already that size
    _apply(enforcer, Plan((Resize("v", 2, 700),)), _obs(fake, store, now[0]), now[0])
    fake._set([1], state=VariantState.COMPLETED, exit_code=0)
    enforcer.follow_up(_obs(fake, store, now[0] + 3), now[0] + 3)
    assert fake.verbs() == ["signal"] and store.intents() == []
    assert enforcer.log[-1][4].startswith("job 1: completed during its grace period") and \
        enforcer.log[-1][4].endswith("not resized")


def test_dry_run_touches_neither_slurm_nor_the_store(tmp_path: Path) -> None:
    fake = FakeSlurm([job(1, "a"), job(2, "b")])
    store = Store(tmp_path / "s.sqlite")
    daemon = Daemon(SITE, fake, store, make_policy("fifo"), dry_run=True, clock=lambda: 1000.0)  # type: ignore[arg-type]
    report = daemon.cycle()
    assert [a.group_id for a in report.plan.of_type(Start)] == ["a", "b"]
    assert fake.calls == [] and store.intents() == [] and store.history() == []
    assert [c.what() for c in report.would] == ["update job 1: ReqNodeList=c1; job 2: ReqNodeList=c1",
                                                "release jobs 1,2"]  # what it would do, recorded, not done


def test_daemon_cycle_acts_on_a_fresh_view_only(tmp_path: Path) -> None:
    fake = FakeSlurm([job(1, "a"), job(2, "a", "gpu")])
    store = Store(tmp_path / "s.sqlite")
    daemon = Daemon(SITE, fake, store, make_policy("fifo"), clock=lambda: 1000.0)  # type: ignore[arg-type]
    fake.down = True
    with pytest.raises(SlurmUnavailable):
        daemon.cycle()
    assert fake.calls == []
    fake.down = False
    daemon.cycle()
    assert fake.verbs() == ["update_each 1:c1", "release"]
    daemon.cycle()  # released, not yet running: no second start
    assert fake.verbs() == ["update_each 1:c1", "release"]


def test_audit_retention_drops_old_entries_then_all_but_the_newest_rows(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.audit([(float(t), t, "g", "note", f"row {t}") for t in range(1, 11)])
    assert store.prune_audit(older_than=4.0, keep_rows=3) == 7  # t=1..3 by age, then t=4..7 by count
    assert [e.detail for e in store.history()] == ["row 8", "row 9", "row 10"]
    assert store.prune_audit(None, None) == 0 and len(store.history()) == 3


def test_daemon_applies_audit_retention_at_start_up_and_every_n_cycles(tmp_path: Path) -> None:
    site = parse_site_config({"cluster": {"name": "t"}, "resources": {"cpu": {"partition": "cpu", "cpus": 1,
                                                                               "mem": "500M"}},
                              "daemon": {"audit_keep": "1h", "audit_keep_rows": 0, "audit_prune_every": 3}})
    assert (site.daemon.audit_keep_s, site.daemon.audit_keep_rows) == (3600, 0)
    store = Store(tmp_path / "s.sqlite")
    old, recent = (5000.0, 0, "g", "note", "old"), (9000.0, 0, "g", "note", "recent")
    store.audit([old, recent])
    daemon = Daemon(site, FakeSlurm([]), store, make_policy("fifo"), clock=lambda: 10_000.0)  # type: ignore[arg-type]
    daemon.cycle()
    assert [e.detail for e in store.history()] == ["recent"]
    store.audit([old])
    daemon.cycle()
    daemon.cycle()
    assert [e.detail for e in store.history()] == ["recent", "old"]  # cycles 2 and 3 leave it
    daemon.cycle()
    assert [e.detail for e in store.history()] == ["recent"]  # cycle 4 = 1 + 3 prunes


# ------------------------------------------------------------------------------------------------ checks, explain


CONFIG = """Configuration data as of 2026-11-22T09:00:00
AuthInfo                = cred_expire=10
JobRequeue              = 1
PreemptType             = preempt/qos
JobSubmitPlugins        = lua
RequeueExit             = 99
SlurmUser               = slurm(64030)
"""


def test_operator_check_names_the_missing_privilege() -> None:
    config = parse_config(CONFIG)
    assert operator_problem("root", config, "None") == ""
    assert operator_problem("slurm", config, "") == ""
    assert operator_problem("ops", config, "Operator") == ""
    problem = operator_problem("alice", config, "None")
    assert "not a Slurm operator" in problem and "sacctmgr modify user alice set adminlevel=operator" in problem


def test_coexistence_flags_native_qos_preemption_and_a_long_requeue_delay() -> None:
    config = parse_config(CONFIG)
    assert coexistence_warnings(SITE, config, "", [("te", ""), ("be", "")]) == []
    warnings = coexistence_warnings(SITE, {**config, "AuthInfo": "", "JobRequeue": "0"}, "",
                                    [("te", "be"), ("normal", "be")])
    assert len(warnings) == 3
    assert warnings[0].startswith("QOS te may natively preempt be")
    assert "JobRequeue=0" in warnings[1] and "121 s" in warnings[2]


def test_a_cluster_that_would_record_graceful_preemptions_as_failed_is_named_with_the_fix() -> None:
    config = parse_config(CONFIG)
    for listed in ("(null)", "", "98", "100-120", "9"):
        [warning] = coexistence_warnings(SITE, {**config, "RequeueExit": listed}, "", [("te", ""), ("be", "")])
        assert warning.startswith("RequeueExit does not list 99") and "RequeueExit=99" in warning
    for listed in ("99", "1,99", "90-100"):
        assert coexistence_warnings(SITE, {**config, "RequeueExit": listed}, "", [("te", ""), ("be", "")]) == []


def test_a_cluster_without_the_job_submit_plugin_is_named_with_the_fix() -> None:
    config = parse_config(CONFIG)
    for plugins in ("", "require_timelimit", "lua_x"):
        [warning] = coexistence_warnings(SITE, {**config, "JobSubmitPlugins": plugins}, "", [("te", ""), ("be", "")])
        assert warning.startswith("JobSubmitPlugins has no lua") and "site-config/job_submit.lua" in warning
    assert coexistence_warnings(SITE, {**config, "JobSubmitPlugins": "require_timelimit,lua"}, "",
                                [("te", ""), ("be", "")]) == []


def test_explain_answers_from_the_audit_log(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.audit([(1.0, 1, "g", "note", "g: waiting for a gpu"),
                 (2.0, 2, "g", "decide", "start gpu (job 5) on g1: allox: first of 1 planned"),
                 (3.0, 9, "g", "decide", "preempt job 5, grace 10 s: fitgpp victim (for te-1)")])
    lines = explain("g", store.history("g"))
    assert lines[1] == "  why this variant: start gpu (job 5) on g1: allox: first of 1 planned"
    assert lines[2] == "  why preempted: preempt job 5, grace 10 s: fitgpp victim (for te-1) (1 preemption(s) in all)"
    assert explain("x", [])[0].startswith("x: slurmxd has recorded nothing")


def test_json_log_lines_carry_group_and_event() -> None:
    import json
    import logging

    from slurmx.daemon.main import JsonFormatter

    record = logging.LogRecord("slurmxd", logging.INFO, __file__, 1, "released job %d", (7,), None)
    record.group, record.event, record.cycle = "g1", "release", 3
    line = json.loads(JsonFormatter().format(record))
    assert {k: line[k] for k in ("level", "msg", "group", "event", "cycle")} == {
        "level": "info", "msg": "released job 7", "group": "g1", "event": "release", "cycle": 3}


def test_one_refused_release_does_not_stop_the_others(tmp_path: Path) -> None:
    from slurmx.slurm.errors import SlurmCommandError

    class Refusing(FakeSlurm):
        def release(self, job_ids: Iterable[int]) -> None:
            ids = tuple(job_ids)
            if 3 in ids:
                self.calls.append(("refused", ids))
                raise SlurmCommandError(["scontrol", "release"], 1, "Access/permission denied")
            super().release(ids)

    fake = Refusing([job(1, "a"), job(3, "b"), job(5, "c")])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    _apply(enforcer, Plan((Start("a", "cpu"), Start("b", "cpu"), Start("c", "cpu"))), _obs(fake, store, now[0]), now[0])
    assert fake.calls == [("refused", (1, 3, 5)), ("release", (1,)), ("refused", (3,)), ("release", (5,))]
    assert any(row[4] == "release job 3: scontrol release: exit 1: Access/permission denied" for row in enforcer.log)


def test_the_facts_slurmxd_keeps_beside_the_table_are_the_tables(tmp_path: Path) -> None:
    """Facts are read from the store once and then kept beside it; every change must reach both."""
    store = Store(tmp_path / "s.sqlite")
    store.remember_groups([GroupFact("a", 1000, 1, frozenset({1}), 50.0), GroupFact("b", 1000, 3, frozenset({3}),
                                                                                 60.0)], 70.0)
    store.remember_groups([GroupFact("a", 1000, 1, frozenset({1, 2}), 50.0)], 80.0)
    store.count_preemption("a", 90.0)
    store.close_groups([GroupFact("b", 1000, 3, frozenset({3}), 60.0)])
    store.remember_groups([GroupFact("b", 1000, 9, frozenset({9}), 95.0)], 96.0)
    kept = {g: sorted(rows, key=lambda f: f.first_job) for g, rows in store.group_facts().items()}
    store.close()
    assert kept == {g: sorted(rows, key=lambda f: f.first_job) for g, rows in Store(tmp_path / "s.sqlite")
                    .group_facts().items()}
    assert [(f.job_ids, f.preemptions, f.last_requeue) for f in kept["a"]] == [(frozenset({1, 2}), 1, 90.0)]
    assert [(f.first_job, f.submit_time, f.preemptions) for f in kept["b"]] == [(9, 95.0, 0)]


def test_a_cycle_leaves_the_collector_on_and_its_cyclic_garbage_to_the_next_full_pass(tmp_path: Path) -> None:
    """The collector is off during a cycle and its survivors are set aside unscanned after it (`gc.freeze`); every
    FULL_COLLECTION_INTERVAL_S seconds a full pass frees the cyclic garbage the cycles since left."""
    import gc
    import weakref

    class Cell:
        other: object = None

    fake = FakeSlurm([job(1, "a"), job(2, "a", "gpu")])
    daemon = Daemon(SITE, fake, Store(tmp_path / "s.sqlite"), make_policy("fifo"),  # type: ignore[arg-type]
                    clock=lambda: 1000.0)
    kept: list[weakref.ref[Cell]] = []

    def cyclic_garbage(obs: object, now: float) -> None:
        first, second = Cell(), Cell()
        first.other, second.other = second, first  # a cycle: refcounting alone never frees it
        kept.append(weakref.ref(first))

    daemon.backend.on_observed = cyclic_garbage
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        daemon.cycle()
        assert gc.isenabled() and gc.get_freeze_count() > 0
        assert kept[0]() is not None  # frozen: no pass sees it
        daemon._next_full_pass = 0.0  # the next cycle is one with a full pass
        daemon.cycle()
        assert kept[0]() is None and kept[1]() is not None
    finally:
        gc.unfreeze()
        if not was_enabled:
            gc.disable()
