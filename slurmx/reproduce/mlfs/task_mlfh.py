"""The replica's MLF-H: one call = the paper's once-a-minute scheduling round over DAG tasks on shared GPUs.

A part of the task-level replica (`task_model`): every decision goes through `slurmx.policies.mlfs.rules`, the
very functions the registered policy `mlfs` calls (priorities and their scales, job rank and queue order, the
ideal virtual host, eviction, MLF-C's overload test, the take-back rule of preemption). What is here is only the
bookkeeping a task-level world needs and a Slurm group does not: per-task placement on per-GPU utilisation,
all-or-nothing placement of a job's tasks (`gang`), virtual eviction and re-placement, and the traffic each task
could keep local (BW(k, s)).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from slurmx.policies.mlfs.model import FloatArray, JobState, ServerState, TaskKey, TaskState
from slurmx.policies.mlfs.rules import (
    RAW,
    MlfsArgs,
    choose_server,
    job_priorities,
    job_rank,
    queue_key,
    relieve,
    system_overloaded,
    take_back,
    term_scale,
    underloaded,
    victim_key,
)
from slurmx.reproduce.mlfs.task_model import Snapshot, TaskPlan

__all__ = ["MlfH"]

State = tuple[FloatArray, FloatArray, FloatArray, FloatArray]  # nominal, observed, gpu_nominal, gpu_observed
Unit = tuple[float, JobState, list[TaskState]]  # (rank, job, its tasks placed or taken back together)


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


def _gpu_room(state: State, h_r: float) -> float:
    """The largest GPU demand any underloaded server's least-loaded GPU could still take (-1: none underloaded)."""
    _, observed, gpu_nominal, gpu_observed = state
    under = underloaded(observed, gpu_observed, h_r)
    if not under.any():
        return -1.0
    least = gpu_observed.argmin(axis=1)
    rows = np.arange(len(least))
    room = np.minimum(h_r - gpu_observed[rows, least], 1.0 - gpu_nominal[rows, least])
    return float(room[under].max()) + 1e-12


def _slots(state: State, gpu_demand: float, h_r: float) -> int:
    """How many GPUs of underloaded servers could each take one more task of `gpu_demand` (an upper bound)."""
    _, observed, gpu_nominal, gpu_observed = state
    under = underloaded(observed, gpu_observed, h_r)
    ok = (gpu_observed + gpu_demand <= h_r + 1e-12) & (gpu_nominal + gpu_demand <= 1.0 + 1e-12)
    per_gpu = np.floor(np.minimum(h_r - gpu_observed, 1.0 - gpu_nominal) / max(gpu_demand, 1e-9) + 1e-9)
    return int(np.where(ok & under[:, None], per_gpu, 0).sum()) if gpu_demand > 0 else 1 << 30


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
        ranks = {j.job_id: job_rank(j, priority, queued_only=True) for j, _ in queued}

        def rank(jt: tuple[JobState, TaskState]) -> tuple[float, float, float, str, int]:
            job, task = jt
            p = priority[task.key]
            unit_rank = p if task.key in moving_keys or not args.gang else ranks[job.job_id]
            return queue_key(unit_rank, job.submit, job.job_id, p, task.index)

        order = sorted(queued + moving, key=rank)
        state = (nominal, observed, gpu_nominal, gpu_observed)
        queued_of: dict[str, list[TaskState]] = {}
        for job, task in order:
            if task.key not in moving_keys:
                queued_of.setdefault(job.job_id, []).append(task)  # already in P order
        tried: set[str] = set()
        room = _gpu_room(state, args.h_r)
        waiting: list[Unit] = []  # queued units left unplaced, in order
        for job, task in order:
            is_moving = task.key in moving_keys
            if args.gang and not is_moving:
                if job.job_id in tried:
                    continue
                tried.add(job.job_id)
            if room < 0:  # no underloaded server left
                if not is_moving:
                    unit = queued_of[job.job_id] if args.gang else [task]
                    waiting.append((ranks[job.job_id] if args.gang else priority[task.key], job, unit))
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
                waiting.append((ranks[job.job_id], job, queued_of[job.job_id]))
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
        state: State,
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
        waiting: Sequence[Unit],
        moving_keys: set[TaskKey],
        priority: dict[TaskKey, float],
        state: State,
        traffic: _Traffic,
        plan: TaskPlan,
    ) -> None:
        """Give a queued unit that did not fit the room of running units of lower rank (`MlfsArgs.preempt`).

        Units are whole jobs under `gang` (a job's rank: its best worker's P) and single workers otherwise; which
        running units a waiting one takes back is `take_back`'s rule, the one the registered `mlfs` applies to
        Slurm groups. A unit that cannot fit even so preempts nothing.
        """
        args = self.args
        victims: list[Unit] = []
        for job in snapshot.jobs.values():
            running = [t for t in job.tasks if t.server is not None and t.key not in moving_keys]
            if args.gang:
                if running and len(running) == len(job.tasks):
                    victims.append((job_rank(job, priority), job, running))
            else:
                victims += [(priority[t.key], job, [t]) for t in running if not t.is_ps]
        victims.sort(key=lambda v: victim_key(v[0], v[1].submit, v[1].job_id, v[2][0].index))
        taken: set[TaskKey] = set()
        for unit_rank, job, unit in waiting:
            if not args.gang and job.tasks[0].server is None and job.tasks[0].key not in plan.assign:
                continue  # a worker without its PS does not progress
            pool = [(v[0], v) for v in victims if v[0] < unit_rank and v[1] is not job and v[2][0].key not in taken]
            if not pool:
                continue
            saved = tuple(a.copy() for a in state)
            used: set[int] = set()

            def remove_and_fit(victim: Unit, job: JobState = job, unit: list[TaskState] = unit,
                               used: set[int] = used) -> bool:
                self._book(snapshot, victim[1], victim[2], state, traffic, -1.0)
                fitted = (self._place_group(job, unit, state, traffic, plan) if args.gang
                          else self._place_one(job, unit[0], False, state, traffic, plan))
                if fitted:
                    used.update(plan.assign[t.key][0] for t in unit)
                return fitted

            def put_back(victim: Unit, used: set[int] = used) -> bool:
                self._book(snapshot, victim[1], victim[2], state, traffic, 1.0)
                if self._fits(state, victim[2], used):
                    return True
                self._book(snapshot, victim[1], victim[2], state, traffic, -1.0)
                return False

            chosen = take_back(unit_rank, pool, remove_and_fit, put_back)
            if chosen is None:
                for _, victim_job, victim_tasks in (v for _, v in pool):
                    for t in victim_tasks:
                        traffic.move(victim_job, t, None, t.server)
                for a, old in zip(state, saved, strict=True):
                    a[:] = old
                continue
            for victim in chosen:
                self._take(victim[2], plan, taken)

    @staticmethod
    def _take(tasks: Sequence[TaskState], plan: TaskPlan, taken: set[TaskKey]) -> None:
        for t in tasks:
            plan.to_queue.append(t.key)
            taken.add(t.key)

    def _fits(
        self, state: State, tasks: Sequence[TaskState], used: set[int]
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
        state: State,
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
        state: State,
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
