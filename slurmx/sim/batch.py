"""Re-exports `instances_of` (now in `slurmx.sim.workloads.zhao`) for importers not yet moved; the batch
execution model itself is `slurmx.reproduce.accel.batch_replica`."""

from slurmx.sim.workloads.zhao import instances_of

__all__ = ["instances_of"]
