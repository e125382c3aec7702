"""Code written for submitit, run by slurmx: only the import and the executor's construction change.

    python examples/submitit_port.py                      # on this machine (kind="local"), no Slurm needed
    python examples/submitit_port.py SITE.yaml            # on a cluster (its site config)

The trainer is a submitit-style Checkpointable (its checkpoint() returns a DelayedSubmission of itself); locally
the script preempts it halfway through, as slurmxd would, and it resumes from its last step.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import slurmx.executor as submitit  # was: import submitit


class DelayedSubmission:  # was: submitit.helpers.DelayedSubmission (slurmx reads it by shape)
    def __init__(self, function: Any, *args: Any, **kwargs: Any) -> None:
        self.function, self.args, self.kwargs = function, args, kwargs


class Trainer:  # was: class Trainer(submitit.helpers.Checkpointable)
    def __init__(self, steps: int) -> None:
        self.steps, self.done = steps, 0

    def __call__(self, step_s: float) -> int:
        while self.done < self.steps:
            time.sleep(step_s)
            self.done += 1
            print(f"step {self.done}", flush=True)
        return self.done

    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission:
        return DelayedSubmission(self, *args, **kwargs)


def add(a: int, b: int) -> int:
    return a + b


def main(argv: list[str]) -> int:
    # was: executor = submitit.AutoExecutor(folder="log_test")
    executor = submitit.Executor("log_test", site=argv[0]) if argv else submitit.Executor("log_test", kind="local")
    executor.update_parameters(timeout_min=5, mem_gb=1, cpus_per_task=1, slurm_signal_delay_s=30)
    job = executor.submit(add, 5, 7)
    print("add:", job.result())

    jobs = [executor.submit(add, i, i) for i in range(3)]
    print("as completed:", sorted(j.result() for j in submitit.as_completed(jobs, poll_frequency=0.2)))

    train = executor.submit(Trainer(20), 0.2)
    if isinstance(train, submitit.LocalJob):  # a local "preemption" halfway through
        while "step 10\n" not in (train.stdout() or ""):
            time.sleep(0.1)
        train.preempt()
    print("trained:", train.result(), "steps; requeued", getattr(train, "restarts", "?"), "time(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
