"""Scheduling policies: one module per system (allox, fitgpp, synergy, accel_batch, mlfs) and baselines."""

from slurmx.policies.base import Policy, PolicyArgs, available_policies, make_policy, register

__all__ = ["Policy", "PolicyArgs", "available_policies", "make_policy", "register"]
