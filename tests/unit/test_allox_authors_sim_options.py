"""The AlloX baselines' options that follow the authors' simulator (IRFsim): off by default, each a named
behaviour of their code (docs/policies/allox.md, "Beside the authors' simulator")."""

from __future__ import annotations

import pytest

from slurmx.core.actions import Start
from slurmx.core.model import JobClass
from slurmx.policies.allox import Allox, AlloxArgs, select_users, user_progress
from slurmx.policies.allox_baselines import (
    Drfa,
    DrfaArgs,
    Drff,
    DrffArgs,
    Drfs,
    DrfsArgs,
    EqualShare,
    EqualShareArgs,
)
from slurmx.policies.base import Policy
from tests.unit.test_allox import Spec, _jobs, _nodes, _Run, _view


def _starts(policy: Policy, view_args: tuple[float, list[Spec], dict[str, _Run]], cpu_nodes: int,
            gpus: int) -> list[tuple[str, str]]:
    now, specs, running = view_args
    left = {s.name: 1.0 for s in specs}
    view = _view(now, specs, running, left, set(), _nodes(1, gpus, cpu_nodes))
    return [(a.group_id, a.kind) for a in policy.schedule(view, now).of_type(Start)]


def test_es_a_user_holding_a_cpu_node_gets_no_gpu_pass_and_fills_her_gpus_in_cpu_time_order() -> None:
    # 2 GPUs and 4 CPU nodes: ann and bob 1 GPU + 2 CPU nodes each; ann already runs a0 on a CPU node
    specs = [Spec("a0", "ann", {"cpu": 100.0}), Spec("a1", "ann", {"gpu": 1.0, "cpu": 30.0}),
             Spec("a2", "ann", {"gpu": 2.0, "cpu": 5.0}), Spec("b1", "bob", {"gpu": 4.0, "cpu": 50.0})]
    state = (1.0, specs, {"a0": _Run("cpu", "c1", 0.0, 1.0)})
    default = _starts(EqualShare(EqualShareArgs()), state, 4, 2)
    assert sorted(default) == [("a1", "gpu"), ("a2", "cpu"), ("b1", "gpu")]  # a1 is ann's GPU-shortest
    blocked = _starts(EqualShare(EqualShareArgs(base_blocks_accelerators=True)), state, 4, 2)
    # ann's CPU pass, CPU-shortest first: a2 (5) takes her GPU, a1 (30) her second CPU node; bob holds no CPU
    assert sorted(blocked) == [("a1", "cpu"), ("a2", "gpu"), ("b1", "gpu")]


def test_es_without_cpu_use_the_option_changes_nothing() -> None:
    specs = [Spec("a1", "ann", {"gpu": 9.0, "cpu": 10.0}), Spec("a2", "ann", {"gpu": 1.0, "cpu": 30.0}),
             Spec("b1", "bob", {"gpu": 4.0, "cpu": 5.0})]
    state = (0.0, specs, {})
    assert sorted(_starts(EqualShare(EqualShareArgs(base_blocks_accelerators=True)), state, 2, 2)) == \
        sorted(_starts(EqualShare(EqualShareArgs()), state, 2, 2))


@pytest.mark.parametrize(("default", "by_name"), [
    (Drff(DrffArgs()), Drff(DrffArgs(ties="by_name"))),
    (Drfs(DrfsArgs()), Drfs(DrfsArgs(ties="by_name"))),
    (Drfa(DrfaArgs()), Drfa(DrfaArgs(ties="by_name"))),
], ids=["drff", "drfs", "drfa"])
def test_drf_ties_go_to_the_earliest_waiting_user_or_with_by_name_to_the_first_name(default: Policy,
                                                                                     by_name: Policy) -> None:
    # one GPU, one CPU node; both users hold nothing (equal shares) and favour the GPU; bob waited longer
    specs = [Spec("b1", "bob", {"gpu": 1.0, "cpu": 50.0}), Spec("a1", "ann", {"gpu": 1.0, "cpu": 50.0}, submit=0.5)]
    state = (1.0, specs, {})
    assert _starts(default, state, 1, 1)[0] == ("b1", "gpu")
    assert _starts(by_name, state, 1, 1)[0] == ("a1", "gpu")


def test_allox_progress_ties_go_to_the_longest_waiting_user_or_with_by_name_to_the_first_name() -> None:
    jobs = _jobs(["b", "a"])  # b's job arrived first
    assert select_users(jobs, {}, 0.5, 2) == {"b"}
    assert select_users(jobs, {}, 0.5, 2, "by_name") == {"a"}
    assert select_users(jobs, {"a": 0.2}, 0.5, 2, "by_name") == {"b"}  # progress still comes first


def test_es_over_share_a_user_holding_more_than_her_share_of_a_kind_gets_no_cpu_pass_either() -> None:
    # 2 GPUs and 2 CPU nodes, ann and bob: 1 of each kind per user. ann holds both CPU nodes (over her
    # share, as profiling samples put a user); her job a1 could take her free GPU in the CPU pass
    specs = [Spec("r1", "ann", {"cpu": 100.0}), Spec("r2", "ann", {"cpu": 100.0}),
             Spec("a1", "ann", {"gpu": 9.0, "cpu": 5.0}), Spec("b1", "bob", {"gpu": 4.0, "cpu": 50.0})]
    state = (1.0, specs, {"r1": _Run("cpu", "c1", 0.0, 1.0), "r2": _Run("cpu", "c2", 0.0, 1.0)})
    assert sorted(_starts(EqualShare(EqualShareArgs(base_blocks_accelerators=True)), state, 2, 2)) == \
        [("a1", "gpu"), ("b1", "gpu")]
    over = EqualShare(EqualShareArgs(base_blocks_accelerators=True, over_share_blocks=True))
    assert _starts(over, state, 2, 2) == [("b1", "gpu")]


