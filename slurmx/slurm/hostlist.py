"""Slurm host lists (`c[1-2],g[01-02,5],login`) expanded into node names, refused when too large to expand.

Host lists come from squeue and scontrol output, so they are hostile input: a list is counted (a product of
range sizes) before a single name is produced, and one past HOSTLIST_MAX names is a SlurmParseError.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator

from slurmx.slurm.errors import SlurmParseError

__all__ = ["HOSTLIST_MAX", "check_hostlist", "expand_hostlist"]

HOSTLIST_MAX = 100_000  # the most host names one host list may stand for; larger ones are refused unexpanded
_HOSTLIST_MAX_CHARS = 64 * HOSTLIST_MAX  # and the most characters they may add up to


def expand_hostlist(expr: str) -> list[str]:
    """Slurm hostlist `c[1-2],g[01-02,5],login` -> ['c1', 'c2', 'g01', 'g02', 'g5', 'login'].

    Raises SlurmParseError, before expanding anything, when `expr` is malformed or stands for more than
    HOSTLIST_MAX names (`c[1-1000000000000]` would otherwise take all memory and hang the daemon).
    """
    return [name for pattern in _hostlist(expr) for name in _names(pattern)]


def check_hostlist(expr: str) -> None:
    """Raise what `expand_hostlist(expr)` would raise, without expanding: a reader refuses a record early."""
    _hostlist(expr)


_Ranges = tuple[tuple[int, int, int], ...]  # (first, last, zero-padded width) of each range in one bracket
_HOST_GROUP_RE = re.compile(r"\[([^\[\]]*)\]")
_HOST_RANGE_RE = re.compile(r"([0-9]{1,18})(?:-([0-9]{1,18}))?")  # 18 digits: every bound fits in 64 bits


@functools.lru_cache(maxsize=4096)
def _hostlist(expr: str) -> tuple[tuple[str | _Ranges, ...], ...]:
    """A host list read into patterns (fixed text and bracketed ranges), checked without expanding anything:
    the names it stands for are counted (a product of range sizes), never listed. Cached: the daemon checks
    each running job's node list on every read of the queue."""
    patterns = []
    count = chars = 0
    for part in _split_hostlist(expr):
        if part:
            pattern, names, width = _host_pattern(part, expr)
            count, chars = count + names, chars + names * width
            if count > HOSTLIST_MAX or chars > _HOSTLIST_MAX_CHARS:
                raise _hostlist_error(expr, f"stands for more than {HOSTLIST_MAX:,} host names (or "
                                      f"{_HOSTLIST_MAX_CHARS:,} characters of them)")
            patterns.append(pattern)
    return tuple(patterns)


def _host_pattern(part: str, expr: str) -> tuple[tuple[str | _Ranges, ...], int, int]:
    """One comma-separated part -> (its pattern, how many names, the longest name's length)."""
    pattern: list[str | _Ranges] = []
    count, width, pos = 1, 0, 0
    for match in _HOST_GROUP_RE.finditer(part):
        ranges = tuple(_host_range(text, expr) for text in match.group(1).split(","))
        pattern += [part[pos : match.start()], ranges]
        count *= sum(last - first + 1 for first, last, _ in ranges)
        width += match.start() - pos + max(max(w, len(str(last))) for _, last, w in ranges)
        pos = match.end()
        if count > HOSTLIST_MAX:  # refused before reading further: a part can hold a thousand brackets
            raise _hostlist_error(expr, f"stands for more than {HOSTLIST_MAX:,} host names")
    pattern.append(part[pos:])
    width += len(part) - pos
    if any("[" in text or "]" in text for text in pattern if isinstance(text, str)):
        raise _hostlist_error(expr, "has unbalanced brackets")
    return tuple(pattern), count, width


def _host_range(text: str, expr: str) -> tuple[int, int, int]:
    match = _HOST_RANGE_RE.fullmatch(text)
    if not match or int(match.group(2) or match.group(1)) < int(match.group(1)):
        raise _hostlist_error(expr, f"has a range {text[:40]!r} that is not FIRST or FIRST-LAST")
    return int(match.group(1)), int(match.group(2) or match.group(1)), len(match.group(1))


def _hostlist_error(expr: str, why: str) -> SlurmParseError:
    shown = expr if len(expr) <= 80 else expr[:80] + "..."
    return SlurmParseError(("hostlist",), None, f"host list {shown!r} {why}")


def _names(pattern: tuple[str | _Ranges, ...]) -> Iterator[str]:
    choices = [(item,) if isinstance(item, str) else _numbers(item) for item in pattern]
    return map("".join, itertools.product(*choices))


def _numbers(ranges: _Ranges) -> Iterator[str]:
    return (f"{i:0{width}d}" for first, last, width in ranges for i in range(first, last + 1))


def _split_hostlist(expr: str) -> Iterator[str]:
    depth, start = 0, 0
    for i, ch in enumerate(expr):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            yield expr[start:i].strip()
            start = i + 1
    yield expr[start:].strip()
