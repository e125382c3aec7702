"""A replica of the paper's task-level simulator; it calls the very same decision functions as the registered
policy `mlfs`.

The one engine (`slurmx.sim.engine`) places each job whole on one node with exclusive resources; MLFS places
single tasks (model partitions and the parameter server) on GPUs shared by utilisation, evicts them from
overloaded servers, and stops jobs by accuracy, which that engine cannot express. So the reproduction keeps this
replica: DAG tasks on shared GPUs, learning curves, deadlines, time-stepped at the paper's one-minute scheduling
period and deterministic for a seed (the only non-determinism is the measured scheduler time, which is only
reported). Its schedulers (`task_mlfh.MlfH`, `task_baselines`) decide through `slurmx.policies.mlfs.rules` and
`slurmx.policies.mlfs.baseline_rules`, the functions the registered `mlfs`, `mlfs-fairshare`, `gandiva`, `slaq`
and `tiresias` call; `TaskPolicy` is this replica's call (a snapshot in, a task plan out), nothing else uses it.

Job model (ours where the paper is silent, all in `MlfsSimParams`):
- a job is the aggregate of its iterations: its tasks are the workers of its DAG (`task_graph`) plus the PS;
  it progresses while its PS and at least one whole data-parallel replica (all of that replica's model
  partitions) run, at the fraction of its replicas that run (`partial_progress`; "time_share" instead lets
  the missing partitions share the placed GPUs, at the fraction of its workers that run),
  slowed by the most contended GPU or server it touches
  (use above 100% divides the speed) and by its cross-server traffic (per sync period, each worker exchanges
  `comm_ps_mb` with the PS and `comm_worker_mb` with each neighbour, serialised over one `nic_mb_s` link);
- a migrated task pauses its job for `migration_pause_s` and moves `migration_mb` of state over the network;
- observed use = demand x (1 + amplitude x sin(2πt/period + phase)) per job, so packed GPUs overload at times;
- stopping: OptStop (the accuracy gap to the plateau below `optstop_gap`, at most the planned iterations), or,
  once MLF-C switched the job, its required accuracy, whichever comes first.
Invariants checked every call: a plan names only live tasks, never places a task twice, never moves a PS onto
a GPU, and never loads a server or a GPU past its nominal capacity.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from slurmx.policies.mlfs.model import JobState, ServerState, TaskKey, TaskState
from slurmx.sim.jobs import SimJob
from slurmx.sim.workloads.common import make_rng
from slurmx.sim.workloads.mlfs import AccuracyCurve, task_graph

__all__ = ["MlfsResult", "MlfsSimError", "MlfsSimParams", "Snapshot", "TaskPlan", "TaskPolicy", "simulate_mlfs"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one scheduling call sees. Policies must not mutate it."""

    now: float
    jobs: Mapping[str, JobState]  # active jobs (arrived, not finished), in submit order
    servers: Sequence[ServerState]


@dataclass(slots=True)
class TaskPlan:
    """What a policy wants: tasks to place or move (server, gpu), tasks to send back to the queue, switches.

    `assign` may name a queued task (start it) or a running one (migrate it). `to_queue` preempts running tasks.
    `stop_at_requirement` lists jobs MLF-C switches from OptStop to stopping at their required accuracy.
    """

    assign: dict[TaskKey, tuple[int, int | None]] = field(default_factory=dict)
    to_queue: list[TaskKey] = field(default_factory=list)
    stop_at_requirement: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class TaskPolicy(Protocol):
    """A task-level scheduler: pure, deterministic, called once per scheduling period."""

    name: str

    def decide(self, snapshot: Snapshot) -> TaskPlan: ...


class MlfsSimError(RuntimeError):
    """A policy returned a plan that breaks an invariant (a bug in the policy)."""


