"""The fidelity workload: a few dozen groups with minute-scale `sleep` payloads, shaped to the site's own kinds.

Half the groups gain much from the accelerated kind, half barely (what AlloX tells apart); a share of TE groups
arrives to a busy cluster (what FitGpp preempts for). Requests are the site's kind defaults, CPUs varied 1-2, so
several groups share a node. Estimates are exact: the comparison is about the two drivers, not the estimates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from slurmx.core.config import SiteConfig
from slurmx.core.model import JobClass
from slurmx.core.resources import Resources
from slurmx.sim.jobs import SimJob, SimVariant

__all__ = ["mixed_workload"]


def mixed_workload(site: SiteConfig, kinds: Sequence[str], groups: int = 30, seed: int = 0, time_scale: float = 1.0,
                   te_fraction: float = 0.0, mean_gap_s: float = 6.0) -> list[SimJob]:
    """`groups` groups arriving `mean_gap_s` apart on average (exponential gaps), submit times from 0."""
    rng = np.random.default_rng([seed, 0xF1DE])
    gaps = rng.exponential(mean_gap_s, groups)
    base = rng.uniform(40.0, 120.0, groups) * time_scale
    fast = rng.random(groups) < 0.5
    cpus = rng.integers(1, 3, groups)
    te = rng.random(groups) < te_fraction
    jobs = []
    submit = 0.0
    for i in range(groups):
        submit += 0.0 if i == 0 else float(gaps[i])
        variants = {}
        for n, kind in enumerate(kinds):
            speedup = 1.0 if n == 0 else (3.0 if fast[i] else 1.2)
            duration = max(5, round(float(base[i]) / speedup))
            cfg = site.kind(kind)
            request = Resources(int(cpus[i]), cfg.mem_mb, site.resources_for(kind).gres)
            variants[kind] = SimVariant(kind, request, float(duration), float(duration))
        jobs.append(SimJob(f"fid{i:02d}", "fidelity", round(submit), variants,
                           job_class=JobClass.TE if te[i] else JobClass.BE, grace_s=site.preemption.grace_s))
    return jobs
