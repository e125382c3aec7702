"""What a finished sample left in its group's spool folder: its wall time to the sub-second.

The profile template writes `profile-start-<job>` (epoch seconds, `date +%s.%N`) before the payload starts; the
hooks' `progress()` writes `progress-<job>.json` with the epoch `time` of the sample's last step and
`profile-<job>.json` with its step times. Their difference is the sample's wall time with the payload's start-up
included and Slurm's launch latency excluded. sacct's Elapsed counts whole seconds, which is too coarse for
samples a few seconds long; it remains the measure of what samples cost (the allocation).

The folder is the user's: every file is read through `slurmx.core.userfiles` (no link, no FIFO, size-capped and,
when the daemon knows the group's uid, owned by it), so a planted file costs the group its reading and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from slurmx.core.userfiles import read_user_text
from slurmx.hooks.sample import sample_step_seconds as step_seconds
from slurmx.hooks.sample import sample_wall_seconds as wall_seconds

__all__ = ["read_spool_json", "sample_step_seconds", "sample_wall_seconds"]


def read_spool_json(path: str | Path, owner: int | None = None) -> Mapping[str, object] | None:
    """A JSON object from a user's spool folder, or None when missing, hostile, broken or not an object."""
    text = read_user_text(path, owner=owner, folder_owner=owner)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def sample_wall_seconds(spool_dir: str | Path, job_id: int | str, owner: int | None = None) -> float | None:
    """Wall seconds from the sample's start mark to its last step; None until the sample wrote its profile (the
    progress file alone is written from the first step on) or when a file is broken."""
    spool = Path(spool_dir)
    profile = read_spool_json(spool / f"profile-{job_id}.json", owner)
    progress = read_spool_json(spool / f"progress-{job_id}.json", owner)
    start_text = read_user_text(spool / f"profile-start-{job_id}", owner=owner, folder_owner=owner, max_bytes=64)
    if profile is None or progress is None or start_text is None:
        return None
    return wall_seconds(start_text, progress, profile)


def sample_step_seconds(spool_dir: str | Path, job_id: int | str, owner: int | None = None) -> float | None:
    """Seconds per step inside the sample, from its first recorded step to its last (start-up excluded)."""
    profile = read_spool_json(Path(spool_dir) / f"profile-{job_id}.json", owner)
    return step_seconds(profile) if profile is not None else None
