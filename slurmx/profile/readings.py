"""What a finished sample left in its group's spool folder: its wall time to the sub-second.

The profile template writes `profile-start-<job>` (epoch seconds, `date +%s.%N`) before the payload starts; the
hooks' `progress()` writes `progress-<job>.json` with the epoch `time` of the sample's last step and
`profile-<job>.json` with its step times. Their difference is the sample's wall time with the payload's start-up
included and Slurm's launch latency excluded. sacct's Elapsed counts whole seconds, which is too coarse for
samples a few seconds long; it remains the measure of what samples cost (the allocation).
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["sample_step_seconds", "sample_wall_seconds"]


def sample_wall_seconds(spool_dir: str | Path, job_id: int | str) -> float | None:
    """Wall seconds from the sample's start mark to its last step; None until the sample wrote its profile (the
    progress file alone is written from the first step on) or when a file is broken."""
    spool = Path(spool_dir)
    try:
        profile = json.loads((spool / f"profile-{job_id}.json").read_text())
        start = float((spool / f"profile-start-{job_id}").read_text().strip())
        progress = json.loads((spool / f"progress-{job_id}.json").read_text())
        end = float(progress["time"])
        last = progress["step"] >= profile["steps"]  # the hooks write the profile, then the last progress
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return end - start if last and end >= start else None


def sample_step_seconds(spool_dir: str | Path, job_id: int | str) -> float | None:
    """Seconds per step inside the sample, from its first recorded step to its last (start-up excluded)."""
    try:
        profile = json.loads((Path(spool_dir) / f"profile-{job_id}.json").read_text())
        times, steps = profile["times"], profile["at_steps"]
        span = steps[-1] - steps[0]
        return (float(times[-1]) - float(times[0])) / span if span > 0 else None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
