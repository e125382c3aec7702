"""How each action of a plan, and each end of a run, changes the simulator's model world; a mixin of `Engine`.

Apart from the kernel because it is the model's rules, not the event machinery: what a start allocates, how a
preemption or a resize goes through the grace protocol, what a requeue, a cancel or a completion releases.
Whether an action applies at all is not decided here: `cycle.admissible` decides it for both backends, on the
group as `_standing` describes it, and an action it does not admit never reaches these methods. What they still
raise on is a policy or engine bug the model cannot carry on from: an over-allocation, or nodes a start names
that are unknown, outside the kind's partition or not admitted by the variant's placement (slurmxd would ignore
such a steer and let Slurm place the job).

Work: a job's variant on kind k runs at `work / duration_s` per second, times `speed(kind, cpus, mem)` when
the job has a speed function and the policy allocates something else than the request. A preempted job
makes no progress during its grace period; when the grace ends it is requeued with its remaining work
(`checkpoint: keep`) or all of it (`lose`), and only its started variant stays (its siblings were cancelled
when it first started, as slurmx does on Slurm).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import islice

from slurmx.core.actions import Cancel, Hold, Preempt, Release, Resize, SetPriority, Start
from slurmx.core.placement import ANYWHERE, Placement
from slurmx.core.resources import Resources
from slurmx.cycle import Outcome
from slurmx.cycle.admissible import Standing, Verdict
from slurmx.cycle.log import REPEATED
from slurmx.sim.cluster import SimulationError, SimulationInvariantError, Vector
from slurmx.sim.engine_state import (
    CANCELLED,
    FINISH,
    GRACE,
    GRACE_END,
    PENDING,
    RUNNING,
    EngineState,
    JobState,
)
from slurmx.sim.metrics import JobRecord

_NO_RESOURCES = Resources()
_WAITING: dict[tuple[str, ...], Standing] = {}  # a pending group's standing, by the kinds it waits on

__all__ = ["ActionSteps"]


class ActionSteps(EngineState):
    """One method per action type (`_start`, `_preempt`, ...) and the state changes events share with them."""

    _reschedule: list[float]  # from a preemption to the next start, per restart
    _victims: dict[str, list[int]]  # beneficiary -> jobs preempted for it, marks still shown
    _repeated_preempts: int
    _releases: int
    _late_visible: bool  # a group shown since the last decision may be older than the queue's end
    _moves: int  # starts, preemptions and cancels: what makes a stalled run move again
    _waits_for_release: bool  # the policy is a strict FIFO (Capabilities.waits_for_release)
    _freed: list[int]  # nodes given room back since its last decision began

    # ---- state changes ---------------------------------------------------------------------------------

    def _release(self, j: JobState, t: float) -> None:
        self._releases += 1
        cluster = self.cluster
        for node in j.nodes:
            cluster.release(node, cluster.nodes[node].capacity if j.whole else j.alloc_vec, j.group_id, t)
        if self._waits_for_release:
            self._freed += j.nodes
        self._alloc_changed = True
        self._busy -= 1
        j.nodes = ()

    def _close(self, j: JobState, t: float, status: int) -> None:
        self._clear_marks_for(j.group_id)
        j.status = status
        j.version += 1
        self._open -= 1
        del self._visible[j.group_id]
        self._dirty[j.idx] = None
        self._gone.append(j.idx)  # its state goes once the next view has filed it out of the queues
        self._record_order.append(j.idx)
        self._records.append(JobRecord(
            j.group_id, j.job.user, j.job.job_class, j.job.submit_time, j.first_start, t, j.productive, j.kind,
            j.preemptions, cancelled=status == CANCELLED, deadline=j.job.deadline))
        # Its record holds what the result needs: the per-kind facts and the allocation go (a third of a
        # finished job's memory; a million-job run holds every job's state to the end).
        j.facts = {}
        j.alloc, j.alloc_vec, j.nodes = _NO_RESOURCES, (), ()

    def _clear_marks_for(self, beneficiary: str) -> None:
        """The beneficiary started or left: its victims' earmarks are void."""
        for idx in self._victims.pop(beneficiary, ()):
            victim = self._jobs.get(idx)  # None: it has ended since
            if victim is not None and victim.beneficiary == beneficiary:
                victim.beneficiary = None
                victim.marked_nodes = ()
                self._dirty[idx] = None

    def _requeue(self, j: JobState, t: float) -> None:
        self._release(j, t)
        if j.resize_to is not None:
            self._resize_kinds(j, j.resize_to)
            j.resize_to = None
        else:
            j.preemptions += 1  # counted when it is back in the queue, as slurmxd counts it
        j.grace_deadline = None
        j.requeue_time = t
        self._late_visible = True  # back in the queue: it may be older than the groups waiting
        if self.options.checkpoint == "lose":
            j.done = 0.0
            j.productive = 0.0
        j.status = PENDING
        j.version += 1
        j.run_estimate = None
        self._pending += 1
        self._max_pending = max(self._max_pending, self._pending)
        self._dirty[j.idx] = None

    # ---- admissibility ---------------------------------------------------------------------------------

    def _standing(self, group_id: str) -> Standing | None:
        """The group as `cycle.admissible` reads it: the model's live state, so an action earlier in the plan
        counts (a cancelled group has left the view, a preempted one is in its grace)."""
        j = self._visible.get(group_id)
        if j is None:
            return None
        if j.status == PENDING:
            standing = _WAITING.get(j.kinds)
            if standing is None:  # one per set of kinds: immutable, shared
                standing = _WAITING[j.kinds] = Standing(waiting=frozenset(j.kinds))
            return standing
        if j.status not in (RUNNING, GRACE):
            raise SimulationInvariantError(f"group {group_id} is in the view with status {j.status}")
        return Standing(running=True, in_grace=j.status == GRACE, size=(j.alloc.cpus, j.alloc.mem_mb))

    def _not_admitted(self, a: object, verdict: Verdict) -> None:
        """Counts what the results report of actions the model did not apply."""
        if verdict is Verdict.ALREADY_IN_GRACE and isinstance(a, Preempt):
            self._repeated_preempts += 1  # already signalled: the enforcer skips it as already applied

    # ---- actions (each admitted by `cycle.admissible` first) ----------------------------------------------

    def _set_priority(self, a: SetPriority, now: float) -> Outcome | None:
        j = self._visible[a.group_id]
        j.priority = a.priority
        self._dirty[j.idx] = None
        return None

    def _hold(self, a: Hold, now: float) -> Outcome | None:
        j = self._visible[a.group_id]
        if j.held:
            return Outcome(REPEATED)
        j.held = True
        self._dirty[j.idx] = None
        return None

    def _release_hold(self, a: Release, now: float) -> Outcome | None:
        j = self._visible[a.group_id]
        if not j.held:
            return Outcome(REPEATED)
        j.held = False
        self._dirty[j.idx] = None
        return None

    def _start(self, a: Start, now: float) -> Outcome | None:
        j = self._visible[a.group_id]
        facts = j.facts.get(a.kind)
        if facts is None:
            raise SimulationInvariantError(f"t={now:g}: Start: group {a.group_id} waits on {a.kind} with no facts "
                                           "of that kind")
        request = facts.request
        alloc = request if a.alloc is None or a.alloc is request or a.alloc == request else a.alloc
        vec = facts.vector if alloc is request else self.cluster.vector(alloc)
        placement = facts.placement
        nodes = self._start_nodes(a, vec, facts.node_count, placement, now)
        whole = placement.exclusive
        for node in nodes:  # an exclusive variant holds the whole node (`Variant.taken_on`)
            self.cluster.allocate(node, self.cluster.nodes[node].capacity if whole else vec, a.group_id, now)
        j.whole = whole
        self._moves += 1
        speed = 1.0
        if j.job.speed is not None and alloc is not request:
            speed = float(j.job.speed(a.kind, alloc.cpus, alloc.mem_mb))
            if not speed > 0:
                raise SimulationError(f"t={now:g}: group {a.group_id}: speed({a.kind}, {alloc.cpus}, "
                                      f"{alloc.mem_mb}) = {speed}; must be > 0")
        variant = j.job.variants[a.kind]
        j.rate = j.job.work / variant.duration_s * speed
        if j.preempted_at is not None:
            self._reschedule.append(now - j.preempted_at)
            j.preempted_at = None
        # Slurm's start latency (`start_latency_s`, measured by `slurmx fidelity`): the node is taken now, the
        # work begins when Slurm has started the job.
        begin = now + self.options.start_latency_s
        if j.first_start is None:
            j.first_start = begin
        else:  # a restart: the job reloads its checkpoint before its work goes on (`restart_cost`)
            begin += self.options.restart_cost_s
        j.status = RUNNING
        j.kind = a.kind
        j.kinds = (a.kind,)
        j.nodes = nodes
        j.alloc = alloc
        j.alloc_vec = vec
        j.seg_start = begin
        j.held = False
        remaining = j.job.work - j.done
        j.run_estimate = facts.est_total * remaining / j.job.work
        # Time left as a share of the variant's duration: exact for whole durations, where `remaining / rate`
        # rounds up (7 min -> 420.00000000000006 s) and a tick-mode job would free its node a tick late.
        j.complete_at = begin + remaining / j.job.work * variant.duration_s / speed
        j.version += 1
        finish = j.complete_at
        if self.options.mode == "round":
            period = self.options.period_s
            finish = max(now, math.ceil(finish / period - 1e-9) * period)
        self._push(finish, FINISH, j.idx, j.version)
        if j.group_id in self._victims:
            self._clear_marks_for(j.group_id)
        self._pending -= 1
        self._busy += 1
        self._alloc_changed = True
        self._dirty[j.idx] = None
        return None

    def _start_nodes(self, a: Start, vec: Vector, count: int, placement: Placement, now: float) -> tuple[int, ...]:
        """The nodes a start takes: the ones it names (exactly the variant's node count, distinct, each one its
        placement admits), or the first `count` with room it admits, as Slurm picks them for a job it is not told
        where to run."""
        partition = self.cluster.kinds.get(a.kind)
        if partition is None:
            raise SimulationError(f"t={now:g}: Start {a.group_id}: no partition serves kind {a.kind!r}")
        if a.nodes:
            if len(a.nodes) != count or len(set(a.nodes)) != count:
                raise SimulationError(f"t={now:g}: Start {a.group_id}: names {len(a.nodes)} node(s) "
                                      f"({', '.join(a.nodes)}) for a variant that runs on {count} distinct nodes")
            chosen = tuple([self._named_node(a, name, partition, now) for name in a.nodes])
            if placement is not ANYWHERE:
                for index in chosen:
                    self._check_admits(a, index, placement, now)
            return chosen
        found: Iterator[int] = self.cluster.fitting(a.kind, vec)
        if placement is not ANYWHERE:
            found = (i for i in found if self._admits(i, placement))
        chosen = tuple(islice(found, count))
        if len(chosen) < count:
            some = "no node" if count == 1 else f"{len(chosen)} of the {count} nodes needed"
            raise SimulationInvariantError(f"t={now:g}: Start {a.group_id}: {some} of partition {partition} has "
                                           f"room for {self.cluster.resources(vec)}; the policy over-allocates")
        return chosen

    def _admits(self, index: int, placement: Placement) -> bool:
        node = self.cluster.nodes[index]
        return placement.admits(node.name, node.features, not any(node.allocated))

    def _check_admits(self, a: Start, index: int, placement: Placement, now: float) -> None:
        """A policy that starts a variant on a node its placement does not admit breaks the model's rules."""
        if not self._admits(index, placement):
            node = self.cluster.nodes[index]
            busy = " (not idle)" if any(node.allocated) else ""
            raise SimulationInvariantError(f"t={now:g}: Start {a.group_id}: node {node.name}{busy} is not one its "
                                           f"{a.kind} variant may run on ({placement.describe()})")

    def _named_node(self, a: Start, name: str, partition: str, now: float) -> int:
        index = self.cluster.index.get(name)
        if index is None:
            raise SimulationError(f"t={now:g}: Start {a.group_id}: unknown node {name!r}")
        if self.cluster.nodes[index].partition != partition:
            raise SimulationError(f"t={now:g}: Start {a.group_id}: node {name} is not in partition "
                                  f"{partition} serving {a.kind}")
        return index

    def _preempt(self, a: Preempt, now: float) -> Outcome | None:
        j = self._visible[a.group_id]
        if now > j.complete_at:
            raise SimulationInvariantError(f"t={now:g}: Preempt {a.group_id}: its work completed at "
                                           f"t={j.complete_at:g} and it still runs")
        if a.beneficiary is not None:
            self._victims.setdefault(a.beneficiary, []).append(j.idx)
        j.beneficiary = a.beneficiary
        self._enter_grace(j, a.grace_s, now)
        return None

    def _enter_grace(self, j: JobState, grace_s: int, now: float) -> None:
        """The grace protocol, as slurmxd runs it: the job stops making progress, and is requeued at the deadline."""
        self._moves += 1
        ran = max(0.0, now - j.seg_start)  # nothing while Slurm was still starting it
        j.done = min(j.job.work, j.done + j.rate * ran)
        j.productive += ran
        j.status = GRACE
        j.version += 1
        j.preempted_at = now
        j.grace_deadline = now + grace_s
        # The nodes it frees are earmarked for its beneficiary; a victim preempted for no one earmarks nothing.
        j.marked_nodes = tuple(self.cluster.nodes[n].name for n in j.nodes) if j.beneficiary is not None else ()
        self._dirty[j.idx] = None
        delay = self.options.requeue_delay_s  # a victim whose hook exits on the signal leaves before its deadline
        leave = float(grace_s) if delay is None else min(float(grace_s), delay)
        if leave == 0:
            self._requeue(j, now)
        else:
            self._push(now + leave, GRACE_END, j.idx, j.version)

    def _cancel(self, a: Cancel, now: float) -> Outcome | None:
        j = self._visible[a.group_id]
        self._moves += 1
        if j.status == PENDING:
            self._pending -= 1
        else:
            if j.status == RUNNING:
                ran = max(0.0, now - j.seg_start)
                j.done += j.rate * ran
                j.productive += ran
            self._release(j, now)
        self._close(j, now, CANCELLED)
        return None

    def _resize(self, a: Resize, now: float) -> Outcome | None:
        """A pending group is resized in place; a running one, as slurmxd does it, through the grace protocol:
        its own grace period, then a requeue at the new size (not counted as a preemption)."""
        j = self._visible[a.group_id]
        if j.status == PENDING:
            self._resize_kinds(j, a)
            self._dirty[j.idx] = None
            return None
        for k in j.kinds:  # the size is checked now, as Slurm would refuse it at the update
            self._checked_vector(j.job, k, Resources(a.cpus, a.mem_mb, j.facts[k].request.gres))
        j.resize_to = a
        self._enter_grace(j, j.job.grace_s, now)
        return None

    def _resize_kinds(self, j: JobState, a: Resize) -> None:
        for k in j.kinds:
            facts = j.facts[k]
            request = Resources(a.cpus, a.mem_mb, facts.request.gres)
            j.facts[k] = facts._replace(request=request, vector=self._checked_vector(j.job, k, request))
