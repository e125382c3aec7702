"""Where a group's files live in the shared spool: one convention for `slurmx submit`, its jobs and slurmxd.

`slurmx submit` creates `<spool>/<group>` owner-only before the first sbatch; the job's output, the sample
scripts, progress and preemption intents all live in it, never in the spool root that every user can write.
"""

from __future__ import annotations

from slurmx.core.config import SiteConfig

__all__ = ["group_spool", "sample_script_path"]


def group_spool(site: SiteConfig, group_id: str) -> str:
    return f"{site.submit.spool_dir.rstrip('/')}/{group_id}"


def sample_script_path(site: SiteConfig, group_id: str, kind: str) -> str:
    """Where the submitter leaves a variant's sample script for slurmxd: in the group folder, which `slurmx submit`
    creates owner-only before the first sbatch, so no other user can plant or swap it."""
    return f"{group_spool(site, group_id)}/sample-{kind}.sh"
