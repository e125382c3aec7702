"""The MLFS ablation: MLF-H with each of the three model changes made after it first lost on and off.

The changes (`docs/policies/mlfs.md`): a queued job of higher priority preempts running ones (`MlfsArgs.preempt`),
each base term normalised by its largest value (`MlfsArgs.normalize`), and a job progressing only by whole
data-parallel replicas (`MlfsSimParams.partial_progress`). 2^3 runs of MLF-H per seed at a reduced size (620 jobs
over a week on 80 GPUs, the generator's `real` setting at x = 1), the baselines under each progress model.

    python -m slurmx.reproduce.mlfs.ablation [SEEDS] [JSON]
"""

from __future__ import annotations

import itertools
import json
import sys
from typing import Literal

from slurmx.policies.mlfs.rules import MlfsArgs
from slurmx.reproduce.mlfs.experiment import DURATIONS_MIN, WEEK_H
from slurmx.reproduce.mlfs.task_baselines import FairShare, Gandiva, Slaq, Tiresias
from slurmx.reproduce.mlfs.task_mlfh import MlfH
from slurmx.reproduce.mlfs.task_model import MlfsSimParams, TaskPolicy, simulate_mlfs
from slurmx.sim.workloads.mlfs import MlfsParams, mlfs

__all__ = ["JOBS", "ablation"]

JOBS = 620
Progress = Literal["whole_replicas", "time_share"]
BASELINES: dict[str, type[Tiresias] | type[Gandiva] | type[FairShare] | type[Slaq]] = {
    "Tiresias": Tiresias, "Gandiva": Gandiva, "TensorFlow": FairShare, "SLAQ": Slaq}


def ablation(seeds: int) -> dict[str, float]:
    """Mean JCT (min) per "seed|progress|policy" key."""
    out: dict[str, float] = {}
    for seed in range(seeds):
        work = mlfs(MlfsParams(n_jobs=JOBS, jobs_per_hour=JOBS / WEEK_H, duration_cdf_min=DURATIONS_MIN), seed)
        progress: Progress
        for progress in ("whole_replicas", "time_share"):
            sim = MlfsSimParams(servers=20, partial_progress=progress)
            runs: list[tuple[str, TaskPolicy]] = [(name, cls()) for name, cls in BASELINES.items()]
            runs += [(f"MLF-H preempt={p} normalize={n}", MlfH(MlfsArgs(preempt=p, normalize=n), "MLF-H"))
                     for p, n in itertools.product((True, False), ("max", "none"))]
            for name, policy in runs:
                out[f"{seed}|{progress}|{name}"] = float(simulate_mlfs(work, policy, sim, seed=seed).avg_jct_min)
                print(seed, progress, name, round(out[f"{seed}|{progress}|{name}"], 1), flush=True)
    return out


if __name__ == "__main__":
    result = ablation(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)
