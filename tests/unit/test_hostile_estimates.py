"""Policies on views holding any finite positive estimates: 1e-3 s beside 1e15 s (a tag `e=1e15`, a time limit of
UNLIMITED) never make a solver raise, and the plan stays valid. `accel_batch`'s LP used to fail on e=1e15 (HiGHS
refuses coefficients from 1e15 on), failing every cycle."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmx.core.actions import Plan, Start
from slurmx.core.model import ClusterView, Group, JobClass, Node, Partition, Variant, VariantState
from slurmx.core.resources import Resources
from slurmx.core.validation import ConfigError
from slurmx.policies.accel_batch import policy as accel_policy
from slurmx.policies.accel_batch.lst import LstError, lst_assign
from slurmx.policies.accel_batch.model import BatchInstance, Schedule
from slurmx.policies.base import available_policies, make_policy, policy_args

KINDS = ("cpu", "gpu", "accel")
REQUEST = {"cpu": Resources(2, 1000), "gpu": Resources(2, 1000, {"gpu": 1}), "accel": Resources(1, 1000, {"accel": 1})}
NODES = {"c1": ("cpu", Resources(8, 8000)), "c2": ("cpu", Resources(8, 8000)),
         "g1": ("gpu", Resources(8, 8000, {"gpu": 2})), "a1": ("accel", Resources(8, 8000, {"accel": 1})),
         "a2": ("accel", Resources(8, 8000, {"accel": 1}))}
NOW = 1000.0


def view(estimates: list[dict[str, float | None]], running: frozenset[int] = frozenset()) -> ClusterView:
    """Group i has a variant of each kind in `estimates[i]`; those in `running` run their first variant on its
    kind's first node."""
    nodes = {n: Node(n, (k,), cap, Resources(), "IDLE") for n, (k, cap) in NODES.items()}
    groups = {}
    for i, times in enumerate(estimates):
        gid = f"g{i}"
        variants = []
        for j, (kind, estimate) in enumerate(times.items()):
            runs = i in running and j == 0
            node = next(n for n, (k, _) in NODES.items() if k == kind)
            variants.append(Variant(gid, kind, 100 + 3 * i + j, VariantState.RUNNING if runs else VariantState.PENDING,
                                    REQUEST[kind], kind, (node,) if runs else (), estimate, submit_time=NOW - 100 + i,
                                    start_time=NOW - 10 if runs else None))
        groups[gid] = Group(gid, gid, "u", JobClass.TE if i % 3 == 0 else JobClass.BE, tuple(variants),
                            submit_time=NOW - 100 + i, work=1.0)
    parts = {k: Partition(k, tuple(n for n, (q, _) in NODES.items() if q == k), kind=k) for k in KINDS}
    return ClusterView(NOW, nodes, parts, groups, {k: k for k in KINDS})


def assert_valid(plan: Plan, v: ClusterView, *, pending_only: bool) -> None:
    """Every start names a group of the view, a variant of its kind, nodes of that kind that hold its request; a
    group starts at most once. `pending_only`: and only waiting groups, at most one start per node."""
    starts = plan.of_type(Start)
    assert len({s.group_id for s in starts}) == len(starts)
    for start in starts:
        group = v.groups[start.group_id]
        variant = group.variant(start.kind)
        assert variant is not None and start.nodes
        for name in start.nodes:
            assert start.kind in v.nodes[name].partitions and variant.request.fits_in(v.nodes[name].capacity)
        if pending_only:
            assert variant.state is VariantState.PENDING
    if pending_only:
        nodes = [n for s in starts for n in s.nodes]
        assert len(nodes) == len(set(nodes))


# Log-uniform over 1e-3 .. 1e300 s, plus the extremes a view can hold.
SECONDS = st.one_of(st.floats(min_value=-3, max_value=300).map(lambda e: 10.0**e),
                    st.sampled_from([1e-3, 1e12, 1e15, 1.7976931348623157e308, 5e-324]))
GROUP = st.dictionaries(st.sampled_from(KINDS), SECONDS, min_size=1, max_size=3)


def test_an_estimate_of_1e15_s_no_longer_fails_the_accel_lp() -> None:
    v = view([{"accel": 1e15, "cpu": 1e15}, {"accel": 20.0, "cpu": 30.0}, {"accel": 5.0}])
    plan = make_policy("accel_batch").schedule(v, NOW)
    assert_valid(plan, v, pending_only=True)
    assert plan.of_type(Start) and not plan.notes  # the LP itself solved it, scaled


def test_the_lp_scaled_gives_the_same_assignment_and_t_lp_in_the_original_units() -> None:
    p = np.array([[2.0, 2.0, 20.0], [2.0, 2.0, 20.0], [2.0, 2.0, 3.0]])
    small = lst_assign(p)
    big = lst_assign(p * 2.0**60)  # far past HiGHS' 1e15 limit
    assert list(big.assignment) == list(small.assignment) and big.t_lp == small.t_lp * 2.0**60


def _takes(name: str, params: dict[str, str]) -> bool:
    """Whether policy `name` accepts these arguments (LST's order is an argument of one Zhao policy only)."""
    try:
        policy_args(name, params)
    except ConfigError:
        return False
    return True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(estimates=st.lists(GROUP, min_size=1, max_size=8), running=st.frozensets(st.integers(0, 7), max_size=2),
       name=st.sampled_from(["accel_batch", "sct", "mmi"]), johnson=st.booleans())
def test_accel_policies_never_raise_and_plan_validly_over_any_magnitudes(
        estimates: list[dict[str, float | None]], running: frozenset[int], name: str, johnson: bool) -> None:
    v = view(estimates, running)
    params = {"order": "johnson"} if johnson and _takes(name, {"order": "johnson"}) else {}
    plan = make_policy(name, params).schedule(v, NOW)
    assert_valid(plan, v, pending_only=True)
    busy = {n for g in v.running_groups() for var in g.variants if var.is_occupying for n in var.nodes}
    assert not busy & {n for s in plan.of_type(Start) for n in s.nodes}


def test_a_solver_failure_falls_back_to_list_scheduling_for_that_call() -> None:
    # A fake failure, named as such: scaling leaves no real instance on which HiGHS fails, so the solver is
    # replaced by one that raises as `lst_assign` does.
    def failing(instance: BatchInstance) -> Schedule:
        raise LstError("accel LST: HiGHS returned status 4 (planted)")

    v = view([{"accel": 1.0}, {"accel": 3.0}, {"accel": 2.0, "cpu": 9.0}])
    plan = accel_policy._plan(v, accel_policy.AccelBatchArgs(), failing, "LST+mttf")
    assert_valid(plan, v, pending_only=True)
    assert plan.of_type(Start)
    assert tuple(map(str, plan.notes)) == (
        "solver failed on this batch (accel LST: HiGHS returned status 4 (planted)): list scheduling this cycle",)


POLICIES = available_policies()  # every one, strict FIFO too (it reads none: it must not mind them)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(estimates=st.lists(GROUP, min_size=1, max_size=6), running=st.frozensets(st.integers(0, 5), max_size=2))
def test_no_policy_raises_on_huge_or_tiny_finite_estimates(estimates: list[dict[str, float | None]],
                                                           running: frozenset[int]) -> None:
    v = view(estimates, running)
    for name in POLICIES:
        plan = make_policy(name).schedule(v, NOW)
        assert_valid(plan, v, pending_only=False)  # migrating policies (srpt, synergy) may restart a running group
        assert all(math.isfinite(getattr(a, "grace_s", 0.0)) for a in plan.actions)
