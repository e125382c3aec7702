"""Where a group's files live in the shared spool: one convention for `slurmx submit`, its jobs and slurmxd.

`slurmx submit` creates `<spool>/<group>` owner-only before the first sbatch; the job's output, progress,
sample timings and preemption intents all live in it, never in the spool root that every user can write. The
folder's owner is the group's owner (`core/ownership.py`).
"""

from __future__ import annotations

from slurmx.core.config import SiteConfig

__all__ = ["group_spool", "spool_path"]


def spool_path(spool_dir: str, group_id: str) -> str:
    """`<spool_dir>/<group_id>`; ValueError for an id that is not one path component (a tag is anyone's to write)."""
    if not group_id or "/" in group_id or "\0" in group_id or group_id in (".", ".."):
        raise ValueError(f"group id {group_id[:40]!r} is not a plain name")
    return f"{spool_dir.rstrip('/')}/{group_id}"


def group_spool(site: SiteConfig, group_id: str) -> str:
    return f"{site.submit.spool_dir.rstrip('/')}/{group_id}"
