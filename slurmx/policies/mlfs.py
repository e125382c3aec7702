"""MLF-H and MLF-C (Wang, Liu, Shen, CoNEXT '20): ML-aware task priorities, ideal-virtual-host placement,
overload eviction, and system-load control by early stopping.

Priority (digest §2.1, Eqs. 2-6): `P = α·P_ML + (1-α)·P_C` where
`P_ML_base = L · (1/I) · (δl_{I-1} / Σ_{j<I} δl_j) · S_k` and `P_C_base = γ_d/(d_k-t) + γ_r/r_k + γ_w·w_k`, and each
adds `γ · Σ_{children} P(child)` recursively. The children of a task are all tasks of the next DAG stage, so the
recursion is evaluated once per stage from the sink upwards (a sum per stage) instead of once per path; the
literal per-task recursion is kept as `naive_priorities` (the benchmark's baseline and the tests' cross-check).
The parameter-server task always comes first. The paper gives no scale for the terms; by default each base term
is divided by its largest value over the tasks ranked in the call (`term_scale`), so the weights mix like terms.

Preemption (§3.3.2, "MLF-H inserts newly submitted tasks and preempted tasks to the queue based on the priority"):
a paper task is one iteration of one partition, so the order by P is re-applied at every iteration; here a task is
all iterations of a partition, so a queued job that does not fit takes the place of running jobs of lower P.

Placement (§2.2): tasks in P order go to the underloaded server nearest (Euclidean) to the *ideal virtual host*:
per resource the least utilisation among underloaded servers, the largest traffic the task could keep local,
zero migration degradation. Overload (§2.3): from a server with an overloaded GPU only the lowest-P `p_s`
fraction of that GPU's tasks may leave, the one nearest the *ideal virtual task* first, until the server is
no longer overloaded; evicted tasks are re-placed by the same routine in the same call.

MLF-C (§2.5): the system is overloaded when the queue is non-empty or the mean server utilisation norm exceeds
h_s; then every job switches from OptStop to stopping at its required accuracy (the simulator, which owns the
learning curves, stops the job and drops its tasks once that holds).

Every choice the paper leaves open (digest §2.8) is an `MlfsArgs` field marked "ours" (docs/policies/mlfs.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from slurmx.policies.mlfs_model import FloatArray, JobState, ServerState, Snapshot, TaskKey, TaskPlan, TaskState

__all__ = [
    "MlfH",
    "MlfsArgs",
    "choose_server",
    "eviction_candidates",
    "ideal_virtual_host",
    "job_priorities",
    "naive_priorities",
    "relieve",
    "system_overloaded",
    "term_scale",
]

BoolArray = npt.NDArray[np.bool_]


class MlfsArgs(BaseModel):
    """MLF-H / MLF-C parameters: the paper's values (§4.1) and our documented choices where it is silent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha: float = Field(0.3, ge=0, le=1)
    gamma: float = Field(0.8, ge=0, le=1)
    gamma_d: float = Field(0.3, ge=0)
    gamma_r: float = Field(0.3, ge=0)
    gamma_w: float = Field(0.35, ge=0)
    h_r: float = Field(0.9, gt=0, le=1)  # per-resource overload threshold
    h_s: float = Field(0.9, gt=0)  # system overload threshold (MLF-C)
    p_s: float = Field(0.1, gt=0, le=1)  # lowest-priority fraction eligible for eviction from an overloaded GPU
    # ours (digest §2.8):
    time_unit_s: float = Field(60.0, gt=0)  # Eq. 4 in minutes: the scheduler runs every minute, JCT is in minutes
    inverse_cap: float = Field(60.0, gt=0)  # 1/(d-t) and 1/r are capped here once the slack/remaining time is ~0
    loss_eps: float = Field(1e-12, gt=0)  # a non-positive delta-l is clamped to this
    use_urgency: bool = True  # ablation of Fig. 6 (L^J = 1 when off)
    use_deadline: bool = True  # ablation of Fig. 6 (γ_d = 0 when off)
    use_bandwidth: bool = True  # ablation of Fig. 7 (no traffic dimension in the host distance)
    migration: bool = True  # ablation of Fig. 8 (no eviction from overloaded servers)
    mlf_c: bool = False  # MLF-C on top (the paper's "MLFS" also has MLF-RL, which we did not build)
    ideal_over: Literal["underloaded", "candidates"] = "underloaded"  # servers U_V's minima are taken over
    unplaced_evicted: Literal["stay", "queue"] = "stay"  # an evicted task nobody can take keeps running, or queues
    overload_norm: Literal["sqrt_m", "none"] = "sqrt_m"  # ‖U_s‖ / sqrt(M) so O_c compares with h_s = 90%
    migration_degradation: float = Field(0.1, ge=0)  # q_{k,s}: 10% of the task's CPU use (Beloglazov & Buyya)
    traffic_weight: float = Field(1.0, ge=0)  # weight of the BW(k, s) dimension in the host distance (plain: 1)
    gang: bool = True  # a job's queued tasks are placed all or nothing (DP+MP training needs every partition)
    # ours (§3.3.2 "inserts newly submitted tasks and preempted tasks to the queue based on the priority"): a paper
    # task is one partition x one mini-batch, so every iteration re-enters the queue and competes by P; a task here
    # stands for all iterations of a partition, so a running job whose P ranks below a queued job that cannot fit
    # yields its workers at the next iteration boundary (this call). Off: tasks, once placed, run to the end.
    preempt: bool = True
    # ours (§2.1 leaves the scales open): "max" divides each base term of Eqs. 2 and 4 by its largest value over the
    # tasks this call ranks (`term_scale`), "none" mixes the raw values as printed
    normalize: Literal["max", "none"] = "max"


