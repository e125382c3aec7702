"""The ablation beside the authors' simulator: from all the authors'-simulator options on, each turned off in
turn, and none; AlloX's reduction against each baseline (1 - AlloX / baseline) and SRPT's gap (1 - SRPT /
AlloX) under each setting, on their input, from our runs.

A setting changes only the policies its option applies to (`authors_sim.options_of`); the others' runs are
shared, so the whole table is the distinct (policy, options in effect) runs: about 20 of the input's 10,000 jobs.
"""

from __future__ import annotations

from collections.abc import Mapping

from slurmx.reproduce.allox.experiment import (
    AS_AUTHORS_SIM,
    AUTHORS_SIM_OPTIONS,
    FULL,
    RunSpec,
    authors_sim_options,
    run_one,
)
from slurmx.reproduce.base import ResultTable
from slurmx.sim.parallel import parallel_map

__all__ = ["BASELINES", "POLICIES", "SETTINGS", "Ablation", "ablation", "as_data", "table"]

BASELINES = ("drff", "drfs", "es", "drfa")
POLICIES = ("allox", *BASELINES, "srpt")
# setting label -> RunSpec.variant: the options on (all; all but one; none)
SETTINGS = {"as the authors' simulator (all options)": AS_AUTHORS_SIM,
            **{f"all but {name}": f"{AS_AUTHORS_SIM}:-{name}" for name in AUTHORS_SIM_OPTIONS},
            "our model (no option)": ""}
Ablation = Mapping[str, Mapping[str, float]]  # setting -> policy -> average JCT (units)


def _key(policy: str, variant: str) -> tuple[str, frozenset[str]]:
    on = authors_sim_options(variant)
    return policy, frozenset(o for o in on if policy in AUTHORS_SIM_OPTIONS[o])


def ablation(workers: int = 1, progress: bool = False) -> dict[str, dict[str, float]]:
    """Every setting's average JCT per policy on the authors' input (distinct runs only, on `workers`)."""
    specs: dict[tuple[str, frozenset[str]], RunSpec] = {}
    for variant in SETTINGS.values():
        for policy in POLICIES:
            specs.setdefault(_key(policy, variant), RunSpec.make(policy, 0, FULL, source="authors", variant=variant))
    keys = list(specs)
    outcomes = parallel_map(run_one, [specs[k] for k in keys], workers, "allox: ablation", progress)
    jct = {k: o.mean_jct for k, o in zip(keys, outcomes, strict=True)}
    return {label: {p: jct[_key(p, variant)] for p in POLICIES} for label, variant in SETTINGS.items()}


def _reductions(jcts: Mapping[str, float]) -> tuple[str, ...]:
    allox = jcts["allox"]
    return (*(f"{1 - allox / jcts[b]:.1%}" for b in BASELINES), f"{1 - jcts['srpt'] / allox:.1%}",
            f"{allox:,.1f}", " / ".join(f"{jcts[b]:,.1f}" for b in BASELINES))


def table(result: Ablation, paper: Mapping[str, float]) -> ResultTable:
    """Setting by setting: AlloX's reductions, SRPT's gap, and the average JCTs they come from."""
    head = ("the paper (§5.2.2)", *(f"{paper[b]:.0%}" for b in BASELINES), "30%", "", "")
    rows = (head, *((label, *_reductions(jcts)) for label, jcts in result.items()))
    return ResultTable("authors-sim ablation, ours on their input: AlloX's reduction (1 - AlloX / baseline) as each "
                       "authors'-simulator option is turned off in turn",
                       ("setting", *(f"vs {b.upper()}" for b in BASELINES), "SRPT below AlloX", "AlloX JCT",
                        "DRFF / DRFS / ES / DRFA JCT"), rows)


def as_data(result: Ablation) -> dict[str, dict[str, float]]:
    return {label: dict(jcts) for label, jcts in result.items()}
