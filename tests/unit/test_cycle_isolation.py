"""Per-group isolation of the policy's decision (`slurmx.cycle.isolate`): a group whose data makes the policy raise
is set aside and reported once, the others are decided as without it, in the simulator and in slurmxd alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmx.core.actions import Action, Cancel, Hold, Plan, Preempt, Release, SetPriority, Start
from slurmx.core.model import ClusterView, Group, JobClass, Node, Partition, Variant, VariantState
from slurmx.core.resources import Resources
from slurmx.cycle import Quarantine
from slurmx.cycle.isolate import MAX_CALLS, Isolated
from slurmx.cycle.isolate import plan_isolated as _plan_isolated
from slurmx.cycle.log import APPLIED, FAILED, REFUSED
from slurmx.daemon.errors import CycleTimeout
from slurmx.daemon.explain import explain
from slurmx.daemon.loop import Daemon
from slurmx.daemon.store import Store
from slurmx.policies import make_policy
from slurmx.policies.base import Policy
from slurmx.sim.engine import Engine
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.metrics import JobRecord, SimResult
from slurmx.slurm.errors import SlurmCommandError, SlurmError, SlurmUnavailable
from slurmx.slurm.records import SlurmJob
from tests.parity.harness import model_cluster
from tests.sim import Scripted, cluster
from tests.sim import job as sim_job
from tests.unit.test_accel_policy import _view as accel_view
from tests.unit.test_daemon import SITE, FakeSlurm, job

FIFO = make_policy("fifo")


class Poisoned:
    """A real policy that raises, as a solver tripping on one group's data does, whenever a group of `poison` is in
    its view; otherwise `inner`'s own plan. Counts its calls."""

    name: ClassVar[str] = "poisoned"

    def __init__(self, inner: Policy, poison: Iterable[str], error: Callable[[str], Exception] = ValueError) -> None:
        self.inner = inner
        self.poison = set(poison)
        self.error = error
        self.calls = 0

    def schedule(self, view: ClusterView, now: float) -> Plan:
        self.calls += 1
        bad = sorted(g for g in self.poison if g in view.groups)
        if bad:
            raise self.error(f"solver failed on\n  {bad[0]}")  # a message over two lines: reported on one
        return self.inner.schedule(view, now)


def plan_isolated(policy: Policy, view: ClusterView, now: float, quarantine: Quarantine,
                  fatal: tuple[type[BaseException], ...] = ()) -> Isolated:
    """`cycle.isolate.plan_isolated`, its normal path's bare plan read as an `Isolated` that did nothing."""
    got = _plan_isolated(policy, view, now, quarantine, fatal)
    return got if isinstance(got, Isolated) else Isolated(got)


def _touched(plan: Plan) -> set[str]:
    return {a.group_id for a in plan.actions} | {b for a in plan.actions if (b := getattr(a, "beneficiary", None))}


# ----------------------------------------------------------------------------------------- crafted views

NODE = Resources(8, 16000)


def _view(pending: Sequence[tuple[str, int]], running: Sequence[tuple[str, int, str]] = (), nodes: int = 2,
          estimate: float = 100.0) -> ClusterView:
    """`pending`: (group, cpus) in submit order; `running`: (group, cpus, node); cpu nodes c0.. of 8 CPUs."""
    used: dict[str, Resources] = {}
    groups: dict[str, Group] = {}
    t = 0.0
    for gid, cpus, node in running:
        req = Resources(cpus, 100)
        used[node] = used.get(node, Resources()) + req
        v = Variant(gid, "cpu", None, VariantState.RUNNING, req, "cpu", (node,), estimate, start_time=0.0)
        groups[gid] = Group(gid, gid, "u", JobClass.BE, (v,), submit_time=t)
        t += 1
    for gid, cpus in pending:
        v = Variant(gid, "cpu", None, VariantState.PENDING, Resources(cpus, 100), "cpu", (), estimate)
        groups[gid] = Group(gid, gid, "u", JobClass.BE, (v,), submit_time=t)
        t += 1
    names = [f"c{i}" for i in range(nodes)]
    node_map = {n: Node(n, ("cpu",), NODE, used.get(n, Resources()), "IDLE") for n in names}
    return ClusterView(10.0, node_map, {"cpu": Partition("cpu", tuple(names), kind="cpu")}, groups, {"cpu": "cpu"})