def _inverse(x: float, cap: float) -> float:
    return cap if x <= 1.0 / cap else 1.0 / x


def _loss_factor(job: JobState, eps: float) -> float:
    """δl_{I-1} / Σ_{j<I} δl_j, 1 at I = 1 (empty sum)."""
    if job.iteration <= 1 or job.drop_sum <= 0:
        return 1.0
    return max(job.last_drop, eps) / max(job.drop_sum, eps)


class TermScale(NamedTuple):
    """Divisors of the four base terms of Eqs. 2 and 4 (1 = raw values, as the equations are printed)."""

    ml: float = 1.0  # L/I · δl-factor · S_k
    deadline: float = 1.0  # 1/(d_k - t)
    remaining: float = 1.0  # 1/r_k
    waiting: float = 1.0  # w_k


RAW = TermScale()


def _raw_terms(job: JobState, now: float, args: MlfsArgs) -> tuple[float, list[float], float, float]:
    """Unweighted per-job factors: (L/I · loss factor, per-stage 1/(d_k - t), 1/r, time unit in seconds)."""
    unit = args.time_unit_s
    urgency = float(job.urgency) if args.use_urgency else 1.0
    ml = urgency / job.iteration * _loss_factor(job, args.loss_eps)
    n = len(job.stages)
    stage_time = job.iter_time_s / n
    # ours: latest-start task deadline, d_k = d_J - (time of the stages after k's) on one iteration's DAG
    deadlines = [_inverse((job.deadline - (n - 1 - s) * stage_time - now) / unit, args.inverse_cap) for s in range(n)]
    return ml, deadlines, _inverse(job.remaining_s / unit, args.inverse_cap), unit


def term_scale(jobs: Sequence[JobState], now: float, args: MlfsArgs) -> TermScale:
    """Each base term's largest value over the tasks of `jobs` (`MlfsArgs.normalize="max"`; 1 where all are 0).

    Dividing by it puts every term in [0, 1] whatever the time unit, so the paper's weights (γ_d, γ_r, γ_w summing
    to ~1, α in [0, 1]) weigh comparable quantities; raw, w_k (grows without bound) swamps 1/r_k and 1/(d_k - t),
    and their relative weight moves by 60² between seconds and minutes.
    """
    ml = deadline = remaining = waiting = 0.0
    for job in jobs:
        m, d, r, unit = _raw_terms(job, now, args)
        ml = max(ml, m * max((t.params_frac for t in job.tasks), default=0.0))
        deadline, remaining = max(deadline, max(d, default=0.0)), max(remaining, r)
        waiting = max(waiting, max((t.waited_s / unit for t in job.tasks), default=0.0))
    return TermScale(*(x if x > 0 else 1.0 for x in (ml, deadline, remaining, waiting)))


