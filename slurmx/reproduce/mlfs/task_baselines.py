"""The replica's baselines MLFS is compared with (digest §3), on the task-level snapshot: fair share (TensorFlow on
Borg), SLAQ, Tiresias and Gandiva. Their decisions (shares, order, fill, affinity) are the functions of
`slurmx.policies.mlfs.baseline_rules`, which the registered `mlfs-fairshare`, `slaq`, `tiresias` and `gandiva`
call too; what is here is task placement on per-GPU utilisation, which a Slurm group does not have.

Each decides per *job* how many of its workers run, which is how these systems allocate, and then places tasks:
- **fair share**: max-min fair GPU shares over active jobs (water-filling on worker counts, ties by submit);
- **SLAQ**: GPUs go to the jobs with the largest predicted normalised loss reduction per unit time (the last
  iteration's δl per second per worker, over the starting loss); a job with no finished iteration first;
- **Tiresias**: discretised least-attained-service (2D-LAS on GPU-seconds, queues with `queue_limits_gpu_s`,
  FIFO within a queue), all-or-nothing, with preemption of lower-priority jobs whenever the order changes;
- **Gandiva**: FIFO, all-or-nothing, GPUs time-shared (a task joins a GPU while its observed utilisation stays
  under `pack_threshold`), affinity packing (servers already holding jobs of the same size first), and
  utilisation migration (a GPU above `migrate_threshold` sends its least-utilising task to the least-utilised GPU).
Fair share, SLAQ and Tiresias hold GPUs exclusively (one task per GPU), as those systems do. The parameter server
of a running job is placed first, on the server with the most free CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from slurmx.policies.mlfs.baseline_rules import (
    affinity,
    fair_shares,
    gang_fill,
    greedy_fill,
    slaq_gain,
    tiresias_level,
)
from slurmx.policies.mlfs.model import JobState, TaskState
from slurmx.reproduce.mlfs.task_model import Snapshot, TaskPlan

__all__ = ["FairShare", "Gandiva", "Slaq", "Tiresias"]

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


class _Pool:
    """Free capacity during one call: nominal server use and per-GPU nominal/observed use (copies)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.nominal = np.array([s.nominal for s in snapshot.servers])
        self.gpu_nominal = np.array([s.gpu_nominal for s in snapshot.servers])
        self.gpu_observed = np.array([s.gpu_observed for s in snapshot.servers])

    def remove(self, task: TaskState) -> None:
        assert task.server is not None
        self.nominal[task.server] -= task.demand
        if task.gpu is not None:
            self.gpu_nominal[task.server, task.gpu] -= task.gpu_demand
            self.gpu_observed[task.server, task.gpu] -= task.gpu_demand

    def add(self, task: TaskState, server: int, gpu: int | None) -> None:
        self.nominal[server] += task.demand
        if gpu is not None:
            self.gpu_nominal[server, gpu] += task.gpu_demand
            self.gpu_observed[server, gpu] += task.gpu_demand

    def gpu_slots(self, task: TaskState, shared: bool, pack_threshold: float) -> tuple[IntArray, IntArray]:
        """Which GPUs could take the task now: a free GPU, or (shared) one staying under the threshold."""
        ok: BoolArray
        if shared:
            ok = (self.gpu_observed + task.gpu_demand <= pack_threshold) & (self.gpu_nominal + task.gpu_demand <= 1.0)
        else:
            ok = self.gpu_nominal <= 1e-12
        server_ok: BoolArray = np.asarray(((self.nominal + task.demand) <= 1.0 + 1e-12).all(axis=1))
        ok = ok & server_ok[:, None]
        rows, cols = np.nonzero(ok)
        return rows.astype(np.int64), cols.astype(np.int64)

    def free_gpus(self, shared: bool, pack_threshold: float, typical: float) -> int:
        if shared:
            return int((self.gpu_observed + typical <= pack_threshold).sum())
        return int((self.gpu_nominal <= 1e-12).sum())


