"""An example slurmx policy in one file: shortest estimated job first (docs/add-a-policy.md walks through it).

Each decision starts waiting groups in order of their shortest variant's estimate (no estimate: last; ties by
submission), each on the first node of its fastest kind that has room, and skips a group nothing fits now. It is
registered under the name `shortest-first` through the `slurmx.policies` entry point of the package that ships
this module; slurmx imports the module when a config names the policy.
"""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import Field

from slurmx.core.actions import Plan, Start
from slurmx.core.model import ClusterView, Group, Variant
from slurmx.core.resources import Resources
from slurmx.policies.base import Capabilities, PolicyArgs, register


class ShortestFirstArgs(PolicyArgs):
    """`max_starts`: at most this many groups started per decision (a site may want a gentle ramp)."""

    max_starts: int = Field(1000, ge=1)


def _estimate(variant: Variant) -> float:
    return variant.estimate_s if variant.estimate_s is not None else math.inf


@register("shortest-first", ShortestFirstArgs)
class ShortestFirst:
    """Shortest estimated job first, first fit; one node per job, no placement rules (the cycle hands groups
    with either to a policy that places them)."""

    name: ClassVar[str] = "shortest-first"
    capabilities: ClassVar[Capabilities] = Capabilities(profiled=True, max_nodes=1, places_constraints=False)

    def __init__(self, args: ShortestFirstArgs) -> None:
        self.args = args

    def schedule(self, view: ClusterView, now: float) -> Plan:
        def key(group: Group) -> tuple[float, float, str]:
            return min((_estimate(v) for v in group.variants), default=math.inf), group.submit_time, group.group_id

        taken: dict[str, Resources] = {}  # what this plan already started on each node
        starts: list[Start] = []
        for group in sorted(view.pending_groups(), key=key):
            if len(starts) >= self.args.max_starts:
                break
            for variant in sorted(group.variants, key=lambda v: (_estimate(v), v.kind)):
                if variant.kind not in view.kinds:
                    continue
                node = next((name for name in view.fitting_node_names(variant.kind, variant.request)
                             if name not in taken or taken[name].fits_with(variant.request, view.nodes[name].free)),
                            None)
                if node is not None:
                    taken[node] = variant.request + taken[node] if node in taken else variant.request
                    starts.append(Start(group.group_id, variant.kind, (node,), variant.request,
                                        reason="shortest-first: shortest estimate that fits"))
                    break
        return Plan(tuple(starts))