def _drop(view: ClusterView, drop: Iterable[str]) -> ClusterView:
    """The same view without some groups, built plainly (the reference the isolated plan is compared with)."""
    gone = set(drop)
    return ClusterView(view.now, dict(view.nodes), dict(view.partitions),
                       {g: v for g, v in view.groups.items() if g not in gone}, dict(view.kinds))


def test_a_real_solver_failing_on_one_groups_estimate_costs_that_group_only() -> None:
    """accel_batch on a negative estimate (a value from a user's tag or file) raises ValueError: before isolation
    every decision did, for every group."""
    view = accel_view({"g1": {"accel": 2.0, "cpu": 20.0}, "bad": {"accel": -5.0, "cpu": -5.0},
                       "g3": {"accel": 2.0, "cpu": 3.0}, "g4": {"accel": 7.0, "cpu": 3.0}})
    policy = make_policy("accel_batch")
    with pytest.raises(ValueError, match="must be >= 0"):
        policy.schedule(view, 0.0)
    quarantine = Quarantine()
    got = plan_isolated(policy, view, 0.0, quarantine)
    assert got.plan == policy.schedule(_drop(view, ["bad"]), 0.0)
    assert got.plan.actions and "bad" not in _touched(got.plan)
    assert [s.group_id for s in got.set_aside] == ["bad"] and got.set_aside[0].reason.startswith("ValueError: ")
    assert got.fallback is None and "bad" in quarantine


def test_culprits_are_found_by_bisection_and_the_plan_is_the_one_without_them() -> None:
    view = _view([(f"g{i:02d}", 1 + i % 3) for i in range(40)], running=[("r", 4, "c0")])
    policy = Poisoned(make_policy("fifo", {"backfill": "easy"}), {"g07", "g31"})
    got = plan_isolated(policy, view, 10.0, Quarantine())
    assert got.plan == policy.inner.schedule(_drop(view, ["g07", "g31"]), 10.0)
    assert [s.group_id for s in got.set_aside] == ["g07", "g31"]
    assert got.set_aside[0].reason == "ValueError: solver failed on g07"  # one line
    assert got.calls == policy.calls <= 1 + 2 * 2 * 6  # 2 culprits among 40: about 1 + 2k log2(n)
    assert got.hidden == {"g07", "g31"}


def test_a_quarantined_group_is_not_shown_while_unchanged_tried_again_when_changed_forgotten_when_gone() -> None:
    view = _view([("a", 2), ("bad", 2), ("c", 2)])
    policy = Poisoned(FIFO, {"bad"})
    quarantine = Quarantine()
    first = plan_isolated(policy, view, 10.0, quarantine)
    assert [s.group_id for s in first.set_aside] == ["bad"]
    calls = policy.calls
    again = plan_isolated(policy, view, 11.0, quarantine)  # the same entry: no search, nothing reported again
    assert policy.calls == calls + 1 and again.set_aside == () and again.hidden == {"bad"}
    assert again.plan == FIFO.schedule(_drop(view, ["bad"]), 11.0)
    # Slurm's priority moves with age: not a change of the group's data
    bad = view.groups["bad"]
    aged = replace(bad, variants=tuple(replace(v, priority=v.priority or 0 + 7) for v in bad.variants))
    assert plan_isolated(policy, _with(view, aged), 12.0, quarantine).hidden == {"bad"}
    # a new estimate: tried again (still failing: set aside and reported again)
    changed = replace(bad, variants=tuple(replace(v, estimate_s=50.0) for v in bad.variants))
    retried = plan_isolated(policy, _with(view, changed), 13.0, quarantine)
    assert [s.group_id for s in retried.set_aside] == ["bad"]
    # fixed and changed again: scheduled
    policy.poison.clear()
    fixed = replace(bad, variants=tuple(replace(v, estimate_s=60.0) for v in bad.variants))
    assert plan_isolated(policy, _with(view, fixed), 14.0, quarantine).hidden == frozenset()
    assert len(quarantine) == 0
    # gone from the view: forgotten
    quarantine.hold(bad)
    assert plan_isolated(policy, _drop(view, ["bad"]), 15.0, quarantine).hidden == frozenset()
    assert len(quarantine) == 0


