"""The simulator's engine: event order, allocation invariants, grace/requeue accounting, estimates, modes,
determinism. Every expected number is worked out by hand in the test's comment."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from slurmx.cli.sim import sim_group
from slurmx.core.actions import Action, Cancel, Hold, Plan, Preempt, Release, Resize, SetPriority, Start
from slurmx.core.model import ClusterView, Group, GroupQueue, GroupState, JobClass, Node, VariantState
from slurmx.core.resources import Resources
from slurmx.core.snapshot import LentSnapshot
from slurmx.cycle import DecisionLog, Outcome
from slurmx.cycle.log import APPLIED, REFUSED, REPEATED
from slurmx.policies import make_policy
from slurmx.policies.base import Policy, queue_window, waits_for_release
from slurmx.sim import engine_state
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape, SimulationError, SimulationInvariantError
from slurmx.sim.config import EngineOptions, parse_sim_config
from slurmx.sim.engine import Engine
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.metrics import JobRecord, SimResult, compute_metrics
from slurmx.sim.report import result_document, result_json
from slurmx.sim.runner import run_config
from tests.sim import Scripted, cluster, job, run

FIFO = make_policy("fifo")


def fifo(view: ClusterView, now: float) -> Sequence[Action]:
    return FIFO.schedule(view, now).actions


def record(result: SimResult, job_id: str) -> JobRecord:
    return next(r for r in result.jobs if r.job_id == job_id)


def tiny_workload(params: dict[str, Any], seed: int) -> list[SimJob]:
    """A small mixed workload (importable as a generator `tests.sim.test_engine:tiny_workload`)."""
    rng = np.random.default_rng(seed)
    n = int(params.get("jobs", 200))
    submit = np.cumsum(rng.exponential(20.0, n))
    out = []
    for i in range(n):
        cpus = int(rng.choice([1, 2, 4]))
        variants = {"cpu": SimVariant("cpu", Resources(cpus, 512 * cpus), float(rng.uniform(10, 200)))}
        if i % 3 == 0:
            variants["gpu"] = SimVariant("gpu", Resources(1, 512, {"gpu": 1}), float(rng.uniform(5, 50)))
        out.append(SimJob(f"j{i}", f"u{i % 4}", float(submit[i]), variants,
                          job_class=JobClass.TE if i % 5 == 0 else JobClass.BE, grace_s=int(rng.integers(0, 30))))
    return out


def two_kinds() -> ModelCluster:
    return ModelCluster([
        PartitionShape("cpu", "cpu", (NodeShape(2, Resources(4, 4096), "c"),)),
        PartitionShape("gpu", "gpu", (NodeShape(1, Resources(8, 8192, {"gpu": 2}), "g"),)),
    ])


# ---- event order -----------------------------------------------------------------------------------------


def test_tie_order_is_finish_grace_arrival_profiled_tick() -> None:
    assert engine_state.EVENT_NAMES == ("finish", "grace_end", "arrival", "profiled", "tick")
    assert (engine_state.FINISH, engine_state.GRACE_END, engine_state.ARRIVAL, engine_state.PROFILED,
            engine_state.TICK) == (0, 1, 2, 3, 4)


def test_a_finish_frees_the_node_for_an_arrival_at_the_same_instant() -> None:
    # a holds the whole node 0..10; b arrives at 10: one call at 10 sees a gone and b pending, so b runs 10..15.
    policy = Scripted(fifo)
    result = run([job("a", 0, 10, cpus=4), job("b", 10, 5, cpus=4)], policy)
    assert [s.now for s in policy.seen] == [0.0, 10.0]
    assert (policy.seen[1].pending, policy.seen[1].running) == (["b"], [])
    b = record(result, "b")
    assert (b.first_start, b.finish) == (10.0, 15.0)


def test_one_policy_call_per_instant_and_none_while_nothing_is_pending() -> None:
    policy = Scripted(fifo)
    run([job("a"), job("b"), job("c")], policy)  # all start at 0 and finish at 10 with an empty queue
    assert [s.now for s in policy.seen] == [0.0]
    idle = Scripted(fifo)
    run([job("a"), job("b"), job("c")], idle, call_when_idle=True)
    assert [s.now for s in idle.seen] == [0.0, 10.0]


def test_simultaneous_arrivals_keep_the_workload_order() -> None:
    policy = Scripted(fifo)
    result = run([job("b"), job("a"), job("c")], policy)
    assert list(policy.seen[0].view.groups) == ["b", "a", "c"]
    assert [r.job_id for r in result.jobs] == ["b", "a", "c"]


def test_a_grace_end_and_an_arrival_at_one_instant_meet_in_one_call() -> None:
    # a (4 cpus, 100 s) starts at 0; b arrives at 10 and a is preempted with a 10 s grace -> requeued at 20,
    # when c arrives. The one call at 20 sees a, b, c pending (oldest first) and nothing running.
    def decide(view: ClusterView, now: float) -> Sequence[Action]:
        return [Preempt("a", 10)] if now == 10 else fifo(view, now)

    policy = Scripted(decide)
    result = run([job("a", 0, 100, cpus=4), job("b", 10, 5, cpus=4), job("c", 20, 5, cpus=1)], policy)
    at_20 = [s for s in policy.seen if s.now == 20.0]
    assert len(at_20) == 1
    assert (at_20[0].pending, at_20[0].running) == (["a", "b", "c"], [])
    # a restarts at 20 with 90 s left -> 110; strict FIFO then runs b 110..115 and c 115..120.
    assert [(r.job_id, r.first_start, r.finish) for r in result.jobs] == [
        ("a", 0.0, 110.0), ("b", 110.0, 115.0), ("c", 115.0, 120.0)]


# ---- allocation invariants ------------------------------------------------------------------------------


def _outcomes(jobs: list[SimJob], plans: dict[int, list[Action]]) -> list[tuple[float, str, str, Outcome]]:
    """Every action's outcome when the policy returns `plans[now]` (nothing at other instants)."""
    log = DecisionLog()
    Engine(cluster(nodes=2), Scripted(lambda view, now: plans.get(int(now), [])), jobs,
           EngineOptions(call_when_idle=False), decisions=log).run()
    return [(r.t, r.action, r.group_id, r.outcome) for r in log.records]


