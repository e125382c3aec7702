"""The registered policy `mlfs` under its former module name (the live daemon test imports it from here)."""

from slurmx.policies.mlfs import MlfsSlurm, MlfsSlurmArgs, Ranked, group_job, rank_groups

__all__ = ["MlfsSlurm", "MlfsSlurmArgs", "Ranked", "group_job", "rank_groups"]
