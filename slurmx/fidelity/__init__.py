"""Sim-vs-live fidelity: one small workload run on the live cluster under slurmxd's cycle and in the simulator,
compared side by side (average JCT, makespan, start order). `slurmx fidelity` is the command."""

from slurmx.fidelity.compare import Comparison, Outcome, compare, sim_outcome
from slurmx.fidelity.live import run_live
from slurmx.fidelity.workload import mixed_workload

__all__ = ["Comparison", "Outcome", "compare", "mixed_workload", "run_live", "sim_outcome"]