def _with(view: ClusterView, group: Group) -> ClusterView:
    return ClusterView(view.now, dict(view.nodes), dict(view.partitions), {**view.groups, group.group_id: group},
                       dict(view.kinds))


def test_the_quarantine_is_bounded_oldest_let_go_first() -> None:
    view = _view([(f"g{i}", 1) for i in range(5)])
    quarantine = Quarantine(limit=3)
    for gid in ("g0", "g1", "g2", "g3"):
        quarantine.hold(view.groups[gid])
    assert len(quarantine) == 3 and "g0" not in quarantine and quarantine.hidden(view.groups) == {"g1", "g2", "g3"}


def test_with_no_group_to_blame_the_decision_is_fifos() -> None:
    """The policy raises on the running groups alone: no pending group is to blame; FIFO decides this cycle."""
    view = _view([("a", 2), ("b", 2)], running=[("r", 4, "c0")])
    got = plan_isolated(Poisoned(FIFO, {"r"}, ZeroDivisionError), view, 10.0, Quarantine())
    assert got.plan == FIFO.schedule(view, 10.0) and got.plan.actions
    assert got.set_aside == () and got.fallback is not None
    assert "ZeroDivisionError" in got.fallback and "fifo decided this cycle" in got.fallback


def test_when_the_fallback_fails_too_the_plan_is_empty() -> None:
    """Strict FIFO does not raise on any view we could build, so the fallback here is a policy that always does
    (a stand-in for a failure we cannot produce for real)."""
    view = _view([("a", 2)], running=[("r", 4, "c0")])
    failing = Poisoned(FIFO, {"a", "r"}, RuntimeError)
    got = plan_isolated(failing, view, 10.0, Quarantine(fallback=failing))
    assert got.plan == Plan() and got.fallback is not None and "nothing decided this cycle" in got.fallback


def test_at_the_cap_the_culprits_found_stay_set_aside_and_fifo_decides_without_the_groups_not_tried() -> None:
    view = _view([(f"g{i:02d}", 1) for i in range(32)])
    poison = {"g00", "g09", "g17", "g25"}
    policy = Poisoned(FIFO, poison)
    quarantine = Quarantine(max_calls=8)
    got = plan_isolated(policy, view, 10.0, quarantine)
    assert got.calls == policy.calls == 8 and got.fallback is not None and "within 8 calls" in got.fallback
    assert not _touched(got.plan) & poison
    assert {s.group_id for s in got.set_aside} <= poison and got.set_aside
    # the next decisions go on from there: every culprit is found within a few cycles, none twice
    found = [s.group_id for s in got.set_aside]
    for t in range(11, 15):
        found += [s.group_id for s in plan_isolated(policy, view, float(t), quarantine).set_aside]
    assert sorted(found) == sorted(poison)


def test_the_cycles_own_ends_are_never_blamed_on_a_group() -> None:
    view = _view([("a", 1), ("bad", 1)])
    ends: list[Callable[[str], Exception]] = [lambda m: SlurmUnavailable(["squeue"], 1, m), CycleTimeout]
    for error in ends:
        quarantine = Quarantine()
        policy = Poisoned(FIFO, {"bad"}, error)  # e.g. the watchdog's alarm landing inside the solver
        with pytest.raises((SlurmError, CycleTimeout)):
            plan_isolated(policy, view, 10.0, quarantine, (SlurmError, CycleTimeout))  # as slurmxd declares them
        assert len(quarantine) == 0 and policy.calls == 1


def test_slurmxd_declares_slurm_errors_and_the_watchdog_fatal(tmp_path: Path) -> None:
    daemon = Daemon(SITE, FakeSlurm([]), Store(tmp_path / "s.sqlite"), FIFO)  # type: ignore[arg-type]
    assert set(daemon.backend.fatal) == {SlurmError, CycleTimeout}