def _base_terms(
    job: JobState, now: float, args: MlfsArgs, scale: TermScale
) -> tuple[float, list[float], float, float]:
    """Weighted per-job factors of Eqs. 2 and 4: (L/I·loss factor, per-stage γ_d/(d_k - t), γ_r/r, w divisor)."""
    ml, deadlines, remaining, unit = _raw_terms(job, now, args)
    gamma_d = args.gamma_d if args.use_deadline else 0.0
    deadline_terms = [gamma_d * d / scale.deadline for d in deadlines]
    return ml / scale.ml, deadline_terms, args.gamma_r * remaining / scale.remaining, unit * scale.waiting


def job_priorities(job: JobState, now: float, args: MlfsArgs, scale: TermScale = RAW) -> FloatArray:
    """P(k, J) for every task of `job` in `job.tasks` order (the PS is +inf). Sums once per DAG stage."""
    ml, deadline_terms, remaining, unit = _base_terms(job, now, args, scale)
    n = len(job.stages)
    by_stage: list[list[int]] = [[] for _ in range(n)]
    for pos, task in enumerate(job.tasks):
        if task.stage >= 0:
            by_stage[task.stage].append(pos)
    out = np.empty(len(job.tasks))
    child_ml = child_c = 0.0  # Σ over the next stage's tasks of P_ML and P_C (the PS is not a child term)
    for s in range(n - 1, -1, -1):
        sum_ml = sum_c = 0.0
        for pos in by_stage[s]:
            task = job.tasks[pos]
            p_ml = ml * task.params_frac + args.gamma * child_ml
            p_c = deadline_terms[s] + remaining + args.gamma_w * task.waited_s / unit + args.gamma * child_c
            out[pos] = args.alpha * p_ml + (1 - args.alpha) * p_c
            sum_ml += p_ml
            sum_c += p_c
        child_ml, child_c = sum_ml, sum_c
    for pos, task in enumerate(job.tasks):
        if task.is_ps:
            out[pos] = math.inf
    return out


def naive_priorities(job: JobState, now: float, args: MlfsArgs, scale: TermScale = RAW) -> FloatArray:
    """The literal reading: every task recomputes every term and recurses into each child (once per path)."""
    stages = [[t for t in job.tasks if t.stage == s] for s in range(len(job.stages))]

    def p_ml(task: TaskState) -> float:
        ml, _, _, _ = _base_terms(job, now, args, scale)
        kids = stages[task.stage + 1] if task.stage + 1 < len(stages) else []
        return ml * task.params_frac + args.gamma * sum(p_ml(c) for c in kids)

    def p_c(task: TaskState) -> float:
        _, deadline_terms, remaining, unit = _base_terms(job, now, args, scale)
        kids = stages[task.stage + 1] if task.stage + 1 < len(stages) else []
        own = deadline_terms[task.stage] + remaining + args.gamma_w * task.waited_s / unit
        return own + args.gamma * sum(p_c(c) for c in kids)

    return np.array([math.inf if t.is_ps else args.alpha * p_ml(t) + (1 - args.alpha) * p_c(t) for t in job.tasks])


# ---------------------------------------------------------------- placement ------------------------------------


def _underloaded(observed: FloatArray, gpu_observed: FloatArray, h_r: float) -> BoolArray:
    """Mask of servers with no resource and no GPU above h_r."""
    return np.asarray((observed <= h_r).all(axis=1) & (gpu_observed <= h_r).all(axis=1))


def ideal_virtual_host(
    observed: FloatArray, least_gpu: FloatArray, traffic: FloatArray, over: BoolArray
) -> FloatArray:
    """U_V: least utilisation per resource and the most keepable traffic over the servers in `over`; q = 0."""
    return np.concatenate([observed[over].min(axis=0), [least_gpu[over].min(), traffic[over].max(), 0.0]])


