"""AlloX, AlloX+ and the paper's baselines as policies: worked examples end to end, fairness, plan shape.

`_replay` is a minimal event loop (exact estimates, no arrivals after t = 0 unless given, free preemption):
enough to check the paper's worked examples through the real `schedule(view, now)` interface. The digest's
exact answers: Table 1 under ES (intro variant) 181 total and makespan 75, under AlloX the true optimum 75;
JSQ+ 100 vs 45 min average; SJF+ 50 vs 20; Fig. 8's delay cost 11; the progress example 1/2 vs 1/8.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pytest

from slurmx.core.actions import Plan, Preempt, Start
from slurmx.core.model import ClusterView, Group, JobClass, Node, Partition, Variant, VariantState
from slurmx.core.resources import Resources
from slurmx.policies import available_policies, make_policy
from slurmx.policies.allox import (
    Allox,
    AlloxArgs,
    AlloxPlus,
    AlloxPlusArgs,
    Job,
    _cap_jobs,
    dominant_share,
    job_value,
    matching_instance,
    read_cluster,
    select_users,
    user_progress,
)
from slurmx.policies.allox_baselines import (
    Drfa,
    DrfaArgs,
    Drff,
    DrffArgs,
    Drfs,
    DrfsArgs,
    EqualShare,
    EqualShareArgs,
    JsqPlus,
    JsqPlusArgs,
    Sjf,
    SjfArgs,
    SjfPlus,
    SjfPlusArgs,
    Srpt,
    SrptArgs,
)
from slurmx.policies.base import Policy
from slurmx.policies.matching import solve

GPU_REQ = Resources(1, 2000, {"gpu": 1})
CPU_REQ = Resources(16, 4000)
REQUEST = {"gpu": GPU_REQ, "cpu": CPU_REQ}


@dataclass
class Spec:
    """A test job: its user, arrival and (true = estimated) time on each kind."""

    name: str
    user: str
    times: Mapping[str, float]
    submit: float = 0.0
    job_class: JobClass = JobClass.BE  # TE: a profiling sample (the authors'-simulator option samples_first)


@dataclass
class _Run:
    kind: str
    node: str
    start: float
    left: float  # fraction of the work left at `start`


def _nodes(gpu_nodes: int, gpus_per_node: int, cpu_nodes: int, gpu_mem: int = 64_000, cpu_mem: int = 64_000
           ) -> list[tuple[str, str, Resources]]:
    nodes = [(f"g{i + 1}", "gpu", Resources(8, gpu_mem, {"gpu": gpus_per_node})) for i in range(gpu_nodes)]
    return nodes + [(f"c{i + 1}", "cpu", Resources(16, cpu_mem)) for i in range(cpu_nodes)]


def _view(now: float, specs: list[Spec], running: dict[str, _Run], left: dict[str, float], done: set[str],
          nodes: list[tuple[str, str, Resources]]) -> ClusterView:
    used: dict[str, Resources] = {}
    groups = {}
    for spec in specs:
        if spec.name in done or spec.submit > now:
            continue
        run = running.get(spec.name)
        variants = []
        for kind, time in spec.times.items():
            where: tuple[str, ...] = ()
            if run is None:
                state, est, start = VariantState.PENDING, left[spec.name] * time, None
            elif run.kind == kind:
                state, est, start, where = VariantState.RUNNING, run.left * time, run.start, (run.node,)
                used[run.node] = used.get(run.node, Resources()) + REQUEST[kind]
            else:
                state, est, start = VariantState.PENDING, left[spec.name] * time, None
            variants.append(Variant(spec.name, kind, None, state, REQUEST[kind], kind, where, est,
                                    submit_time=spec.submit, start_time=start))
        groups[spec.name] = Group(spec.name, spec.name, spec.user, spec.job_class, tuple(variants),
                                  submit_time=spec.submit)
    node_map = {name: Node(name, (part,), cap, used.get(name, Resources()), "IDLE") for name, part, cap in nodes}
    parts = {p: Partition(p, tuple(n for n, q, _ in nodes if q == p), kind=p) for p in ("gpu", "cpu")}
    return ClusterView(now, node_map, parts, groups, {"cpu": "cpu", "gpu": "gpu"})


def _replay(policy: Policy, specs: list[Spec], nodes: list[tuple[str, str, Resources]]) -> dict[str, float]:
    """Completion time of every job when `policy` decides at every arrival and completion."""
    running: dict[str, _Run] = {}
    left = {s.name: 1.0 for s in specs}
    done: dict[str, float] = {}
    times = {s.name: s.times for s in specs}
    now = 0.0
    for _ in range(10 * len(specs) + 10):
        plan = policy.schedule(_view(now, specs, running, left, set(done), nodes), now)
        for action in plan.of_type(Preempt):
            run = running.pop(action.group_id)
            left[action.group_id] = run.left - (now - run.start) / times[action.group_id][run.kind]
        for start in plan.of_type(Start):
            assert start.group_id not in running and start.group_id not in done
            running[start.group_id] = _Run(start.kind, start.nodes[0], now, left[start.group_id])
        ends = {g: r.start + r.left * times[g][r.kind] for g, r in running.items()}
        arrivals = [s.submit for s in specs if s.submit > now]
        if not ends and not arrivals:
            assert len(done) == len(specs), f"stuck at t={now} with {sorted(set(left) - set(done))} waiting"
            return done
        now = min([*ends.values(), *arrivals])
        for g, end in ends.items():
            if end <= now + 1e-9:
                done[g] = end
                del running[g]
    raise AssertionError("did not finish")


def _specs(rows: Sequence[tuple[float, float]], users: list[str] | None = None) -> list[Spec]:
    return [Spec(f"J{i + 1}", (users or ["u"] * len(rows))[i], {"gpu": g, "cpu": c}) for i, (g, c) in enumerate(rows)]


TABLE_1 = [(10, 15), (8, 10), (10, 50), (5, 75), (10, 15), (10, 15)]  # (GPU, CPU) minutes
TABLE_1_USERS = ["u1", "u2", "u1", "u2", "u1", "u2"]
TWO_AND_TWO = _nodes(2, 1, 2)

ALL = Allox(AlloxArgs(alpha=1.0))


def test_table_1_es_gives_181_and_makespan_75_allox_gives_the_optimum_75() -> None:
    specs = _specs(TABLE_1, TABLE_1_USERS)
    es = _replay(EqualShare(EqualShareArgs(order="fcfs")), specs, TWO_AND_TWO)
    assert sum(es.values()) == 181 and max(es.values()) == 75
    allox = _replay(ALL, specs, TWO_AND_TWO)
    assert sum(allox.values()) == pytest.approx(75)
    assert pytest.approx(0.59, abs=0.005) == 1 - 75 / 181


def test_jsq_plus_example_100_minutes_against_allox_45() -> None:
    specs = _specs([(40, 50), (40, 50), (40, 160), (40, 160)])
    assert sum(_replay(JsqPlus(JsqPlusArgs()), specs, TWO_AND_TWO).values()) / 4 == 100
    assert sum(_replay(JsqPlus(JsqPlusArgs(join_busy=True)), specs, TWO_AND_TWO).values()) / 4 == 60
    assert sum(_replay(ALL, specs, TWO_AND_TWO).values()) / 4 == pytest.approx(45)


def test_sjf_plus_example_50_minutes_against_allox_20() -> None:
    specs = _specs([(10, 20), (10, 20), (20, 90), (20, 90)])
    assert sum(_replay(SjfPlus(SjfPlusArgs()), specs, TWO_AND_TWO).values()) / 4 == 50
    assert sum(_replay(ALL, specs, TWO_AND_TWO).values()) / 4 == pytest.approx(20)


def test_fig_8_cost_of_a_job_behind_a_busy_machine_is_11() -> None:
    # now T = 6; the GPU frees at ω = 10 (a job started at 2 for 8); the new job arrived at a = 4, p = 5
    specs = [Spec("old", "u", {"gpu": 8.0}), Spec("new", "u", {"gpu": 5.0}, submit=4.0)]
    view = _view(6.0, specs, {"old": _Run("gpu", "g1", 2.0, 1.0)}, {"old": 1.0, "new": 1.0}, set(), _nodes(1, 1, 0))
    cluster = read_cluster(view, 6.0)
    assert [m.ready_s for m in cluster.machines] == [4.0]
    assert solve(matching_instance(cluster, cluster.jobs, 6.0)).objective == pytest.approx(11)


def test_progress_example_value_half_on_gpu_eighth_on_cpu() -> None:
    # capacity 8 CPUs (whole nodes), 2 GPUs, 64 GB; CPU config (1 CPU, 4 GB, 20), GPU config (1 GPU, 2 GB, 5)
    nodes = [("g1", "gpu", Resources(8, 32_000, {"gpu": 2}))] + [
        (f"c{i}", "cpu", Resources(16, 4_000)) for i in range(8)
    ]
    specs = [Spec("a", "ann", {"gpu": 5.0, "cpu": 20.0}), Spec("b", "bob", {"gpu": 5.0, "cpu": 20.0})]
    running = {"a": _Run("gpu", "g1", 0.0, 1.0), "b": _Run("cpu", "c0", 0.0, 1.0)}
    view = _view(1.0, specs, running, {"a": 1.0, "b": 1.0}, set(), nodes)
    cluster = read_cluster(view, 1.0)
    share = dominant_share(Resources(1, 2000, {"gpu": 1}), "gpu", cluster)
    assert share == pytest.approx(1 / 2)  # max(1/2, 2/64)
    assert job_value(share, 5.0, 5.0) == pytest.approx(1 / 2)
    assert job_value(share, 5.0, 20.0) == pytest.approx(1 / 8)
    assert job_value(share, 5, 5) * 5 == job_value(share, 5, 20) * 20  # value x runtime is equal
    assert user_progress(view) == pytest.approx({"ann": 1 / 2, "bob": 1 / 8})


def _jobs(users: list[str]) -> list[Job]:
    groups = [Group(f"g{i}", "x", u, JobClass.BE, (), submit_time=float(i)) for i, u in enumerate(users)]
    return [Job(g, {"gpu": 1.0}) for g in groups]


def test_alpha_selects_the_lowest_progress_users() -> None:
    jobs = _jobs([f"u{i:02d}" for i in range(20)])
    progress = {f"u{i:02d}": float(20 - i) for i in range(20)}
    assert len(select_users(jobs, progress, 0.3, 20)) == 6
    assert select_users(jobs, progress, 0.3, 20) == {f"u{i}" for i in range(14, 20)}
    assert len(select_users(jobs, progress, 1.0, 20)) == 20
    assert len(select_users(jobs, progress, 0.0, 20)) == 1  # α = 0: strict fairness, one user
    assert select_users(_jobs(["b", "a"]), {}, 0.5, 2) == {"b"}  # tie: the user waiting longest


def test_n_max_takes_the_next_shortest_job_on_each_kind_in_turn() -> None:
    groups = [Group(f"g{i}", "x", "u", JobClass.BE, (), submit_time=float(i)) for i in range(6)]
    jobs = [Job(g, {"gpu": gt, "cpu": ct}) for g, (gt, ct) in zip(
        groups, [(1, 90), (2, 80), (3, 70), (4, 5), (5, 6), (6, 7)], strict=True)]
    chosen = _cap_jobs(jobs, 4, ("gpu", "cpu"))
    assert [j.group.group_id for j in chosen] == ["g0", "g1", "g3", "g4"]


def test_allox_starts_only_the_first_planned_job_of_idle_machines_on_the_gpus_node() -> None:
    specs = _specs([(1, 100), (1, 100), (1, 100)])
    view = _view(0.0, specs, {}, {s.name: 1.0 for s in specs}, set(), _nodes(1, 2, 1))
    plan = ALL.schedule(view, 0.0)
    assert [(a.kind, a.nodes, a.alloc) for a in plan.of_type(Start)] == [("gpu", ("g1",), GPU_REQ)] * 2
    assert not plan.of_type(Preempt)
    assert plan == ALL.schedule(view, 0.0)  # deterministic


def test_a_job_planned_on_a_busy_gpu_waits_although_a_cpu_is_idle() -> None:
    specs = [Spec("old", "u", {"gpu": 5.0}), Spec("new", "u", {"gpu": 1.0, "cpu": 100.0})]
    running = {"old": _Run("gpu", "g1", 0.0, 1.0)}
    view = _view(1.0, specs, running, {"old": 1.0, "new": 1.0}, set(), _nodes(1, 1, 1))
    plan = ALL.schedule(view, 1.0)
    assert not plan.actions and any("wait" in n.text for n in plan.notes)


def test_alpha_doubles_while_nothing_starts() -> None:
    # ann (no progress) is selected first, but her job waits for the busy GPU; bob's job fits the idle CPU
    specs = [Spec("old", "carl", {"gpu": 5.0}), Spec("a", "ann", {"gpu": 1.0, "cpu": 100.0}),
             Spec("b", "bob", {"cpu": 3.0}, submit=0.5)]
    running = {"old": _Run("gpu", "g1", 0.0, 1.0)}
    view = _view(1.0, specs, running, {s.name: 1.0 for s in specs}, set(), _nodes(1, 1, 1))
    widened = Allox(AlloxArgs(alpha=0.1)).schedule(view, 1.0)
    assert [a.group_id for a in widened.of_type(Start)] == ["b"]
    assert not Allox(AlloxArgs(alpha=0.1, widen_alpha=False)).schedule(view, 1.0).actions


def test_fairness_filter_serves_the_user_with_the_lowest_progress() -> None:
    specs = [Spec("r", "ann", {"gpu": 50.0}), Spec("a", "ann", {"gpu": 1.0}), Spec("b", "bob", {"gpu": 9.0})]
    running = {"r": _Run("gpu", "g1", 0.0, 1.0)}
    view = _view(1.0, specs, running, {s.name: 1.0 for s in specs}, set(), _nodes(1, 2, 0))
    fair = Allox(AlloxArgs(alpha=0.5, widen_alpha=False, starts_per_solve="all")).schedule(view, 1.0)
    assert [a.group_id for a in fair.of_type(Start)] == ["b"]  # ann already runs a job
    assert [a.group_id for a in ALL.schedule(view, 1.0).of_type(Start)] == ["a"]  # α = 1: shortest first


def test_allox_plus_prefers_timed_out_jobs_then_the_shortest_pair() -> None:
    specs = [Spec("long", "u", {"gpu": 30.0}, submit=0.0), Spec("short", "u", {"gpu": 2.0}, submit=590.0)]
    view = _view(600.0, specs, {}, {"long": 1.0, "short": 1.0}, set(), _nodes(1, 1, 0))
    plus = AlloxPlus(AlloxPlusArgs(alpha=1.0))
    assert [a.group_id for a in plus.schedule(view, 600.0).of_type(Start)] == ["long"]  # waited 600 >= 500
    early = _view(100.0, [Spec("long", "u", {"gpu": 30.0}), Spec("short", "u", {"gpu": 2.0}, submit=90.0)],
                  {}, {"long": 1.0, "short": 1.0}, set(), _nodes(1, 1, 0))
    assert [a.group_id for a in plus.schedule(early, 100.0).of_type(Start)] == ["short"]


def test_allox_plus_is_a_heuristic_and_falls_into_the_sjf_plus_trap() -> None:
    specs = _specs([(10, 20), (10, 20), (20, 90), (20, 90)])
    plus = _replay(AlloxPlus(AlloxPlusArgs(alpha=1.0)), specs, TWO_AND_TWO)
    assert sum(plus.values()) == 200  # a shortest-pair heuristic falls into the same trap as SJF+


def test_drff_blocks_behind_the_head_job_and_uses_the_gpu_variant() -> None:
    specs = [Spec("a1", "ann", {"gpu": 10.0, "cpu": 12.0}), Spec("a2", "ann", {"gpu": 10.0, "cpu": 12.0}),
             Spec("b1", "bob", {"cpu": 12.0, "gpu": 10.0}, submit=0.1)]  # bob lists the CPU first
    view = _view(1.0, specs, {}, {s.name: 1.0 for s in specs}, set(), _nodes(1, 1, 2))
    plan = Drff(DrffArgs()).schedule(view, 1.0)
    assert [(a.group_id, a.kind) for a in plan.of_type(Start)] == [("a1", "gpu")]  # then bob's GPU is busy: stop
    first = Drff(DrffArgs(config="first")).schedule(view, 1.0)
    assert [(a.group_id, a.kind) for a in first.of_type(Start)] == [("a1", "gpu"), ("b1", "cpu")]


def test_drfs_takes_each_users_shortest_job_on_its_faster_kind() -> None:
    specs = [Spec("a1", "ann", {"gpu": 50.0, "cpu": 60.0}), Spec("a2", "ann", {"gpu": 30.0, "cpu": 3.0}),
             Spec("b1", "bob", {"gpu": 2.0, "cpu": 40.0})]
    view = _view(0.0, specs, {}, {s.name: 1.0 for s in specs}, set(), _nodes(1, 1, 1))
    plan = Drfs(DrfsArgs()).schedule(view, 0.0)
    assert sorted((a.group_id, a.kind) for a in plan.of_type(Start)) == [("a2", "cpu"), ("b1", "gpu")]


def test_drfa_converts_gpus_with_the_average_speedup() -> None:
    specs = [Spec("a1", "ann", {"gpu": 1.0, "cpu": 10.0}), Spec("a2", "ann", {"gpu": 1.0, "cpu": 10.0}),
             Spec("b1", "bob", {"gpu": 5.0, "cpu": 50.0}, submit=0.1)]
    view = _view(1.0, specs, {}, {s.name: 1.0 for s in specs}, set(), _nodes(1, 1, 3))
    plan = Drfa(DrfaArgs()).schedule(view, 1.0)
    # ann takes the GPU (worth 10 CPUs of 13: share 10/13); bob then the least share: a CPU; ann's next: a CPU
    assert [(a.group_id, a.kind) for a in plan.of_type(Start)] == [("a1", "gpu"), ("b1", "cpu"), ("a2", "cpu")]


def test_es_splits_each_kind_statically_and_picks_the_shortest_on_it() -> None:
    specs = [Spec("a1", "ann", {"gpu": 9.0, "cpu": 10.0}), Spec("a2", "ann", {"gpu": 1.0, "cpu": 30.0}),
             Spec("a3", "ann", {"gpu": 1.0, "cpu": 30.0}), Spec("b1", "bob", {"gpu": 4.0, "cpu": 5.0})]
    view = _view(0.0, specs, {}, {s.name: 1.0 for s in specs}, set(), _nodes(1, 2, 2))
    plan = EqualShare(EqualShareArgs()).schedule(view, 0.0)
    # one GPU and one CPU node each; GPUs first: ann's shortest on GPU (a2), bob's (b1); then ann's on CPU
    assert sorted((a.group_id, a.kind) for a in plan.of_type(Start)) == [("a1", "cpu"), ("a2", "gpu"), ("b1", "gpu")]


def test_es_with_a_static_user_list_leaves_an_absent_users_share_idle() -> None:
    specs = [Spec("a1", "ann", {"gpu": 1.0}), Spec("a2", "ann", {"gpu": 2.0})]
    view = _view(0.0, specs, {}, {"a1": 1.0, "a2": 1.0}, set(), _nodes(1, 2, 0))
    in_view = EqualShare(EqualShareArgs()).schedule(view, 0.0)
    assert [a.group_id for a in in_view.of_type(Start)] == ["a1", "a2"]  # bob is not in the view: ann gets both
    static = EqualShare(EqualShareArgs(users=("ann", "bob"))).schedule(view, 0.0)
    assert [a.group_id for a in static.of_type(Start)] == ["a1"]  # the paper's static split: bob's GPU idles


def test_online_es_gives_each_free_machine_to_the_user_holding_fewest_and_fills_every_kind() -> None:
    specs = [Spec("a1", "ann", {"gpu": 9.0, "cpu": 10.0}), Spec("a2", "ann", {"gpu": 1.0, "cpu": 30.0}),
             Spec("a3", "ann", {"gpu": 2.0, "cpu": 40.0}), Spec("b1", "bob", {"gpu": 4.0, "cpu": 5.0})]
    view = _view(0.0, specs, {}, {s.name: 1.0 for s in specs}, set(), _nodes(1, 2, 2))
    plan = EqualShare(EqualShareArgs(split="online")).schedule(view, 0.0)
    # GPUs: ann (0 held, first by name) takes her GPU-shortest a2, then bob (0) b1; CPUs: ann's CPU-shortest
    # a1, then ann again (bob has nothing left) a3, which a static split would have left waiting
    assert [(a.group_id, a.kind) for a in plan.of_type(Start)] == [
        ("a2", "gpu"), ("b1", "gpu"), ("a1", "cpu"), ("a3", "cpu")]


def test_srpt_preempts_for_shorter_remaining_work_and_migrates_for_free() -> None:
    specs = [Spec("long", "u", {"gpu": 100.0, "cpu": 400.0}), Spec("short", "v", {"gpu": 5.0, "cpu": 50.0}, 10.0)]
    done = _replay(Srpt(SrptArgs()), specs, _nodes(1, 1, 1))
    # at 10 the long job (90 GPU-s left, i.e. 360 CPU-s) yields the GPU and moves to the CPU; at 15 the GPU
    # is free and 88.75 GPU-s are left (5 of the 360 CPU-s were done): it moves back and ends at 103.75
    assert done["short"] == pytest.approx(15.0)
    assert done["long"] == pytest.approx(15.0 + 90.0 * (1 - 5.0 / 360.0))


def test_sjf_runs_the_shortest_best_case_job_first_on_its_fastest_kind() -> None:
    specs = [Spec("a", "u", {"gpu": 9.0, "cpu": 10.0}), Spec("b", "u", {"gpu": 1.0, "cpu": 30.0})]
    view = _view(0.0, specs, {}, {"a": 1.0, "b": 1.0}, set(), _nodes(1, 1, 1))
    assert [(a.group_id, a.kind) for a in Sjf(SjfArgs()).schedule(view, 0.0).of_type(Start)] == [
        ("b", "gpu"), ("a", "cpu")]


def test_every_policy_is_registered_and_rejects_unknown_keys() -> None:
    names = {"allox", "allox_plus", "es", "drff", "drfs", "drfa", "srpt", "sjf", "sjf_plus", "jsq_plus"}
    assert names <= set(available_policies())
    policy = make_policy("allox", {"alpha": 0.2, "n_max": 50})
    assert isinstance(policy, Allox) and policy.args.alpha == 0.2
    with pytest.raises(Exception, match="alpah"):
        make_policy("allox", {"alpah": 0.2})


def test_policies_never_raise_on_an_empty_or_estimate_free_view() -> None:
    empty = _view(0.0, [], {}, {}, set(), TWO_AND_TWO)
    unestimated = _view(0.0, [Spec("a", "u", {"gpu": math.nan})], {}, {"a": 1.0}, set(), TWO_AND_TWO)
    for name in ("allox", "allox_plus", "es", "drff", "drfs", "drfa", "srpt", "sjf", "sjf_plus", "jsq_plus"):
        policy = make_policy(name, {})
        assert isinstance(policy.schedule(empty, 0.0), Plan)
        assert isinstance(policy.schedule(unestimated, 0.0), Plan)
