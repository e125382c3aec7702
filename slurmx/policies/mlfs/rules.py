"""MLFS's decision rules (Wang, Liu, Shen, CoNEXT '20), pure functions shared by every MLFS scheduler.

The registered policy `mlfs` (`slurmx.policies.mlfs`, what slurmxd runs) and the reproduction's task-level
replica (`slurmx.reproduce.mlfs.task_mlfh`, what `slurmx reproduce mlfs` measures) both decide through these
functions, so the published numbers validate the code the daemon runs. Nothing here keeps state or does I/O.

Priority (digest §2.1, Eqs. 2-6): `P = α·P_ML + (1-α)·P_C` where
`P_ML_base = L · (1/I) · (δl_{I-1} / Σ_{j<I} δl_j) · S_k` and `P_C_base = γ_d/(d_k-t) + γ_r/r_k + γ_w·w_k`, and each
adds `γ · Σ_{children} P(child)` recursively. The children of a task are all tasks of the next DAG stage, so the
recursion is evaluated once per stage from the sink upwards (a sum per stage) instead of once per path; the
literal per-task recursion is kept as `naive_priorities` (the benchmark's baseline and the tests' cross-check).
The parameter-server task always comes first. The paper gives no scale for the terms; by default each base term
is divided by its largest value over the tasks ranked in the call (`term_scale`), so the weights mix like terms.

Order and preemption (§3.3.2, "MLF-H inserts newly submitted tasks and preempted tasks to the queue based on the
priority"): jobs queue by their best worker's P (`job_rank`, `queue_key`); a queued job that does not fit takes
back running jobs of lower rank, lowest first, and puts back those it turns out not to need (`take_back`).

Placement (§2.2): the underloaded server nearest (Euclidean) to the *ideal virtual host* (`choose_server`).
Overload (§2.3): from a server with an overloaded GPU only the lowest-P `p_s` fraction of that GPU's tasks may
leave, the one nearest the *ideal virtual task* first, until the server is no longer overloaded (`relieve`).
MLF-C (§2.5): the system is overloaded when the queue is non-empty or the mean server utilisation norm exceeds
h_s (`system_overloaded`); then every job switches from OptStop to stopping at its required accuracy.

Every choice the paper leaves open (digest §2.8) is an `MlfsArgs` field marked "ours" (docs/policies/mlfs.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import Field

from slurmx.policies.base import PolicyArgs
from slurmx.policies.mlfs.model import FloatArray, JobState, ServerState, TaskKey, TaskState

__all__ = [
    "RAW",
    "MlfhWeights",
    "MlfsArgs",
    "TermScale",
    "choose_server",
    "eviction_candidates",
    "ideal_virtual_host",
    "job_priorities",
    "job_rank",
    "naive_priorities",
    "queue_key",
    "relieve",
    "system_overloaded",
    "take_back",
    "term_scale",
    "underloaded",
    "victim_key",
]

BoolArray = npt.NDArray[np.bool_]
V = TypeVar("V")


class MlfhWeights(PolicyArgs):
    """MLF-H's priority weights (paper §4.1) and the scale choices, the same for the daemon and the replica."""

    alpha: float = Field(0.3, ge=0, le=1)
    gamma: float = Field(0.8, ge=0, le=1)
    gamma_d: float = Field(0.3, ge=0)
    gamma_r: float = Field(0.3, ge=0)
    gamma_w: float = Field(0.35, ge=0)
    # ours (digest §2.8):
    time_unit_s: float = Field(60.0, gt=0)  # Eq. 4 in minutes: the scheduler runs every minute, JCT is in minutes
    inverse_cap: float = Field(60.0, gt=0)  # 1/(d-t) and 1/r are capped here once the slack/remaining time is ~0
    # ours (§2.1 leaves the scales open): "max" divides each base term of Eqs. 2 and 4 by its largest value over the
    # tasks this call ranks (`term_scale`), "none" mixes the raw values as printed
    normalize: Literal["max", "none"] = "max"
    # ours (§3.3.2 "inserts newly submitted tasks and preempted tasks to the queue based on the priority"): a paper
    # task is one partition x one mini-batch, so every iteration re-enters the queue and competes by P; a task here
    # stands for all iterations of a partition, so a running job whose P ranks below a queued job that cannot fit
    # yields its workers at the next iteration boundary (this call). Off: tasks, once placed, run to the end.
    preempt: bool = True


class MlfsArgs(MlfhWeights):
    """MLF-H / MLF-C parameters: the paper's values (§4.1) and our documented choices where it is silent."""

    h_r: float = Field(0.9, gt=0, le=1)  # per-resource overload threshold
    h_s: float = Field(0.9, gt=0)  # system overload threshold (MLF-C)
    p_s: float = Field(0.1, gt=0, le=1)  # lowest-priority fraction eligible for eviction from an overloaded GPU
    # ours (digest §2.8):
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


# ---------------------------------------------------------------- order and preemption -------------------------


def job_rank(job: JobState, priority: Mapping[TaskKey, float], queued_only: bool = False) -> float:
    """A job's place among jobs: its best (queued, if `queued_only`) worker's P. Its PS is +inf only within it:
    ranking jobs by their PS would make MLF-H plain FIFO."""
    return max((priority[t.key] for t in job.tasks if not t.is_ps and (t.server is None or not queued_only)),
               default=math.inf)


def queue_key(rank: float, submit: float, job_id: str, task_p: float | None = None,
              index: int = 0) -> tuple[float, float, float, str, int]:
    """The MLF-H queue order: higher job rank first, then (inside a job) higher task P, older submit, id, index."""
    return (-rank, -(rank if task_p is None else task_p), submit, job_id, index)


def victim_key(rank: float, submit: float, job_id: str, index: int = 0) -> tuple[float, float, str, int]:
    """The order running units are taken back in: lowest rank first, then the most recently submitted."""
    return (rank, -submit, job_id, index)


def take_back(
    unit_rank: float,
    victims: Sequence[tuple[float, V]],
    remove_and_fit: Callable[[V], bool],
    put_back: Callable[[V], bool],
) -> list[V] | None:
    """MLF-H's preemption: which running units a queued unit of `unit_rank` takes back (None: it cannot fit).

    `victims` are (rank, unit) in `victim_key` order; only those ranked below `unit_rank` are taken, one by one,
    each through `remove_and_fit(unit)` (take its room, try the queued unit; True once it fits). Then those taken
    before the last are offered back, highest first, through `put_back(unit)` (True: it fits again beside the
    queued unit, so it keeps running). The callbacks hold the caller's bookkeeping; on None the caller undoes it.
    The result is in `victims` order.
    """
    removed: list[V] = []
    for rank, victim in victims:
        if rank >= unit_rank:
            break
        removed.append(victim)
        if remove_and_fit(victim):
            kept = {id(v) for v in reversed(removed[:-1]) if put_back(v)}
            return [v for v in removed if id(v) not in kept]
    return None


# ---------------------------------------------------------------- placement ------------------------------------


def underloaded(observed: FloatArray, gpu_observed: FloatArray, h_r: float) -> BoolArray:
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
    under = underloaded(observed, gpu_observed, args.h_r)
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
