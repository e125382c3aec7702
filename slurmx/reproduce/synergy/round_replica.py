"""A replica of the authors' round simulator; it calls the very same decision functions as the registered
policy `synergy` (`slurmx.policies.synergy.decisions`: `job_profile`, `queue_key`, `admit_by_gpus`,
`allocate_round`), and decides nothing of its own.

Why a replica beside `slurmx.sim.engine`: Synergy's published numbers come from a simulator that credits a
round's progress as whole iterations, floor(R / (iteration time / speed)), when the round starts, records
completions at lease end, and splits multi-GPU jobs across servers (`synergy.md` §3.1); the engine runs
jobs on one node with continuous progress. Replaying the authors' job lists through the same arithmetic is
what makes our numbers comparable with theirs (81.09 h and 21.88 h on their list). What is the released
runner's and not Synergy's stays here: arrivals repeated past the trace, the 1000 h starvation bump, and the
checks every round makes (no job below its proportional throughput, no server over-committed, and for PROP,
TUNE and OPT every GPU-admitted job placed).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from slurmx.policies.synergy.decisions import (
    ClusterShape,
    JobProfile,
    Mechanism,
    Order,
    QueueState,
    admit_by_gpus,
    allocate_round,
    job_profile,
    queue_key,
)
from slurmx.policies.synergy.mechanisms import EPS, Allocation, Placement
from slurmx.policies.synergy.opt import super_machine

__all__ = ["FairnessViolation", "OptCompare", "RoundJob", "RoundRun", "RoundSettings", "round_jobs", "simulate"]


class FairnessViolation(AssertionError):
    """A round broke one of Synergy's guarantees (a bug in a mechanism)."""


@dataclass(frozen=True, slots=True)
class RoundJob:
    """One job of a trace: arrival (s), GPUs, model, total iterations and iteration time at the proportional share."""

    job_id: int
    arrival: float
    gpus: int
    model: str
    total_iters: int
    iter_time_s: float
    measured: bool = True


@dataclass(frozen=True, slots=True)
class RoundSettings:
    """Everything that changes a run besides the trace."""

    mechanism: Mechanism = "tune"
    order: Order = "fifo"
    shape: ClusterShape = field(default_factory=ClusterShape)
    round_s: float = 300.0
    placement: Placement = "first_fit"
    speed_model: Literal["binary", "matrix"] = "binary"
    ftf: Literal["themis", "released"] = "themis"
    tune_order: Literal["policy", "demand"] = "policy"
    stop_when_measured_done: bool = True
    starvation_s: float | None = 1000 * 3600.0  # a job idle this long goes to the front for good (released code)
    # After the trace's last arrival, while measured jobs are unfinished: "repeat" keeps jobs arriving, the trace
    # again with its arrivals shifted by its last arrival (unmeasured copies), as the released runner generates
    # jobs until the measured window is done; "stop" lets the queue drain with no more arrivals. Only with the
    # starvation bump on (else a measured job could wait for ever).
    after_trace: Literal["repeat", "stop"] = "repeat"
    compare_opt: bool = False  # also solve OPT's LP1 on each round's admitted jobs (paper §5.6's comparison)


@dataclass
class OptCompare:
    """Paper §5.6's comparison, round by round: the mechanism's summed relative throughput against OPT's LP1
    optimum on the same admitted jobs (same queue state, same round). Rounds where every job gets its best
    point (nothing contended) count too: there the two agree unless the mechanism's packing loses."""

    rounds: int = 0
    ours: float = 0.0  # sum over rounds of the mechanism's summed throughput
    opt: float = 0.0  # the same for OPT
    prop: float = 0.0  # the same at the proportional share (1.0 a job)
    worst: float = 1.0  # lowest per-round ratio ours / OPT
    within_10pct: int = 0  # rounds with ours >= 0.9 OPT

    def add(self, ours: float, opt: float, prop: float) -> None:
        ratio = ours / opt if opt > EPS else 1.0
        self.rounds += 1
        self.ours += ours
        self.opt += opt
        self.prop += prop
        self.worst = min(self.worst, ratio)
        self.within_10pct += ratio >= 0.9 - EPS

    @property
    def ratio(self) -> float:
        """Aggregate throughput ratio over all compared rounds."""
        return self.ours / self.opt if self.opt > EPS else math.nan

    @property
    def gain_captured(self) -> float:
        """Share of OPT's throughput gain over the proportional share that the mechanism reaches."""
        return (self.ours - self.prop) / (self.opt - self.prop) if self.opt - self.prop > EPS else math.nan