def test_allox_first_start_base_kind_starts_the_cpu_node_s_planned_job_before_a_shorter_gpu_one() -> None:
    # one GPU, one CPU node, both idle: g is planned on the GPU (1 unit), c on the CPU node (2 units)
    specs = [Spec("g", "ann", {"gpu": 1.0, "cpu": 100.0}), Spec("c", "ann", {"gpu": 100.0, "cpu": 2.0})]
    state = (0.0, specs, {})
    assert _starts(Allox(AlloxArgs(alpha=1.0)), state, 1, 1) == [("g", "gpu"), ("c", "cpu")]
    assert _starts(Allox(AlloxArgs(alpha=1.0, first_start="base_kind")), state, 1, 1) == [("c", "cpu"), ("g", "gpu")]


def test_allox_sample_machines_free_plans_a_gpu_held_by_a_sample_as_free_now() -> None:
    # the only GPU runs ann's sample s for 10 more units; j takes 1 unit on a GPU, 5 on the idle CPU node.
    # Ours sees the GPU free in 10 (11 > 5): j starts on the CPU node. Theirs plans the GPU as free now
    # (1 < 5) and j waits for it: AlloX is not work-conserving
    specs = [Spec("s", "ann", {"gpu": 10.0}, job_class=JobClass.TE), Spec("j", "ann", {"gpu": 1.0, "cpu": 5.0})]
    state = (0.0, specs, {"s": _Run("gpu", "g1", 0.0, 1.0)})
    assert _starts(Allox(AlloxArgs(alpha=1.0)), state, 1, 1) == [("j", "cpu")]
    assert _starts(Allox(AlloxArgs(alpha=1.0, sample_machines_free=True)), state, 1, 1) == []
    # a machine running an ordinary job keeps its end time
    plain = [Spec("s", "ann", {"gpu": 10.0}), specs[1]]
    assert _starts(Allox(AlloxArgs(alpha=1.0, sample_machines_free=True)), (0.0, plain, state[2]), 1, 1) == \
        [("j", "cpu")]


def test_allox_omega_planned_books_a_started_machine_until_all_its_planned_jobs_end() -> None:
    # one GPU, one CPU node, both idle; the solve plans a (1 unit) then b (2) on the GPU. a starts; re-solved,
    # b on the GPU ends at 1 + 2 = 3 < 4 on the CPU node: b waits. Booked busy until 1 + 2 = 3, the GPU ends
    # b at 5 > 4: b starts on the CPU node
    specs = [Spec("a", "ann", {"gpu": 1.0, "cpu": 100.0}), Spec("b", "ann", {"gpu": 2.0, "cpu": 4.0})]
    state = (0.0, specs, {})
    assert _starts(Allox(AlloxArgs(alpha=1.0)), state, 1, 1) == [("a", "gpu")]
    assert _starts(Allox(AlloxArgs(alpha=1.0, omega_planned=True)), state, 1, 1) == [("a", "gpu"), ("b", "cpu")]


def test_allox_with_samples_first_a_running_sample_leaves_its_owner_s_progress_alone() -> None:
    specs = [Spec("s", "ann", {"gpu": 10.0}, job_class=JobClass.TE), Spec("j", "bob", {"gpu": 1.0, "cpu": 5.0}),
             Spec("k", "ann", {"gpu": 1.0, "cpu": 5.0})]
    running = {"s": _Run("gpu", "g1", 0.0, 1.0)}
    view = _view(0.0, specs, running, {x.name: 1.0 for x in specs}, set(), _nodes(2, 1, 1))
    assert user_progress(view)["ann"] > 0.0
    assert user_progress(view, samples=False) == {"ann": 0.0, "bob": 0.0}


def test_es_share_picks_kind_a_job_whose_accelerator_share_has_room_waits_for_a_free_accelerator() -> None:
    # 2 GPUs and 2 CPU nodes, ann and bob: 1 of each kind per user; bob holds both GPUs. ann's a1 has room in
    # her GPU share but no GPU is free: by default it takes a CPU node; their ES picks the GPU and waits
    specs = [Spec("r1", "bob", {"gpu": 100.0}), Spec("r2", "bob", {"gpu": 100.0}),
             Spec("a1", "ann", {"gpu": 9.0, "cpu": 5.0})]
    state = (1.0, specs, {"r1": _Run("gpu", "g1", 0.0, 1.0), "r2": _Run("gpu", "g1", 0.0, 1.0)})
    blocked = EqualShareArgs(base_blocks_accelerators=True)
    assert _starts(EqualShare(blocked), state, 2, 2) == [("a1", "cpu")]
    assert _starts(EqualShare(blocked.model_copy(update={"share_picks_kind": True})), state, 2, 2) == []
