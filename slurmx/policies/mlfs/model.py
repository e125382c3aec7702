"""What MLFS's rules read: jobs made of DAG tasks, and servers with per-GPU utilisation.

MLFS (CoNEXT '20, digest `../shared/papers/mlfs.md`) decides per *task* (a model partition on one worker, plus
the job's parameter server) and per GPU with utilisation-based sharing. The rules (`slurmx.policies.mlfs.rules`)
read these objects and never change them. The registered policy `mlfs` builds a one-worker `JobState` per Slurm
group; the reproduction's task-level replica (`slurmx.reproduce.mlfs.task_model`) owns a full one per job and
updates it between calls.

Utilisations are fractions of one server's capacity (cpu, mem, net) or of one GPU (gpu). `nominal` is what the
placed tasks were profiled to use (their demand); `observed` is what the monitor measured this minute (demand
times a fluctuation), which is what overload detection and MLF-H's host selection read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = [
    "SERVER_DIMS",
    "FloatArray",
    "JobState",
    "ServerState",
    "TaskKey",
    "TaskState",
]

FloatArray = npt.NDArray[np.float64]
SERVER_DIMS = ("cpu", "mem", "net")  # server-level resource types; GPUs are tracked one by one
TaskKey = tuple[str, int]  # (job id, task index); task 0 is the parameter server


@dataclass(slots=True)
class TaskState:
    """One task: its place in the DAG, its demand, and where it runs (None: in the queue)."""

    job: str
    index: int
    stage: int  # -1 for the parameter server
    params_frac: float  # S_k / S^J
    demand: FloatArray  # (cpu, mem, net) fraction of one server
    gpu_demand: float  # fraction of one GPU (0 for the PS)
    server: int | None = None
    gpu: int | None = None
    waited_s: float = 0.0  # w_k: time spent queued (grows again after an eviction)

    @property
    def key(self) -> TaskKey:
        return (self.job, self.index)

    @property
    def is_ps(self) -> bool:
        return self.index == 0


@dataclass(slots=True)
class JobState:
    """What the scheduler knows about a job: DAG, ML progress (I, delta-l), deadline, and its tasks."""

    job_id: str
    submit: float
    urgency: int  # L^J
    deadline: float  # absolute seconds
    stages: tuple[int, ...]  # workers per DAG stage (all replicas); every stage feeds the next, the last the PS
    iter_time_s: float
    iterations_done: float
    planned_iterations: int  # the user's iteration count (option 1); t_{k,J} derives from it
    last_drop: float  # delta-l of the last finished iteration
    drop_sum: float  # sum of delta-l over finished iterations
    loss: float  # current loss (SLAQ reads it)
    loss_start: float
    accuracy: float
    accuracy_req: float
    gpu_seconds: float  # attained service (Tiresias)
    comm_ps_mb: float
    comm_worker_mb: float
    tasks: list[TaskState] = field(default_factory=list)
    stop_at_requirement: bool = False  # MLF-C switched the job from OptStop to its required accuracy
    dp_degree: int = 1  # data-parallel replicas; each holds workers / dp_degree model partitions

    @property
    def replica_workers(self) -> int:
        """Workers one data-parallel replica needs (all its model partitions): the unit a statically placed
        job (TensorFlow) grows or shrinks by. 1 for a purely data-parallel job."""
        return max(1, self.workers // max(1, self.dp_degree))

    @property
    def iteration(self) -> int:
        """I >= 1: the iteration being computed."""
        return int(self.iterations_done) + 1

    @property
    def workers(self) -> int:
        return len(self.tasks) - 1

    @property
    def remaining_s(self) -> float:
        """r_{k,J}: estimated remaining running time (t - p) of every worker of the job."""
        return max(0.0, (self.planned_iterations - self.iterations_done) * self.iter_time_s)


@dataclass(slots=True)
class ServerState:
    """One server: nominal and observed utilisation per server dimension and per GPU."""

    index: int
    nominal: FloatArray  # (cpu, mem, net)
    observed: FloatArray
    gpu_nominal: FloatArray  # one entry per GPU
    gpu_observed: FloatArray
