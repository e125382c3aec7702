"""A share of a generated workload's groups made constrained or multi-node, as an HPC site's queue mixes them.

Why: the papers' generators make one-node jobs that run anywhere, while a site runs MPI jobs over several nodes
and jobs pinned to node features. These options (on every generator's params, `WorkloadParams`) turn a drawn
fraction of the groups into such jobs, so a policy is tried, in its own placement or through the cycle's
handover, on the mix it will meet. Pure and deterministic given the seed: the draws come from their own stream,
so a workload with both fractions at 0 is the generator's own, draw for draw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from slurmx.core.placement import Placement
from slurmx.sim.jobs import SimJob

__all__ = ["with_placement"]

_STREAM = 0x91ACE  # the placement draws' own stream beside the generator's


def with_placement(jobs: Sequence[SimJob], seed: int, *, constrained_fraction: float = 0.0,
                   constraints: Mapping[str, str] | None = None, multi_node_fraction: float = 0.0,
                   multi_node_max: int = 4) -> list[SimJob]:
    """`jobs` with about `constrained_fraction` of the groups given, on each kind `constraints` names, that
    constraint (a variant of another kind is left as it is), and about `multi_node_fraction` of them run on 2 to
    `multi_node_max` nodes (every variant; the request per node and the duration stay, as an MPI job's ranks each
    do their share in the same time). Each group draws both coins and a node count, whatever the fractions."""
    constraints = dict(constraints or {})
    if constrained_fraction > 0 and not constraints:
        raise ValueError("constrained_fraction needs constraints: the constraint per kind, e.g. {cpu: bigmem}")
    if not jobs or (constrained_fraction <= 0 and multi_node_fraction <= 0):
        return list(jobs)
    rng = np.random.default_rng([seed, _STREAM])
    draws = rng.random((len(jobs), 2))
    counts = rng.integers(2, multi_node_max + 1, size=len(jobs))
    placements = {kind: Placement(text) for kind, text in constraints.items()}
    out = []
    for job, (constrain, wide), count in zip(jobs, draws.tolist(), counts.tolist(), strict=True):
        pinned, spread = constrain < constrained_fraction, wide < multi_node_fraction
        if not (pinned or spread):
            out.append(job)
            continue
        variants = {}
        for kind, variant in job.variants.items():
            placement = placements.get(kind, variant.placement) if pinned else variant.placement
            variants[kind] = replace(variant, placement=placement, nodes=int(count) if spread else variant.nodes)
        out.append(replace(job, variants=variants))
    return out
