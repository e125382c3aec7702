"""Parsing of Slurm-style quantities: memory sizes and durations.

Slurm writes memory in megabytes by default (`--mem=1500` is 1500 MB) and durations as
`[days-]hours:minutes:seconds`; people also write `32G`, `90s` or `5m`. One parser for each, so the spec,
the site config and Slurm's own output agree on what a number means.
"""

from __future__ import annotations

import math
import re

__all__ = ["ClockNumber", "UnitError", "format_duration", "format_mem", "parse_duration", "parse_mem",
           "parse_time_limit", "short_repr"]


class UnitError(ValueError):
    """A quantity that cannot be read; the message says what was expected."""


# Past this a quantity is a typo, and larger ones stop fitting Slurm's 64-bit fields or a float.
MAX_QUANTITY = 2**53

_MEM_FACTORS_MB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024, "P": 1024**3}
_MEM_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(?:i?B)?\s*$", re.IGNORECASE)


def parse_mem(value: str | int | float) -> int:
    """Memory in whole megabytes. A bare number is megabytes, as in `sbatch --mem`."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise UnitError(f"expected a memory size like 32G or 1500M, got {short_repr(value)}")
    if isinstance(value, int | float):
        if not _finite_non_negative(value):
            raise UnitError(f"expected a finite, non-negative memory size, got {short_repr(value)}")
        return _capped(int(value), value, "memory size")
    match = _MEM_RE.match(value)
    if not match:
        raise UnitError(f"expected a memory size like 32G or 1500M, got {short_repr(value)}")
    megabytes = float(match.group(1)) * _MEM_FACTORS_MB[(match.group(2) or "M").upper()]
    if not math.isfinite(megabytes):
        raise UnitError(f"memory size {short_repr(value)} is too large")
    return _capped(round(megabytes), value, "memory size")


def format_mem(mb: int) -> str:
    """The shortest exact Slurm spelling: 32768 -> '32G', 1500 -> '1500M'."""
    if mb and mb % (1024 * 1024) == 0:
        return f"{mb // (1024 * 1024)}T"
    if mb and mb % 1024 == 0:
        return f"{mb // 1024}G"
    return f"{mb}M"


_SUFFIX_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_SUFFIX_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$", re.IGNORECASE)
_SLURM_TIME_RE = re.compile(r"^\s*(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?\s*$")


def parse_duration(value: str | int | float) -> int:
    """Duration in whole seconds.

    Accepts `90s`, `5m`, `2h`, `1d`, and Slurm's `--time` forms: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`,
    `D-HH:MM`, `D-HH:MM:SS`. A bare number is minutes, exactly as `sbatch --time=30` reads it;
    an int or float given programmatically is seconds.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise UnitError(f"expected a duration like 90s, 5m or 2-00:00:00, got {short_repr(value)}")
    if isinstance(value, int | float):
        if not _finite_non_negative(value):
            raise UnitError(f"expected a finite, non-negative duration, got {short_repr(value)}")
        return _capped(int(value), value, "duration")
    text = value.strip()
    if text.upper() in {"UNLIMITED", "INFINITE"}:
        raise UnitError(f"expected a finite duration, got {value!r}")
    suffixed = _SUFFIX_RE.match(text)
    if suffixed:
        seconds = float(suffixed.group(1)) * _SUFFIX_SECONDS[suffixed.group(2).lower()]
        if not math.isfinite(seconds):
            raise UnitError(f"duration {short_repr(value)} is too large")
        return _capped(round(seconds), value, "duration")
    match = _SLURM_TIME_RE.match(text)
    if not match:
        raise UnitError(f"expected a duration like 90s, 5m or 2-00:00:00, got {short_repr(value)}")
    if len(text) > 40:  # int() of a long digit string is slow, then refused
        raise UnitError(f"duration {short_repr(value)} is too large")
    days_s, first, second, third = match.groups()
    a, b, c = int(first), int(second or 0), int(third or 0)
    if days_s is not None:
        seconds_total = int(days_s) * 86400 + a * 3600 + b * 60 + c  # D-HH, D-HH:MM, D-HH:MM:SS
    elif third is not None:
        seconds_total = a * 3600 + b * 60 + c  # HH:MM:SS
    elif second is not None:
        seconds_total = a * 60 + b  # MM:SS
    else:
        seconds_total = a * 60  # MM
    return _capped(seconds_total, value, "duration")


class ClockNumber(int):
    """A YAML 1.1 base-60 number (`1:30:00`), which YAML reads as 5400, with the text as written.

    For a plain duration the number is right (5400 seconds is 1:30:00 read as HH:MM:SS). For a time limit, where
    a bare number means minutes, the text is read instead: `time: 1:30:00` is an hour and a half, not 5400 minutes.
    """

    text: str

    def __new__(cls, value: int, text: str) -> ClockNumber:
        number = super().__new__(cls, value)
        number.text = text
        return number

    def __getnewargs__(self) -> tuple[int, str]:  # type: ignore[override]  # pickle and copy pass the text too
        return int(self), self.text


def parse_time_limit(value: str | int | float) -> int:
    """A Slurm time limit (`time:`, `--time`) in whole seconds: a bare number is MINUTES, whether it is written
    as text, as a YAML number or passed as a Python int or float, exactly as `sbatch --time=30` reads it.

    Every other form is `parse_duration`'s (`90s`, `2h`, `1:30:00`, `2-00:00:00`).
    """
    if isinstance(value, ClockNumber):
        return parse_duration(value.text)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not _finite_non_negative(value):
            raise UnitError(f"expected a finite, non-negative time limit, got {short_repr(value)}")
        if value > MAX_QUANTITY // 60:
            raise UnitError(f"time limit {short_repr(value)} is too large")
        return round(value * 60)
    return parse_duration(value)


def _finite_non_negative(value: int | float) -> bool:
    if isinstance(value, int):
        return value >= 0  # no float(): a huge int would overflow it
    return math.isfinite(value) and value >= 0


def _capped(number: int, given: object, what: str) -> int:
    if number > MAX_QUANTITY:
        raise UnitError(f"{what} {short_repr(given)} is too large")
    return number


def short_repr(value: object) -> str:
    """`repr`, cut short: the value may be a 400-digit number or a whole YAML subtree."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def format_duration(seconds: int) -> str:
    """Slurm's `D-HH:MM:SS` (days only when needed)."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    core = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{core}" if days else core
