"""`slurmx reproduce mlfs`: MLFS (Wang, Liu, Shen, CoNEXT '20), MLF-H against Tiresias, Gandiva, fair share
(TensorFlow) and SLAQ, on the paper's real-cluster setting (and a load sweep and a scaled-down simulation).

- `experiment`: the points (`Run`) and their results, each a run of the task-level replica;
- `report`: the paper's claims beside ours, the tables and the plot;
- `task_model`: a replica of the paper's task-level simulator (DAG tasks on shared GPUs, migration, MLF-C's early
  stop), which the one engine cannot express; `task_mlfh` and `task_baselines` are its schedulers, and they decide
  through the very functions the registered policies `mlfs`, `mlfs-fairshare`, `gandiva`, `slaq` and `tiresias`
  call (`slurmx.policies.mlfs.rules`, `slurmx.policies.mlfs.baseline_rules`).
"""

from __future__ import annotations

from slurmx.reproduce.base import Reproduction, ReproOptions
from slurmx.reproduce.mlfs.experiment import DURATIONS_MIN, POLICIES, WEEK_H, aggregate, make_policy, run_all
from slurmx.reproduce.mlfs.report import PAPER_1860, TITLE, report

__all__ = ["DURATIONS_MIN", "PAPER_1860", "POLICIES", "TITLE", "WEEK_H", "make_policy", "reproduce"]


def reproduce(options: ReproOptions) -> Reproduction:
    """Run the selected experiments and set them beside the paper's numbers."""
    outcomes = run_all(options)
    return report(outcomes, aggregate(outcomes), options)
