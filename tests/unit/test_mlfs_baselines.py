"""MLFS's baselines as registered policies (`mlfs-fairshare`, `slaq`, `tiresias`, `gandiva`) on small views:
start order, node choice and preemption, worked out by hand; and an engine run of each."""

from __future__ import annotations

import pytest

from slurmx.core.actions import Note, Plan, Preempt, Start
from slurmx.core.model import ClusterView, Group, JobClass, Node, Partition, Variant, VariantState
from slurmx.core.resources import Resources
from slurmx.core.validation import ConfigError
from slurmx.policies import available_policies, make_policy
from slurmx.policies.mlfs.baselines import FairShare, Gandiva, MlfsBaselineArgs, Slaq, Tiresias, TiresiasArgs
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape
from slurmx.sim.engine import Engine
from slurmx.sim.jobs import SimJob, SimVariant

NOW = 10_000.0
NAMES = ("mlfs-fairshare", "slaq", "tiresias", "gandiva")


def gpus(n: int) -> Resources:
    return Resources(n, n * 1024, {"gpu": n})


def node(name: str, allocated: int) -> Node:
    return Node(name, ("gpu",), gpus(4), gpus(allocated), "MIXED")


def pending(gid: str, submit: float, n: int, preemptions: int = 0) -> Group:
    variant = Variant(gid, "gpu", None, VariantState.HELD, gpus(n), "gpu", submit_time=submit)
    return Group(gid, gid, "u", JobClass.BE, (variant,), grace_s=30, submit_time=submit, preemptions=preemptions)


def running(gid: str, on: str, submit: float, n: int, started: float = NOW - 60.0,
            job_class: JobClass = JobClass.BE) -> Group:
    variant = Variant(gid, "gpu", 7, VariantState.RUNNING, gpus(n), "gpu", (on,), submit_time=submit,
                      start_time=started)
    return Group(gid, gid, "u", job_class, (variant,), grace_s=45, submit_time=submit)


def view(nodes: list[Node], groups: list[Group]) -> ClusterView:
    return ClusterView(NOW, {n.name: n for n in nodes}, {"gpu": Partition("gpu", tuple(n.name for n in nodes))},
                       {g.group_id: g for g in groups}, {"gpu": "gpu"})


def starts(plan: Plan) -> list[tuple[str, tuple[str, ...]]]:
    return [(a.group_id, a.nodes) for a in plan.of_type(Start)]


def preempts(plan: Plan) -> list[tuple[str, str | None]]:
    return [(a.group_id, a.beneficiary) for a in plan.of_type(Preempt)]


def test_the_four_baselines_are_registered_with_typed_args() -> None:
    assert set(NAMES) <= set(available_policies())
    assert isinstance(make_policy("mlfs-fairshare", {"resource": "cpus"}), FairShare)
    assert isinstance(make_policy("slaq"), Slaq)
    assert isinstance(make_policy("gandiva"), Gandiva)
    tiresias = make_policy("tiresias", {"queue_limits_s": [60, 600]})
    assert isinstance(tiresias, Tiresias) and tiresias.args.queue_limits_s == (60.0, 600.0)
    with pytest.raises(ConfigError, match="pack_threshold"):
        make_policy("gandiva", {"pack_threshold": 0.9})


def test_fair_share_gives_whole_shares_smallest_first_and_takes_back_the_loser() -> None:
    # 8 GPUs; demands big 4, mid 2, a 2, b 2, c 1 (submit order): max-min fair on whole groups gives c, mid, a, b
    # (7 GPUs) and nothing to big. In submit order a takes n2's 2 free GPUs; b and c wait; big goes back for b.
    groups = [running("big", "n1", 0.0, 4), running("mid", "n2", 10.0, 2), pending("a", 20.0, 2),
              pending("b", 30.0, 2), pending("c", 40.0, 1)]
    plan = FairShare().schedule(view([node("n1", 4), node("n2", 2)], groups), NOW)
    assert starts(plan) == [("a", ("n2",))]
    assert preempts(plan) == [("big", "b")]
    # with room for every winner nothing is taken back, whatever the shares say
    roomy = [running("big", "n1", 0.0, 4), pending("c", 40.0, 1)]
    plan = FairShare().schedule(view([node("n1", 4), node("n2", 0)], roomy), NOW)
    assert starts(plan) == [("c", ("n2",))] and not preempts(plan)