def test_a_second_start_of_a_group_in_one_plan_or_later_is_refused_as_on_slurm() -> None:
    got = _outcomes([job("a", 0, 10), job("b", 5, 10)], {0: [Start("a", "cpu"), Start("a", "cpu")],
                                                         5: [Start("a", "cpu"), Start("b", "cpu")]})
    refused = Outcome(REFUSED, "no waiting cpu variant")
    assert got == [(0, "Start", "a", Outcome(APPLIED)), (0, "Start", "a", refused),
                   (5, "Start", "a", refused), (5, "Start", "b", Outcome(APPLIED))]


def test_over_allocating_a_node_names_the_node_the_group_and_the_time() -> None:
    policy = Scripted(lambda view, now: [Start("a", "cpu", ("c001",)), Start("b", "cpu", ("c001",))])
    with pytest.raises(SimulationInvariantError,
                       match=r"t=0: over-allocation of node c001: group b needs cpus=3 but only 1 of 4 are free"):
        run([job("a", cpus=3), job("b", cpus=3)], policy)


def test_an_unpinned_start_that_fits_no_node_is_an_over_allocation() -> None:
    policy = Scripted(lambda view, now: [Start("a", "cpu"), Start("b", "cpu")])
    with pytest.raises(SimulationInvariantError, match=r"t=0: Start b: no node of partition cpu has room"):
        run([job("a", cpus=3), job("b", cpus=3)], policy)


def test_actions_on_a_group_that_left_or_never_came_are_refused_as_on_slurm() -> None:
    gone = [Start("a", "cpu"), Preempt("a", 5), Cancel("a"), Hold("a"), Start("zz", "cpu"), Start("b", "cpu")]
    got = _outcomes([job("a", 0, 10), job("b", 20, 10)], {0: [Start("a", "cpu")], 20: gone})
    refused = Outcome(REFUSED, "not a group in the view")
    assert [o for t, _, _, o in got if t == 20] == [refused] * 5 + [Outcome(APPLIED)]


def test_actions_that_do_not_fit_the_group_as_it_is_are_refused_as_on_slurm() -> None:
    plan: list[Action] = [Start("c", "gpu"), Preempt("a", 5), Preempt("b", -1), Preempt("b", 5, beneficiary="zz"),
                          Preempt("b", 5), Resize("b", 1, 500), Cancel("a")]
    got = _outcomes([job("a", 0, 10), job("b", 0, 20, cpus=1, mem_mb=500), job("c", 5, 1)],  # c: a call at 5
                    {0: [Start("b", "cpu")], 5: [*plan, Start("c", "cpu")], 10: [Start("b", "cpu")]})
    assert [(action, o.status, o.detail) for t, action, _, o in got if t == 5] == [  # in effect order: starts last
        ("Preempt", REFUSED, "the group is not running"), ("Preempt", REFUSED, "a negative grace period"),
        ("Preempt", REFUSED, "its beneficiary is not a waiting group in the view"), ("Preempt", APPLIED, ""),
        ("Resize", REPEATED, ""), ("Cancel", APPLIED, ""), ("Start", REFUSED, "no waiting gpu variant"),
        ("Start", APPLIED, "")]


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        ([Start("a", "cpu", ("c001", "c002"))], r"names 2 node\(s\) \(c001, c002\) for a variant that runs on 1"),
        ([Start("a", "cpu", ("x9",))], r"unknown node 'x9'"),
        ([object()], r"returned <object object at .*>, which is not an action"),
    ],
)
def test_actions_the_model_cannot_apply_are_loud_errors(actions: list[Any], message: str) -> None:
    with pytest.raises(SimulationError, match=message):
        run([job("a")], Scripted(lambda view, now: actions), model=cluster(nodes=2))


def test_hold_release_and_priority_of_a_running_group_are_refused_as_on_slurm() -> None:
    """slurmxd holds, releases and re-prioritises waiting variants only: a running group has none."""
    log = DecisionLog()
    plans = {0: [Start("a", "cpu")], 10: [Hold("a"), Release("a"), SetPriority("a", 5)], 20: [Start("b", "cpu")]}
    engine = Engine(cluster(nodes=1), Scripted(lambda view, now: plans.get(int(now), [])),
                    [job("a", 0, 20, cpus=4), job("b", 10, 5, cpus=4)], EngineOptions(call_when_idle=False),
                    decisions=log)
    engine.run()
    late = [(r.action, r.outcome) for r in log.records if r.t == 10]
    refused = Outcome(REFUSED, "no waiting variant")
    assert late == [("Hold", refused), ("Release", refused), ("SetPriority", refused)]