@dataclass
class RoundRun:
    """JCTs (s) of the measured jobs, makespan, and what the run cost."""

    jct: dict[int, float]
    makespan_s: float
    rounds: int
    mechanism_wall_s: float
    checked_rounds: int
    max_speed: float = 1.0
    unfinished: int = 0
    speedups: list[float] = field(default_factory=list)
    opt_compare: OptCompare | None = None

    def mean_h(self) -> float:
        return float(np.mean(list(self.jct.values()))) / 3600.0 if self.jct else math.nan

    def pct_h(self, q: float) -> float:
        return float(np.percentile(list(self.jct.values()), q)) / 3600.0 if self.jct else math.nan


@dataclass(slots=True)
class _Live:
    job: RoundJob
    profile: JobProfile
    done: int = 0
    attained: float = 0.0
    key: tuple[float, ...] | None = None  # queue key, cleared when the job runs
    priority: int = 0  # 1 once starved: sorted ahead of every job without it
    last_run: float = 0.0  # end of the last round it ran (its arrival before that), as the released code


def _key_of(lj: _Live) -> tuple[float, ...]:
    assert lj.key is not None
    return lj.key


def round_jobs(rows: Sequence[tuple[int, float, int, str, int, float, bool]]) -> list[RoundJob]:
    """RoundJobs from (id, arrival, gpus, model, total_iters, iter_time, measured) tuples."""
    return [RoundJob(*row) for row in rows]


def _check(live: list[_Live], results: list[tuple[Allocation, float] | None], st_free: tuple[np.ndarray, ...],
           settings: RoundSettings, admitted_gpus: int, t: float) -> None:
    for lj, res in zip(live, results, strict=True):
        if res is not None and res[1] < 1.0 - EPS:
            raise FairnessViolation(f"t={t:g}: job {lj.job.job_id} ({lj.job.model}) runs at {res[1]:.3f} of its "
                                    "proportional throughput")
    for name, free in zip(("GPUs", "CPUs", "memory"), st_free, strict=True):
        if free.min() < -EPS:
            raise FairnessViolation(f"t={t:g}: server {int(free.argmin())} over-committed in {name}")
    if settings.mechanism != "greedy":
        placed = sum(lj.job.gpus for lj, res in zip(live, results, strict=True) if res is not None)
        if placed != admitted_gpus:
            raise FairnessViolation(f"t={t:g}: {settings.mechanism} placed {placed} of {admitted_gpus} admitted GPUs")


def _compare_with_opt(head: list[_Live], results: list[tuple[Allocation, float] | None], shape: ClusterShape,
                      into: OptCompare) -> None:
    """Add one round: the placed jobs' summed throughput against OPT's LP1 on the same jobs."""
    placed = [(lj, res) for lj, res in zip(head, results, strict=True) if res is not None]
    if not placed:
        return
    opt = super_machine([lj.profile.opt for lj, _ in placed], shape.cpus * shape.servers, shape.mem_gb * shape.servers)
    into.add(sum(res[1] for _, res in placed), opt.objective, float(len(placed)))


def _next_cycle(arrivals: list[RoundJob], trace: list[RoundJob], cycle: int, period: float, id_step: int) -> int:
    """The released runner keeps generating jobs until the measured ones are done: here, the trace once more,
    shifted by `period` (its last arrival) per cycle, its copies unmeasured and renumbered."""
    cycle += 1
    arrivals.extend(replace(j, job_id=j.job_id + cycle * id_step, arrival=j.arrival + cycle * period, measured=False)
                    for j in trace)
    return cycle