def choose_server(
    task_demand: FloatArray,
    gpu_demand: float,
    traffic: FloatArray,
    degradation: float,
    state: tuple[FloatArray, FloatArray, FloatArray, FloatArray],
    args: MlfsArgs,
) -> tuple[int, int | None] | None:
    """The candidate server nearest the ideal virtual host, and its least-loaded GPU; None if nothing fits.

    `state` is (nominal, observed, gpu_nominal, gpu_observed) over all servers; `traffic[s]` is the share of
    the task's per-sync data it would exchange locally on s (0..1); `degradation` is q_{k,s} off its server.
    A candidate stays at or under h_r on every observed resource and its least-loaded GPU, and within capacity
    on every nominal one, after adding the task.
    """
    nominal, observed, gpu_nominal, gpu_observed = state
    under = _underloaded(observed, gpu_observed, args.h_r)
    if not under.any():
        return None
    rows = np.arange(len(observed))
    least = gpu_observed.argmin(axis=1)
    least_obs = gpu_observed[rows, least]
    fits = (
        under
        & ((observed + task_demand) <= args.h_r + 1e-12).all(axis=1)
        & ((nominal + task_demand) <= 1.0 + 1e-12).all(axis=1)
        & (least_obs + gpu_demand <= args.h_r + 1e-12)
        & (gpu_nominal[rows, least] + gpu_demand <= 1.0 + 1e-12)
    )
    if not fits.any():
        return None
    over = fits if args.ideal_over == "candidates" else under
    ideal = ideal_virtual_host(observed, least_obs, traffic, over)
    vectors = np.column_stack([observed, least_obs, traffic, np.full(len(observed), degradation)])
    diff = vectors - ideal
    diff[:, 4] *= args.traffic_weight if args.use_bandwidth else 0.0
    dist = np.einsum("ij,ij->i", diff, diff)
    dist[~fits] = np.inf
    server = int(dist.argmin())
    return server, (int(least[server]) if gpu_demand > 0 else None)


def eviction_candidates(gpu_tasks: Sequence[tuple[TaskKey, float]], p_s: float) -> list[TaskKey]:
    """The lowest-priority ceil(p_s · n) tasks (at least one) of an overloaded GPU's (task, P) list."""
    ordered = sorted(gpu_tasks, key=lambda kp: kp[1])
    return [k for k, _ in ordered[: max(1, math.ceil(p_s * len(ordered)))]]


def relieve(
    server: ServerState,
    tasks: Sequence[TaskState],
    priority: dict[TaskKey, float],
    local_traffic: dict[TaskKey, float],
    args: MlfsArgs,
) -> list[TaskKey]:
    """Virtually evict tasks from an overloaded server until it is not overloaded (estimates, no side effects).

    A task's observed use is estimated as its demand scaled by the server's observed/nominal ratio. With an
    overloaded GPU the candidates are the lowest-P `p_s` of the tasks on overloaded GPUs; otherwise all tasks.
    Among candidates, the task nearest the ideal virtual task U_o (max use on overloaded resources, min
    elsewhere, no local traffic lost) goes first.
    """
    ratio = np.where(server.nominal > 0, server.observed / np.maximum(server.nominal, 1e-12), 1.0)
    gpu_ratio = np.where(server.gpu_nominal > 0, server.gpu_observed / np.maximum(server.gpu_nominal, 1e-12), 1.0)
    observed = server.observed.copy()
    gpu_observed = server.gpu_observed.copy()
    left = list(tasks)
    use = {t.key: np.append(t.demand * ratio, t.gpu_demand * (gpu_ratio[t.gpu] if t.gpu is not None else 0.0))
           for t in left}
    evicted: list[TaskKey] = []
    while left and ((observed > args.h_r).any() or (gpu_observed > args.h_r).any()):
        hot_gpus = set(np.flatnonzero(gpu_observed > args.h_r).tolist())
        if hot_gpus:
            on_hot = [(t.key, priority[t.key]) for t in left if t.gpu in hot_gpus]
            keys = set(eviction_candidates(on_hot, args.p_s)) if on_hot else {t.key for t in left}
        else:
            keys = {t.key for t in left}
        pool = [t for t in left if t.key in keys]
        usage = np.array([use[t.key] for t in left])
        hot = np.append(observed > args.h_r, bool(hot_gpus))
        ideal = np.append(np.where(hot, usage.max(axis=0), usage.min(axis=0)), 0.0)
        best = min(pool, key=lambda t: (float(np.sum((np.append(use[t.key], local_traffic.get(t.key, 0.0))
                                                      - ideal) ** 2)), t.key))
        evicted.append(best.key)
        left.remove(best)
        observed -= use[best.key][:3]
        if best.gpu is not None:
            gpu_observed[best.gpu] -= use[best.key][3]
    return evicted


