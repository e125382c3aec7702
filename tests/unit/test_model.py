"""Domain model and actions: state mapping, derived group state, read-only views, action ids."""

from __future__ import annotations

import dataclasses

import pytest

from slurmx.core.actions import Cancel, Hold, Note, Plan, Preempt, Release, Resize, SetPriority, Start
from slurmx.core.model import (
    ClusterView,
    Group,
    GroupState,
    JobClass,
    Node,
    Partition,
    Variant,
    VariantState,
)
from slurmx.core.resources import Resources

VS = VariantState


@pytest.mark.parametrize(
    ("slurm", "state"),
    [
        ("PENDING", VS.PENDING),
        ("RUNNING", VS.RUNNING),
        ("COMPLETED", VS.COMPLETED),
        ("CANCELLED by 0", VS.CANCELLED),
        ("CANCELLED+", VS.CANCELLED),
        ("OUT_OF_MEMORY", VS.OUT_OF_MEMORY),
        ("REQUEUED", VS.REQUEUED),
        ("REQUEUE_HOLD", VS.HELD),
        ("SUSPENDED", VS.SUSPENDED),
        ("TIMEOUT", VS.TIMEOUT),
        ("NODE_FAIL", VS.NODE_FAIL),
        ("PREEMPTED", VS.PREEMPTED),
        ("FAILED", VS.FAILED),
        ("COMPLETING", VS.COMPLETING),
        ("CONFIGURING", VS.RUNNING),
        ("running", VS.RUNNING),
        ("  PD ", VS.PENDING),
        ("R", VS.RUNNING),
        ("CG", VS.COMPLETING),
        ("OOM", VS.OUT_OF_MEMORY),
        ("SOMETHING_NEW", VS.UNKNOWN),
        ("", VS.UNKNOWN),
    ],
)
def test_variant_state_from_slurm(slurm: str, state: VariantState) -> None:
    assert VariantState.from_slurm(slurm) is state


def test_active_and_finished_partition_the_known_states() -> None:
    active = {s for s in VS if s.is_active}
    finished = {s for s in VS if s.is_finished}
    assert active == {VS.PENDING, VS.HELD, VS.RUNNING, VS.COMPLETING, VS.REQUEUED, VS.SUSPENDED}
    assert not active & finished
    assert active | finished | {VS.UNKNOWN} == set(VS)


def test_enums_are_strings() -> None:
    assert JobClass("te") is JobClass.TE and str(JobClass.BE) == "be"
    assert isinstance(GroupState.RUNNING, str) and f"{GroupState.RUNNING}" == "running"


def _node(name: str, state: str = "IDLE", alloc: Resources | None = None) -> Node:
    return Node(name, ("gpu",), Resources(4, 8000, {"gpu": 2}), alloc or Resources(), state)


def test_node_free_clips_at_zero() -> None:
    node = _node("g1", alloc=Resources(6, 1000, {"gpu": 1, "accel": 1}))
    assert node.free == Resources(0, 7000, {"gpu": 1})


@pytest.mark.parametrize(
    ("state", "usable"),
    [
        ("IDLE", True),
        ("MIXED", True),
        ("ALLOCATED", True),
        ("mix", True),
        ("IDLE+DRAIN", False),
        ("MIXED+DRAIN", False),
        ("DRAINING", False),
        ("drng", False),
        ("DOWN", False),
        ("DOWN*", False),
        ("IDLE*", False),
        ("idle~", True),
        ("FAIL", False),
        ("MIXED+NOT_RESPONDING", False),
        ("", False),
    ],
)
def test_node_is_usable(state: str, usable: bool) -> None:
    assert _node("g1", state).is_usable is usable


def _variant(kind: str, state: VariantState, start: float | None = None, gid: str = "g") -> Variant:
    return Variant(gid, kind, 1, state, Resources(1, 500), kind, start_time=start)


def _group(*variants: Variant, gid: str = "g", submit: float = 0.0) -> Group:
    return Group(gid, "job", "alice", JobClass.BE, variants, submit_time=submit)


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ((VS.PENDING, VS.PENDING), GroupState.PENDING),
        ((VS.RUNNING, VS.PENDING), GroupState.RUNNING),
        ((VS.CANCELLED, VS.COMPLETING), GroupState.RUNNING),
        ((VS.COMPLETED, VS.CANCELLED), GroupState.COMPLETED),
        ((VS.CANCELLED, VS.FAILED), GroupState.FAILED),
        ((VS.TIMEOUT, VS.CANCELLED), GroupState.FAILED),
        ((VS.OUT_OF_MEMORY, VS.CANCELLED), GroupState.FAILED),
        ((VS.CANCELLED, VS.CANCELLED), GroupState.CANCELLED),
        ((VS.REQUEUED, VS.CANCELLED), GroupState.REQUEUED),
        ((VS.HELD, VS.HELD), GroupState.PENDING),
        ((VS.CANCELLED, VS.PENDING), GroupState.PENDING),
    ],
)
def test_group_state(states: tuple[VariantState, VariantState], expected: GroupState) -> None:
    group = _group(_variant("cpu", states[0]), _variant("gpu", states[1]))
    assert group.state is expected


def test_group_state_follows_the_variant_that_ran() -> None:
    # The gpu variant ran and was cancelled by the user; the cpu sibling never started.
    group = _group(_variant("cpu", VS.CANCELLED), _variant("gpu", VS.CANCELLED, start=10.0))
    assert group.chosen_variant() is group.variants[1]
    assert group.state is GroupState.CANCELLED
    ran = _group(_variant("cpu", VS.CANCELLED), _variant("gpu", VS.COMPLETED, start=10.0))
    assert ran.state is GroupState.COMPLETED


