"""The discrete-event engine: runs a daemon policy, unchanged, against a model cluster and a workload.

One kernel serves every mode. Events sit in a heap of `(time, priority, sequence, ...)`, so ties break the
same way on every run: at one instant, finishes come before grace ends, before arrivals, before profiling
results, before the periodic tick. The policy is consulted at *scheduling points*, never per event:

- `event` mode: once all events of an instant are processed (by default only while a group is pending), and
  again at the same instant if the plan released resources (a cancel, a zero-grace preemption);
- `tick` mode (FitGpp's one-minute steps): at every period boundary, after that instant's events;
- `round` mode (Synergy's 300 s leases): as tick, and a job whose work completes mid-round keeps its
  resources until the round ends, where its completion is recorded (the paper's simulator's granularity).

A policy with a backfill cadence (FIFO under `cadence: slurm`) gets its full passes on ticks in event mode and
its `between` policy (Slurm's main scheduler) at the scheduling points (`engine_passes`).

The policy reads a `ClusterView` built from cached immutable `Node` and `Group` objects, each rebuilt only
when its own state changed, and its plan is applied action by action to the model. Anything the model cannot
do is a loud `SimulationError`; anything that breaks the model's rules (over-allocation, a double start, work
not adding up) is a `SimulationInvariantError` naming the group, the node and the time.

The engine is one class in several modules, so each part reads on its own: this kernel (set-up, the event heap
and its loop, the events, the cycle's backend surface, the result); `engine_actions`, how each action changes the
model world; `engine_view`, the view the policy reads; `engine_skips`, when a decision can be skipped;
`engine_passes`, ticks and backfill passes; `engine_isolation`, the groups the policy failed on; `engine_state`,
the state they share, typed, and the checks of each job read.
"""

from __future__ import annotations

import heapq
import math
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from slurmx.core.actions import Action, Cancel, Hold, Plan, Preempt, Release, Resize, SetPriority, Start
from slurmx.core.model import ClusterView
from slurmx.core.resources import Resources
from slurmx.core.snapshot import constant, freeze_if_alive
from slurmx.cycle import DecisionLog, Handler, Outcome, checked_handlers, decide
from slurmx.cycle.admissible import Verdict, admissible, verdict_outcome
from slurmx.cycle.log import APPLIED
from slurmx.cycle.run import PlanError
from slurmx.policies.base import Policy, queue_window, waits_for_release
from slurmx.sim.cluster import ModelCluster, SimulationError, SimulationInvariantError, Vector
from slurmx.sim.collector import fewer_collections
from slurmx.sim.config import EngineOptions
from slurmx.sim.engine_passes import PassSteps
from slurmx.sim.engine_skips import SkipRules
from slurmx.sim.engine_state import (
    ARRIVAL,
    DONE,
    EVENT_NAMES,
    PENDING,
    PROFILED,
    PROFILING,
    JobState,
    KindFacts,
)
from slurmx.sim.engine_view import Queues, ViewSteps
from slurmx.sim.jobs import SimJob
from slurmx.sim.metrics import RunStats, SimResult

__all__ = ["Engine", "Progress", "SimulationError", "SimulationInvariantError"]

_REL_TOL = 1e-7
_MAX_CALLS_PER_INSTANT = 1000
_PROGRESS_EVERY = 1024  # events between two progress reports
_APPLIED = Outcome(APPLIED)  # a tuple: one for every applied action


class Progress(NamedTuple):
    """What a progress callback is told, every few thousand events and at the end."""

    done: int  # jobs completed or cancelled
    total: int | None  # None for a streamed workload, whose length is known only at its end
    events: int
    now: float


