"""Zhao et al. (ICC '18): make-span of a batch on accelerator responders, with the SCT and MMI baselines.

Read in this order: `model` (the batch instance, schedules, MTTF and Johnson orders), `lst` (the
Lenstra-Shmoys-Tardos assignment), `schedule` (`zhao_schedule`, the decision every driver calls, and its
lower bound), `baselines` (SCT, MMI), `policy` (the registered `accel_batch`, `sct` and `mmi` on a
`ClusterView`), `exact` (tiny batches' optima, the tests' ground truth). Importing this package registers
the policies.
"""

from slurmx.policies.accel_batch.baselines import mmi_schedule, sct_schedule
from slurmx.policies.accel_batch.model import BatchInstance, Schedule
from slurmx.policies.accel_batch.policy import AccelBatch, AccelBatchArgs, Mmi, MmiArgs, Sct, SctArgs
from slurmx.policies.accel_batch.schedule import overlap_lower_bound, zhao_schedule

__all__ = [
    "AccelBatch",
    "AccelBatchArgs",
    "BatchInstance",
    "Mmi",
    "MmiArgs",
    "Schedule",
    "Sct",
    "SctArgs",
    "mmi_schedule",
    "overlap_lower_bound",
    "sct_schedule",
    "zhao_schedule",
]
