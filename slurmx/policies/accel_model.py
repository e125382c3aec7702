"""Re-exports `slurmx.policies.accel_batch.model` (Zhao's batch instance) for importers not yet moved."""

from slurmx.policies.accel_batch.model import (
    MTTF_COUNTEREXAMPLE,
    BatchInstance,
    FloatArray,
    IntArray,
    OrderRule,
    Schedule,
    flow_shop_makespan,
    johnson_order,
    mttf_order,
    order_jobs,
    schedule_from_assignment,
)

__all__ = [
    "MTTF_COUNTEREXAMPLE",
    "BatchInstance",
    "FloatArray",
    "IntArray",
    "OrderRule",
    "Schedule",
    "flow_shop_makespan",
    "johnson_order",
    "mttf_order",
    "order_jobs",
    "schedule_from_assignment",
]
