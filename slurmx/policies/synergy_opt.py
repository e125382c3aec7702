"""Re-exports `slurmx.policies.synergy.opt` (Synergy's OPT) for importers not yet moved to the package."""

from slurmx.policies.synergy.opt import OptJob, OptResult, SpreadResult, _solve, fair_points, spread, super_machine

__all__ = ["OptJob", "OptResult", "SpreadResult", "_solve", "fair_points", "spread", "super_machine"]
