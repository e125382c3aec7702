"""When a `--begin` value falls, read as sbatch reads it (Slurm's `parse_time`, src/common/parse_time.c).

A managed group's variants wait under slurmxd's lease, so the begin time Slurm shows is the lease's: `slurmx
submit` turns the user's time into Unix seconds for the group tag (`b=`, `core/tag.py`) and into `now+<s>` for
sbatch. Both come from this one reading, in the submitting host's local time as sbatch's own would be; the
relative `now+<s>` then means the same instant on a controller in another time zone.
"""

from __future__ import annotations

import math
import re
import time

__all__ = ["begin_at"]

_UNITS = {"": 1, "s": 1, "second": 1, "seconds": 1, "m": 60, "minute": 60, "minutes": 60, "h": 3600, "hour": 3600,
          "hours": 3600, "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}
_NAMED_HOURS = {"midnight": 0, "noon": 12, "elevenses": 11, "fika": 15, "teatime": 16}
_RELATIVE = re.compile(r"now(?:\+([0-9]{1,9})([a-z]*))?")
_CLOCK = re.compile(r"([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?(am|pm)?")
_ISO = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:t([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?)?")
_MMDDYY = re.compile(r"([0-9]{2})([0-9]{2})([0-9]{2})")
_SLASHED = re.compile(r"([0-9]{2})/([0-9]{2})(?:/([0-9]{2}))?")


def begin_at(value: str, now: float) -> float:
    """The Unix time `--begin=value` (a form `directives.parse_begin` accepted) stands for at `now`; a time
    already past stays as it is (Slurm starts such a job at once). ValueError for a date that does not exist."""
    text = value.strip().lower()
    relative = _RELATIVE.fullmatch(text)
    if relative is not None:
        count, unit = relative.group(1), relative.group(2) or ""
        if unit not in _UNITS:
            raise ValueError(f"--begin={value}: unknown unit {unit!r}; use s, m, h, d or w")
        return now + int(count or 0) * _UNITS[unit]
    today = time.localtime(now)
    if text in ("today", "tomorrow"):
        day = today if text == "today" else time.localtime(now + 86400)
        return _local(day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0)
    if text in _NAMED_HOURS:
        return _soonest(now, _NAMED_HOURS[text], 0, 0)
    clock = _CLOCK.fullmatch(text)
    if clock is not None:
        hour, minute, second = int(clock[1]), int(clock[2]), int(clock[3] or 0)
        if clock[4] == "pm" and hour < 12:
            hour += 12
        elif clock[4] == "am" and hour == 12:
            hour = 0
        return _soonest(now, hour, minute, second)
    iso = _ISO.fullmatch(text)
    if iso is not None:
        year, month, day_of = int(iso[1]), int(iso[2]), int(iso[3])
        return _local(year, month, day_of, int(iso[4] or 0), int(iso[5] or 0), int(iso[6] or 0))
    dated = _MMDDYY.fullmatch(text) or _SLASHED.fullmatch(text)
    if dated is None:
        raise ValueError(f"--begin={value}: expected a time as sbatch takes it: now+1hour, 16:00, 2026-12-01T08:00")
    month, day_of = int(dated[1]), int(dated[2])
    if dated[3] is not None:
        return _local(2000 + int(dated[3]), month, day_of, 0, 0, 0)
    # No year: this year if still ahead (to the minute, as Slurm compares), else next year.
    ahead = (month, day_of) > (today.tm_mon, today.tm_mday)
    return _local(today.tm_year + (0 if ahead else 1), month, day_of, 0, 0, 0)


def _soonest(now: float, hour: int, minute: int, second: int) -> float:
    """A time of day without a date: today while it is still ahead (to the minute, as Slurm compares), else
    tomorrow."""
    today = time.localtime(now)
    day = today if (hour, minute) > (today.tm_hour, today.tm_min) else time.localtime(now + 86400)
    return _local(day.tm_year, day.tm_mon, day.tm_mday, hour, minute, second)


def _local(year: int, month: int, day: int, hour: int, minute: int, second: int) -> float:
    """A local wall-clock time as Unix seconds (`mktime`, as Slurm's `slurm_mktime`), checked to exist."""
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59 and second <= 60):
        raise ValueError(f"no such time: {year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}")
    stamp = time.mktime((year, month, day, hour, minute, second, 0, 0, -1))
    if not math.isfinite(stamp):
        raise ValueError(f"no such time: {year:04}-{month:02}-{day:02}")
    return stamp