def _place(
    job: JobState,
    workers: int,
    pool: _Pool,
    plan: TaskPlan,
    shared: bool = False,
    pack_threshold: float = 1.0,
    prefer: Callable[[int], float] | None = None,
) -> bool:
    """Start queued tasks of `job` until `workers` of its workers run (PS first). False if it ran out of room."""
    running = sum(1 for t in job.tasks if t.server is not None and not t.is_ps)
    ps = job.tasks[0]
    if ps.server is None and ps.key not in plan.assign:
        fits = ((pool.nominal + ps.demand) <= 1.0 + 1e-12).all(axis=1)
        if not fits.any():
            return False
        room = np.where(fits, -pool.nominal[:, 0], -np.inf)
        server = int(room.argmax())
        pool.add(ps, server, None)
        plan.assign[ps.key] = (server, None)
    home = {t.server for t in job.tasks if t.server is not None} | {s for s, _ in (plan.assign.get(t.key, (None, None))
                                                                                   for t in job.tasks) if s is not None}
    for task in job.tasks[1:]:
        if running >= workers:
            break
        if task.server is not None or task.key in plan.assign:
            continue
        servers, gpus = pool.gpu_slots(task, shared, pack_threshold)
        if len(servers) == 0:
            return False
        free_per_server = np.bincount(servers, minlength=len(pool.nominal))
        at_home = np.isin(servers, list(home))
        preference = np.array([prefer(int(x)) for x in servers]) if prefer else np.zeros(len(servers))
        # home servers first (locality), then the policy's preference, then the emptiest server, least-used GPU
        best = int(np.lexsort((servers, pool.gpu_observed[servers, gpus] - free_per_server[servers], preference,
                               ~at_home))[0])
        server, gpu = int(servers[best]), int(gpus[best])
        pool.add(task, server, gpu)
        plan.assign[task.key] = (server, gpu)
        home.add(server)
        running += 1
    return True


def _trim(job: JobState, workers: int, pool: _Pool, plan: TaskPlan) -> None:
    """Send running workers beyond `workers` back to the queue (and the PS when none may run)."""
    running = [t for t in job.tasks[1:] if t.server is not None]
    for task in reversed(running[workers:] if workers > 0 else running):
        pool.remove(task)
        plan.to_queue.append(task.key)
    ps = job.tasks[0]
    if workers == 0 and ps.server is not None:
        pool.remove(ps)
        plan.to_queue.append(ps.key)


def _enact(snapshot: Snapshot, targets: Sequence[tuple[JobState, int]]) -> TaskPlan:
    """Shrink first (freeing GPUs), then grow in the given order."""
    plan = TaskPlan()
    pool = _Pool(snapshot)
    for job, k in targets:
        _trim(job, k, pool, plan)
    for job, k in targets:
        if k > 0:
            _place(job, k, pool, plan)
    return plan


def _granule(job: JobState, granule: str) -> int:
    return job.replica_workers if granule == "replica" else 1


def _gpu_count(snapshot: Snapshot) -> int:
    return sum(len(s.gpu_nominal) for s in snapshot.servers)


class FairShare:
    """TensorFlow on Borg: max-min fair GPU shares, exclusive GPUs.

    `granule="replica"` (default): a job grows by whole data-parallel replicas, since TensorFlow pins each model
    partition to a device and a replica missing a partition computes nothing; `"worker"`: by single workers
    (for a simulator that time-shares missing partitions, `MlfsSimParams.partial_progress="time_share"`)."""

    name = "fair"

    def __init__(self, granule: Literal["replica", "worker"] = "replica") -> None:
        self.granule = granule

    def decide(self, snapshot: Snapshot) -> TaskPlan:
        jobs = list(snapshot.jobs.values())
        units = [_granule(j, self.granule) for j in jobs]
        shares = fair_shares([j.workers for j in jobs], _gpu_count(snapshot), units)
        return _enact(snapshot, list(zip(jobs, shares, strict=True)))


class Slaq:
    """SLAQ: GPUs to the largest predicted normalised loss reduction per unit time, exclusive GPUs."""

    name = "slaq"

    def __init__(self, granule: Literal["replica", "worker"] = "replica") -> None:
        self.granule = granule  # as `FairShare`

    def decide(self, snapshot: Snapshot) -> TaskPlan:
        def gain(job: JobState) -> float:
            return slaq_gain(job.iteration, job.last_drop, job.iter_time_s, job.workers, job.loss_start)

        jobs = sorted(snapshot.jobs.values(), key=lambda j: (-gain(j), j.submit, j.job_id))
        shares = greedy_fill([j.workers for j in jobs], _gpu_count(snapshot), [_granule(j, self.granule) for j in jobs])
        return _enact(snapshot, list(zip(jobs, shares, strict=True)))


