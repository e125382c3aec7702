"""Slurm's own scheduling as a policy of the model: FIFO by submit time with EASY backfill at the site's cadence.

`slurmx whatif` replays a site's history under it (`--policy slurm`) beside what Slurm really did, so a what-if
run can first show how close the model of the site's own scheduler comes, before other policies are read
against it. Priority factors (fair share, QOS, age) are not modelled: the queue is in submit order.
"""

from __future__ import annotations

from typing import Any

from slurmx.policies.base import Policy, make_policy
from slurmx.slurm.scheduler_config import BackfillSettings

__all__ = ["SLURM_MODEL_NAME", "slurm_model"]

SLURM_MODEL_NAME = "slurm"  # the name `whatif --policy` knows it by


def slurm_model(settings: BackfillSettings) -> tuple[Policy, dict[str, Any]]:
    """The policy that runs as the site's schedulers do, and the parameters it was built with (for the report).
    `sched/builtin` is strict FIFO (the main scheduler alone)."""
    if not settings.backfill:
        params: dict[str, Any] = {"backfill": "none"}
    else:
        params = {"backfill": "easy", "cadence": "slurm", "backfill_interval_s": settings.interval_s,
                  "backfill_window_s": settings.window_s, "backfill_resolution_s": settings.resolution_s,
                  "backfill_depth": settings.max_job_test}
    return make_policy("fifo", params, "scontrol show config"), params
