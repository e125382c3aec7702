"""MLF-H as a daemon policy (`mlfs`): P order on a hand-built view, host choice, group preemption, a simulator run.

Expected priorities by hand with the paper's weights (α 0.3, γ_r 0.3, γ_w 0.35) and max-normalised terms: a
group's ML term is 1 (L = 1, I = 1, one stage), its deadline term 0, so P = 0.3 + 0.7·(0.3·r_min/r + 0.35·w/w_max).
"""

from __future__ import annotations

import pytest

from slurmx.core.actions import Plan, Preempt, Start
from slurmx.core.model import ClusterView, Group, JobClass, Node, Partition, Variant, VariantState
from slurmx.core.resources import Resources
from slurmx.core.validation import ConfigError
from slurmx.policies import make_policy
from slurmx.policies.mlfs import MlfsSlurm, MlfsSlurmArgs, rank_groups
from slurmx.policies.mlfs.rules import MlfsArgs
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape
from slurmx.sim.engine import Engine
from slurmx.sim.jobs import SimJob, SimVariant

NOW = 1000.0
GB = 1024


def cpus(n: int) -> Resources:
    return Resources(n, n * GB)


def node(name: str, allocated: int, size: int = 4) -> Node:
    return Node(name, ("cpu",), cpus(size), cpus(allocated), "MIXED")


def pending(gid: str, submit: float, estimate: float, n: int = 1, job_class: JobClass = JobClass.BE) -> Group:
    variant = Variant(gid, "cpu", None, VariantState.HELD, cpus(n), "cpu", estimate_s=estimate, submit_time=submit)
    return Group(gid, gid, "u", job_class, (variant,), grace_s=30, submit_time=submit)


def running(gid: str, on: str, estimate: float, n: int = 1, job_class: JobClass = JobClass.BE,
            grace_deadline: float | None = None) -> Group:
    variant = Variant(gid, "cpu", 7, VariantState.RUNNING, cpus(n), "cpu", (on,), estimate_s=estimate,
                      submit_time=0.0, start_time=0.0)
    return Group(gid, gid, "u", job_class, (variant,), grace_s=45, submit_time=0.0, grace_deadline=grace_deadline)


def view(nodes: list[Node], groups: list[Group]) -> ClusterView:
    return ClusterView(NOW, {n.name: n for n in nodes}, {"cpu": Partition("cpu", tuple(n.name for n in nodes))},
                       {g.group_id: g for g in groups}, {"cpu": "cpu"})


# a: w 1000, r 600; b: w 500, r 100; c: w 100, r 300  ->  r_min 100, w_max 1000
ABC = [pending("a", 0.0, 600.0), pending("b", 500.0, 100.0), pending("c", 900.0, 300.0)]


def test_priorities_are_mlf_h_terms_with_neutral_slurm_values() -> None:
    ranked = rank_groups(ABC, view([node("n1", 0)], ABC), NOW, MlfsSlurmArgs())
    assert [r.group.group_id for r in ranked] == ["b", "a", "c"]  # neither FIFO (a b c) nor SJF (b c a)
    assert [r.priority for r in ranked] == pytest.approx([0.6325, 0.58, 0.3945])


def test_a_group_without_estimate_ranks_as_one_of_unknown_estimate_s() -> None:
    groups = [pending("a", 0.0, 600.0), pending("n", 0.0, float("nan")), pending("m", 0.0, 600.0)]
    groups[2] = Group("m", "m", "u", JobClass.BE, (Variant("m", "cpu", None, VariantState.HELD, cpus(1), "cpu"),))
    args = MlfsSlurmArgs(unknown_estimate_s=600.0)
    ranked = rank_groups(groups, view([node("n1", 0)], groups), NOW, args)
    assert [r.priority for r in ranked] == pytest.approx([0.3 + 0.7 * (0.3 + 0.35)] * 3)


def test_priority_defaults_are_the_papers_as_in_mlfs_args() -> None:
    ours, theirs = MlfsSlurmArgs(), MlfsArgs()
    for key in ("alpha", "gamma", "gamma_d", "gamma_r", "gamma_w", "time_unit_s", "inverse_cap", "normalize"):
        assert getattr(ours, key) == getattr(theirs, key), key
    assert isinstance(make_policy("mlfs", {"alpha": 0.5}), MlfsSlurm)
    with pytest.raises(ConfigError, match="placement"):
        make_policy("mlfs", {"placement": "best"})


def test_starts_in_priority_order_and_skips_what_does_not_fit() -> None:
    groups = [*ABC[:2], pending("c", 900.0, 300.0, n=3)]
    plan = MlfsSlurm().schedule(view([node("n1", 0)], groups), NOW)  # 4 cpus: b (1), a (1); c (3) waits
    assert [(a.group_id, a.nodes) for a in plan.of_type(Start)] == [("b", ("n1",)), ("a", ("n1",))]
    assert not plan.of_type(Preempt)  # nothing runs, so nothing to take back