def test_the_normal_path_hands_the_policy_the_view_itself_and_returns_its_plan_as_is() -> None:
    view = _view([("a", 1)])
    seen: list[ClusterView] = []
    returned: list[Plan] = []

    class Recording:
        name: ClassVar[str] = "recording"

        def schedule(self, v: ClusterView, now: float) -> Plan:
            seen.append(v)
            returned.append(FIFO.schedule(v, now))
            return returned[-1]

    quarantine = Quarantine()
    quarantine.hold(_view([("gone", 1)]).groups["gone"])  # quarantined, but not in this view: nothing to hide
    assert _plan_isolated(Recording(), view, 10.0, quarantine) is returned[0]
    assert seen[0] is view and len(quarantine) == 0


# ----------------------------------------------------------------------------------------------- property

@st.composite
def _cases(draw: st.DrawFn) -> tuple[ClusterView, set[str], int, str]:
    n = draw(st.integers(1, 30))
    pending = [(f"p{i:02d}", draw(st.integers(1, 8))) for i in range(n)]
    nodes = draw(st.integers(1, 4))
    running = [(f"r{i}", draw(st.integers(1, 4)), f"c{i % nodes}") for i in range(draw(st.integers(0, nodes)))]
    poison = set(draw(st.lists(st.sampled_from([g for g, _ in pending]), max_size=n, unique=True)))
    cap = draw(st.sampled_from([MAX_CALLS, 4, 12]))
    backfill = draw(st.sampled_from(["none", "easy", "greedy"]))
    return _view(pending, running, nodes), poison, cap, backfill


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_any_poison_set_the_decision_never_raises_and_touches_no_poison_group(
        case: tuple[ClusterView, set[str], int, str]) -> None:
    view, poison, cap, backfill = case
    inner = make_policy("fifo", {"backfill": backfill})
    policy = Poisoned(inner, poison)
    got = plan_isolated(policy, view, 10.0, Quarantine(max_calls=cap))
    assert not _touched(got.plan) & poison
    assert {s.group_id for s in got.set_aside} <= poison
    assert got.calls <= cap
    if got.fallback is None:  # every culprit found: the policy's own plan on the view without them
        assert {s.group_id for s in got.set_aside} == poison
        assert got.plan == inner.schedule(_drop(view, poison), 10.0)


# ------------------------------------------------------------------------------------------------ simulator

def record(result: SimResult, job_id: str) -> JobRecord:
    return next(r for r in result.jobs if r.job_id == job_id)


def _records(result: Any) -> dict[str, tuple[Any, ...]]:
    return {r.job_id: (r.first_start, r.finish, r.kind, r.cancelled) for r in result.jobs}


def test_the_simulator_runs_the_others_as_without_the_culprit_and_counts_it() -> None:
    jobs = [sim_job("a", 0, 10, cpus=2), sim_job("bad", 1, 10, cpus=2), sim_job("c", 2, 10, cpus=4),
            sim_job("d", 3, 5, cpus=2)]
    policy = Poisoned(FIFO, {"bad"})
    engine = Engine(cluster(), policy, jobs)
    result = engine.run()
    alone = Engine(cluster(), FIFO, [j for j in jobs if j.job_id != "bad"]).run()
    got = _records(result)
    assert {k: v for k, v in got.items() if k != "bad"} == _records(alone)
    assert got["bad"][3] and got["bad"][0] is None  # never started; cancelled when only it was left
    assert [(g, r) for _, g, r in engine.set_aside_groups] == [("bad", "ValueError: solver failed on bad")]
    assert result.stats.notes["cycle: groups set aside"] == 1
    assert "cycle: decisions fallen back to FIFO" not in result.stats.notes


