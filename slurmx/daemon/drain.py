"""`slurmxd drain` / `slurmxd resume`: hand every managed group to Slurm (race mode) and stop deciding, or resume.

Draining writes a marker in the state directory, which every slurmxd on that directory reads at the start of each
cycle (a drained daemon observes nothing and decides nothing), then moves the begin time of every waiting leased
variant to now in one `scontrol update` (to the user's own `--begin` where that is later, `b=` in the tag): Slurm
starts them as it would any job, and the job-side guard lets one variant per group do the work. Turning slurmxd
off is then `systemctl stop slurmxd`; without a drain the leases run out by themselves within `daemon.lease`.
"""

from __future__ import annotations

import time
from pathlib import Path

from slurmx.core.model import VariantState
from slurmx.core.tag import begin_floor
from slurmx.daemon.lease import begin_after, is_leased
from slurmx.slurm import SlurmAdapter
from slurmx.slurm.adapter import JobUpdate

__all__ = ["DRAIN_MARKER", "drain", "is_drained", "resume"]

DRAIN_MARKER = "drained"


def is_drained(state_dir: Path) -> bool:
    return (state_dir / DRAIN_MARKER).exists()


def drain(state_dir: Path, adapter: SlurmAdapter, now: float | None = None) -> list[int]:
    """Mark the state directory drained, then let every waiting leased variant start now; returns their ids."""
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / DRAIN_MARKER).write_text("slurmxd drain: managed groups are Slurm's to run; "
                                          "`slurmxd resume` takes them back\n")
    now = time.time() if now is None else now
    by_begin: dict[str, list[int]] = {}
    for job in adapter.jobs():
        if job.state is VariantState.PENDING and is_leased(job):
            floor = begin_floor(job.comment, job.submit_time)
            by_begin.setdefault(begin_after(floor - now if floor is not None else 0), []).append(job.job_id)
    for begin, ids in by_begin.items():
        adapter.update(ids, JobUpdate(begin=begin))
    return [job_id for ids in by_begin.values() for job_id in ids]


def resume(state_dir: Path) -> bool:
    """Lift a drain; the next cycle takes every still-waiting leased variant back. False: it was not drained."""
    try:
        (state_dir / DRAIN_MARKER).unlink()
    except FileNotFoundError:
        return False
    return True