class Tiresias:
    """Tiresias (discretised 2D-LAS): least attained GPU-service first, gang scheduling, preemptive."""

    name = "tiresias"

    def __init__(self, queue_limits_gpu_s: Sequence[float] = (3600.0, 36000.0)) -> None:
        self.limits = tuple(queue_limits_gpu_s)  # ours: 1 and 10 GPU-hours

    def decide(self, snapshot: Snapshot) -> TaskPlan:
        jobs = sorted(snapshot.jobs.values(),
                      key=lambda j: (tiresias_level(j.gpu_seconds, self.limits), j.submit, j.job_id))
        shares = gang_fill([j.workers for j in jobs], _gpu_count(snapshot))
        return _enact(snapshot, list(zip(jobs, shares, strict=True)))


class Gandiva:
    """Gandiva: FIFO gang scheduling with GPU time-sharing, affinity packing and utilisation migration."""

    name = "gandiva"

    def __init__(self, pack_threshold: float = 0.9, migrate_threshold: float = 0.9) -> None:
        self.pack_threshold = pack_threshold  # ours: the paper does not give Gandiva's thresholds
        self.migrate_threshold = migrate_threshold

    def decide(self, snapshot: Snapshot) -> TaskPlan:
        plan = TaskPlan()
        pool = _Pool(snapshot)
        jobs = list(snapshot.jobs.values())  # submit order
        size_on_server: dict[int, set[int]] = {}
        for job in jobs:
            for t in job.tasks:
                if t.server is not None:
                    size_on_server.setdefault(t.server, set()).add(job.workers)
        self._migrate(jobs, pool, plan)
        for job in jobs:
            if all(t.server is None for t in job.tasks):
                typical = job.tasks[1].gpu_demand if job.workers else 0.0
                if pool.free_gpus(True, self.pack_threshold, typical) < job.workers:
                    continue
                before = dict(plan.assign)
                if not _place(job, job.workers, pool, plan, True, self.pack_threshold,
                              prefer=affinity(size_on_server, job.workers)):
                    for key in [k for k in plan.assign if k not in before]:  # all or nothing
                        task = snapshot.jobs[key[0]].tasks[key[1]]
                        server, gpu = plan.assign.pop(key)
                        pool.nominal[server] -= task.demand
                        if gpu is not None:
                            pool.gpu_nominal[server, gpu] -= task.gpu_demand
                            pool.gpu_observed[server, gpu] -= task.gpu_demand
        return plan

    def _migrate(self, jobs: Sequence[JobState], pool: _Pool, plan: TaskPlan) -> None:
        hot = np.argwhere(pool.gpu_observed > self.migrate_threshold)
        if len(hot) == 0:
            return
        on_gpu: dict[tuple[int, int], list[TaskState]] = {}
        for job in jobs:
            for t in job.tasks:
                if t.server is not None and t.gpu is not None:
                    on_gpu.setdefault((t.server, t.gpu), []).append(t)
        for server, gpu in hot.tolist():
            tasks = on_gpu.get((server, gpu), [])
            if len(tasks) < 2:
                continue
            task = min(tasks, key=lambda t: (t.gpu_demand, t.key))
            pool.remove(task)
            target = np.unravel_index(int(np.argmin(pool.gpu_observed)), pool.gpu_observed.shape)
            ts, tg = int(target[0]), int(target[1])
            if (ts, tg) != (server, gpu) and _fits_gpu(pool, task, ts, tg):
                pool.add(task, ts, tg)
                plan.assign[task.key] = (ts, tg)
            else:
                pool.add(task, server, gpu)


def _fits_gpu(pool: _Pool, task: TaskState, server: int, gpu: int) -> bool:
    return bool(pool.gpu_nominal[server, gpu] + task.gpu_demand <= 1.0
                and ((pool.nominal[server] + task.demand) <= 1.0 + 1e-12).all())

