"""The examples of submitit's documentation as a submitit user writes them: only the import and the executor's
construction differ (`slurmx.Executor` for `submitit.AutoExecutor`). Each example's outcome is returned, so a test
checks it against the expected values and compares one executor's with another's (local against the cluster).

`calls` is the module the functions come from (`executor_calls.py`, importable where the jobs run).
"""

from __future__ import annotations

from typing import Any

from slurmx.executor import Executor

EXPECTED = {
    "add": 12,
    "exception": ("ValueError", "bad input"),
    "map_array": [0, 1, 4, 9, 16, 25],
    "batch": [0, 2, 4],
    "tasks": [(0, 2, 0), (1, 2, 0)],  # two nodes, one task each
}


def run_examples(executor: Executor, calls: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # "Basic usage": submit a function, wait for its result.
    job = executor.submit(calls.add, 5, 7)
    out["add"] = job.result()
    # An exception in the job is the caller's exception.
    bad = executor.submit(calls.fail, "bad input")
    exc = bad.exception()
    out["exception"] = (type(exc).__name__, str(exc))
    # "Job arrays": map_array, at most 2 at once.
    executor.update_parameters(slurm_array_parallelism=2)
    out["map_array"] = [j.result() for j in executor.map_array(calls.square, range(6))]
    # "Batch": submissions inside the block go as one array when it ends.
    jobs = []
    with executor.batch():
        for i in range(3):
            jobs.append(executor.submit(calls.add, i, i))
    out["batch"] = [j.result() for j in jobs]
    # "Multi-task jobs": each task reads its JobEnvironment; results() has every task's value.
    executor.update_parameters(nodes=2, tasks_per_node=1, slurm_array_parallelism=0)
    out["tasks"] = [tuple(r) for r in executor.submit(calls.env_ranks).results()]
    return out
