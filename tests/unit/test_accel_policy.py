"""The `accel_batch`, `sct` and `mmi` policies on a hand-built cluster view: responders are nodes, CPU nodes
take jobs with a CPU variant, only idle responders start their first planned job, pinned to them."""

from __future__ import annotations

import pytest

from slurmx.core.actions import Plan, Start
from slurmx.core.model import ClusterView, Group, JobClass, Node, Partition, Variant, VariantState
from slurmx.core.resources import Resources
from slurmx.core.validation import ConfigError
from slurmx.policies import make_policy

ACCEL = Resources(1, 1000, {"accel": 1})
CPU = Resources(4, 1000)
REQUEST = {"accel": ACCEL, "cpu": CPU}


def _view(jobs: dict[str, dict[str, float | None]], running: dict[str, str] | None = None) -> ClusterView:
    """`jobs`: group -> kind -> estimate; `running`: group -> node it runs on (accel variant)."""
    running = running or {}
    nodes = {"a1": ("accel", Resources(8, 8000, {"accel": 1})), "a2": ("accel", Resources(8, 8000, {"accel": 1})),
             "c1": ("cpu", Resources(16, 8000))}
    used: dict[str, Resources] = {}
    groups = {}
    for name, times in jobs.items():
        variants = []
        for kind, estimate in times.items():
            where = running.get(name)
            nodes_of: tuple[str, ...] = ()
            state = VariantState.PENDING
            if where is not None and kind == "accel":
                state, nodes_of = VariantState.RUNNING, (where,)
                used[where] = ACCEL
            variants.append(Variant(name, kind, None, state, REQUEST[kind], kind, nodes_of, estimate,
                                    start_time=0.0 if where else None))
        groups[name] = Group(name, name, "u", JobClass.BE, tuple(variants))
    node_map = {n: Node(n, (k,), cap, used.get(n, Resources()), "IDLE") for n, (k, cap) in nodes.items()}
    parts = {k: Partition(k, tuple(n for n, (q, _) in nodes.items() if q == k), kind=k) for k in ("accel", "cpu")}
    return ClusterView(0.0, node_map, parts, groups, {"accel": "accel", "cpu": "cpu"})


def _starts(plan: Plan) -> dict[str, tuple[str, str]]:
    return {a.group_id: (a.kind, a.nodes[0]) for a in plan.of_type(Start)}


def test_each_idle_responder_starts_one_job_and_the_cpu_node_takes_the_cpu_friendly_job() -> None:
    # p = [[2, 2, 20], [2, 2, 20], [2, 2, 3]]: T_LP = 3; the split third job goes where its load is least: c1.
    view = _view({"g1": {"accel": 2.0, "cpu": 20.0}, "g2": {"accel": 2.0, "cpu": 20.0},
                  "g3": {"accel": 2.0, "cpu": 3.0}})
    plan = make_policy("accel_batch").schedule(view, 0.0)
    starts = _starts(plan)
    assert starts["g3"] == ("cpu", "c1")
    assert {starts["g1"][1], starts["g2"][1]} == {"a1", "a2"}
    assert all(a.alloc == REQUEST[a.kind] for a in plan.of_type(Start))


def test_a_busy_responder_gets_work_planned_but_nothing_started() -> None:
    view = _view({"r": {"accel": 50.0}, "g1": {"accel": 1.0}, "g2": {"accel": 1.0}}, running={"r": "a1"})
    starts = _starts(make_policy("accel_batch", {"kinds": ["accel"]}).schedule(view, 0.0))
    assert "a1" not in {node for _, node in starts.values()}
    assert list(starts.values()) == [("accel", "a2")]


def test_input_size_and_a_slow_link_steer_a_job_away() -> None:
    view = _view({"g1": {"accel": 1.0}})
    args = {"kinds": ["accel"], "input_mb": {"g1": 1000.0}, "ingress_mbps": {"a1": 10.0}}
    for name in ("accel_batch", "sct", "mmi"):
        assert _starts(make_policy(name, args).schedule(view, 0.0)) == {"g1": ("accel", "a2")}


def test_jobs_without_estimates_are_noted_not_started() -> None:
    view = _view({"g1": {"accel": None}, "g2": {"accel": 1.0}})
    plan = make_policy("accel_batch", {"order": "johnson"}).schedule(view, 0.0)
    assert set(_starts(plan)) == {"g2"}
    assert any(note.group_id == "g1" and note.text.startswith("no responder") for note in plan.notes)
    assert len(make_policy("sct").schedule(_view({}), 0.0)) == 0


def test_unknown_arguments_are_rejected_with_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="order"):
        make_policy("accel_batch", {"order": "fastest"})
    with pytest.raises(ConfigError, match="tiebreak"):
        make_policy("mmi", {"tiebreak": "x"})