class Engine(PassSteps, SkipRules, ViewSteps):
    """One simulation run: `Engine(cluster, policy, jobs, options).run() -> SimResult`. Single use.

    `jobs` is a sequence (sorted here by submit time; every job is checked before the run starts) or a stream, an
    iterator in submit order (a trace read as it goes): each job is then checked when it is read, and the engine
    holds only the jobs still in the system, so memory follows the queue, not the log. Either way a job's state
    is built when it is read and dropped once it has ended, and its record is all that remains."""

    def __init__(
        self,
        cluster: ModelCluster,
        policy: Policy,
        jobs: Sequence[SimJob] | Iterator[SimJob],
        options: EngineOptions | None = None,
        progress: Callable[[Progress], None] | None = None,
        decisions: DecisionLog | None = None,
    ) -> None:
        self.name = "simulator"
        self.decisions = decisions
        self._init_isolation()
        self.handlers = checked_handlers(self.name, {
            Start: self._each(self._start), Preempt: self._each(self._preempt), Cancel: self._each(self._cancel),
            Resize: self._each(self._resize), SetPriority: self._each(self._set_priority),
            Hold: self._each(self._hold), Release: self._each(self._release_hold)})
        self.cluster = cluster
        self.policy = policy
        self.options = options or EngineOptions()
        self.progress = progress
        self.now = 0.0
        self._heap = []
        self._seq = 0
        self._jobs = {}
        self._by_id = {}
        self._seen_ids = set()
        self._gone = []
        self._visible = {}
        self._groups = {}
        self._stale_groups = set()
        self._lent = []
        self._holes = 0
        self._queues = Queues()
        self._partitions = constant(cluster.partitions)
        self._kinds = constant(cluster.kinds)
        self._dirty = {}
        self._read = 0  # jobs taken from the workload so far
        self._last_submit = -math.inf
        self._exhausted = False
        self._arrived = 0
        self._open = 0
        self._pending = 0
        self._max_pending = 0
        self._busy = 0
        self._records = []
        self._record_order = array("q")
        self._reschedule = []
        self._events = 0
        self._by_event = [0] * len(EVENT_NAMES)
        self._calls = 0
        self._actions: dict[str, int] = {}
        self._repeated_preempts = 0
        self._notes = dict.fromkeys(self.options.count_notes, 0)
        self._victims = {}
        self._policy_wall = 0.0
        self._alloc_changed = False
        self._releases = 0
        self._moves = 0
        self._util_t = array("d")
        self._util_v = array("d")
        self._util_cols = tuple((p, d) for p in cluster.partitions for d in cluster.dims)
        self._ran = False
        self._largest = {}
        self._placeable = {}
        # A policy that waits for a release is not asked again while its last plan left groups waiting and the
        # instant brought only arrivals (no room given back, no group shown late, older than the queue's end).
        self._init_passes(policy)  # the policy asked between passes is the one the skips below are judged by
        self._waits_for_release = waits_for_release(self._between)
        self._blocked = False
        self._freed: list[int] = []  # nodes given room back since the last decision began (strict FIFO)
        # A policy that reads a bounded window of the queue is not asked again after a plan that changed nothing,
        # with the window full, while instants bring only arrivals and no running job is past its expected end.
        self._window = queue_window(self._between)
        if self._window is not None:  # whether a job is past its expected end is read from the by-end lists
            self._queues.ends_wanted = True
        self._quiet = False
        self._releases_seen = 0
        self._late_visible = False
        # Jobs held until named jobs finish (meta "after": the AlloX authors' profiling samples, which hold
        # machines, release their job when done): held idx -> how many it waits for; awaited id -> who waits;
        # the awaited (meta "awaited") that already finished.
        self._held: dict[int, int] = {}
        self._waiters: dict[str, list[int]] = {}
        self._awaited_done: set[str] = set()
        self._skipped_calls = 0
        self._profiling = self.options.profiling_fixed_s > 0 or self.options.profiling_fraction > 0
        self._vectors: dict[tuple[str, Resources], Vector] = {}
        self._next_vid = 1
        self._error_rng = (np.random.default_rng([self.options.seed, 0x5E57])
                           if self.options.error_sigma is not None else None)
        self._source: Iterator[SimJob]
        if isinstance(jobs, Sequence):
            # stable: ties keep input order; the jobs checked here are the ones run (the caller's list may change)
            ordered = sorted(jobs, key=lambda job: job.submit_time)
            self._check_all(ordered)
            self._total: int | None = len(ordered)
            self._source = iter(ordered)
        else:
            self._total = None
            self._source = iter(jobs)

    # ---- set-up ----------------------------------------------------------------------------------------

    def _error_factors(self, job: SimJob) -> dict[str, float] | None:
        """The estimate error model's factor per variant: one draw per variant, served or not, in job order, so
        the stream of draws depends on the workload alone."""
        opts = self.options
        if self._error_rng is None or opts.error_sigma is None:
            return None
        draws = self._error_rng.standard_normal(len(job.variants))
        factors = 1.0 + np.clip(draws * opts.error_sigma, -opts.error_clamp, opts.error_clamp)
        return dict(zip(job.variants, factors.tolist(), strict=True))

    def _admit(self, job: SimJob) -> JobState:
        """A job read from the workload: checked (a stream's job here; a sequence's were checked whole before the
        run, so only the kinds it is served on are read again), its estimates fixed (the error model drawn in job
        order) and its state built."""
        if job.submit_time < self._last_submit:
            raise SimulationError(f"workload: job {job.job_id} is submitted at t={job.submit_time:g}, before the "
                                  f"job read before it (t={self._last_submit:g}); a streamed workload must come "
                                  "in submit order")
        self._last_submit = job.submit_time
        kinds = self._check(job, self._seen_ids) if self._total is None else self._served_kinds(job)
        j = JobState(self._read, job)
        self._read += 1
        factors = self._error_factors(job) if self._error_rng is not None else None
        variants, facts = job.variants, j.facts
        for kind, vec in kinds:
            variant = variants[kind]
            base = variant.estimate_s if variant.estimate_s is not None else variant.duration_s
            estimate = float(base * factors[kind]) if factors is not None else float(base)
            facts[kind] = KindFacts(variant.request, vec, estimate, self._next_vid, variant.nodes, variant.placement)
            self._next_vid += 1
        j.kinds = tuple([kind for kind, _ in kinds])
        self._jobs[j.idx] = j
        self._by_id[job.job_id] = j
        self._open += 1
        return j

    # ---- the kernel ------------------------------------------------------------------------------------

    def _push_next_arrival(self) -> None:
        """Read the next job (one is read ahead, as its arrival event)."""
        if self._exhausted:
            return
        job = next(self._source, None)
        if job is None:
            self._exhausted = True
            return
        j = self._admit(job)
        self._push(job.submit_time, ARRIVAL, j.idx)

    def run(self) -> SimResult:
        if self._ran:
            raise SimulationError("an Engine runs once; build a new one")
        self._ran = True
        with fewer_collections():
            return self._run()

    def _run(self) -> SimResult:
        started = time.perf_counter()
        periodic = self.options.mode != "event"
        idle_calls = self.options.call_when_idle
        heap = self._heap
        self._push_next_arrival()
        self._first_tick()
        handlers = (self._on_finish, self._on_grace_end, self._on_arrival, self._on_profiled, self._on_tick)
        pop = heapq.heappop
        by_event = self._by_event
        events = 0
        next_progress = 0
        while heap:
            t = heap[0][0]
            if t < self.now:
                raise SimulationInvariantError(f"t={t:g}: time went backwards from {self.now:g}")
            self.now = t
            changed = False
            for _ in range(_MAX_CALLS_PER_INSTANT):
                while heap and heap[0][0] == t:
                    _, prio, _, payload, version = pop(heap)
                    if handlers[prio](payload, version, t):
                        changed = True
                        events += 1
                        by_event[prio] += 1
                # A scheduling point: every event of the instant is in.
                if periodic or not changed or not (self._pending or idle_calls):
                    break
                if self._nothing_to_decide(t):
                    self._skipped_calls += 1
                    break  # its plan would be empty: nothing it waits for has happened
                # A plan that freed resources (cancel, zero-grace preemption) is followed by another decision
                # at the same instant, as if the release were an event; otherwise the instant is done.
                changed = self._schedule(t, self._between)[1]
            else:
                raise SimulationError(f"t={t:g}: {_MAX_CALLS_PER_INSTANT} policy calls at one instant; the plans "
                                      "keep creating events at the same time")
            if self._alloc_changed:
                self._sample(t)
            if self.progress is not None and events >= next_progress:
                next_progress = events + _PROGRESS_EVERY
                self.progress(Progress(len(self._records), self._total, events, t))
        self._events = events
        self._finish_checks()
        self._drop_gone()
        if self.progress is not None:
            self.progress(Progress(len(self._records), self._total if self._total is not None else self._read,
                                   events, self.now))
        return self._result(time.perf_counter() - started)

    def _sample(self, t: float) -> None:
        if self._util_t and self._util_t[-1] == t:
            del self._util_v[-len(self._util_cols):]
            self._util_t.pop()
        self._util_t.append(t)
        for p in self.cluster.partitions:
            self._util_v.extend(self.cluster.used[p])
        self._alloc_changed = False

    # ---- events ----------------------------------------------------------------------------------------

    def _on_arrival(self, idx: int, _version: int, t: float) -> bool:
        self._push_next_arrival()
        self._arrived += 1
        j = self._jobs[idx]
        meta = j.job.meta
        if not meta and not self._profiling:  # most jobs: nothing to wait for, no profiling delay
            self._make_visible(j)
            return True
        opts = self.options
        after = [a for a in meta.get("after", ()) if a not in self._awaited_done]
        if after:  # shown when every job it waits for has finished (`_release_waiters`)
            j.status = PROFILING
            self._busy += 1
            self._held[idx] = len(after)
            for a in after:
                self._waiters.setdefault(a, []).append(idx)
            return True
        measured = meta.get("profiling_delay_s")  # set by sim.profiling_model: the samples' own times
        if measured is not None:
            delay = float(measured)
        elif opts.profiling_fixed_s > 0 or opts.profiling_fraction > 0:
            longest = max(v.duration_s for v in j.job.variants.values())
            delay = opts.profiling_fixed_s + opts.profiling_fraction * longest
        else:
            delay = 0.0
        if delay > 0:
            j.status = PROFILING
            self._busy += 1
            self._push(t + delay, PROFILED, idx)
            return True
        self._make_visible(j)
        return True

    def _on_profiled(self, idx: int, _version: int, t: float) -> bool:
        self._busy -= 1
        self._late_visible = True  # it may be older than groups already waiting
        self._make_visible(self._jobs[idx])
        return True

    def _make_visible(self, j: JobState) -> None:
        j.status = PENDING
        self._pending += 1
        self._shown_one(self.now)
        self._max_pending = max(self._max_pending, self._pending)
        self._visible[j.group_id] = j
        self._dirty[j.idx] = None

    def _on_finish(self, idx: int, version: int, t: float) -> bool:
        j = self._jobs.get(idx)
        if j is None or version != j.version:
            return False  # superseded by a preemption or cancel
        j.done += j.rate * (j.complete_at - j.seg_start)
        j.productive += j.complete_at - j.seg_start
        total = j.job.work
        if not math.isclose(j.done, total, rel_tol=_REL_TOL, abs_tol=_REL_TOL * total):
            raise SimulationInvariantError(f"t={t:g}: group {j.group_id} finished with work {j.done!r} of {total!r}")
        j.done = total
        self._release(j, t)
        self._close(j, t, DONE)
        if j.job.meta.get("awaited"):
            self._release_waiters(j.group_id)
        return True

    def _release_waiters(self, group_id: str) -> None:
        """`group_id` finished: a job held for it (meta "after") and nothing else is shown now."""
        self._awaited_done.add(group_id)
        for idx in self._waiters.pop(group_id, ()):
            self._held[idx] -= 1
            if not self._held[idx]:
                del self._held[idx]
                self._on_profiled(idx, 0, self.now)

    def _on_grace_end(self, idx: int, version: int, t: float) -> bool:
        j = self._jobs.get(idx)
        if j is None or version != j.version:
            return False
        self._requeue(j, t)
        return True

    def _finish_checks(self) -> None:
        if self._open:
            self._stalled(self.now)
        busy = self.cluster.busy_nodes()
        if busy:
            raise SimulationInvariantError(f"t={self.now:g}: every job ended but nodes still hold resources: "
                                           f"{', '.join(busy[:5])}")

    # ---- the policy ------------------------------------------------------------------------------------

    def _schedule(self, now: float, policy: Policy) -> tuple[bool, bool]:
        """One decision of the shared cycle (`slurmx.cycle.decide`); says whether anything started, stopped or was
        cancelled, and whether resources were released (event mode then decides again at the same instant)."""
        moves, releases = self._moves, self._releases
        self._calls += 1
        self._freed = []  # what this plan frees counts for the next decision
        self._late_visible = False  # and a group it requeues is shown late to it
        try:
            decision = decide(policy, self, now, self.decisions, self._calls)
        except PlanError as exc:
            raise SimulationError(str(exc)) from None
        self._policy_wall += decision.policy_s
        self._releases_seen = releases
        self._blocked = self._waits_for_release and self._pending > 0
        self._quiet = (self._window is not None and self._pending >= self._window and self._moves == moves
                       and self._releases == releases)
        return self._moves != moves, self._releases != releases

    # ---- the cycle's backend: observe, notes, one handler per action type --------------------------------

    def observe(self, now: float) -> ClusterView:
        return self._view(now)

    def take_notes(self, plan: Plan, now: float) -> None:
        """Count the notes the run reports; first, the view is gone: what it still lends is frozen before the plan
        changes the engine's state."""
        if freeze_if_alive(self._lent):
            self._queues.keep_read()
        if self._notes:
            for note in map(str, plan.notes):
                for prefix in self._notes:
                    if note.startswith(prefix):
                        self._notes[prefix] += 1

    def _each(self, apply: Callable[[Any, float], Outcome | None]) -> Handler:
        """A handler applying a batch action by action, each one `cycle.admissible` admits (`apply` returns None
        for an applied action); the others end as Slurm would end them."""
        def handle(batch: Sequence[Action], now: float) -> list[Outcome]:
            done = []
            counts = self._actions
            for action in batch:
                name = type(action).__name__
                counts[name] = counts.get(name, 0) + 1
                verdict = admissible(action, self._standing)
                if verdict is Verdict.ADMITTED:
                    done.append(apply(action, now) or _APPLIED)
                else:
                    self._not_admitted(action, verdict)
                    done.append(verdict_outcome(verdict, action))
            return done
        return handle

    # ---- result ----------------------------------------------------------------------------------------

    def _result(self, wall: float) -> SimResult:
        cols = len(self._util_cols)
        values = np.frombuffer(self._util_v, dtype=np.float64).reshape(-1, cols) if cols else np.zeros((0, 0))
        capacity = tuple(c for p in self.cluster.partitions for c in self.cluster.partition_dims[p])
        stats = RunStats(events=self._events, by_event=dict(zip(EVENT_NAMES, self._by_event, strict=True)),
                         policy_calls=self._calls, actions=dict(sorted(self._actions.items())),
                         repeated_preempts=self._repeated_preempts, max_pending=self._max_pending,
                         notes=self._notes_counted(self._notes), end_time=self.now, wall_s=wall,
                         policy_calls_skipped=self._skipped_calls, policy_wall_s=self._policy_wall)
        order = np.argsort(np.frombuffer(self._record_order, dtype=np.int64), kind="stable")
        records = tuple(map(self._records.__getitem__, order.tolist()))  # in submission order
        # The samples are read in place, not copied (48 MB at a million jobs, at the run's peak): the engine runs
        # once and never appends to them again, and an array exporting its buffer refuses to resize anyway.
        return SimResult(records, np.frombuffer(self._util_t, dtype=np.float64), values,
                         self._util_cols, capacity, tuple(self._reschedule), stats, self.options)
