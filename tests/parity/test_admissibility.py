"""Parity of admissibility: random plans, valid and invalid, against the states a random trace passes through end
the same way, action by action, in the simulator and on Slurm (the model slurmctld, `model_slurm`).

The plans come from `Chaos`, a policy that draws its actions from the view it is shown (the same on both sides,
as the parity harness checks): starts of variants that wait and of ones that do not, of unknown kinds and groups;
preemptions of running, waiting, already signalled and unknown groups, with no grace, a grace, a negative one,
for a beneficiary in the view or not; resizes; priorities; holds and releases; cancels, and actions on groups
cancelled earlier in the same plan. Every action's outcome (status and detail) must be equal in both backends.

Two things a plan never does, because they are not admissibility questions: a start of a waiting variant where
it does not fit (an over-allocation, a policy bug the simulator raises on), and the two actions whose admitted
effect each backend models apart: `Release` of a waiting group (on Slurm it hands the group to Slurm's own
scheduler, which the simulator has not) and `Hold` of one (slurmxd's managed variants already wait held), and the
resize of a running group to a new size (slurmxd releases it after the update, the simulator waits for a start).
Their refusals are drawn all the same.
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from slurmx.core.actions import Action, Cancel, Hold, Plan, Preempt, Release, Resize, SetPriority, Start
from slurmx.core.model import ClusterView, Group, JobClass, VariantState
from slurmx.core.resources import Resources
from slurmx.cycle.log import REFUSED
from slurmx.sim.jobs import SimJob
from tests.parity.harness import EPOCH, differences, job, run_both

KINDS = ("cpu", "gpu")
CHAOS_UNTIL = EPOCH + 240  # random actions in the trace's first minutes; then only starts, so it ends
_WAITING = (VariantState.PENDING, VariantState.HELD, VariantState.REQUEUED)


@dataclass
class Chaos:
    """A policy drawing valid and invalid actions from what it is shown; a function of (seed, view, now) only."""

    seed: int
    name: ClassVar[str] = "chaos"
    calls: dict[float, int] = field(default_factory=dict)  # calls at each instant (a requeue with no grace
    # makes another one at the same instant; both backends make the same calls, the harness checks it)

    def schedule(self, view: ClusterView, now: float) -> Plan:
        call = self.calls[now] = self.calls.get(now, 0) + 1
        rng = random.Random(f"{self.seed}:{now}:{call}")
        free = {n.name: n.free for n in view.nodes.values()}
        touched: set[str] = set()  # groups this plan already preempted, resized or cancelled
        sizes: dict[str, tuple[int, int]] = {}  # waiting groups this plan resized: their new size
        actions: list[Action] = []
        if now < CHAOS_UNTIL and call <= 3:  # no endless chain of calls at one instant
            for _ in range(rng.randint(0, 6)):
                action = self._draw(rng, view, touched)
                if action is not None:
                    actions.append(action)
                    if isinstance(action, Resize):
                        sizes[action.group_id] = (action.cpus, action.mem_mb)
        for group in sorted(view.pending_groups(), key=lambda g: (g.submit_time, g.group_id)):
            start = _fitting_start(group, view, free, sizes.get(group.group_id))
            if start is not None:  # a group cancelled earlier in the plan: refused
                actions.append(start)
        return Plan(tuple(actions))

    def _draw(self, rng: random.Random, view: ClusterView, touched: set[str]) -> Action | None:
        ids = [*sorted(view.groups), "ghost"]
        gid = rng.choice(ids)
        group = view.groups.get(gid)
        running = group is not None and group.running_variant() is not None
        waits = group is not None and any(v.state in _WAITING for v in group.variants)
        what = rng.choice(("start", "preempt", "preempt", "resize", "priority", "hold", "release", "cancel"))
        if what == "start":  # of a variant that does not wait (running, unknown kind or group): refused either way
            kind = rng.choice((*KINDS, "tpu"))
            if group is not None and gid not in touched and any(v.kind == kind and v.state in _WAITING
                                                                for v in group.variants):
                return None  # a waiting variant: started by the sweep, where it fits
            if running and group is not None:
                if gid not in touched:
                    return None  # it runs: refused, as every start of it below
                variant = group.running_variant()
                assert variant is not None  # preempted with no grace earlier in the plan, it waits again: a
                return Start(gid, kind, variant.nodes)  # migration back onto its own room, which the view counts
            return Start(gid, kind)
        if what == "preempt":
            grace = rng.choice((0, 5, 30, -1))
            beneficiary = rng.choice((None, None, "ghost", *sorted(view.groups)))
            touched.add(gid)
            return Preempt(gid, grace, beneficiary)
        if what == "resize":
            if running and group is not None:
                variant = group.running_variant()
                assert variant is not None
                touched.add(gid)  # the same size (repeated) or while in its grace (repeated): never a new size
                return Resize(gid, variant.request.cpus, variant.request.mem_mb)
            touched.add(gid)
            return Resize(gid, rng.choice((1, 2)), rng.choice((500, 700)))
        if what == "priority":
            return SetPriority(gid, rng.randint(1, 1000))
        if what in ("hold", "release"):
            if waits or gid in touched:
                return None  # admitted effects the two backends model apart (the module's docstring)
            return Hold(gid) if what == "hold" else Release(gid)
        touched.add(gid)
        return Cancel(gid)


def _fitting_start(group: Group, view: ClusterView, free: dict[str, Resources],
                   size: tuple[int, int] | None) -> Start | None:
    """A start of the group's first waiting variant (at `size` when this plan resized it) pinned to the first node
    with room, the room then taken."""
    for variant in group.variants:
        if variant.state not in _WAITING:
            continue
        request = variant.request if size is None else Resources(*size, variant.request.gres)
        partition = view.kinds.get(variant.kind)
        for name in sorted(free):
            if partition in view.nodes[name].partitions and request.fits_in(free[name]):
                free[name] = free[name] - request
                return Start(group.group_id, variant.kind, (name,))
    return None


@st.composite
def traces(draw: st.DrawFn) -> list[SimJob]:
    """Three to eight groups over the first minute, on one or both kinds, BE or TE."""
    jobs = []
    for i in range(draw(st.integers(3, 8))):
        kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=2, unique=True))
        durations = {k: draw(st.sampled_from((40, 70, 100))) for k in KINDS if k in kinds}  # the site's kind order
        jobs.append(job(f"g{i}", draw(st.integers(0, 12)) * 5, durations, cpus=draw(st.integers(1, 3)),
                        job_class=draw(st.sampled_from((JobClass.BE, JobClass.TE)))))
    return jobs


# Found by the search (2026-11-29): g4 is preempted for g7, g7 starts, then g7 is preempted with no grace while
# g4 is still in grace. The simulator voids g4's earmark when g7 starts; slurmxd read it back from the open
# preemption once g7 waited again, so g7 took g4's room a second time.
_EARMARK_AFTER_START = [job(f"g{i}", at, {"cpu": 40}, cpus=cpus, job_class=JobClass.BE) for i, (at, cpus) in
                        enumerate([(55, 1), (20, 1), (0, 3), (0, 1), (5, 1), (0, 1), (0, 1), (0, 3)])]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=traces(), seed=st.integers(0, 2**32 - 1))
@example(jobs=_EARMARK_AFTER_START, seed=0)
def test_every_action_ends_alike_in_the_simulator_and_on_slurm(jobs: list[SimJob], seed: int) -> None:
    with tempfile.TemporaryDirectory() as state:
        runs = run_both("fifo", jobs, KINDS, Path(state), make=lambda: Chaos(seed))
    assert differences(runs) == []
    sim = [(r.action, r.group_id, r.outcome) for r in runs.sim.records]
    slurm = [(r.action, r.group_id, r.outcome) for r in runs.slurm.records]
    assert sim == slurm


def test_the_plans_drawn_hold_refusals_of_every_kind_of_action() -> None:
    """The generator is not vacuous: one fixed trace already refuses each action type somewhere."""
    jobs = [job(f"g{i}", 5 * i, {"cpu": 70, "gpu": 40} if i % 2 else {"cpu": 100}, cpus=1 + i % 3) for i in range(8)]
    refused: set[str] = set()
    for seed in range(12):
        with tempfile.TemporaryDirectory() as state:
            runs = run_both("fifo", jobs, KINDS, Path(state), make=lambda seed=seed: Chaos(seed))  # type: ignore[misc]
        assert differences(runs) == []
        assert [r.outcome for r in runs.sim.records] == [r.outcome for r in runs.slurm.records]
        refused |= {r.action for r in runs.sim.records if r.outcome.status is REFUSED}
    assert refused == {"Start", "Preempt", "Resize", "SetPriority", "Hold", "Release", "Cancel"}