def test_the_simulator_with_accel_batch_and_a_negative_estimate() -> None:
    """A real solver on a real run: before isolation the run ended at the first decision with ValueError."""
    def two(gid: str, submit: float, estimate: float | None = None) -> SimJob:
        return SimJob(gid, "u", submit, {"accel": SimVariant("accel", Resources(1, 500, {"accel": 1}), 20, estimate),
                                         "cpu": SimVariant("cpu", Resources(1, 500), 60, estimate)})
    jobs = [two("a", 0), two("bad", 1, -5.0), two("c", 2), two("d", 3)]
    engine = Engine(model_cluster(("accel", "cpu")), make_policy("accel_batch"), jobs)
    result = engine.run()
    assert [g for _, g, _ in engine.set_aside_groups] == ["bad"]
    assert all(record(result, g).finish is not None and not record(result, g).cancelled for g in "acd")
    assert record(result, "bad").cancelled


def test_the_simulator_refuses_an_action_on_a_group_set_aside() -> None:
    """A plan that names a group the policy was not shown (a policy keeping an earlier view) is refused."""
    from slurmx.cycle import DecisionLog

    def decide(view: ClusterView, now: float) -> list[Action]:
        if "bad" in view.groups:
            raise KeyError("bad")
        return [Start("bad", "cpu"), *(Start(g.group_id, "cpu") for g in view.pending_groups())]
    log = DecisionLog()
    engine = Engine(cluster(), Scripted(decide), [sim_job("a", 0, 10), sim_job("bad", 0, 10)], decisions=log)
    result = engine.run()
    refused = [r for r in log.records if r.group_id == "bad"]
    assert refused and all(r.outcome.status == REFUSED and "set aside" in r.outcome.detail for r in refused)
    assert record(result, "bad").first_start is None and record(result, "a").finish == 10