def test_slaq_without_loss_reports_fills_in_submit_order_and_preempts_a_later_group() -> None:
    # x (submit 1) and early (10) win the 8 GPUs; late (50) runs on n1 and loses its share to early
    groups = [running("late", "n1", 50.0, 4), running("x", "n2", 1.0, 4), pending("early", 10.0, 4)]
    plan = Slaq().schedule(view([node("n1", 4), node("n2", 4)], groups), NOW)
    assert not starts(plan)
    assert preempts(plan) == [("late", "early")]
    # a later group that does not fit waits; nothing running is taken back for it
    queue = [running("x", "n1", 1.0, 4), pending("p1", 5.0, 4), pending("p2", 6.0, 2)]
    plan = Slaq().schedule(view([node("n1", 4), node("n2", 0)], queue), NOW)
    assert starts(plan) == [("p1", ("n2",))] and not preempts(plan)


def test_tiresias_preempts_a_group_of_a_lower_queue_only() -> None:
    # long: 4 GPUs for 2 h = 8 GPU-h attained (queue 1); short: 4 GPUs for 60 s (queue 0); new: queue 0
    groups = [running("long", "n1", 0.0, 4, started=NOW - 7200.0), running("short", "n2", 5.0, 4),
              pending("new", 100.0, 4)]
    plan = Tiresias().schedule(view([node("n1", 4), node("n2", 4)], groups), NOW)
    assert preempts(plan) == [("long", "new")]
    # same queue: the earlier-submitted pending group wins the share, but a queue-0 group is not taken back
    same = [running("a", "n1", 100.0, 4), pending("b", 50.0, 4)]
    assert not preempts(Tiresias().schedule(view([node("n1", 4)], same), NOW))
    # nor is a TE group, whatever its queue
    te = [running("te", "n1", 0.0, 4, started=NOW - 7200.0, job_class=JobClass.TE), pending("new", 100.0, 4)]
    assert not preempts(Tiresias().schedule(view([node("n1", 4)], te), NOW))
    # Slurm forgets a requeued job's service: each preemption counts as one queue down
    order = [pending("again", 0.0, 4, preemptions=1), pending("fresh", 50.0, 4)]
    assert starts(Tiresias().schedule(view([node("n1", 0)], order), NOW)) == [("fresh", ("n1",))]
    limits = TiresiasArgs(queue_limits_s=(60.0,))
    assert starts(Tiresias(limits).schedule(view([node("n1", 0)], order), NOW)) == [("fresh", ("n1",))]


def test_gandiva_is_fifo_with_affinity_and_never_preempts() -> None:
    # n1 runs a 2-GPU group (2 free), n2 a 1-GPU group (3 free), n3 is empty. big (5 GPUs) fits no node and is
    # passed; g (2 GPUs) joins the 2-GPU group on n1 though n3 is emptier; h (3 GPUs) has no peer: the emptiest, n3
    groups = [running("two", "n1", 0.0, 2), running("one", "n2", 0.0, 1), pending("big", 1.0, 5),
              pending("g", 2.0, 2), pending("h", 3.0, 3)]
    plan = Gandiva().schedule(view([node("n1", 2), node("n2", 1), node("n3", 0)], groups), NOW)
    assert starts(plan) == [("g", ("n1",)), ("h", ("n3",))]
    assert not preempts(plan)
    assert plan.notes == (Note("no node fits it now", "big"),)


@pytest.mark.parametrize("name", NAMES)
def test_an_engine_run_completes_every_job_with_invariants_intact(name: str) -> None:
    cluster = ModelCluster([PartitionShape("cpu", "cpu", (NodeShape(2, Resources(4, 4096), "c"),))])
    jobs = [SimJob(f"j{i}", "u", 30.0 * i,
                   {"cpu": SimVariant("cpu", Resources(1 + i % 3, 1024), 200.0 + 97.0 * (i % 5))}, grace_s=20)
            for i in range(16)]
    result = Engine(cluster, make_policy(name, MlfsBaselineArgs(resource="cpus").model_dump()), jobs).run()
    assert sorted(r.job_id for r in result.jobs) == sorted(j.job_id for j in jobs)
    assert all(not r.cancelled and r.finish > (r.first_start or 0.0) for r in result.jobs)
    duration = {j.job_id: j.variants["cpu"].duration_s for j in jobs}
    assert all(r.exec_s == pytest.approx(duration[r.job_id]) for r in result.jobs)
