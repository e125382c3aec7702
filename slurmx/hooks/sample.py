"""A profiling sample's timing, as the sample itself reports it to slurmxd through its Slurm comment.

A sample run (the profile template) leaves `profile-start-<job>` (epoch seconds before the payload),
`progress-<job>.json` (the time of its last step) and `profile-<job>.json` (its step times) in the group folder.
The folder is the user's, mode 0700: a daemon that is not root cannot read it. So when the payload ends, the
sample reads its own files and appends `t=<wall seconds>,ps=<seconds per step>` to its comment
(`scontrol update`), which any Slurm operator can read. slurmxd computes the same numbers with the same function
when it can read the folder.

`python3 -m slurmx.hooks.sample` prints those fields for the running job (nothing when the sample did not finish).
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["report_fields", "sample_step_seconds", "sample_wall_seconds"]

_MAX_BYTES = 1 << 20


def sample_wall_seconds(start_text: str, progress: Mapping[str, object], profile: Mapping[str, object]) \
        -> float | None:
    """Seconds from the start mark to the last step, if the progress file reached the profile's last step."""
    try:
        start = float(start_text.strip())
        end = float(progress["time"])  # type: ignore[arg-type]
        last = progress["step"] >= profile["steps"]  # type: ignore[operator]
    except (ValueError, KeyError, TypeError, OverflowError):
        return None
    if not (math.isfinite(start) and math.isfinite(end)):
        return None
    return end - start if last and end >= start else None


def sample_step_seconds(profile: Mapping[str, object]) -> float | None:
    """Seconds per step inside the sample, from its first recorded step to its last (start-up excluded)."""
    try:
        times, steps = profile["times"], profile["at_steps"]
        span = steps[-1] - steps[0]  # type: ignore[index]
        value = (float(times[-1]) - float(times[0])) / span if span > 0 else None  # type: ignore[index]
    except (ValueError, KeyError, TypeError, IndexError, OverflowError, ZeroDivisionError):
        return None
    return value if value is not None and math.isfinite(value) and value >= 0 else None


def _read(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(_MAX_BYTES)
    except (OSError, UnicodeError):
        return None


def _json(path: Path) -> dict[str, object] | None:
    text = _read(path)
    try:
        data = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def report_fields(spool: Path, job_id: str) -> str:
    """`t=…,ps=…` for the comment (either part left out when unknown); empty when the sample did not finish."""
    start = _read(spool / f"profile-start-{job_id}")
    progress = _json(spool / f"progress-{job_id}.json")
    profile = _json(spool / f"profile-{job_id}.json")
    if start is None or progress is None or profile is None:
        return ""
    wall = sample_wall_seconds(start, progress, profile)
    if wall is None:
        return ""
    step = sample_step_seconds(profile)
    return f"t={wall:.6f}" + (f",ps={step:.9g}" if step is not None else "")


def main() -> int:
    spool, job = os.environ.get("SLURMX_SPOOL_DIR"), os.environ.get("SLURM_JOB_ID")
    if spool and job:
        sys.stdout.write(report_fields(Path(spool), job))
    return 0


if __name__ == "__main__":
    sys.exit(main())
