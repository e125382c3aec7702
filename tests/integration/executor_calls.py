"""The functions the executor's live tests run: a module the nodes import from the shared storage, so each call
is pickled by reference and runs on the nodes' own Python 3, whatever its minor version (standard library only)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def add(a: int, b: int) -> int:
    print(f"adding {a} and {b} on {os.environ.get('SLURMX_VARIANT')}", flush=True)
    return a + b


def fail(text: str) -> None:
    raise ValueError(text)


def square_once(x: int, marks: str) -> int:
    """Leaves one file per run, named by item and job, so a second run of an item would show."""
    Path(marks, f"{x}-{os.environ['SLURM_JOB_ID']}").touch()
    return x * x


class Trainer:
    """`total` steps of 1 s; the state is the list of steps done, so a lost or repeated step shows in the result."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done: list[int] = []

    def __call__(self) -> dict[str, Any]:
        while len(self.done) < self.total:
            time.sleep(1.0)
            self.done.append(len(self.done))
        return {"done": self.done, "restarts": int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)}

    def checkpoint(self) -> Trainer:
        return self  # resume with this object (its steps so far) and the same arguments


class MarkingTrainer(Trainer):
    """A Trainer that leaves `<restart> <steps done>` in a shared file after each step, for the test to follow."""

    def __init__(self, total: int, marks: str) -> None:
        super().__init__(total)
        self.marks = marks

    def __call__(self) -> dict[str, Any]:
        restart = os.environ.get("SLURM_RESTART_COUNT", "0") or "0"
        while len(self.done) < self.total:
            time.sleep(1.0)
            self.done.append(len(self.done))
            Path(self.marks).write_text(f"{restart} {len(self.done)}\n")
        return {"done": self.done, "restarts": int(restart)}


class DelayedSubmission:
    """The shape of submitit's `DelayedSubmission`, which the job side reads without importing submitit."""

    def __init__(self, function: Any, *args: Any, **kwargs: Any) -> None:
        self.function, self.args, self.kwargs = function, args, kwargs


class SubmititTrainer:
    """Written for submitit: `checkpoint()` resubmits self with the same arguments, as `Checkpointable` does.
    `total` steps of 0.5 s, a line `<restart> <step>` appended to `marks` for each, so a step run twice shows;
    reports what its setup exported."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done: list[int] = []

    def __call__(self, marks: str) -> dict[str, Any]:
        restart = os.environ.get("SLURM_RESTART_COUNT", "0") or "0"
        while len(self.done) < self.total:
            time.sleep(0.5)
            with Path(marks).open("a") as log:
                log.write(f"{restart} {len(self.done)}\n")
            self.done.append(len(self.done))
        return {"done": self.done, "restarts": int(restart), "setup": os.environ.get("SETUP_MARK")}

    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission:
        return DelayedSubmission(self, *args, **kwargs)


def timed_square(x: int, marks: str) -> int:
    """Leaves `x kind start end` for its run, so the runs' overlaps can be counted per kind."""
    import time

    start = time.time()
    time.sleep(2)
    Path(marks, f"{x}-{os.environ['SLURM_JOB_ID']}").write_text(
        f"{x} {os.environ.get('SLURMX_VARIANT', '')} {start} {time.time()}\n")
    return x * x


def where_am_i() -> tuple[int, int, str, list[str]]:
    """This task's rank, the task count, its node and the job's nodes, as JobEnvironment reads them."""
    from slurmx.hooks import JobEnvironment

    env = JobEnvironment()
    print(f"rank {env.global_rank} on {env.hostname}")
    return env.global_rank, env.num_tasks, env.hostname, env.hostnames


def square(x: int) -> int:
    return x * x


def env_ranks() -> tuple[int, int, int]:
    """submitit's JobEnvironment example: this task's global rank, the task count and its local rank."""
    from slurmx.hooks import JobEnvironment  # was: submitit.JobEnvironment()

    env = JobEnvironment()
    return env.global_rank, env.num_tasks, env.local_rank