def test_ideal_host_picks_the_least_allocated_node_and_first_fit_the_first() -> None:
    nodes = [node("n1", 2), node("n2", 0), node("n3", 1)]
    group = [pending("g", 0.0, 60.0)]
    assert MlfsSlurm().schedule(view(nodes, group), NOW).of_type(Start)[0].nodes == ("n2",)
    first_fit = MlfsSlurm(MlfsSlurmArgs(placement="first_fit"))
    assert first_fit.schedule(view(nodes, group), NOW).of_type(Start)[0].nodes == ("n1",)
    # within one call, what was placed counts: g1 to n2 (empty); then n2 and n3 tie at 1 of 4, the first wins
    two = [pending("g1", 0.0, 60.0, n=1), pending("g2", 1.0, 60.0, n=1)]
    starts = MlfsSlurm().schedule(view(nodes, two), NOW).of_type(Start)
    assert [(a.group_id, a.nodes) for a in starts] == [("g1", ("n2",)), ("g2", ("n2",))]


# r1: P 0.3 + 0.7·0.3·100/4000 = 0.30525; r2: r 200 -> 0.405; p: r 100, w 900 (max) -> 0.755
def preemption_view(free_cpus: int = 0) -> ClusterView:
    groups = [running("r1", "n1", 5000.0, n=2), running("r2", "n1", 1200.0, n=2), pending("p", 100.0, 100.0, n=2)]
    nodes = [node("n1", 4)] + ([node("n2", 4 - free_cpus)] if free_cpus else [])
    return view(nodes, groups)


def preempts(plan: Plan) -> list[tuple[str, int, str | None]]:
    return [(a.group_id, a.grace_s, a.beneficiary) for a in plan.of_type(Preempt)]


def test_preempts_exactly_the_lowest_priority_be_group_for_the_one_that_does_not_fit() -> None:
    plan = MlfsSlurm().schedule(preemption_view(), NOW)
    assert preempts(plan) == [("r1", 45, "p")]
    assert plan.of_type(Preempt)[0].reason == "mlf-h P=0.3052 < P=0.7550 of p"
    assert not plan.of_type(Start)  # p starts once r1 has left (the daemon's grace protocol)


def test_nothing_is_preempted_when_the_group_fits() -> None:
    plan = MlfsSlurm().schedule(preemption_view(free_cpus=2), NOW)
    assert [(a.group_id, a.nodes) for a in plan.of_type(Start)] == [("p", ("n2",))]
    assert not plan.of_type(Preempt)


def test_victims_on_other_nodes_are_put_back_and_te_in_grace_and_off_are_spared() -> None:
    # r1 (lowest P) alone on n1 with a TE group cannot make room for 3 cpus; r2 on n2 can: only r2 goes
    groups = [running("r1", "n1", 5000.0, n=1), running("te", "n1", 5000.0, n=3, job_class=JobClass.TE),
              running("r2", "n2", 4000.0, n=4), pending("p", 100.0, 100.0, n=3)]
    assert preempts(MlfsSlurm().schedule(view([node("n1", 4), node("n2", 4)], groups), NOW)) == [("r2", 45, "p")]
    # a victim already in its grace period is not preempted again, nor is a TE group
    graced = [running("r1", "n1", 5000.0, n=4, grace_deadline=NOW + 10), pending("p", 100.0, 100.0, n=3)]
    assert not MlfsSlurm().schedule(view([node("n1", 4)], graced), NOW).of_type(Preempt)
    te_only = [running("te", "n1", 5000.0, n=4, job_class=JobClass.TE), pending("p", 100.0, 100.0, n=3)]
    assert not MlfsSlurm().schedule(view([node("n1", 4)], te_only), NOW).of_type(Preempt)
    assert not MlfsSlurm(MlfsSlurmArgs(preempt=False)).schedule(preemption_view(), NOW).of_type(Preempt)


def test_a_simulator_run_completes_every_job_with_invariants_intact() -> None:
    cluster = ModelCluster([PartitionShape("cpu", "cpu", (NodeShape(2, cpus(4), "c"),))])
    jobs = [SimJob(f"j{i}", "u", 30.0 * i, {"cpu": SimVariant("cpu", cpus(1 + i % 3), 200.0 + 97.0 * (i % 5))},
                   grace_s=20) for i in range(16)]
    result = Engine(cluster, MlfsSlurm(), jobs).run()  # raises SimulationInvariantError on a broken rule
    assert sorted(r.job_id for r in result.jobs) == sorted(j.job_id for j in jobs)
    assert all(not r.cancelled and r.first_start is not None and r.finish > r.first_start for r in result.jobs)
    # every job did its work exactly once: productive time equals its duration
    duration = {j.job_id: j.variants["cpu"].duration_s for j in jobs}
    assert all(r.exec_s == pytest.approx(duration[r.job_id]) for r in result.jobs)
    # preemptions happened (lower-P groups made room) and each one was a Preempt the policy returned
    assert sum(r.preemptions for r in result.jobs) == result.stats.actions["Preempt"] > 0
    assert result.stats.actions["Start"] == len(jobs) + result.stats.actions["Preempt"]
