"""Placement: the constraint grammar, the one `admits` rule, FIFO/EASY honouring it, and the cycle's handover of
groups a policy cannot place (a multi-node or constrained group under a one-node, placement-blind policy)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.core.actions import Plan, Start
from slurmx.core.model import ClusterView, Group, JobClass, Node, Partition, Variant, VariantState
from slurmx.core.placement import ANYWHERE, ConstraintError, Placement, parse_constraint, satisfies
from slurmx.core.resources import Resources
from slurmx.core.snapshot import LentSnapshot
from slurmx.cycle import handover
from slurmx.cycle.handover import handed_over, helper_plan, merged, residual, with_handover
from slurmx.cycle.isolate import Isolated, Quarantine, plan_isolated, without
from slurmx.policies import make_policy
from slurmx.policies.base import Policy, can_place
from slurmx.policies.reservation import reserve

CAP = Resources(4, 4000)
FEATURES = {"c1": ("intel",), "c2": ("intel", "ib"), "c3": ("amd",), "c4": ("amd", "ib")}


# --- the grammar -------------------------------------------------------------------------------------------------

def test_and_or_brackets_and_comma_read_as_slurm_writes_them() -> None:
    assert satisfies("intel&ib", frozenset({"intel", "ib"}))
    assert not satisfies("intel&ib", frozenset({"intel"}))
    assert satisfies("intel|amd", frozenset({"amd"}))
    assert satisfies("(intel|amd)&ib", frozenset({"amd", "ib"}))
    assert not satisfies("(intel|amd)&ib", frozenset({"amd"}))
    assert satisfies("[intel|amd],ib", frozenset({"intel", "ib"}))  # `,` is and; `[ ]` groups (matching or, per node)


@pytest.mark.parametrize(("text", "says"), [
    ("((a)&b)", "a bracket inside another at character 2"), ("(a|[b])", "inside another"),
    ("[a|b]&[c|d]", "a second [ ]"), ("(" * 400 + "a" + ")" * 400, "inside another"),
    ("intel*2", "feature count"), ("intel&", "ends after an operator"), ("(intel", "not closed"),
    ("", "empty"), ("!intel", "character 1"), ("intel amd", "unexpected 'amd' at character 7"),
    ("&intel", "where a feature belongs"), ("x" * 2000, "longer than 1024"),
])
def test_an_unreadable_constraint_is_one_line_naming_the_place(text: str, says: str) -> None:
    with pytest.raises(ConstraintError, match=None) as caught:
        parse_constraint(text)
    assert says in str(caught.value) and "\n" not in str(caught.value)


_NAMES = st.sampled_from(["a", "b", "c", "d"])
_OPS = st.sampled_from(["&", "|", ","])


@st.composite
def _flat(draw: st.DrawFn) -> str:
    names = draw(st.lists(_NAMES, min_size=1, max_size=4))
    return "".join(f"{draw(_OPS)}{name}" if i else name for i, name in enumerate(names))


@st.composite
def _expressions(draw: st.DrawFn) -> str:
    """Terms (a feature, or a flat expression in brackets: Slurm reads one level) joined by & | and `,`."""
    terms = draw(st.lists(st.one_of(_NAMES, _flat().map(lambda e: f"({e})")), min_size=1, max_size=4))
    return "".join(f"{draw(_OPS)}{term}" if i else term for i, term in enumerate(terms))


def _truth(text: str, have: frozenset[str]) -> bool:
    """The expression as Python reads and/or: and before or, as Slurm (23.02 on) reads & before |."""
    python = text.replace("&", " and ").replace(",", " and ").replace("|", " or ")
    return bool(eval(python, {}, {name: name in have for name in "abcd"}))


@settings(max_examples=300, deadline=None)
@given(_expressions(), st.frozensets(_NAMES))
def test_the_parsed_form_agrees_with_evaluating_the_expression(text: str, have: frozenset[str]) -> None:
    assert satisfies(text, have) == _truth(text, have)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_any_text_parses_or_is_refused_in_one_line(text: str) -> None:
    try:
        parse_constraint(text)
    except ConstraintError as exc:
        assert "\n" not in str(exc)


def test_admits_features_required_excluded_and_whole_nodes() -> None:
    rule = Placement("ib", excluded=("c4",))
    assert [n for n in FEATURES if rule.admits(n, FEATURES[n])] == ["c2"]
    assert [n for n in FEATURES if Placement(required=("c3",)).admits(n, FEATURES[n])] == ["c3"]
    assert not Placement(exclusive=True).admits("c1", (), idle=False)
    assert Placement(exclusive=True).admits("c1", (), idle=True)
    assert ANYWHERE.anywhere and not rule.anywhere and Placement().anywhere
    with pytest.raises(ConstraintError):
        Placement("ib&")


# --- FIFO and EASY place only where admitted -------------------------------------------------------------------

def _nodes(used: dict[str, Resources] | None = None) -> dict[str, Node]:
    used = used or {}
    return {n: Node(n, ("cpu",), CAP, used.get(n, Resources()), "IDLE", f) for n, f in FEATURES.items()}


def _pending(gid: str, cpus: int, submit: float, placement: Placement = ANYWHERE, count: int = 1,
             estimate: float | None = 100) -> Group:
    variant = Variant(gid, "cpu", None, VariantState.PENDING, Resources(cpus, 100), "cpu", estimate_s=estimate,
                      submit_time=submit, node_count=count, placement=placement)
    return Group(gid, gid, "u", JobClass.BE, (variant,), submit_time=submit)


def _running(gid: str, cpus: int, node: str, ends: float) -> Group:
    variant = Variant(gid, "cpu", 1, VariantState.RUNNING, Resources(cpus, 100), "cpu", (node,), estimate_s=ends,
                      start_time=0)
    return Group(gid, gid, "u", JobClass.BE, (variant,), submit_time=-10)


def _view(groups: Sequence[Group], used: dict[str, Resources] | None = None) -> ClusterView:
    return ClusterView(0.0, _nodes(used), {"cpu": Partition("cpu", tuple(FEATURES))},
                       {g.group_id: g for g in groups}, {"cpu": "cpu"})


def _starts(plan: Plan) -> dict[str, tuple[str, ...]]:
    return {a.group_id: a.nodes for a in plan.of_type(Start)}


@pytest.mark.parametrize("backfill", ["none", "easy", "greedy"])
def test_fifo_starts_each_group_only_on_nodes_it_admits(backfill: str) -> None:
    groups = [_pending("ib", 1, 1, Placement("ib")), _pending("not-c1", 1, 2, Placement(excluded=("c1",))),
              _pending("on-c3", 1, 3, Placement(required=("c3",))), _pending("amd-ib", 1, 4, Placement("amd&ib"))]
    plan = make_policy("fifo", {"backfill": backfill}).schedule(_view(groups), 0.0)
    assert _starts(plan) == {"ib": ("c2",), "not-c1": ("c2",), "on-c3": ("c3",), "amd-ib": ("c4",)}


def test_an_exclusive_group_takes_only_an_idle_node_and_holds_all_of_it() -> None:
    groups = [_pending("whole", 1, 1, Placement(exclusive=True)), _pending("after", 1, 2)]
    plan = make_policy("fifo").schedule(_view(groups, {"c1": Resources(1, 10)}), 0.0)
    assert _starts(plan) == {"whole": ("c2",), "after": ("c1",)}  # not beside `whole` on c2


def test_a_multi_node_group_starts_on_all_its_admitted_nodes_at_once() -> None:
    plan = make_policy("fifo").schedule(_view([_pending("mpi", 4, 1, Placement("ib"), count=2)]), 0.0)
    assert _starts(plan) == {"mpi": ("c2", "c4")}
    blocked = make_policy("fifo").schedule(_view([_pending("mpi", 4, 1, Placement("ib"), count=3)]), 0.0)
    assert not blocked.of_type(Start)


def test_easy_reserves_only_nodes_the_head_admits() -> None:
    head = _pending("head", 4, 1, Placement(required=("c3",)))
    view = _view([_running("r3", 4, "c3", 50), _running("r1", 4, "c1", 10), head],
                 {"c3": Resources(4, 100), "c1": Resources(4, 100)})
    found = reserve(view, head, {}, [], 0.0)
    assert found is not None and (found.nodes, found.at) == (("c3",), 50)  # c1 frees first, but is not admitted


# --- the handover ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OneNodeBlind:
    """A policy as most papers define one: one node per job, no placement rule; starts every group it is shown on
    the first node with room (so a test sees what it was shown)."""

    name: ClassVar[str] = "one-node-blind"
    shown: list[str] = field(default_factory=list)

    def schedule(self, view: ClusterView, now: float) -> Plan:
        free = {n.name: n.free for n in view.nodes_of_kind("cpu")}
        actions = []
        for group in view.pending_groups():
            self.shown.append(group.group_id)
            variant = group.variants[0]
            for name, room in free.items():
                if variant.request.fits_in(room):
                    free[name] = room - variant.request
                    actions.append(Start(group.group_id, "cpu", (name,), variant.request))
                    break
        return Plan(tuple(actions))


def test_a_policy_is_shown_only_what_it_can_place_and_easy_decides_the_rest_on_what_it_leaves() -> None:
    policy = OneNodeBlind()
    groups = [_pending("plain", 4, 1), _pending("ib", 4, 2, Placement("ib")), _pending("mpi", 4, 3, count=2),
              _pending("plain2", 4, 4)]
    view = _view(groups)
    handed = handed_over(policy, view)
    assert handed == ["ib", "mpi"]
    assert not can_place(policy, groups[1].variants) and can_place(make_policy("fifo"), groups[2].variants)
    own = policy.schedule(without(view, frozenset(handed)), 0.0)
    assert policy.shown == ["plain", "plain2"] and _starts(own) == {"plain": ("c1",), "plain2": ("c2",)}
    rest = helper_plan(view, own, handed, 0.0)
    # c1 and c2 are the policy's: `ib` would have taken c2, it takes c4; `mpi` finds one node left and waits.
    assert _starts(rest) == {"ib": ("c4",)}
    assert _starts(merged(own, rest)) == {"plain": ("c1",), "plain2": ("c2",), "ib": ("c4",)}
    assert any(str(n).startswith("handover: 2 group(s)") for n in rest.notes)


def test_a_policy_that_places_everything_hands_nothing_over_and_reads_no_group() -> None:
    def unreadable(group_id: str) -> Group:
        raise AssertionError(f"read {group_id}")

    ids = ["a", "b"]
    lent: LentSnapshot[str, Group] = LentSnapshot(cast("dict[str, Group]", dict.fromkeys(ids)), set(ids), unreadable)
    view = ClusterView(0.0, _nodes(), {"cpu": Partition("cpu", tuple(FEATURES))}, lent, {"cpu": "cpu"})
    assert handed_over(make_policy("fifo"), view) == []
    with pytest.raises(AssertionError, match="read"):
        handed_over(OneNodeBlind(), view)  # the others read each pending group once


def test_the_residual_view_counts_the_policys_starts_and_keeps_running_groups() -> None:
    groups = [_running("r", 1, "c1", 50), _pending("a", 2, 1), _pending("b", 1, 2, Placement("ib"))]
    view = _view(groups, {"c1": Resources(1, 100)})
    rest = residual(view, Plan((Start("a", "cpu", ("c1",), Resources(2, 100)),)), ["b"])
    assert rest.nodes["c1"].allocated == Resources(3, 200)
    assert [g.group_id for g in rest.pending_groups()] == ["b"]
    assert [g.group_id for g in rest.running_groups()] == ["r"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3), st.sampled_from(["", "ib", "intel", "amd|ib"]),
                          st.booleans()), min_size=1, max_size=8))
def test_through_the_handover_no_node_is_overfilled_and_every_start_is_admitted(
        shapes: list[tuple[int, int, str, bool]]) -> None:
    groups = [_pending(f"g{i}", cpus, i, Placement(c, exclusive=whole), count=count)
              for i, (cpus, count, c, whole) in enumerate(shapes)]
    view = _view(groups)
    policy = OneNodeBlind()
    handed = handed_over(policy, view)
    own = policy.schedule(without(view, frozenset(handed)) if handed else view, 0.0)
    plan = merged(own, helper_plan(view, own, handed, 0.0)) if handed else own
    used = {n: Resources() for n in FEATURES}
    whole_on: set[str] = set()
    by_id = {g.group_id: g for g in groups}
    for start in plan.of_type(Start):
        variant = by_id[start.group_id].variants[0]
        assert len(set(start.nodes)) == variant.node_count
        for name in start.nodes:
            node = view.nodes[name]
            assert variant.admits(node)
            assert name not in whole_on
            if variant.placement.exclusive:
                assert used[name] == Resources()
                whole_on.add(name)
            used[name] = used[name] + variant.taken_on(node)
            assert used[name].fits_in(CAP)
    assert not set(handed) & set(policy.shown)  # never shown what it cannot place


class PoisonedHelper:
    """A fake: EASY raising on one group, standing for a bug in the handover policy (valid data cannot make it
    raise), to show such a group is found and quarantined like any other."""

    name: ClassVar[str] = "fifo"

    def __init__(self, poison: str) -> None:
        self.inner = make_policy("fifo", {"backfill": "easy"})
        self.poison = poison

    def schedule(self, view: ClusterView, now: float) -> Plan:
        if self.poison in view.groups and view.groups[self.poison] in view.pending_groups():
            raise ValueError(f"poisoned {self.poison}")
        return self.inner.schedule(view, now)


def test_a_group_the_handover_fails_on_is_quarantined_and_the_other_handed_groups_still_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handover, "_HELPERS", [cast("Policy", PoisonedHelper("bad"))])
    groups = [_pending("plain", 1, 1), _pending("bad", 1, 2, Placement("ib")), _pending("ok", 1, 3, Placement("ib"))]
    quarantine = Quarantine()
    got = plan_isolated(with_handover(OneNodeBlind()), _view(groups), 0.0, quarantine)
    assert isinstance(got, Isolated) and [a.group_id for a in got.set_aside] == ["bad"]
    assert set(_starts(got.plan)) == {"plain", "ok"}
    again = plan_isolated(with_handover(OneNodeBlind()), _view(groups), 0.0, quarantine)
    assert isinstance(again, Isolated) and again.calls == 1 and "bad" in again.hidden  # kept, not searched again


def test_room_a_preemption_freed_for_a_waiting_beneficiary_is_not_handed_out() -> None:
    victim = replace(_pending("victim", 1, 0), preempted_for="ben", preempted_nodes=("c3",))
    groups = [victim, _pending("ben", 4, 1), _pending("amd", 1, 2, Placement("amd"))]
    rest = residual(_view(groups), Plan(), ["amd"])
    assert rest.nodes["c3"].free == Resources() and rest.nodes["c4"].free == CAP
    plan = make_policy("fifo", {"backfill": "easy"}).schedule(rest, 0.0)
    assert _starts(plan) == {"amd": ("c4",)}
