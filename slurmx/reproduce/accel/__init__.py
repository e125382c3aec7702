"""`slurmx reproduce accel`: Zhao, Liu, Qiao (ICC '18), make-span of batches on accelerator responders.

Four experiments, each point averaged over 20 seeds as in the paper (digest `accel_batch.md` §4-5):
fig2 (50 responders, 200-1,200 jobs), fig3 (1,000 jobs, 25-150 responders), fig4 (ten batches arriving 0-5 s
apart, throughput), fig5 (computation-time estimation error 0-50%). Schemes: ours (LST + the paper's MTTF),
ours with Johnson's rule (the corrected order), MMI and SCT. Every batch planned on true times is checked
against the 4-approximation: make-span <= 4 x a lower bound on OPT built from the LP bound. The schedules
come from the registered policies' decision functions; they run in a replica of the paper's batch model
(`batch_replica.py`: input transfers overlap computations, which the engine does not model). `experiment.py`
runs the tasks, `report.py` turns them into claims and tables.
"""

from __future__ import annotations

from slurmx.reproduce.accel.experiment import EXPERIMENTS, run_all, scale_of, selected
from slurmx.reproduce.accel.report import TITLE, report
from slurmx.reproduce.base import Reproduction, ReproOptions

__all__ = ["EXPERIMENTS", "TITLE", "reproduce"]


def reproduce(options: ReproOptions) -> Reproduction:
    """Run the selected experiments (all by default) and compare them with the paper."""
    only = selected(options)
    scale, seeds = scale_of(options)
    outcomes = run_all(scale, seeds, only, options.workers, options.progress)
    return report(outcomes, scale, seeds, options.quick, options.plot_dir)
