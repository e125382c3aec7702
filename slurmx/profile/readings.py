"""What a finished sample left in its group's spool folder: its wall time to the sub-second.

The profile template writes `profile-start-<job>` (epoch seconds, `date +%s.%N`) before the payload starts; the
hooks' `progress()` writes `progress-<job>.json` with the epoch `time` of the sample's last step and
`profile-<job>.json` with its step times. Their difference is the sample's wall time with the payload's start-up
included and Slurm's launch latency excluded. sacct's Elapsed counts whole seconds, which is too coarse for
samples a few seconds long; it remains the measure of what samples cost (the allocation).

The folder is the user's: every file is read through `slurmx.core.userfiles` (no link, no FIFO, size-capped and,
when the daemon knows the group's uid, owned by it), so a planted file costs the group its reading and nothing else.
What the files hold is the user's too: every number is checked before it reaches the estimator (`progress_report`,
`bounded_seconds`), so a valid but absurd one (a 400-digit integer, `NaN`, `1e308`) is refused, never raised on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from slurmx.core.userfiles import read_user_text
from slurmx.hooks.sample import sample_step_seconds as step_seconds
from slurmx.hooks.sample import sample_wall_seconds as wall_seconds
from slurmx.profile.estimator import MAX_ESTIMATE_S, ProgressReport

__all__ = ["MAX_RATE", "MAX_STEPS", "bounded_seconds", "progress_report", "read_spool_json", "sample_step_seconds",
           "sample_wall_seconds"]

MAX_STEPS = 10**18 - 1
"""The most steps a progress file may claim: the tag's `n=` bound (18 digits, `core.tag.whole_number`)."""

MAX_RATE = 1e9
"""The fastest progress (steps/s) a file may claim. A step is one call of the hooks' `progress()` from the job's
own loop: a Python call costs tens of nanoseconds at the very least, so no job reports more than about 1e8 steps
a second; 1e9 leaves a factor of ten and still keeps `remaining / rate` far from overflowing."""


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


def bounded_seconds(value: object, limit_s: float) -> float | None:
    """`value` as seconds a sample ran (a number, or its text), if finite and within [0, limit_s]; else None.

    Every timing a sample reports (its comment, its spool files) goes through this: the sample's time limit bounds
    what it can have run, so anything beyond is a claim, not a measurement."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        seconds = float(value)
    except (ValueError, OverflowError):
        return None
    return seconds if math.isfinite(seconds) and 0 <= seconds <= limit_s else None


def _count(data: Mapping[str, object], key: str) -> int | str:
    """A whole number of steps in [0, MAX_STEPS] (absent or null: 0), else why not."""
    value = data.get(key)
    if value is None:
        return 0
    if type(value) is not int or not 0 <= value <= MAX_STEPS:
        return f"{key} is {_shown(value)}, not a whole number of steps in [0, {MAX_STEPS}]"
    return value


def _shown(value: object) -> str:
    text = json.dumps(value, allow_nan=True, default=str) if not isinstance(value, int) or \
        abs(value) < 10**20 else f"a {len(str(abs(value)))}-digit integer"
    return text if len(text) <= 40 else text[:37] + "..."


def progress_report(data: object, elapsed_s: float) -> ProgressReport | str:
    """A running job's progress file (`{"step", "total", "rate"}`) as a bounded report, or one line saying why it
    is refused. A missing file (None) reports elapsed time alone; a null or non-positive rate is none (the hooks
    write null before their second step); a step or total out of [0, MAX_STEPS], or a rate that is not a finite
    number up to MAX_RATE, is refused."""
    if data is None:
        return ProgressReport(0, 0, elapsed_s)
    if not isinstance(data, Mapping):
        return f"not a JSON object but {_shown(data)}"
    step, total = _count(data, "step"), _count(data, "total")
    for count in (step, total):
        if isinstance(count, str):
            return count
    rate = data.get("rate")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float)):
        return f"rate is {_shown(rate)}, not a number"
    if rate is not None and not rate <= MAX_RATE:  # NaN too; a 400-digit int compares exactly, no conversion
        return f"rate is {_shown(rate)}, beyond {MAX_RATE:.0e} steps/s"
    assert isinstance(step, int) and isinstance(total, int) and (rate is None or isinstance(rate, int | float))
    return ProgressReport(step, total, elapsed_s, float(rate) if rate is not None and rate > 0 else None)


def sample_wall_seconds(spool_dir: str | Path, job_id: int | str, owner: int | None = None, *,
                        limit_s: float = MAX_ESTIMATE_S) -> float | None:
    """Wall seconds from the sample's start mark to its last step, within the sample's `limit_s` (its time limit);
    None until the sample wrote its profile (the progress file alone is written from the first step on) or when a
    file is broken or claims more than the sample could have run."""
    spool = Path(spool_dir)
    profile = read_spool_json(spool / f"profile-{job_id}.json", owner)
    progress = read_spool_json(spool / f"progress-{job_id}.json", owner)
    start_text = read_user_text(spool / f"profile-start-{job_id}", owner=owner, folder_owner=owner, max_bytes=64)
    if profile is None or progress is None or start_text is None:
        return None
    return bounded_seconds(wall_seconds(start_text, progress, profile), limit_s)


def sample_step_seconds(spool_dir: str | Path, job_id: int | str, owner: int | None = None, *,
                        limit_s: float = MAX_ESTIMATE_S) -> float | None:
    """Seconds per step inside the sample, from its first recorded step to its last (start-up excluded), within
    `limit_s` (a step cannot take longer than the whole sample)."""
    profile = read_spool_json(Path(spool_dir) / f"profile-{job_id}.json", owner)
    return bounded_seconds(step_seconds(profile), limit_s) if profile is not None else None
