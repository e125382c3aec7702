"""The policy's memo survives the cycle's own rewrites of a view and a plan (isolation's narrowed view, the
handover's merged plan), so what the policy left is what it gets back."""

from __future__ import annotations

from slurmx.core.actions import Plan
from slurmx.core.model import ClusterView
from slurmx.cycle.handover import merged
from slurmx.cycle.isolate import without


def test_a_narrowed_view_keeps_the_memo() -> None:
    view = ClusterView(0.0, {}, {}, {}, {}).with_memo({"booked": 1.5})
    assert without(view, frozenset({"g1"})).memo == {"booked": 1.5}
    assert ClusterView(0.0, {}, {}, {}, {}).memo is None


def test_the_merged_plan_keeps_the_policys_memo_not_the_handovers() -> None:
    assert merged(Plan(memo="policy"), Plan(memo="handover")).memo == "policy"
    assert merged(Plan(), Plan(memo="handover")).memo is None