class MlfsSimParams(BaseModel):
    """The cluster and the job model (defaults: the paper's 20 x p3.8xlarge = 80 V100 GPUs; ours where silent)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: int = Field(20, ge=1)
    gpus_per_server: int = Field(4, ge=1)
    cpus: float = Field(32, gt=0)
    mem_gb: float = Field(244, gt=0)
    nic_mb_s: float = Field(1250, gt=0)  # 10 Gb/s
    tick_s: float = Field(60, gt=0)  # the paper's scheduling period
    sync_period_s: float = Field(30, gt=0)  # ours: one PS/worker exchange per 30 s of computing
    gpu_util: tuple[float, float] = (0.25, 0.85)  # ours: a worker's mean use of its GPU, U[lo, hi] per job
    worker_cpus: tuple[float, float] = (1.0, 6.0)
    worker_mem_gb: tuple[float, float] = (8.0, 40.0)
    ps_cpus: float = 2.0
    ps_mem_gb: float = 16.0
    fluctuation: float = Field(0.3, ge=0, lt=1)
    fluctuation_period_min: tuple[float, float] = (10.0, 60.0)
    optstop_gap: float = Field(0.005, gt=0)
    migration_pause_s: float = Field(5.0, ge=0)
    migration_mb: float = Field(1024.0, ge=0)  # ours: a migrated task ships its partition's state, ~1 GB
    h_r: float = Field(0.9, gt=0)  # what counts as an overload occurrence (metrics only)
    # How a job with some of its workers placed progresses (ours; the paper does not say): "whole_replicas" - a
    # data-parallel replica computes only with all its model partitions placed (a mini-batch passes through
    # every partition; TensorFlow pins partitions to devices), so speed = complete replicas / replicas;
    # "time_share" - the missing partitions are time-shared on the placed GPUs, speed = placed / all workers.
    partial_progress: Literal["whole_replicas", "time_share"] = "whole_replicas"
    horizon_h: float = Field(24 * 60, gt=0)  # give up after this long (unfinished jobs are reported)


@dataclass
class MlfsResult:
    """Per-run metrics, in the paper's units (§1.6)."""

    policy: str
    jobs: int
    finished: int
    avg_jct_min: float
    deadline_ratio: float
    urgent_deadline_ratio: float  # urgency > 8 (Fig. 6)
    avg_wait_s: float
    avg_accuracy: float  # by deadline
    accuracy_ratio: float  # accuracy requirement met by the deadline
    bandwidth_tb: float
    overloads: int  # (server, minute) pairs with a resource or GPU above h_r
    makespan_h: float
    overhead_ms: float  # mean wall time of one policy call
    jct_min: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "jct_min"}


@dataclass
class _Truth:
    """What only the simulator knows about a job: its curve, stop point, load profile and outcome."""

    job: SimJob
    curve: AccuracyCurve
    optstop_iter: float
    requirement_iter: float
    amplitude: float
    period_s: float
    phase: float
    stop_iter: float = 0.0
    done_at: float | None = None
    acc_at_deadline: float | None = None
    waited_s: float = 0.0
    pause_s: float = 0.0
    idx_srv: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    idx_gpu: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    all_srv: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # every placed task, PS too
    all_gpu: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # -1 for the PS
    all_dem: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    all_gdem: np.ndarray = field(default_factory=lambda: np.zeros(0))
    cross_mb: float = 0.0
    share: float = 0.0  # fraction of the job's full speed its placed workers give (`partial_progress`)
    dirty: bool = True