def test_a_policy_that_never_starts_anything_stalls_loudly() -> None:
    with pytest.raises(SimulationError, match=r"stalled with 1 unfinished jobs.*first: a"):
        run([job("a")], Scripted(lambda view, now: []))
    with pytest.raises(SimulationError, match=r"t=60: stalled"):
        run([job("a", 10)], Scripted(lambda view, now: []), mode="tick", period_s=60.0)
    with pytest.raises(SimulationError, match=r"t=60: stalled"):  # actions that never start anything
        run([job("a", 10)], Scripted(lambda view, now: [SetPriority("a", 1)]), mode="tick", period_s=60.0)


def test_jobs_the_cluster_can_never_run_are_rejected_before_the_run() -> None:
    with pytest.raises(SimulationError, match=r"job a variant cpu: requests cpus=8 .* more than any node"):
        run([job("a", cpus=8)])
    with pytest.raises(SimulationError, match=r"job a variant cpu: no node of this cluster has GRES gpu"):
        run([job("a", gres={"gpu": 1})])
    with pytest.raises(SimulationError, match=r"job a: none of its kinds \(gpu\) is served"):
        run([job("a", kind="gpu")])
    with pytest.raises(SimulationError, match=r"job id 'a' appears twice"):
        run([job("a"), job("a")])


def test_work_that_does_not_add_up_is_an_invariant_error() -> None:
    class Leaky(Engine):  # a deliberately broken engine: progress is lost behind the model's back
        def _start(self, a: Start, now: float) -> None:
            super()._start(a, now)
            self._by_id[a.group_id].done -= 0.25

    with pytest.raises(SimulationInvariantError, match=r"t=10: group a finished with work 0.75 of 1.0"):
        Leaky(cluster(), FIFO, [job("a")], EngineOptions()).run()


def test_releasing_more_than_a_node_holds_is_an_invariant_error() -> None:
    model = cluster()
    model.allocate(0, (1, 100), "a", 0.0)
    with pytest.raises(SimulationInvariantError, match=r"t=3: node c001 would hold negative cpus"):
        model.release(0, (2, 100), "a", 3.0)


# ---- grace periods and requeue ---------------------------------------------------------------------------


def _preempt_at_30(grace: int) -> Scripted:
    def decide(view: ClusterView, now: float) -> Sequence[Action]:
        return ([Preempt("a", grace)] if now == 30 else []) + list(fifo(view, now))

    return Scripted(decide)


@pytest.mark.parametrize(("checkpoint", "work_left", "finish"), [("keep", 0.7, 110.0), ("lose", 1.0, 140.0)])
def test_a_preempted_job_resumes_with_exactly_the_work_left(checkpoint: str, work_left: float, finish: float) -> None:
    # a (100 s) runs 0..30, is signalled at 30 with grace 10 (no progress in grace), requeued at 40 and restarted
    # at once: keep -> 70 s left, done at 110; lose -> 100 s left, done at 140. b only triggers the call at 30.
    policy = _preempt_at_30(10)
    result = run([job("a", 0, 100, cpus=4), job("b", 30, 1, cpus=1)], policy, model=cluster(cpus=8),
                 checkpoint=checkpoint)
    restart = next(s for s in policy.seen if s.now == 40.0)
    group = restart.view.groups["a"]
    assert group.state is GroupState.PENDING
    assert (group.work, group.preemptions) == (pytest.approx(work_left), 1)
    assert group.variants[0].estimate_s == pytest.approx(100 * work_left)
    a = record(result, "a")
    assert (a.first_start, a.finish, a.preemptions) == (0.0, finish, 1)
    assert a.exec_s == pytest.approx(100.0)  # productive time: 30 + 70 (keep) or the final 100 (lose)
    assert result.reschedule_intervals == (10.0,)


def test_a_restart_cost_delays_the_resumed_work_not_the_first_start() -> None:
    """As above with `keep`, and each restart paying 15 s to reload: a restarts at 40, works from 55, ends at 125;
    its node is held from the restart (the cost is time on the node), its first start is not charged."""
    policy = _preempt_at_30(10)
    result = run([job("a", 0, 100, cpus=4), job("b", 30, 1, cpus=1)], policy, model=cluster(cpus=8),
                 restart_cost_s=15.0)
    a = record(result, "a")
    assert (a.first_start, a.finish, a.preemptions) == (0.0, 125.0, 1)
    with pytest.raises(ValueError, match="restart_cost_s must be finite and >= 0"):
        EngineOptions(restart_cost_s=-1.0)


def test_the_grace_period_holds_the_node_and_a_zero_grace_frees_it_at_once() -> None:
    def decide(grace: int) -> Scripted:
        def plan(view: ClusterView, now: float) -> Sequence[Action]:
            if now == 30 and view.groups["a"].state is GroupState.RUNNING:
                return [Preempt("a", grace), Start("b", "cpu")]
            return fifo(view, now)

        return Scripted(plan)

    jobs = [job("a", 0, 100, cpus=4), job("b", 30, 5, cpus=4)]
    # Grace 10: a still holds the node when the plan starts b there.
    with pytest.raises(SimulationInvariantError, match=r"t=30: Start b: no node of partition cpu has room"):
        run(jobs, decide(10))
    # Grace 0: the Preempt frees the node within the plan, b runs 30..35, and a restarts at 35 with 70 s left.
    result = run(jobs, decide(0))
    assert record(result, "b").first_start == 30.0
    assert record(result, "a").finish == 105.0


