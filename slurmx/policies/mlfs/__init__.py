"""MLFS (CoNEXT '20): MLF-H's priorities and host choice, with the paper's baselines (Tiresias, Gandiva, SLAQ, fair
share).

Read in this order: `model` (jobs, tasks and servers as the paper's rules see them), `rules` (the paper's
priorities, host choice and MlfsArgs: what the reproduction's task-level replica and the policy both call),
`policy` (the registered `mlfs` policy on a `ClusterView`), `baseline_rules` and `baselines` (the registered
baselines). Importing this package registers `mlfs`; `slurmx.policies.mlfs.baselines` registers the baselines.
"""

from slurmx.policies.mlfs.policy import MlfsSlurm, MlfsSlurmArgs, Ranked, group_job, rank_groups
from slurmx.policies.mlfs.rules import MlfsArgs

__all__ = ["MlfsArgs", "MlfsSlurm", "MlfsSlurmArgs", "Ranked", "group_job", "rank_groups"]