def simulate(jobs: Sequence[RoundJob], settings: RoundSettings = RoundSettings()) -> RoundRun:
    """Run the trace round by round until every measured job (or every job) has finished. Pure."""
    shape, r = settings.shape, settings.round_s
    aware = settings.mechanism != "prop"
    arrivals = sorted(jobs, key=lambda j: (j.arrival, j.job_id))
    trace, cycle = list(arrivals), 0
    period = trace[-1].arrival if trace else 0.0  # cycle c's job k arrives at c * period + its own arrival
    id_step = max((j.job_id for j in trace), default=0) + 1
    waiting_measured = sum(1 for j in jobs if j.measured)
    live: list[_Live] = []
    jct: dict[int, float] = {}
    nxt, t, rounds, checked, wall, last_finish, max_speed = 0, 0.0, 0, 0, 0.0, 0.0, 1.0
    speedups: list[float] = []
    total_gpus = shape.servers * shape.gpus
    stop_early = settings.stop_when_measured_done and waiting_measured > 0
    idle: list[tuple[float, int, _Live]] = []  # (last run or arrival, id, job): who may starve next
    bumped = 0
    compare = OptCompare() if settings.compare_opt and settings.mechanism in ("prop", "tune") else None
    # Without the starvation bump, SRTF could keep a measured job waiting behind new arrivals for ever.
    repeat = settings.after_trace == "repeat" and stop_early and period > 0 and settings.starvation_s is not None
    while nxt < len(arrivals) or live:
        if stop_early and waiting_measured == 0:
            break
        if repeat and nxt == len(arrivals):
            cycle = _next_cycle(arrivals, trace, cycle, period, id_step)
        if not live and nxt < len(arrivals) and arrivals[nxt].arrival > t:
            t = math.ceil(arrivals[nxt].arrival / r) * r
        while nxt < len(arrivals) and arrivals[nxt].arrival <= t:
            j = arrivals[nxt]
            live.append(_Live(j, job_profile(j.model, j.gpus, shape), last_run=j.arrival))
            if settings.starvation_s is not None:
                heapq.heappush(idle, (j.arrival, j.job_id, live[-1]))
            nxt += 1
            if repeat and nxt == len(arrivals):  # the next cycle's first jobs may arrive by t too
                cycle = _next_cycle(arrivals, trace, cycle, period, id_step)
        if settings.order != "fifo" or bumped:  # FIFO without starved jobs: `live` stays in arrival order
            for lj in live:  # a key changes only when the job ran or starved (or, for FTF, with the clock)
                if lj.key is None or settings.order == "ftf":
                    state = QueueState(lj.job.arrival, (lj.job.total_iters - lj.done) * lj.job.iter_time_s,
                                       lj.job.total_iters * lj.job.iter_time_s, lj.attained, lj.profile,
                                       lj.job.job_id)
                    lj.key = (-lj.priority, *queue_key(settings.order, state, t, shape, aware, settings.ftf))
            live.sort(key=_key_of)
        # The policy's GPU-only admission, to know how far down the queue a round reaches.
        chosen = admit_by_gpus([lj.job.gpus for lj in live], total_gpus)
        admitted = sum(live[i].job.gpus for i in chosen)
        head = live if settings.mechanism == "greedy" else live[:chosen[-1] + 1 if chosen else 0]
        servers = shape.servers_state()
        started = time.perf_counter()
        results = allocate_round([lj.profile for lj in head], servers, settings.mechanism, settings.placement,
                                 settings.tune_order)
        wall += time.perf_counter() - started
        if settings.speed_model == "matrix" and settings.mechanism in ("tune", "greedy"):
            results = [None if res is None else (res[0], lj.profile.speed(res[0], "matrix"))
                       for lj, res in zip(head, results, strict=True)]
        _check(head, results, (servers.free_gpus, servers.free_cpus, servers.free_mem), settings, admitted, t)
        if compare is not None:
            _compare_with_opt(head, results, shape, compare)
        checked += 1
        rounds += 1
        if settings.starvation_s is not None:  # the released check: at the round's start, on every queued job,
            # whether it runs this round or not, idle time measured from the end of its last lease (or its
            # arrival). Lazily: a heap entry is stale once the job ran again.
            while idle and idle[0][0] < t - settings.starvation_s:
                since, _, lj = heapq.heappop(idle)
                if since == lj.last_run and lj.priority == 0 and lj.done < lj.job.total_iters:
                    lj.priority, lj.key = 1, None
                    bumped += 1
        end = t + r
        still: list[_Live] = []
        for lj, res in zip(head, results, strict=True):
            if res is not None:
                speed = res[1]
                max_speed = max(max_speed, speed)
                lj.done += math.floor(r / (lj.job.iter_time_s / speed))
                lj.attained += r * lj.job.gpus
                lj.key = None
                lj.last_run = end
                if settings.starvation_s is not None:
                    heapq.heappush(idle, (end, lj.job.job_id, lj))
            if lj.done >= lj.job.total_iters:
                last_finish = end
                if lj.job.measured:
                    jct[lj.job.job_id] = end - lj.job.arrival
                    waiting_measured -= 1
                    prop_time = lj.job.total_iters * lj.job.iter_time_s
                    speedups.append(prop_time / max(end - lj.job.arrival, EPS))
            else:
                still.append(lj)
        if len(head) < len(live):
            still.extend(live[len(head):])
        live = still
        t = end
    first = arrivals[0].arrival if arrivals else 0.0
    return RoundRun(jct, last_finish - first, rounds, wall, checked, max_speed, len(live), speedups, compare)