def _progress_share(job: JobState, placed: Sequence[TaskState], rule: str) -> float:
    """The fraction of full speed the placed workers give (see `MlfsSimParams.partial_progress`)."""
    if rule == "time_share" or job.replica_workers == 1:
        return len(placed) / job.workers
    if len(placed) == job.workers:
        return 1.0
    # A worker's replica: its position within its stage over the partitions per replica in that stage.
    replicas = max(1, job.dp_degree)
    missing: set[int] = set()
    position = [0] * len(job.stages)
    placed_keys = {t.key for t in placed}
    for t in job.tasks[1:]:
        parts = max(1, job.stages[t.stage] // replicas)
        replica = position[t.stage] // parts
        position[t.stage] += 1
        if t.key not in placed_keys:
            missing.add(replica)
    return (replicas - len(missing)) / replicas


def _optstop(curve: AccuracyCurve, planned: int, gap: float) -> float:
    target = curve.acc_max - gap
    return float(min(planned, math.ceil(curve.iterations_to(target)) if target > curve.acc_start else 1))


class _Sim:
    def __init__(self, jobs: Sequence[SimJob], policy: TaskPolicy, params: MlfsSimParams, seed: int) -> None:
        self.p = params
        self.policy = policy
        self.rng = make_rng(seed)
        self.pending = sorted(jobs, key=lambda j: (j.submit_time, j.job_id))
        self.next_arrival = 0
        self.active: dict[str, JobState] = {}
        self.truth: dict[str, _Truth] = {}
        self.finished: list[tuple[JobState, _Truth]] = []
        n, g = params.servers, params.gpus_per_server
        # one array per quantity; each ServerState holds row views of them, so policies and metrics agree
        self.nominal, self.observed = np.zeros((n, 3)), np.zeros((n, 3))
        self.gpu_nominal, self.gpu_observed = np.zeros((n, g)), np.zeros((n, g))
        self.servers = [ServerState(i, self.nominal[i], self.observed[i], self.gpu_nominal[i], self.gpu_observed[i])
                        for i in range(n)]
        self.bandwidth_mb = 0.0
        self.overloads = 0
        self.calls = 0
        self.policy_s = 0.0

    # ------------------------------------------------------------------ arrivals
    def _admit(self, now: float) -> None:
        while self.next_arrival < len(self.pending) and self.pending[self.next_arrival].submit_time <= now:
            self._add(self.pending[self.next_arrival])
            self.next_arrival += 1

    def _add(self, job: SimJob) -> None:
        p, m, rng = self.p, job.meta, self.rng
        curve: AccuracyCurve = m["accuracy_curve"]
        graph = task_graph(m)
        stages = [0] * len(m["stages"])
        for t in graph[1:]:
            stages[t.stage] += 1
        gpu = rng.uniform(*p.gpu_util)
        cpu = rng.uniform(*p.worker_cpus) / p.cpus
        mem = rng.uniform(*p.worker_mem_gb) / p.mem_gb
        comm_rate = (m["comm_ps_mb"] + m["comm_worker_mb"]) / p.sync_period_s / p.nic_mb_s
        tasks = [TaskState(job.job_id, 0, -1, 0.0, np.array([p.ps_cpus / p.cpus, p.ps_mem_gb / p.mem_gb, comm_rate]),
                           0.0)]
        tasks += [TaskState(job.job_id, t.task, t.stage, t.params_frac, np.array([cpu, mem, comm_rate]), gpu)
                  for t in graph[1:]]
        planned = int(m["iterations"])
        state = JobState(
            job_id=job.job_id, submit=job.submit_time, urgency=int(m["urgency"]),
            deadline=float(job.deadline if job.deadline is not None else math.inf), stages=tuple(stages),
            iter_time_s=float(m["iter_time_s"]), iterations_done=0.0, planned_iterations=planned, last_drop=0.0,
            drop_sum=0.0, loss=curve.loss(0), loss_start=curve.loss(0), accuracy=curve.accuracy(0),
            accuracy_req=float(m["accuracy_req"]), gpu_seconds=0.0, comm_ps_mb=float(m["comm_ps_mb"]),
            comm_worker_mb=float(m["comm_worker_mb"]), tasks=tasks, dp_degree=int(m.get("dp_degree", 1)),
        )
        optstop = _optstop(curve, planned, p.optstop_gap)
        truth = _Truth(job, curve, optstop, float(math.ceil(curve.iterations_to(state.accuracy_req))),
                       amplitude=p.fluctuation, period_s=60.0 * rng.uniform(*p.fluctuation_period_min),
                       phase=rng.uniform(0, 2 * math.pi), stop_iter=optstop)
        self.active[job.job_id] = state
        self.truth[job.job_id] = truth

    # ------------------------------------------------------------------ utilisation
    def _refresh(self, now: float) -> None:
        """Recompute nominal and observed use of every server and GPU from the placements (vectorised)."""
        srv, gpu, dem, gdem, fac = [], [], [], [], []
        for job in self.active.values():
            tr = self.truth[job.job_id]
            if tr.dirty:
                self._cache(job, tr)
            if len(tr.all_srv) == 0:
                continue
            srv.append(tr.all_srv)
            gpu.append(tr.all_gpu)
            dem.append(tr.all_dem)
            gdem.append(tr.all_gdem)
            factor = 1.0 + tr.amplitude * math.sin(2 * math.pi * now / tr.period_s + tr.phase)
            fac.append(np.full(len(tr.all_srv), factor))
        self.nominal[:] = 0.0
        self.gpu_nominal[:] = 0.0
        if srv:
            s_idx, g_idx = np.concatenate(srv), np.concatenate(gpu)
            d, gd, f = np.concatenate(dem), np.concatenate(gdem), np.concatenate(fac)
            np.add.at(self.nominal, s_idx, d)
            on_gpu = g_idx >= 0
            np.add.at(self.gpu_nominal, (s_idx[on_gpu], g_idx[on_gpu]), gd[on_gpu])
            observed = np.zeros_like(self.nominal)
            gpu_observed = np.zeros_like(self.gpu_nominal)
            np.add.at(observed, s_idx, d * f[:, None])
            np.add.at(gpu_observed, (s_idx[on_gpu], g_idx[on_gpu]), gd[on_gpu] * f[on_gpu])
            self.observed[:] = observed
            self.gpu_observed[:] = gpu_observed
        else:
            self.observed[:] = 0.0
            self.gpu_observed[:] = 0.0

    def _check_capacity(self) -> None:
        bad = np.flatnonzero((self.nominal > 1.0 + 1e-9).any(axis=1) | (self.gpu_nominal > 1.0 + 1e-9).any(axis=1))
        if len(bad):
            s = self.servers[int(bad[0])]
            raise MlfsSimError(f"{self.policy.name}: server {s.index} over-allocated "
                               f"(nominal {s.nominal.round(3).tolist()}, GPUs {s.gpu_nominal.round(3).tolist()})")

    # ------------------------------------------------------------------ plans
    def _apply(self, plan: TaskPlan, now: float) -> None:
        name = self.policy.name
        seen: set[tuple[str, int]] = set()
        for key in [*plan.to_queue, *plan.assign]:
            job = self.active.get(key[0])
            if job is None or not 0 <= key[1] < len(job.tasks):
                raise MlfsSimError(f"{name}: plan names an unknown task {key}")
        for key in plan.to_queue:
            if key in seen or key in plan.assign:
                raise MlfsSimError(f"{name}: task {key} both queued and placed (a task runs at most once)")
            seen.add(key)
            task = self.active[key[0]].tasks[key[1]]
            if task.server is None:
                raise MlfsSimError(f"{name}: cannot preempt queued task {key}")
            task.server = task.gpu = None
            self.truth[key[0]].dirty = True
        for key, (server, gpu) in plan.assign.items():
            task = self.active[key[0]].tasks[key[1]]
            if not 0 <= server < self.p.servers or (gpu is None) != task.is_ps or (
                    gpu is not None and not 0 <= gpu < self.p.gpus_per_server):
                raise MlfsSimError(f"{name}: bad target {(server, gpu)} for task {key}")
            if task.server is not None and (task.server, task.gpu) != (server, gpu):
                tr = self.truth[key[0]]
                tr.pause_s += self.p.migration_pause_s
                self.bandwidth_mb += self.p.migration_mb
            task.server, task.gpu = server, gpu
            self.truth[key[0]].dirty = True
        for job_id in plan.stop_at_requirement:
            job = self.active.get(job_id)
            if job is None:
                raise MlfsSimError(f"{name}: cannot switch unknown job {job_id}")
            job.stop_at_requirement = True
            tr = self.truth[job_id]
            tr.stop_iter = min(tr.optstop_iter, tr.requirement_iter)
        self._refresh(now)
        self._check_capacity()

    # ------------------------------------------------------------------ progress
    def _cache(self, job: JobState, tr: _Truth) -> None:
        placed = [t for t in job.tasks[1:] if t.server is not None]
        tr.idx_srv = np.array([t.server for t in placed], dtype=np.int64)
        tr.idx_gpu = np.array([t.gpu for t in placed], dtype=np.int64)
        tr.share = _progress_share(job, placed, self.p.partial_progress)
        every = [t for t in job.tasks if t.server is not None]
        tr.all_srv = np.array([t.server for t in every], dtype=np.int64)
        tr.all_gpu = np.array([-1 if t.gpu is None else t.gpu for t in every], dtype=np.int64)
        tr.all_dem = np.array([t.demand for t in every]).reshape(-1, 3)
        tr.all_gdem = np.array([t.gpu_demand for t in every])
        ps = job.tasks[0].server
        stage_servers: list[list[int]] = [[] for _ in job.stages]
        cross = 0.0
        for t in placed:
            assert t.server is not None
            stage_servers[t.stage].append(t.server)
            if ps is not None and t.server != ps:
                cross += job.comm_ps_mb
        for a, b in itertools.pairwise(stage_servers):
            same = sum(a.count(x) * b.count(x) for x in set(a))
            cross += job.comm_worker_mb * (len(a) * len(b) - same)
        tr.cross_mb = cross
        tr.dirty = False

    def _progress(self, now: float) -> None:
        p = self.p
        dt = p.tick_s
        gpu_slow = np.maximum(1.0, self.gpu_observed)
        srv_slow = np.maximum(1.0, self.observed.max(axis=1))
        done: list[str] = []
        for job_id, job in self.active.items():
            tr = self.truth[job_id]
            queued = [t for t in job.tasks if t.server is None]
            for t in queued:
                t.waited_s += dt
            if tr.dirty:
                self._cache(job, tr)
            running = len(tr.idx_srv)
            if tr.share <= 0.0 or job.tasks[0].server is None:
                tr.waited_s += dt  # ours: a job waits while it cannot progress (no whole replica, or no PS)
                self._deadline(job, tr, now + dt)
                continue
            slow = max(float(gpu_slow[tr.idx_srv, tr.idx_gpu].max()), float(srv_slow[tr.idx_srv].max()),
                       float(srv_slow[job.tasks[0].server]))
            transfer = tr.cross_mb / p.nic_mb_s
            compute = max(0.0, dt - tr.pause_s) * tr.share / slow
            compute *= p.sync_period_s / (p.sync_period_s + transfer)
            tr.pause_s = max(0.0, tr.pause_s - dt)
            job.gpu_seconds += running * dt
            step = compute / job.iter_time_s
            finish = job.iterations_done + step >= tr.stop_iter
            if finish:
                step_used = max(0.0, tr.stop_iter - job.iterations_done)
                frac = step_used / step if step > 0 else 0.0
                end = now + frac * dt
            else:
                step_used, end = step, now + dt
            self.bandwidth_mb += tr.cross_mb * (compute * step_used / step if step > 0 else 0.0) / p.sync_period_s
            self._advance(job, tr, job.iterations_done + step_used, now, end)
            if finish:
                tr.done_at = end
                done.append(job_id)
        for job_id in done:
            self.finished.append((self.active.pop(job_id), self.truth[job_id]))

    def _advance(self, job: JobState, tr: _Truth, iterations: float, start: float, end: float) -> None:
        before = job.iterations_done
        if tr.acc_at_deadline is None and end >= job.deadline:
            share = (job.deadline - start) / (end - start) if end > start else 0.0
            tr.acc_at_deadline = tr.curve.accuracy(before + (iterations - before) * min(1.0, max(0.0, share)))
        job.iterations_done = iterations
        whole = int(iterations)
        job.loss = tr.curve.loss(iterations)
        job.accuracy = tr.curve.accuracy(iterations)
        job.drop_sum = job.loss_start - tr.curve.loss(whole)
        job.last_drop = tr.curve.loss_drop(whole) if whole >= 1 else 0.0

    def _deadline(self, job: JobState, tr: _Truth, end: float) -> None:
        if tr.acc_at_deadline is None and end >= job.deadline:
            tr.acc_at_deadline = tr.curve.accuracy(job.iterations_done)

    # ------------------------------------------------------------------ loop
    def run(self, on_call: Callable[[Snapshot], None] | None) -> float:
        p = self.p
        now = 0.0 if not self.pending else math.floor(self.pending[0].submit_time / p.tick_s) * p.tick_s
        horizon = now + p.horizon_h * 3600.0
        while (self.active or self.next_arrival < len(self.pending)) and now < horizon:
            if not self.active:
                nxt = self.pending[self.next_arrival].submit_time
                now = max(now, math.floor(nxt / p.tick_s) * p.tick_s)
            self._admit(now)
            self._refresh(now)
            self.overloads += int(((self.observed > p.h_r).any(axis=1) | (self.gpu_observed > p.h_r).any(axis=1)).sum())
            snapshot = Snapshot(now, self.active, self.servers)
            if on_call is not None:
                on_call(snapshot)
            start = time.perf_counter()
            plan = self.policy.decide(snapshot)
            self.policy_s += time.perf_counter() - start
            self.calls += 1
            self._apply(plan, now)
            self._progress(now)
            now += p.tick_s
        return now


def simulate_mlfs(
    jobs: Sequence[SimJob],
    policy: TaskPolicy,
    params: MlfsSimParams | None = None,
    seed: int = 0,
    on_call: Callable[[Snapshot], None] | None = None,
) -> MlfsResult:
    """Run `policy` over `jobs` (from `slurmx.sim.workloads.mlfs`); `on_call` sees each snapshot before the policy."""
    sim = _Sim(jobs, policy, params or MlfsSimParams(), seed)
    end = sim.run(on_call)
    done = sim.finished
    everyone = done + [(j, sim.truth[j.job_id]) for j in sim.active.values()]
    jct = [(tr.done_at - j.submit) / 60.0 for j, tr in done if tr.done_at is not None]
    met = [tr.done_at is not None and tr.done_at <= j.deadline for j, tr in everyone]
    urgent = [m for (j, _), m in zip(everyone, met, strict=True) if j.urgency > 8]

    def acc_by_deadline(job: JobState, tr: _Truth) -> float:
        return tr.acc_at_deadline if tr.acc_at_deadline is not None else job.accuracy

    accs = [acc_by_deadline(j, tr) for j, tr in everyone]
    reqs = [a >= j.accuracy_req - 1e-9 for a, (j, _) in zip(accs, everyone, strict=True)]
    first = min((j.submit for j, _ in everyone), default=0.0)
    last = max((tr.done_at or end for _, tr in everyone), default=first)
    return MlfsResult(
        policy=policy.name,
        jobs=len(everyone),
        finished=len(done),
        avg_jct_min=float(np.mean(jct)) if jct else math.nan,
        deadline_ratio=float(np.mean(met)) if met else math.nan,
        urgent_deadline_ratio=float(np.mean(urgent)) if urgent else math.nan,
        avg_wait_s=float(np.mean([tr.waited_s for _, tr in everyone])) if everyone else math.nan,
        avg_accuracy=float(np.mean(accs)) if accs else math.nan,
        accuracy_ratio=float(np.mean(reqs)) if reqs else math.nan,
        bandwidth_tb=sim.bandwidth_mb / 1024.0**2,
        overloads=sim.overloads,
        makespan_h=(last - first) / 3600.0,
        overhead_ms=1000.0 * sim.policy_s / max(1, sim.calls),
        jct_min=jct,
    )

