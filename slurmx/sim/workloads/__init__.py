"""Workload generators from the papers slurmx reproduces, each a pure function `(params, seed) -> list[SimJob]`.

Every parameter lives in one frozen params model per paper (defaults from `../shared/papers/`, the rest
documented in docs/workloads.md). `generate("fitgpp", {"te_fraction": 0.5}, seed=1)` is how a config file
reaches them: unknown names or keys fail at once with the valid ones listed. Every generator also takes
`placement: {constrained_fraction, constraints, multi_node_fraction, multi_node_max}` (`workloads/placement.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from slurmx.core.validation import validate_model
from slurmx.sim.jobs import SimJob
from slurmx.sim.workloads.allox import AlloxParams, allox
from slurmx.sim.workloads.common import WorkloadParams, offered_load, with_submit_times
from slurmx.sim.workloads.fitgpp import FitgppParams, calibrated_horizon, fitgpp, fitgpp_capacity
from slurmx.sim.workloads.mlfs import AccuracyCurve, MlfsParams, mlfs, mlfs_from_trace, task_graph
from slurmx.sim.workloads.placement import with_placement
from slurmx.sim.workloads.synergy import PHILLY_MULTI_GPU, SynergyParams, SynergySpeed, load_synergy_joblist, synergy
from slurmx.sim.workloads.zhao import ZhaoParams, ZhaoWorkload, zhao, zhao_batches

__all__ = [
    "PHILLY_MULTI_GPU",
    "WORKLOADS",
    "AccuracyCurve",
    "AlloxParams",
    "FitgppParams",
    "MlfsParams",
    "SynergyParams",
    "SynergySpeed",
    "WorkloadParams",
    "ZhaoParams",
    "ZhaoWorkload",
    "allox",
    "calibrated_horizon",
    "fitgpp",
    "fitgpp_capacity",
    "generate",
    "load_synergy_joblist",
    "mlfs",
    "mlfs_from_trace",
    "offered_load",
    "synergy",
    "task_graph",
    "with_placement",
    "with_submit_times",
    "zhao",
    "zhao_batches",
]

Generator = Callable[[Any, int], list[SimJob]]
WORKLOADS: Mapping[str, tuple[type[WorkloadParams], Generator]] = {
    "allox": (AlloxParams, allox),
    "fitgpp": (FitgppParams, fitgpp),
    "synergy": (SynergyParams, synergy),
    "zhao": (ZhaoParams, zhao),
    "mlfs": (MlfsParams, mlfs),
}


def generate(name: str, params: Mapping[str, Any] | BaseModel | None = None, seed: int = 0) -> list[SimJob]:
    """Run workload `name` with `params` (a mapping of overrides, or the params model itself).

    Raises `ValueError` for an unknown name and `slurmx.core.validation.ConfigError` (one line per problem,
    valid keys listed) for bad parameters.
    """
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; expected one of {', '.join(WORKLOADS)}")
    model, generator = WORKLOADS[name]
    if isinstance(params, BaseModel):
        if not isinstance(params, model):
            raise ValueError(f"workload {name!r} takes {model.__name__}, got {type(params).__name__}")
        chosen = params
    else:
        chosen = validate_model(model, dict(params or {}), f"workload {name}")
    jobs = generator(chosen, seed)
    mix = chosen.placement
    if mix.any:
        jobs = with_placement(jobs, seed, constrained_fraction=mix.constrained_fraction, constraints=mix.constraints,
                              multi_node_fraction=mix.multi_node_fraction, multi_node_max=mix.multi_node_max)
    return jobs