def _fails(view: ClusterView, now: float) -> Sequence[Action]:
    return [Start(g.group_id, "cpu") for g in view.pending_groups()][: 1 // 0]  # a policy bug, on every view


def test_the_simulator_falls_back_to_fifo_when_no_group_is_to_blame() -> None:
    jobs = [sim_job("a", 0, 10, cpus=4), sim_job("b", 1, 10, cpus=4)]
    always = Scripted(_fails)  # fails on every view, with or without groups
    engine = Engine(cluster(), always, jobs)
    result = engine.run()
    assert _records(result) == _records(Engine(cluster(), FIFO, jobs).run())
    assert result.stats.notes["cycle: decisions fallen back to FIFO"] == engine.fallbacks > 0
    assert "ZeroDivisionError" in engine.first_fallback


# ----------------------------------------------------------------------------------------------- slurmxd

def _ignored(store: Store, group: str) -> list[str]:
    return [e.detail for e in store.history(group) if e.event == "ignore"]


def _released(fake: FakeSlurm) -> set[int]:
    return {i for verb, ids in fake.calls if verb == "release" for i in ids}


def _jobs() -> list[SlurmJob]:
    return [job(1, "a"), job(2, "bad"), job(3, "c")]


def test_slurmxd_sets_the_culprit_aside_reports_it_once_and_tries_it_again_when_it_changes(tmp_path: Path) -> None:
    fake = FakeSlurm(_jobs())
    store = Store(tmp_path / "s.sqlite")
    policy = Poisoned(FIFO, {"bad"})
    now = [1000.0]
    daemon = Daemon(SITE, fake, store, policy, clock=lambda: now[0])  # type: ignore[arg-type]
    report = daemon.cycle()  # before isolation: ValueError out of every cycle, nothing released
    # the same Slurm without the culprit's job, under the plain policy: the plan the others get
    without = FakeSlurm([j for j in _jobs() if j.job_id != 2])
    alone = Daemon(SITE, without, Store(tmp_path / "b.sqlite"), FIFO).cycle()  # type: ignore[arg-type]
    assert report.plan == alone.plan and {a.group_id for a in report.plan.actions} == {"a", "c"}
    assert _released(fake) == {1, 3}
    ignored = _ignored(store, "bad")
    assert len(ignored) == 1 and "ValueError: solver failed on bad" in ignored[0]
    assert explain("bad", store.history("bad"))[1].startswith("  ignored: set aside: the policy failed on this")
    calls = policy.calls
    now[0] += 10
    daemon.cycle()
    assert policy.calls == calls + 1 and len(_ignored(store, "bad")) == 1  # quarantined: no search, no new report
    fake.table[2] = replace(fake.table[2], comment=fake.table[2].comment.replace("e=60", "e=90"))
    now[0] += 10
    daemon.cycle()  # its data changed: tried again, still failing, reported again
    assert len(_ignored(store, "bad")) == 2 and 2 not in _released(fake)
    policy.poison.clear()
    now[0] += 10
    daemon.cycle()  # fixed, but its entry is the one it failed on: still not shown
    assert 2 not in _released(fake)
    fake.table[2] = replace(fake.table[2], comment=fake.table[2].comment.replace("e=90", "e=120"))
    now[0] += 10
    daemon.cycle()
    assert 2 in _released(fake) and len(_ignored(store, "bad")) == 2


def test_slurmxd_falls_back_to_fifo_and_logs_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeSlurm(_jobs())
    always = Scripted(_fails)
    daemon = Daemon(SITE, fake, Store(tmp_path / "s.sqlite"), always)  # type: ignore[arg-type]
    with caplog.at_level("ERROR", logger="slurmxd"):
        report = daemon.cycle()
    assert {a.group_id for a in report.plan.actions} == {"a", "bad", "c"}  # strict FIFO's plan
    assert any("fifo decided this cycle" in r.getMessage() and "ZeroDivisionError" in r.getMessage()
               for r in caplog.records)


class _RefusingHold(FakeSlurm):
    """slurmctld refusing one job's hold (a stand-in for a refusal a test cannot provoke without Slurm)."""

    def hold(self, job_ids: Iterable[int]) -> None:
        ids = tuple(job_ids)
        if 1 in ids:
            raise SlurmCommandError(["scontrol", "hold", "1"], 1, "Job has already finished")
        super().hold(ids)


def test_one_actions_failure_on_slurm_costs_that_action_only(tmp_path: Path) -> None:
    jobs = [job(1, "a", state=VariantState.PENDING), job(3, "c", state=VariantState.PENDING)]
    fake = _RefusingHold(jobs)
    daemon = Daemon(SITE, fake, Store(tmp_path / "s.sqlite"),  # type: ignore[arg-type]
                    Scripted(lambda view, now: [Hold("a"), Hold("c")]), clock=lambda: 1000.0)
    from slurmx.cycle import DecisionLog
    daemon.decisions = log = DecisionLog()
    daemon.cycle()
    assert [(r.group_id, r.outcome.status) for r in log.records] == [("a", FAILED), ("c", APPLIED)]
    assert ("hold", (3,)) in fake.calls


@pytest.mark.parametrize("action", [Start("zz", "cpu"), Preempt("zz", 0), Cancel("zz"), Hold("zz"), Release("zz"),
                                    SetPriority("zz", 5)])
def test_slurmxd_refuses_an_action_on_a_group_its_view_lacks(tmp_path: Path, action: Action) -> None:
    from slurmx.cycle import DecisionLog
    fake = FakeSlurm([job(1, "a")])
    log = DecisionLog()
    daemon = Daemon(SITE, fake, Store(tmp_path / "s.sqlite"), Scripted(lambda view, now: [action]),  # type: ignore[arg-type]
                    clock=lambda: 1000.0, decisions=log)
    daemon.cycle()
    assert [r.outcome.status for r in log.records] == [REFUSED]
    assert fake.calls == []


def test_slurmxd_refuses_an_action_on_a_group_set_aside(tmp_path: Path) -> None:
    from slurmx.cycle import DecisionLog

    def decide(view: ClusterView, now: float) -> list[Action]:
        if "bad" in view.groups:
            raise KeyError("bad")
        return [Start("bad", "cpu"), Start("a", "cpu")]
    fake = FakeSlurm(_jobs()[:2])
    log = DecisionLog()
    Daemon(SITE, fake, Store(tmp_path / "s.sqlite"), Scripted(decide), clock=lambda: 1000.0,  # type: ignore[arg-type]
           decisions=log).cycle()
    assert [(r.group_id, r.outcome.status) for r in log.records] == [("bad", REFUSED), ("a", APPLIED)]
    assert _released(fake) == {1}