def system_overloaded(queue_nonempty: bool, servers: Sequence[ServerState], args: MlfsArgs) -> bool:
    """MLF-C's test: the queue is non-empty, or O_c = mean_s ‖U_s‖ (normalised by sqrt(M) if set) exceeds h_s."""
    if queue_nonempty:
        return True
    if not servers:
        return False
    vectors = np.array([np.append(s.observed, s.gpu_observed.mean()) for s in servers])
    norms = np.sqrt((vectors**2).sum(axis=1))
    if args.overload_norm == "sqrt_m":
        norms /= math.sqrt(vectors.shape[1])
    return bool(norms.mean() > args.h_s)


# ---------------------------------------------------------------- traffic bookkeeping ---------------------------


class _Traffic:
    """Per job: how many of its tasks of each stage (and its PS) sit on each server, for BW(k, s)."""

    def __init__(self, n_servers: int) -> None:
        self.n = n_servers
        self.counts: dict[str, FloatArray] = {}  # job -> (stages + 1, servers); row 0 is the PS

    def _table(self, job: JobState) -> FloatArray:
        table = self.counts.get(job.job_id)
        if table is None:
            table = np.zeros((len(job.stages) + 1, self.n))
            for t in job.tasks:
                if t.server is not None:
                    table[t.stage + 1, t.server] += 1
            self.counts[job.job_id] = table
        return table

    def share(self, job: JobState, task: TaskState) -> FloatArray:
        """Per server, the fraction of the task's per-sync data exchanged with its job's tasks already there."""
        table = self._table(job)
        if task.is_ps:
            vol = job.comm_ps_mb * table[1:].sum(axis=0)
            total = job.comm_ps_mb * job.workers
        else:
            s = task.stage
            neighbours = (table[s] if s > 0 else 0.0) + (table[s + 2] if s + 2 < len(table) else 0.0)
            n_neighbours = (job.stages[s - 1] if s > 0 else 0) + (job.stages[s + 1] if s + 1 < len(job.stages) else 0)
            vol = job.comm_ps_mb * table[0] + job.comm_worker_mb * neighbours
            total = job.comm_ps_mb + job.comm_worker_mb * n_neighbours
        return np.asarray(vol / total if total > 0 else np.zeros(self.n), dtype=np.float64)

    def move(self, job: JobState, task: TaskState, old: int | None, new: int | None) -> None:
        table = self._table(job)
        if old is not None:
            table[task.stage + 1, old] -= 1
        if new is not None:
            table[task.stage + 1, new] += 1


def _gpu_room(state: tuple[FloatArray, FloatArray, FloatArray, FloatArray], h_r: float) -> float:
    """The largest GPU demand any underloaded server's least-loaded GPU could still take (-1: none underloaded)."""
    _, observed, gpu_nominal, gpu_observed = state
    under = _underloaded(observed, gpu_observed, h_r)
    if not under.any():
        return -1.0
    least = gpu_observed.argmin(axis=1)
    rows = np.arange(len(least))
    room = np.minimum(h_r - gpu_observed[rows, least], 1.0 - gpu_nominal[rows, least])
    return float(room[under].max()) + 1e-12


def _slots(state: tuple[FloatArray, FloatArray, FloatArray, FloatArray], gpu_demand: float, h_r: float) -> int:
    """How many GPUs of underloaded servers could each take one more task of `gpu_demand` (an upper bound)."""
    _, observed, gpu_nominal, gpu_observed = state
    under = _underloaded(observed, gpu_observed, h_r)
    ok = (gpu_observed + gpu_demand <= h_r + 1e-12) & (gpu_nominal + gpu_demand <= 1.0 + 1e-12)
    per_gpu = np.floor(np.minimum(h_r - gpu_observed, 1.0 - gpu_nominal) / max(gpu_demand, 1e-9) + 1e-9)
    return int(np.where(ok & under[:, None], per_gpu, 0).sum()) if gpu_demand > 0 else 1 << 30


def _worker_rank(job: JobState, priority: dict[TaskKey, float], queued_only: bool) -> float:
    """A job's place among jobs: its best worker's P (its PS is +inf only within the job)."""
    return max((priority[t.key] for t in job.tasks if not t.is_ps and (t.server is None or not queued_only)),
               default=math.inf)