def test_group_helpers() -> None:
    cpu, gpu = _variant("cpu", VS.PENDING), _variant("gpu", VS.RUNNING, start=5.0)
    group = _group(cpu, gpu)
    assert group.kinds() == ("cpu", "gpu")
    assert group.variant("gpu") is gpu
    assert group.variant("accel") is None
    assert group.running_variant() is gpu
    assert _group(cpu).running_variant() is None


def test_frozen() -> None:
    group = _group(_variant("cpu", VS.PENDING))
    with pytest.raises(dataclasses.FrozenInstanceError):
        group.name = "other"  # type: ignore[misc]


def _view() -> ClusterView:
    nodes = {
        "c1": Node("c1", ("cpu",), Resources(4, 8000), Resources(1, 500), "MIXED"),
        "c2": Node("c2", ("cpu",), Resources(4, 8000), Resources(), "IDLE+DRAIN"),
        "g1": _node("g1", alloc=Resources(1, 500, {"gpu": 1})),
        "g2": _node("g2"),
    }
    partitions = {
        "cpu": Partition("cpu", ("c1", "c2"), kind="cpu", default=True),
        "gpu": Partition("gpu", ("g1", "g2"), kind="gpu"),
    }
    groups = {
        "b": _group(_variant("cpu", VS.PENDING, gid="b"), gid="b", submit=2.0),
        "a": _group(_variant("cpu", VS.PENDING, gid="a"), gid="a", submit=2.0),
        "z": _group(_variant("cpu", VS.PENDING, gid="z"), gid="z", submit=1.0),
        "r": _group(_variant("gpu", VS.RUNNING, start=3.0, gid="r"), gid="r", submit=0.5),
        "d": _group(_variant("gpu", VS.COMPLETED, start=1.0, gid="d"), gid="d"),
    }
    return ClusterView(100.0, nodes, partitions, groups, {"cpu": "cpu", "gpu": "gpu"})


def test_view_orders_groups() -> None:
    view = _view()
    assert [g.group_id for g in view.pending_groups()] == ["z", "a", "b"]
    assert [g.group_id for g in view.running_groups()] == ["r"]


def test_view_nodes_and_free_total() -> None:
    view = _view()
    assert [n.name for n in view.nodes_of_kind("cpu")] == ["c1", "c2"]
    assert view.nodes_of_kind("accel") == ()
    assert view.free_total("cpu") == Resources(3, 7500)  # c2 is draining
    assert view.free_total("gpu") == Resources(7, 15500, {"gpu": 3})
    assert view.free_total("accel") == Resources()


def test_view_is_read_only_and_detached() -> None:
    kinds = {"cpu": "cpu"}
    view = ClusterView(0.0, {}, {}, {}, kinds)
    kinds["gpu"] = "gpu"
    assert "gpu" not in view.kinds
    with pytest.raises(TypeError):
        view.kinds["gpu"] = "gpu"  # type: ignore[index]
    with pytest.raises(TypeError):
        view.groups["x"] = _group()  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.now = 1.0  # type: ignore[misc]


# ---- actions -----------------------------------------------------------------------------------------

ALL_ACTIONS = [
    Start("g1", "gpu"),
    Start("g1", "cpu"),
    Start("g1", "gpu", nodes=("g1",)),
    Start("g1", "gpu", alloc=Resources(1, 500, {"gpu": 1})),
    Preempt("g1", 120),
    Preempt("g1", 120, beneficiary="g2"),
    Resize("g1", 2, 1000),
    SetPriority("g1", 10),
    Hold("g1"),
    Release("g1"),
    Cancel("g1"),
    Cancel("g2"),
]


def test_action_id_distinct() -> None:
    ids = [a.action_id for a in ALL_ACTIONS]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 12 for i in ids)


def test_action_id_stable_and_ignores_reason() -> None:
    assert Start("g1", "gpu").action_id == Start("g1", "gpu", reason="fifo head").action_id
    # Pinned: ids are persisted by the enforcer, so changing the hashing scheme is a breaking change.
    assert Start("g1", "gpu").action_id == "5148a335a279"
    a = Start("g1", "gpu", alloc=Resources(1, 500, {"gpu": 1, "accel": 1}))
    b = Start("g1", "gpu", alloc=Resources(1, 500, {"accel": 1, "gpu": 1}))
    assert a.action_id == b.action_id
    # Same type, same fields: equal ids across separately built objects.
    assert Hold("g1").action_id == Hold("g1").action_id
    # Same fields, different types: different ids.
    assert Hold("g1").action_id != Release("g1").action_id


def test_action_id_is_deterministic_across_processes() -> None:
    import subprocess
    import sys

    code = "from slurmx.core.actions import Preempt; print(Preempt('g1', 120, 'g2').action_id)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == Preempt("g1", 120, "g2").action_id


def test_plan() -> None:
    plan = Plan((Start("a", "cpu"), Preempt("b", 30, "a"), Start("c", "gpu")), notes=("cannot place d",))
    assert len(plan) == 3
    assert [a.group_id for a in plan] == ["a", "b", "c"]
    assert plan.of_type(Start) == (Start("a", "cpu"), Start("c", "gpu"))
    assert plan.of_type(Cancel) == ()
    assert Plan() == Plan(())
    assert len(Plan()) == 0
    assert plan.notes == (Note("cannot place d"),)  # a plain string: about the plan, never parsed for a group
