"""`cycle.admissible`: the one rule for whether an action applies, on hand-built standings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmx.core.actions import Action, Cancel, Hold, Preempt, Release, Resize, SetPriority, Start
from slurmx.cycle.admissible import Standing, Verdict, admissible, verdict_outcome
from slurmx.cycle.log import REFUSED, REPEATED, Outcome

WAITS = Standing(waiting=frozenset({"cpu", "gpu"}))
RUNS = Standing(running=True, size=(2, 1000))
GRACE = Standing(running=True, in_grace=True, size=(2, 1000))
STARTING = Standing(waiting=frozenset({"cpu"}), starting=True)
GROUPS = {"w": WAITS, "r": RUNS, "g": GRACE, "s": STARTING}


@pytest.mark.parametrize(("action", "verdict"), [
    (Start("w", "cpu"), Verdict.ADMITTED),
    (Start("w", "tpu"), Verdict.NO_WAITING_KIND),
    (Start("r", "cpu"), Verdict.NO_WAITING_KIND),
    (Start("s", "cpu"), Verdict.ALREADY_STARTING),
    (Preempt("r", 30, beneficiary="w"), Verdict.ADMITTED),
    (Preempt("r", 0), Verdict.ADMITTED),
    (Preempt("r", -1), Verdict.NEGATIVE_GRACE),
    (Preempt("r", 30, beneficiary="g"), Verdict.BENEFICIARY_NOT_WAITING),
    (Preempt("r", 30, beneficiary="zz"), Verdict.BENEFICIARY_NOT_WAITING),
    (Preempt("g", 30), Verdict.ALREADY_IN_GRACE),
    (Preempt("w", 30), Verdict.NOT_RUNNING),
    (Resize("w", 1, 500), Verdict.ADMITTED),
    (Resize("r", 1, 500), Verdict.ADMITTED),
    (Resize("r", 2, 1000), Verdict.ALREADY_OF_SIZE),
    (Resize("g", 1, 500), Verdict.ALREADY_IN_GRACE),
    (SetPriority("w", 5), Verdict.ADMITTED),
    (SetPriority("r", 5), Verdict.NO_WAITING_VARIANT),
    (Hold("g"), Verdict.NO_WAITING_VARIANT),
    (Release("s"), Verdict.ADMITTED),
    (Cancel("g"), Verdict.ADMITTED),
])
def test_each_rule(action: Action, verdict: Verdict) -> None:
    assert admissible(action, GROUPS.get) is verdict


def test_the_outcomes_both_backends_report() -> None:
    assert verdict_outcome(Verdict.NO_WAITING_KIND, Start("w", "tpu")) == Outcome(REFUSED, "no waiting tpu variant")
    assert verdict_outcome(Verdict.NOT_IN_VIEW, Cancel("zz")) == Outcome(REFUSED, "not a group in the view")
    assert verdict_outcome(Verdict.ALREADY_IN_GRACE, Preempt("g", 5)) == Outcome(REPEATED)
    assert verdict_outcome(Verdict.ALREADY_OF_SIZE, Resize("r", 2, 1000)) == Outcome(REPEATED, "already of that size")
    with pytest.raises(ValueError, match="backend"):
        _ = Verdict.ADMITTED.status


ACTIONS = st.one_of(
    st.builds(Start, st.just("x"), st.sampled_from(("cpu", "gpu"))),
    st.builds(Preempt, st.just("x"), st.integers(-5, 60), st.sampled_from((None, "w", "r", "x"))),
    st.builds(Resize, st.just("x"), st.integers(1, 4), st.sampled_from((500, 1000))),
    st.builds(SetPriority, st.just("x"), st.integers(0, 9)), st.builds(Hold, st.just("x")),
    st.builds(Release, st.just("x")), st.builds(Cancel, st.just("x")))
STANDINGS = st.builds(Standing, st.frozensets(st.sampled_from(("cpu", "gpu"))), st.booleans(), st.booleans(),
                      st.booleans(), st.sampled_from((None, (1, 500), (2, 1000))))


@given(ACTIONS, STANDINGS)
def test_nothing_applies_to_a_group_the_view_lacks_and_a_verdict_is_all_a_lookup_decides(
        action: Action, standing: Standing) -> None:
    assert admissible(action, {}.get) is Verdict.NOT_IN_VIEW
    verdict = admissible(action, {"x": standing, **GROUPS}.get)
    assert verdict is admissible(action, {"x": standing, **GROUPS}.get)  # pure: the same answer again
    if verdict is not Verdict.ADMITTED:
        assert verdict_outcome(verdict, action).status in (REFUSED, REPEATED)
    if isinstance(action, Start | SetPriority | Hold | Release) and not standing.waiting:
        assert verdict is not Verdict.ADMITTED  # only what waits can start, take a priority, be held or released
    if isinstance(action, Preempt) and verdict is Verdict.ADMITTED:
        assert standing.running and not standing.in_grace and action.grace_s >= 0
