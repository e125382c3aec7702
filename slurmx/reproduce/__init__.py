"""`slurmx reproduce PAPER`: each seed paper's experiment, run with our policies, printed beside its numbers.

Modules are imported only when asked for, so a slow or heavy reproduction costs nothing to the CLI's start.
"""

from __future__ import annotations

import importlib
import os
import time
from types import ModuleType

from slurmx.reproduce.base import (
    Claim,
    Reproduction,
    ReproOptions,
    ResultTable,
    band_claim,
    bound_claim,
    info_claim,
    ordering_claim,
    pct,
)

__all__ = ["PAPERS", "Claim", "ReproOptions", "Reproduction", "ResultTable", "band_claim", "bound_claim",
           "info_claim", "load", "ordering_claim", "pct", "run"]

# paper name -> (module, what it reproduces)
PAPERS: dict[str, tuple[str, str]] = {
    "allox": ("slurmx.reproduce.allox", "AlloX (EuroSys'20): min-cost matching over CPU/GPU, fairness"),
    "fitgpp": ("slurmx.reproduce.fitgpp", "FitGpp: fitness-based preemption of best-effort jobs"),
    "synergy": ("slurmx.reproduce.synergy", "Synergy (OSDI'22): resource-sensitive CPU/memory allocation"),
    "accel": ("slurmx.reproduce.accel", "Zhao et al.: make-span of accelerator batches (4-approximation)"),
    "mlfs": ("slurmx.reproduce.mlfs", "MLFS: ML-aware priorities, placement and overload eviction"),
}


class UnknownPaper(ValueError):
    pass


def load(paper: str) -> ModuleType:
    """The reproduction module of `paper`; one-line errors for an unknown name or one not built yet."""
    if paper not in PAPERS:
        raise UnknownPaper(f"unknown paper {paper!r}; expected one of {', '.join(PAPERS)}")
    module_name, _ = PAPERS[paper]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise UnknownPaper(f"{paper}: no reproduction yet ({module_name} is not built)") from None


def _cpu_seconds() -> float:
    """User + system CPU time of this process and of the worker processes it has waited for (a pool's workers
    are, once it shuts down): what a reproduction costs, whatever the number of workers."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run(paper: str, options: ReproOptions) -> Reproduction:
    module = load(paper)
    start, cpu = time.perf_counter(), _cpu_seconds()
    result: Reproduction = module.reproduce(options)
    result.wall_s = time.perf_counter() - start
    result.cpu_s = _cpu_seconds() - cpu
    result.quick = options.quick
    return result
