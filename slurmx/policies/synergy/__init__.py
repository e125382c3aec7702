"""Synergy (OSDI '22): resource-sensitive CPU and memory allocation, with its baselines (PROP, GREEDY, DRF, Tetris).

Read in this order: `profiles` (the released throughput matrices), `mechanisms` (PROP, GREEDY, TUNE over one
round), `opt` (OPT's LP1 and LP2), `decisions` (profiles on a cluster shape, queue keys, `allocate_round`:
what every driver calls), `policy` (the registered `synergy` policy on a `ClusterView`). Importing this
package registers the policy.
"""

from slurmx.policies.synergy.decisions import (
    ORDERS,
    ClusterShape,
    JobProfile,
    Mechanism,
    Order,
    QueueState,
    allocate_round,
    job_profile,
    queue_key,
)
from slurmx.policies.synergy.policy import SynergyArgs, SynergyPolicy

__all__ = [
    "ORDERS",
    "ClusterShape",
    "JobProfile",
    "Mechanism",
    "Order",
    "QueueState",
    "SynergyArgs",
    "SynergyPolicy",
    "allocate_round",
    "job_profile",
    "queue_key",
]
