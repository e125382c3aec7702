"""The one cycle: effect order, complete handler tables, and the daemon never deciding on a view older than its
last action."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slurmx.core.actions import Cancel, Hold, Plan, Preempt, Release, Resize, SetPriority, Start
from slurmx.core.model import Node, VariantState
from slurmx.core.resources import Resources
from slurmx.cycle import DecisionLog, Outcome, checked_handlers, effect_order
from slurmx.cycle.backend import ACTION_TYPES
from slurmx.cycle.log import APPLIED
from slurmx.daemon.loop import Daemon
from slurmx.daemon.store import Store
from slurmx.policies.base import make_policy
from slurmx.sim.engine import Engine
from tests.sim import cluster
from tests.unit.test_daemon import NODES, SITE, FakeSlurm, job


def test_every_other_action_takes_effect_before_the_starts_each_in_plan_order() -> None:
    plan = Plan((Start("a", "cpu"), Preempt("v", 0), Preempt("w", 0), Cancel("x"), Start("b", "gpu"), Hold("y")))
    batches = [(kind.__name__, [a.group_id for a in batch]) for kind, batch in effect_order(plan)]
    assert batches == [("Preempt", ["v", "w"]), ("Cancel", ["x"]), ("Hold", ["y"]), ("Start", ["a", "b"])]


def _noop(batch: Sequence[Any], now: float) -> list[Outcome]:
    return [Outcome(APPLIED)] * len(batch)


def test_a_backend_missing_a_handler_is_refused_when_it_is_built() -> None:
    table = dict.fromkeys(ACTION_TYPES, _noop)
    assert set(checked_handlers("full", table)) == set(ACTION_TYPES)
    del table[Resize]
    with pytest.raises(TypeError, match="backend half: no handler for Resize"):
        checked_handlers("half", table)
    with pytest.raises(TypeError, match="handlers for unknown actions int"):
        checked_handlers("odd", {**dict.fromkeys(ACTION_TYPES, _noop), int: _noop})  # type: ignore[dict-item]


def test_both_backends_handle_every_action_type(tmp_path: Path) -> None:
    daemon = Daemon(SITE, FakeSlurm([]), Store(tmp_path / "s.sqlite"), make_policy("fifo"))  # type: ignore[arg-type]
    engine = Engine(cluster(), make_policy("fifo"), [])
    assert set(daemon.backend.handlers) == set(engine.handlers) == set(ACTION_TYPES)
    assert {SetPriority, Hold, Release} <= set(ACTION_TYPES)


class AllocatingSlurm(FakeSlurm):
    """The unit-test Slurm, with nodes whose allocation is what their running jobs ask for (FitGpp reads it)."""

    def nodes(self) -> list[Node]:
        self._check()
        used: dict[str, Resources] = {}
        for j in self.table.values():
            if j.state is VariantState.RUNNING and j.nodes:
                used[j.nodes] = used.get(j.nodes, Resources()) + j.request
        return [replace(n, allocated=used.get(n.name, Resources())) for n in NODES]


def test_a_victim_requeued_at_its_deadline_is_the_only_victim_for_its_beneficiary(tmp_path: Path) -> None:
    """The victim ignores the signal and runs to its deadline; the cycle that requeues it decides on a fresh read,
    where it no longer runs, so FitGpp starts the TE job instead of picking a second victim."""
    big = Resources(2, 500)
    fake = AllocatingSlurm([
        replace(job(1, "v1", state=VariantState.RUNNING, nodes="c1"), request=big, start_time=100),
        replace(job(2, "v2", state=VariantState.RUNNING, nodes="c1"), request=big, start_time=101),
    ])
    now = [1000.0]
    log = DecisionLog()
    daemon = Daemon(SITE, fake, Store(tmp_path / "s.sqlite"), make_policy("fitgpp"),  # type: ignore[arg-type]
                    clock=lambda: now[0], decisions=log)
    daemon.cycle()
    fake.table[3] = replace(job(3, "te", qos="te"), request=big)
    daemon.cycle()
    assert fake.verbs() == ["signal"], "FitGpp should signal exactly one victim"
    for t in (1005.0, 1010.0, 1011.0, 1012.0):  # past the 10 s grace: requeued held at 1010
        now[0] = t
        daemon.cycle()
    preempts = [r for r in log.records if r.action == "Preempt" and r.outcome.status == APPLIED]
    assert len(preempts) == 1, [(r.t, r.group_id, r.outcome) for r in log.records]
    assert [c for c in fake.calls if c[0] == "signal"] == [("signal", ({"v1": 1, "v2": 2}[preempts[0].group_id],))]
    assert any(r.action == "Start" and r.group_id == "te" and r.outcome.status == APPLIED for r in log.records)
    assert daemon.backend.reads >= 2 + 5, "the requeueing cycle reads Slurm again"


@pytest.mark.parametrize("now", [1000.0, 1000.5])
def test_a_zero_grace_migration_applies_in_one_plan_whatever_the_clocks_fraction(tmp_path: Path, now: float) -> None:
    """Preempt(grace 0) then Start of the same group: requeued and released in the same cycle, also when the clock
    has a fraction (the protocol rounds a deadline up to a whole second)."""
    from slurmx.core.actions import Plan as P
    from tests.unit.test_daemon import _apply, _enforcer, _obs

    fake = FakeSlurm([job(1, "v", state=VariantState.RUNNING, nodes="c1")])
    clock = [now]
    enforcer, store = _enforcer(tmp_path, fake, clock)
    outcomes = _apply(enforcer, P((Preempt("v", 0), Start("v", "cpu"))), _obs(fake, store, now), now)
    assert [o.status for o in outcomes] == [APPLIED, APPLIED], outcomes
    assert fake.verbs()[:2] == ["signal", "requeuehold"] and "release" in fake.verbs()