def test_preempting_a_group_already_in_grace_is_a_repeat_not_a_second_preemption() -> None:
    def decide(view: ClusterView, now: float) -> Sequence[Action]:
        return [Preempt("a", 10)] if now in (30, 35) else fifo(view, now)

    result = run([job("a", 0, 100, cpus=4), job("b", 30, 1, cpus=4), job("c", 35, 1, cpus=4)], Scripted(decide))
    a = record(result, "a")
    assert a.preemptions == 1
    assert result.stats.repeated_preempts == 1
    assert result.reschedule_intervals == (10.0,)  # the grace still ends at 40, not 45


def test_the_view_carries_the_preemption_marks_until_the_beneficiary_starts() -> None:
    # a (be) is preempted at 30 for te with a 10 s grace; x arrives at 35 to make a call during the grace.
    def decide(view: ClusterView, now: float) -> Sequence[Action]:
        if now == 30:
            return [Preempt("a", 10, beneficiary="te")]
        if now == 40:
            return [Start("te", "cpu", ("c001",))]
        return fifo(view, now)

    policy = Scripted(decide)
    jobs = [job("a", 0, 100, cpus=4), job("te", 30, 10, cpus=4, job_class=JobClass.TE), job("x", 35, 1, cpus=4)]
    result = run(jobs, policy)
    marks = {s.now: (g.grace_deadline, g.preempted_for, g.preempted_nodes, g.requeue_time, g.state)
             for s in policy.seen if (g := s.view.groups.get("a")) is not None}
    assert marks[35.0] == (40.0, "te", ("c001",), None, GroupState.RUNNING)
    assert marks[40.0] == (None, "te", ("c001",), 40.0, GroupState.PENDING)
    assert marks[50.0] == (None, None, (), 40.0, GroupState.PENDING)  # te started at 40: the earmark is void
    assert [(r.job_id, r.first_start, r.finish) for r in result.jobs] == [
        ("a", 0.0, 120.0), ("te", 40.0, 50.0), ("x", 120.0, 121.0)]


def test_cancel_frees_a_running_group_and_records_it() -> None:
    def decide(view: ClusterView, now: float) -> Sequence[Action]:
        return [Cancel("a"), *fifo(view, now)] if "a" in view.groups and now == 5 else fifo(view, now)

    result = run([job("a", 0, 100, cpus=4), job("b", 5, 10, cpus=4)], Scripted(decide))
    a, b = record(result, "a"), record(result, "b")
    assert (a.cancelled, a.finish, b.first_start) == (True, 5.0, 5.0)
    assert compute_metrics(result)["jobs"] == {"total": 2, "completed": 1, "cancelled": 1}


# ---- estimates -------------------------------------------------------------------------------------------


def _estimates(**options: Any) -> list[float]:
    policy = Scripted(fifo)
    jobs = [job(f"j{i}", 0, 10.0 + i, cpus=1, **({"estimate_s": 50.0} if i == 0 else {})) for i in range(6)]
    run(jobs, policy, model=cluster(nodes=2), **options)
    return [g.variants[0].estimate_s or 0.0 for g in policy.seen[0].view.pending_groups()]