class MlfH:
    """MLF-H (with MLF-C when `args.mlf_c`): one call = the paper's once-a-minute scheduling round. Pure.

    `priorities` and `lazy` exist for the benchmark's naive baseline (per-task recursion over every job).
    """

    priorities = staticmethod(job_priorities)
    lazy = True  # compute P only for the jobs a call needs (queued, on overloaded servers, preemptible)

    def __init__(self, args: MlfsArgs | None = None, name: str | None = None) -> None:
        self.args = args or MlfsArgs()
        self.name = name or ("mlfs-c" if self.args.mlf_c else "mlf-h")

    def decide(self, snapshot: Snapshot) -> TaskPlan:
        args = self.args
        plan = TaskPlan()
        jobs = list(snapshot.jobs.values())
        servers = snapshot.servers
        queued = [(j, t) for j in jobs for t in j.tasks if t.server is None]
        if args.mlf_c and system_overloaded(bool(queued), servers, args):
            plan.stop_at_requirement = [j.job_id for j in jobs if not j.stop_at_requirement]
        hot: set[int] = set()
        if args.migration and servers:
            over = (np.array([s.observed for s in servers]) > args.h_r).any(axis=1)
            over |= (np.array([s.gpu_observed for s in servers]) > args.h_r).any(axis=1)
            hot = {servers[int(i)].index for i in np.flatnonzero(over)}
        # P is needed for the queue and for the tasks on overloaded servers (and for every running task when a
        # queued job may preempt it)
        wanted = {j.job_id for j, _ in queued} | {j.job_id for j in jobs for t in j.tasks if t.server in hot}
        everyone = not self.lazy or (args.preempt and bool(queued))
        ranked = [j for j in jobs if j.job_id in wanted or everyone]
        scale = term_scale(ranked, snapshot.now, args) if args.normalize == "max" else RAW
        priority: dict[TaskKey, float] = {}
        for job in ranked:
            for task, p in zip(job.tasks, self.priorities(job, snapshot.now, args, scale), strict=True):
                priority[task.key] = float(p)
        nominal = np.array([s.nominal for s in servers])
        observed = np.array([s.observed for s in servers])
        gpu_nominal = np.array([s.gpu_nominal for s in servers])
        gpu_observed = np.array([s.gpu_observed for s in servers])
        traffic = _Traffic(len(servers))
        moving = self._evict(jobs, [s for s in servers if s.index in hot], priority, traffic) if hot else []
        moving_keys = {t.key for _, t in moving}
        # a PS is +inf only within its job; across jobs a queued job ranks by its best worker task
        job_rank = {j.job_id: _worker_rank(j, priority, queued_only=True) for j, _ in queued}

        def rank(jt: tuple[JobState, TaskState]) -> tuple[float, float, float, str, int]:
            job, task = jt
            p = priority[task.key]
            if task.key in moving_keys or not args.gang:
                return (-p, -p, job.submit, job.job_id, task.index)
            return (-job_rank[job.job_id], -p, job.submit, job.job_id, task.index)

        order = sorted(queued + moving, key=rank)
        state = (nominal, observed, gpu_nominal, gpu_observed)
        queued_of: dict[str, list[TaskState]] = {}
        for job, task in order:
            if task.key not in moving_keys:
                queued_of.setdefault(job.job_id, []).append(task)  # already in P order
        tried: set[str] = set()
        room = _gpu_room(state, args.h_r)
        waiting: list[tuple[float, JobState, list[TaskState]]] = []  # queued units left unplaced, in order
        for job, task in order:
            is_moving = task.key in moving_keys
            if args.gang and not is_moving:
                if job.job_id in tried:
                    continue
                tried.add(job.job_id)
            if room < 0:  # no underloaded server left
                if not is_moving:
                    unit = queued_of[job.job_id] if args.gang else [task]
                    waiting.append((job_rank[job.job_id] if args.gang else priority[task.key], job, unit))
                continue
            if is_moving or not args.gang:
                if task.gpu_demand <= room and self._place_one(job, task, is_moving, state, traffic, plan):
                    room = _gpu_room(state, args.h_r)
                elif not is_moving:
                    waiting.append((priority[task.key], job, [task]))
                continue
            if self._place_group(job, queued_of[job.job_id], state, traffic, plan):
                room = _gpu_room(state, args.h_r)
            else:
                waiting.append((job_rank[job.job_id], job, queued_of[job.job_id]))
        if args.preempt and waiting:
            self._preempt(snapshot, waiting, moving_keys, priority, state, traffic, plan)
        for _, task in moving:
            if task.key not in plan.assign and args.unplaced_evicted == "queue":
                plan.to_queue.append(task.key)
        return plan

    def _place_group(
        self,
        job: JobState,
        group: Sequence[TaskState],
        state: tuple[FloatArray, FloatArray, FloatArray, FloatArray],
        traffic: _Traffic,
        plan: TaskPlan,
    ) -> bool:
        """Place every task of `group` (a job's queued tasks, P order) or none (state and plan undone on failure)."""
        h_r = self.args.h_r
        demand = max(t.gpu_demand for t in group)
        if demand > _gpu_room(state, h_r) or _slots(state, demand, h_r) < len(group) - (group[0].is_ps or 0):
            return False  # cannot fit all of its workers now: skip without the full search
        saved = tuple(a.copy() for a in state)
        placed: list[TaskState] = []
        for t in group:
            if not self._place_one(job, t, False, state, traffic, plan):
                break
            placed.append(t)
        if len(placed) == len(group):
            return True
        for a, old in zip(state, saved, strict=True):
            a[:] = old
        for t in placed:
            server, _ = plan.assign.pop(t.key)
            traffic.move(job, t, server, None)
        return False

    def _preempt(
        self,
        snapshot: Snapshot,
        waiting: Sequence[tuple[float, JobState, list[TaskState]]],
        moving_keys: set[TaskKey],
        priority: dict[TaskKey, float],
        state: tuple[FloatArray, FloatArray, FloatArray, FloatArray],
        traffic: _Traffic,
        plan: TaskPlan,
    ) -> None:
        """Give a queued unit that did not fit the room of running units of lower P (`MlfsArgs.preempt`).

        Units are whole jobs under `gang` (a job's rank: its best worker's P) and single workers otherwise. For
        each waiting unit in order, running units of lower rank are taken back, lowest first, until the unit fits;
        those it turns out not to need are then put back (highest first) where their servers still have room. A
        unit that cannot fit even so preempts nothing.
        """
        args = self.args
        victims: list[tuple[float, JobState, list[TaskState]]] = []
        for job in snapshot.jobs.values():
            running = [t for t in job.tasks if t.server is not None and t.key not in moving_keys]
            if args.gang:
                if running and len(running) == len(job.tasks):
                    victims.append((_worker_rank(job, priority, queued_only=False), job, running))
            else:
                victims += [(priority[t.key], job, [t]) for t in running if not t.is_ps]
        victims.sort(key=lambda v: (v[0], -v[1].submit, v[1].job_id, v[2][0].index))
        taken: set[TaskKey] = set()
        for unit_rank, job, unit in waiting:
            if not args.gang and job.tasks[0].server is None and job.tasks[0].key not in plan.assign:
                continue  # a worker without its PS does not progress
            pool = [v for v in victims if v[0] < unit_rank and v[1] is not job and v[2][0].key not in taken]
            if not pool:
                continue
            saved = tuple(a.copy() for a in state)
            removed: list[tuple[float, JobState, list[TaskState]]] = []
            fitted = False
            for victim in pool:
                self._book(snapshot, victim[1], victim[2], state, traffic, -1.0)
                removed.append(victim)
                fitted = (self._place_group(job, unit, state, traffic, plan) if args.gang
                          else self._place_one(job, unit[0], False, state, traffic, plan))
                if fitted:
                    break
            if not fitted:
                for _, victim_job, victim_tasks in removed:
                    for t in victim_tasks:
                        traffic.move(victim_job, t, None, t.server)
                for a, old in zip(state, saved, strict=True):
                    a[:] = old
                continue
            used = {plan.assign[t.key][0] for t in unit}
            for victim in reversed(removed[:-1]):
                self._book(snapshot, victim[1], victim[2], state, traffic, 1.0)
                if self._fits(state, victim[2], used):
                    continue
                self._book(snapshot, victim[1], victim[2], state, traffic, -1.0)
                self._take(victim[2], plan, taken)
            self._take(removed[-1][2], plan, taken)

    @staticmethod
    def _take(tasks: Sequence[TaskState], plan: TaskPlan, taken: set[TaskKey]) -> None:
        for t in tasks:
            plan.to_queue.append(t.key)
            taken.add(t.key)

    def _fits(
        self, state: tuple[FloatArray, FloatArray, FloatArray, FloatArray], tasks: Sequence[TaskState], used: set[int]
    ) -> bool:
        """After putting `tasks` back: every server within nominal capacity, and within h_r where `used` placed."""
        nominal, observed, gpu_nominal, gpu_observed = state
        for t in tasks:
            s = t.server
            assert s is not None
            if (nominal[s] > 1.0 + 1e-9).any() or (t.gpu is not None and gpu_nominal[s, t.gpu] > 1.0 + 1e-9):
                return False
            if s in used and ((observed[s] > self.args.h_r + 1e-12).any()
                              or (t.gpu is not None and gpu_observed[s, t.gpu] > self.args.h_r + 1e-12)):
                return False
        return True

    @staticmethod
    def _book(
        snapshot: Snapshot,
        job: JobState,
        tasks: Sequence[TaskState],
        state: tuple[FloatArray, FloatArray, FloatArray, FloatArray],
        traffic: _Traffic,
        sign: float,
    ) -> None:
        """Add (sign 1) or take away (sign -1) running tasks' use; observed use scales with their server's ratio."""
        nominal, observed, gpu_nominal, gpu_observed = state
        for t in tasks:
            s = t.server
            assert s is not None
            srv = snapshot.servers[s]
            ratio = np.where(srv.nominal > 0, srv.observed / np.maximum(srv.nominal, 1e-12), 1.0)
            nominal[s] += sign * t.demand
            observed[s] += sign * t.demand * ratio
            if t.gpu is not None:
                g = t.gpu
                gratio = srv.gpu_observed[g] / srv.gpu_nominal[g] if srv.gpu_nominal[g] > 0 else 1.0
                gpu_nominal[s, g] += sign * t.gpu_demand
                gpu_observed[s, g] += sign * t.gpu_demand * gratio
            traffic.move(job, t, s if sign < 0 else None, None if sign < 0 else s)

    def _place_one(
        self,
        job: JobState,
        task: TaskState,
        migrating: bool,
        state: tuple[FloatArray, FloatArray, FloatArray, FloatArray],
        traffic: _Traffic,
        plan: TaskPlan,
    ) -> bool:
        """Put one task on the server nearest the ideal virtual host and book its use in `state`."""
        args = self.args
        degradation = args.migration_degradation * float(task.demand[0]) if migrating else 0.0
        choice = choose_server(task.demand, task.gpu_demand, traffic.share(job, task), degradation, state, args)
        if choice is None:
            return False
        nominal, observed, gpu_nominal, gpu_observed = state
        server, gpu = choice
        nominal[server] += task.demand
        observed[server] += task.demand
        if gpu is not None:
            gpu_nominal[server, gpu] += task.gpu_demand
            gpu_observed[server, gpu] += task.gpu_demand
        traffic.move(job, task, None, server)
        plan.assign[task.key] = (server, gpu)
        return True

    def _evict(
        self,
        jobs: Sequence[JobState],
        hot: Sequence[ServerState],
        priority: dict[TaskKey, float],
        traffic: _Traffic,
    ) -> list[tuple[JobState, TaskState]]:
        """RELIEVE every overloaded server in `hot` (virtual eviction).

        The evicted tasks' use stays booked on their server during this call: an evicted task that finds no new
        home keeps running there (`unplaced_evicted="stay"`), and the server, overloaded, takes no new task now.
        """
        args = self.args
        on_server: dict[int, list[tuple[JobState, TaskState]]] = {s.index: [] for s in hot}
        for job in jobs:
            for task in job.tasks:
                if task.server in on_server:
                    on_server[task.server].append((job, task))
        moving: list[tuple[JobState, TaskState]] = []
        for s in hot:
            pairs = on_server[s.index]
            local = {t.key: float(traffic.share(j, t)[s.index]) for j, t in pairs}
            keys = set(relieve(s, [t for _, t in pairs], priority, local, args))
            for job, task in pairs:
                if task.key in keys:
                    traffic.move(job, task, s.index, None)
                    moving.append((job, task))
        return moving
