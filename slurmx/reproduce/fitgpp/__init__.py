"""`slurmx reproduce fitgpp`: FitGpp's synthetic experiment (Yabuuchi et al., OpML '19, §4) in our engine.

Setup (digest `fitgpp.md` §3): 84 nodes of 32 CPU / 256 GB / 8 GPU, decisions every simulated minute, 30% TE
jobs (exec mean 5 min, cap 30 min), BE jobs (mean 30 min, cap 24 h) with grace periods (mean 3 min, cap
20 min), submitted so that the load under FIFO stays at 2.0, 8 sets of 2^16 jobs, s = 4, P = 1. Experiments,
selectable with `--only`:

- `main`: Table 1, slowdown p50/p95/p99 per class for FIFO, FitGpp, LRTP, RAND, and the headline claims;
- `intervals`: Table 2, re-scheduling intervals (preemption signal to restart) from the same runs;
- `preempted`: Table 3, proportion of preempted jobs at P = 1, and whether FitGpp's fallback ever fired;
- `s`, `P`, `te_share`, `grace_scale`: the sensitivity sweeps of Figs. 4-7 (and Table 4 at P = ∞);
- `be_sources`: not in the paper — where FitGpp's change to BE slowdown comes from: FIFO, then TE jobs first
  without preemption (FitGpp with P = 0), then FitGpp, on the sweep's workload.

Every run is one `RunSpec`; identical runs are shared between experiments and the distinct ones go through
`parallel_map`. Percentiles pool the jobs of all sets (one distribution per policy, as the paper's CDFs).
"""

from __future__ import annotations

from slurmx.reproduce.base import Reproduction, ReproOptions
from slurmx.reproduce.fitgpp.experiment import EXPERIMENTS, run_all, scale_of, selected
from slurmx.reproduce.fitgpp.report import TITLE, report

__all__ = ["EXPERIMENTS", "TITLE", "reproduce"]


def reproduce(options: ReproOptions) -> Reproduction:
    """Run the selected experiments and compare them with the paper."""
    only = selected(options)
    scale = scale_of(options)
    results = run_all(only, scale, options.workers, options.progress)
    return report(results, only, scale, options.quick, options.plot_dir)
