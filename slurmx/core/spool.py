"""Where a group's files live in the shared spool: one convention for `slurmx submit`, its jobs and slurmxd.

`slurmx submit` creates `<spool>/<group>` owner-only before the first sbatch; the job's output, progress,
sample timings and preemption intents all live in it, never in the spool root that every user can write.
"""

from __future__ import annotations

from slurmx.core.config import SiteConfig

__all__ = ["group_spool"]


def group_spool(site: SiteConfig, group_id: str) -> str:
    return f"{site.submit.spool_dir.rstrip('/')}/{group_id}"
