"""Re-exports `slurmx.policies.synergy.profiles` (the released model profiles) for importers not yet moved."""

from slurmx.policies.synergy.profiles import CPU_GRID, MEM_GRID, MODELS, TASKS, ModelProfile

__all__ = ["CPU_GRID", "MEM_GRID", "MODELS", "TASKS", "ModelProfile"]