def test_estimates_are_the_truth_or_the_workloads_estimate_without_an_error_model() -> None:
    assert _estimates() == [50.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    assert _estimates(error_sigma=0.0) == [50.0, 11.0, 12.0, 13.0, 14.0, 15.0]


def test_the_estimation_error_is_deterministic_for_a_seed() -> None:
    first, again = _estimates(error_sigma=0.3, seed=1), _estimates(error_sigma=0.3, seed=1)
    assert first == again
    assert first != _estimates(error_sigma=0.3, seed=2)
    assert first != _estimates()
    factors = np.array(_estimates(error_sigma=100.0, error_clamp=0.5, seed=3)) / np.array(_estimates())
    assert np.all((factors >= 0.5 - 1e-12) & (factors <= 1.5 + 1e-12))


def test_execution_follows_the_truth_whatever_the_estimate() -> None:
    result = run([job("a", 0, 10, estimate_s=50.0)], error_sigma=0.5, seed=4)
    assert record(result, "a").finish == 10.0


# ---- other actions and models -----------------------------------------------------------------------------


def test_resize_priority_and_hold_show_in_the_next_view_and_resize_changes_the_allocation() -> None:
    def decide(view: ClusterView, now: float) -> Sequence[Action]:
        return [Resize("a", 2, 300), SetPriority("a", 7), Hold("a")] if now == 0 else fifo(view, now)

    policy = Scripted(decide)
    result = run([job("a", 0, 10), job("b", 1, 10, cpus=1)], policy, model=cluster(nodes=1, cpus=4))
    variant = policy.seen[1].view.groups["a"].variants[0]
    assert (variant.request, variant.priority, variant.state) == (Resources(2, 300), 7, VariantState.HELD)
    assert policy.seen[1].view.nodes["c001"].allocated == Resources()
    assert list(result.util_values[0]) == [3.0, 400.0]  # a's resized 2 cpus / 300 MB plus b's 1 cpu / 100 MB


def test_a_speed_function_scales_the_rate_when_the_allocation_differs_from_the_request() -> None:
    def speed(kind: str, cpus: int, mem_mb: int) -> float:
        return cpus / 2  # twice the cpus, twice as fast

    sped = SimJob("a", "u", 0.0, {"cpu": SimVariant("cpu", Resources(2, 100), 100.0)}, speed=speed)
    policy = Scripted(lambda view, now: [Start("a", "cpu", (), Resources(4, 100))])
    assert record(run([sped], policy), "a").finish == 50.0


def test_profiling_delays_visibility_and_counts_in_the_jct() -> None:
    # visible at 0 + 5 + 0.1 x 100 = 15, runs 15..115.
    policy = Scripted(fifo)
    result = run([job("a", 0, 100)], policy, profiling_fixed_s=5.0, profiling_fraction=0.1)
    assert [s.now for s in policy.seen] == [15.0]
    a = record(result, "a")
    assert (a.first_start, a.finish, a.exec_s) == (15.0, 115.0, 100.0)


def test_only_the_kinds_the_cluster_serves_are_shown_and_the_started_one_remains() -> None:
    two = SimJob("a", "u", 0.0, {"cpu": SimVariant("cpu", Resources(1, 100), 10.0),
                                 "gpu": SimVariant("gpu", Resources(1, 100, {"gpu": 1}), 5.0),
                                 "accel": SimVariant("accel", Resources(1, 100), 5.0)})
    policy = Scripted(lambda view, now: [Start("a", "gpu")] if now == 0 else fifo(view, now))
    result = run([two, job("b", 1, 1)], policy, model=two_kinds(), call_when_idle=True)
    assert policy.seen[0].view.groups["a"].kinds() == ("cpu", "gpu")
    assert policy.seen[1].view.groups["a"].kinds() == ("gpu",)
    assert record(result, "a").finish == 5.0


# ---- modes -----------------------------------------------------------------------------------------------


def test_tick_mode_decides_only_on_period_boundaries() -> None:
    # Ticks at 60, 120: a (arrives 10) starts at 60 and finishes exactly at 90; b (arrives 70) starts at 120.
    policy = Scripted(fifo)
    result = run([job("a", 10, 30, cpus=4), job("b", 70, 30, cpus=4)], policy, mode="tick", period_s=60.0)
    assert [s.now for s in policy.seen] == [60.0, 120.0]
    assert [(r.first_start, r.finish) for r in result.jobs] == [(60.0, 90.0), (120.0, 150.0)]
    assert result.stats.by_event["tick"] == 3  # 60, 120 and 180, after which nothing is left


def test_a_whole_minute_job_frees_its_node_at_the_tick_it_ends_on() -> None:
    # 67 min = 4020 s; work / (work / 4020) is 4020.0000000000005 in floating point, which used to land after the
    # tick at 4020 and start b a tick late (4080). The finish is now exact, so b starts at 4020.
    result = run([job("a", 0, 4020, cpus=4), job("b", 0, 60, cpus=4)], mode="tick", period_s=60.0)
    assert [(r.job_id, r.first_start, r.finish) for r in result.jobs] == [("a", 0.0, 4020.0), ("b", 4020.0, 4080.0)]


def test_round_mode_records_completions_at_the_end_of_the_round() -> None:
    # a runs from round 0 and completes at 100, but its lease (and the node) ends at 300; b, arriving at 150,
    # starts at 300, completes at 310 and is recorded at 600. Productive times stay exact.
    result = run([job("a", 0, 100, cpus=4), job("b", 150, 10, cpus=4)], mode="round", period_s=300.0)
    a, b = record(result, "a"), record(result, "b")
    assert (a.first_start, a.finish, a.exec_s) == (0.0, 300.0, 100.0)
    assert (b.first_start, b.finish, b.exec_s) == (300.0, 600.0, 10.0)


@pytest.mark.parametrize(("mode", "period"), [("event", 0.0), ("tick", 60.0), ("round", 300.0)])
def test_the_incremental_view_gives_exactly_the_naive_views_results(mode: str, period: float) -> None:
    jobs = tiny_workload({"jobs": 300}, seed=5)
    results = [Engine(two_kinds(), FIFO, jobs, EngineOptions(mode=mode, period_s=period, view=view)).run()
               for view in ("incremental", "naive")]
    assert results[0].jobs == results[1].jobs
    assert compute_metrics(results[0]) == compute_metrics(results[1])


def test_the_incremental_view_is_equal_to_a_fresh_one_at_every_call() -> None:
    seen: list[ClusterView] = []

    class Checked(Engine):
        def _view(self, now: float) -> ClusterView:
            view = super()._view(now)
            groups = {gid: self._group_view(j) for gid, j in self._visible.items()}
            assert dict(view.groups) == groups and list(view.groups) == list(groups)
            assert dict(view.nodes) == self.cluster.rebuild_views()
            fresh = ClusterView(now, dict(view.nodes), dict(view.partitions), dict(view.groups), dict(view.kinds))
            assert view.pending_groups() == fresh.pending_groups()
            assert view.running_groups() == fresh.running_groups()
            assert view.pending_groups()[:] == tuple(fresh.pending_groups())  # read whole at once
            assert view.running_groups()[1:] == tuple(fresh.running_groups())[1:]
            assert all(view.nodes_of_kind(kind) == fresh.nodes_of_kind(kind) for kind in view.kinds)
            for kind in (*view.kinds, "no-such-kind"):
                assert view.node_names_of_kind(kind) == fresh.node_names_of_kind(kind)
                assert view.running_by_expected_end(kind) == fresh.running_by_expected_end(kind)
            for kind in view.kinds:
                queue = view.running_by_expected_end(kind)
                ends.append((queue, tuple(queue)))
            assert view.index is not None and fresh.index is None  # the engine's answers vs the scan's
            requests = [v.request for g in view.groups.values() for v in g.variants]
            requests += [Resources(), Resources(1, 1, {"fpga": 1}), Resources(5, 1)]
            for kind in (*view.kinds, "no-such-kind"):
                for request in requests:
                    assert list(view.fitting_nodes(kind, request)) == list(fresh.fitting_nodes(kind, request))
                    assert list(view.fitting_node_names(kind, request)) == \
                        [n.name for n in fresh.fitting_nodes(kind, request)]
            seen.append(view)
            answers.append((tuple(view.pending_groups()), tuple(view.running_groups())))
            return view

    def decide(view: ClusterView, now: float) -> Sequence[Action]:
        running = view.running_groups()
        if len(view.pending_groups()) > 2 and running:
            return [Preempt(running[-1].group_id, 5)]
        return fifo(view, now)

    answers: list[tuple[tuple[Group, ...], tuple[Group, ...]]] = []
    ends: list[tuple[Sequence[Group], tuple[Group, ...]]] = []
    Checked(two_kinds(), Scripted(decide), tiny_workload({"jobs": 150}, seed=9), EngineOptions()).run()
    assert len(seen) > 50
    # A snapshot's queues never change afterwards, although the engine's queues moved on since.
    assert [(tuple(v.pending_groups()), tuple(v.running_groups())) for v in seen] == answers
    assert all(tuple(queue) == then for queue, then in ends)  # the lent by-end lists too
    assert sum(len(then) for _, then in ends) > 100
    assert isinstance(seen[0].pending_groups(), GroupQueue)


@pytest.mark.parametrize("nodes", [8, 100])  # a partition searched in Python, and one in numpy with remembered misses
def test_first_fit_answers_equal_a_scan_through_allocations_releases_and_repeated_misses(nodes: int) -> None:
    model = ModelCluster([PartitionShape("p", "cpu", (NodeShape(nodes, Resources(8, 64), "n"),))])
    rng = np.random.default_rng(3)
    held: list[tuple[int, tuple[int, ...]]] = []
    requests = [(c, m) for c in (1, 2, 4, 8) for m in (1, 16, 64)]
    for step in range(3000):
        vec = requests[int(rng.integers(len(requests)))]
        scan = [i for i in model.kind_nodes["cpu"]
                if all(c - a >= v for c, a, v in zip(model.capacity(i), model.nodes[i].allocated, vec, strict=True))]
        assert list(model.fitting("cpu", vec)) == scan
        if held and (not scan or rng.random() < 0.45):
            index, amount = held.pop(int(rng.integers(len(held))))
            model.release(index, amount, "g", float(step))
        elif scan:
            index = scan[int(rng.integers(min(len(scan), 3)))]
            model.allocate(index, vec, "g", float(step))
            held.append((index, vec))


def test_a_snapshot_read_only_after_its_call_still_answers_from_its_own_groups() -> None:
    kept: list[tuple[ClusterView, tuple[Group, ...], tuple[Group, ...]]] = []

    def blind(view: ClusterView, now: float) -> Sequence[Action]:
        # Decides on a scanning copy, so the engine's view never has its queues read during the call.
        fresh = ClusterView(now, dict(view.nodes), dict(view.partitions), dict(view.groups), dict(view.kinds))
        kept.append((view, tuple(fresh.pending_groups()), tuple(fresh.running_groups())))
        return fifo(fresh, now)

    Engine(two_kinds(), Scripted(blind), tiny_workload({"jobs": 120}, seed=4), EngineOptions()).run()
    assert len(kept) > 50
    assert all((tuple(v.pending_groups()), tuple(v.running_groups())) == (p, r) for v, p, r in kept)


def test_a_snapshot_kept_past_its_decision_is_frozen_as_it_was_though_its_policy_read_little() -> None:
    # The engine lends its live node and group maps and builds a changed entry only when it is read. A policy that
    # keeps the view (here: the harness) must still find every node and group as they were at its call, later.
    expected: list[tuple[ClusterView, dict[str, Node], dict[str, Group]]] = []

    class Recording(Engine):
        def _view(self, now: float) -> ClusterView:
            view = super()._view(now)
            groups = {gid: self._group_view(j) for gid, j in self._visible.items()}
            expected.append((view, self.cluster.rebuild_views(), groups))
            return view

    Recording(two_kinds(), FIFO, tiny_workload({"jobs": 150}, seed=11), EngineOptions()).run()
    assert len(expected) > 50
    for view, nodes, groups in expected:
        assert dict(view.nodes) == nodes
        assert dict(view.groups) == groups and list(view.groups) == list(groups)


def test_a_lent_snapshot_builds_stale_entries_when_read_and_never_changes_once_frozen() -> None:
    built: list[str] = []
    live = {"a": 1, "b": 2}
    stale = {"b"}

    def build(key: str) -> int:
        built.append(key)
        return 20

    lent = LentSnapshot(live, stale, build)
    assert lent.values_of(["a"]) == (1,) and built == []  # read whole: only the stale keys asked for are built
    assert lent["a"] == 1 and built == []
    assert lent["b"] == 20 and lent["b"] == 20 and built == ["b"]  # built once, cached in the owner's map
    assert live["b"] == 20 and not stale
    stale.add("a")
    assert "a" in lent and built == ["b"]  # membership builds nothing
    assert lent.values_of(["b", "a", "b"]) == (20, 20, 20) and built == ["b", "a"] and not stale
    stale.add("a")
    built.clear()
    lent.freeze()
    assert built == ["a"]
    live["c"] = 3
    live["a"] = 99
    assert dict(lent) == {"a": 20, "b": 20}


# ---- determinism and the command line ----------------------------------------------------------------------


CONFIG = """\
seed: {seed}
cluster:
  partitions:
    - {{name: cpu, nodes: 2, cpus: 4, mem: 4G}}
    - {{name: gpu, nodes: 1, cpus: 8, mem: 8G, gres: "gpu:2"}}
policy: {{name: fifo, params: {{backfill: true}}}}
workload: {{generator: "tests.sim.test_engine:tiny_workload", params: {{jobs: 150}}}}
mode: event
estimation_error: {{sigma: 0.2}}
report: {{util_bins: 20}}
"""


def test_the_same_config_gives_the_same_json_byte_for_byte(tmp_path: Path) -> None:
    config = parse_sim_config(__import__("yaml").safe_load(CONFIG.format(seed=3)))
    texts = []
    for _ in range(2):
        jobs = tiny_workload({"jobs": 150}, config.seed)
        result = run_config(config, jobs)
        texts.append(result_json(result_document(config, compute_metrics(result, config.report.util_bins))))
    assert texts[0] == texts[1]
    other = config.model_copy(update={"seed": 4})
    result = run_config(other, tiny_workload({"jobs": 150}, 4))
    assert result_json(result_document(other, compute_metrics(result, 20))) != texts[0]


def test_sim_run_prints_a_table_and_writes_identical_json_twice(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "configs" / "run.yaml"
    path.parent.mkdir()
    path.write_text(CONFIG.format(seed=11))
    runner = CliRunner()
    outputs = []
    for name in ("a.json", "b.json"):
        result = runner.invoke(sim_group, ["run", str(path), "--json", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        assert "slowdown all" in result.output and "utilisation cpu/cpus" in result.output
        outputs.append((tmp_path / name).read_bytes())
    assert outputs[0] == outputs[1]
    monkeypatch.chdir(tmp_path)
    default = runner.invoke(sim_group, ["run", str(path)])
    assert default.exit_code == 0 and (tmp_path / "run.result.json").read_bytes() == outputs[0]
    assert not (path.parent / "run.result.json").exists()  # never beside the config (examples/ stay untouched)


def test_sim_run_turns_a_simulation_failure_into_one_line(tmp_path: Path) -> None:
    path = tmp_path / "small.yaml"
    path.write_text(CONFIG.format(seed=1).replace("gres: \"gpu:2\"", "gres: \"accel:1\""))
    result = CliRunner().invoke(sim_group, ["run", str(path)])
    assert result.exit_code != 0
    assert "simulation failed: job j0 variant gpu: no node of this cluster has GRES gpu" in result.output


def test_sim_run_replays_a_trace_through_the_configured_loader(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("id,submit,duration,cpus\nx,0,10,2\ny,5,10,4\n")
    path = tmp_path / "t.yaml"
    path.write_text(CONFIG.format(seed=1).replace(
        'workload: {generator: "tests.sim.test_engine:tiny_workload", params: {jobs: 150}}',
        'workload: {trace: unused.csv, loader: "tests.sim.test_engine:csv_loader"}'))
    result = CliRunner().invoke(sim_group, ["run", str(path), "--trace", str(trace), "--json", "-"])
    assert result.exit_code == 0, result.output
    assert '"completed": 2' in result.output


def csv_loader(path: str, params: dict[str, Any], seed: int) -> list[SimJob]:
    rows = Path(path).read_text().splitlines()[1:]
    out = []
    for row in rows:
        jid, submit, duration, cpus = row.split(",")
        out.append(job(jid, float(submit), float(duration), cpus=int(cpus)))
    return out


def test_plots_are_written_when_matplotlib_is_there(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "run.yaml"
    path.write_text(CONFIG.format(seed=2))
    result = CliRunner().invoke(sim_group, ["run", str(path), "--plot", str(tmp_path / "plots"),
                                            "--json", str(tmp_path / "run.json")])
    assert result.exit_code == 0, result.output
    assert {p.name for p in (tmp_path / "plots").iterdir()} == {"jct_cdf.png", "utilisation.png"}


def test_a_plan_is_required() -> None:
    class NotAPlan:
        name = "broken"

        def schedule(self, view: ClusterView, now: float) -> Plan:
            return [Start("a", "cpu")]  # type: ignore[return-value]

    with pytest.raises(SimulationError, match=r"policy broken returned list, not a Plan"):
        run([job("a")], NotAPlan())


def test_slurms_start_latency_delays_the_work_not_the_node() -> None:
    """`start_latency_s` (what `slurmx fidelity` measures): the node is taken at the Start, the run begins later."""
    result = run([job("a", 0, 10, cpus=4), job("b", 1, 10, cpus=4)], make_policy("fifo"),
                 start_latency_s=2.0)
    a, b = record(result, "a"), record(result, "b")
    assert (a.first_start, a.finish) == (2.0, 12.0)
    assert (b.first_start, b.finish) == (14.0, 24.0)  # started at a's finish (12), running from 14
    assert a.exec_s == b.exec_s == 10.0
    with pytest.raises(ValueError, match="start_latency_s must be >= 0"):
        EngineOptions(start_latency_s=-1.0)


def test_a_victim_whose_hook_exits_on_the_signal_leaves_before_its_deadline() -> None:
    """`requeue_delay_s` (measured by `slurmx fidelity`): the victim is requeued that long after the signal, not
    at its grace deadline, and the view never shows it past the requeue."""
    plans = {0: [Start("a", "cpu")], 5: [Preempt("a", 30)], 7: [Start("a", "cpu")]}
    policy = Scripted(lambda view, now: plans.get(int(now), []))
    result = run([job("a", 0, 20, cpus=4, grace_s=30)], policy, mode="tick", period_s=1.0, requeue_delay_s=2.0,
                 call_when_idle=True)
    a = record(result, "a")
    assert a.preemptions == 1 and a.finish == 7 + 15  # requeued at 7 (not 35), restarted with its 15 s left
    with pytest.raises(ValueError, match="requeue_delay_s must be >= 0"):
        EngineOptions(requeue_delay_s=-1.0)


class _Undeclared:
    """Strict FIFO without its declaration: the engine asks it at every instant (the reference run)."""

    name = "fifo"

    def schedule(self, view: ClusterView, now: float) -> Plan:
        return FIFO.schedule(view, now)


@pytest.mark.parametrize(("seed", "profiling"), [(1, 0.0), (2, 0.0), (3, 0.3), (4, 0.5)])
def test_strict_fifo_not_asked_while_only_arrivals_come_runs_exactly_as_when_asked_every_time(
        seed: int, profiling: float) -> None:
    jobs = tiny_workload({"jobs": 400}, seed=seed)  # a queue forms on three nodes
    options = EngineOptions(profiling_fraction=profiling, profiling_fixed_s=profiling * 10)
    skipping = Engine(two_kinds(), FIFO, jobs, options).run()
    asked = Engine(two_kinds(), _Undeclared(), jobs, options).run()
    assert skipping.jobs == asked.jobs and compute_metrics(skipping)["jct"] == compute_metrics(asked)["jct"]
    assert asked.stats.policy_calls_skipped == 0
    assert skipping.stats.policy_calls_skipped > 50  # the instants it was not asked ...
    assert skipping.stats.policy_calls + skipping.stats.policy_calls_skipped == asked.stats.policy_calls  # ... all


class _Unbounded:
    """A backfilling FIFO without its window: the engine asks it at every instant (the reference run)."""

    name = "fifo"

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def schedule(self, view: ClusterView, now: float) -> Plan:
        return self.policy.schedule(view, now)


@pytest.mark.parametrize(("seed", "backfill", "sigma", "profiling"), [
    (1, "easy", None, 0.0), (2, "easy", 0.5, 0.0), (3, "easy", 0.8, 0.3), (4, "greedy", None, 0.0),
    (5, "easy", None, 0.5)])
def test_backfill_not_asked_while_arrivals_queue_past_its_window_runs_exactly_as_when_asked_every_time(
        seed: int, backfill: str, sigma: float | None, profiling: float) -> None:
    """With a window of three groups and a queue of dozens, most arrivals land past it. Estimate errors put jobs
    past their expected end (a reservation then moves with time: those instants are asked); jobs shown late
    after profiling may be older than the window's end (asked too)."""
    policy = make_policy("fifo", {"backfill": backfill, "backfill_depth": 2})
    assert queue_window(policy) == 3 and not waits_for_release(policy)
    jobs = tiny_workload({"jobs": 400}, seed=seed)
    options = EngineOptions(error_sigma=sigma, seed=seed, profiling_fraction=profiling,
                            profiling_fixed_s=profiling * 10)
    skipping = Engine(two_kinds(), policy, jobs, options).run()
    asked = Engine(two_kinds(), _Unbounded(policy), jobs, options).run()
    assert skipping.jobs == asked.jobs and compute_metrics(skipping)["jct"] == compute_metrics(asked)["jct"]
    assert asked.stats.policy_calls_skipped == 0
    assert skipping.stats.policy_calls_skipped > 20
    assert skipping.stats.policy_calls + skipping.stats.policy_calls_skipped == asked.stats.policy_calls


def test_a_run_collects_cycles_less_often_and_gives_the_settings_back_even_when_it_fails() -> None:
    import gc

    from slurmx.sim.collector import RUN_THRESHOLD

    before = gc.get_threshold()
    during: list[tuple[int, int, int]] = []

    def watch(view: ClusterView, now: float) -> Sequence[Action]:
        during.append(gc.get_threshold())
        return fifo(view, now)

    run([job("a"), job("b", submit=1.0)], Scripted(watch))
    assert during and all(t == (max(before[0], RUN_THRESHOLD), *before[1:]) for t in during)
    assert gc.get_threshold() == before

    def broken(view: ClusterView, now: float) -> Sequence[Action]:
        return [Start("nobody", "cpu", ("c001",), Resources(1, 1))]

    with pytest.raises(SimulationError):
        run([job("a")], Scripted(broken))
    assert gc.get_threshold() == before


def test_nested_runs_share_one_raise_and_the_last_one_out_restores_the_settings() -> None:
    import gc

    from slurmx.sim.collector import RUN_THRESHOLD, fewer_collections

    before = gc.get_threshold()
    raised = (max(before[0], RUN_THRESHOLD), *before[1:])
    with fewer_collections():
        with fewer_collections():
            assert gc.get_threshold() == raised
        assert gc.get_threshold() == raised  # the outer block still runs
    assert gc.get_threshold() == before


def test_a_sequence_runs_the_jobs_it_checked_even_if_the_callers_list_changes_afterwards() -> None:
    jobs = [job("j0"), job("j1", submit=1.0), job("j2", submit=2.0)]
    engine = Engine(cluster(), make_policy("fifo"), jobs, EngineOptions())
    jobs[2] = job("j0", submit=3.0)  # a repeated id, put in after the checks
    assert [r.job_id for r in engine.run().jobs] == ["j0", "j1", "j2"]


def test_reading_a_stale_key_whole_builds_it_as_reading_it_alone_does() -> None:
    assert LentSnapshot({}, {"a"}, str.upper)["a"] == "A"
    assert LentSnapshot({}, {"a"}, str.upper).values_of(["a"]) == ("A",)
