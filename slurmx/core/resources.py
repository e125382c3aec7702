"""Resource vectors: cpus, memory and named GRES, with the arithmetic policies need."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from slurmx.core.units import MAX_QUANTITY, UnitError, parse_mem

__all__ = ["Resources", "parse_gres"]

_GRES_ITEM_RE = re.compile(r"^(?:gres/)?([A-Za-z][\w.-]*)(?::([A-Za-z][\w.-]*))?:(\d+)(?:\(.*\))?$")


def parse_gres(text: str | None) -> dict[str, int]:
    """`gpu:2,accel:1` (also Slurm's `gpu:tesla:2`, `gres/gpu:2`, `gpu:2(IDX:0-1)`) -> {'gpu': 2, 'accel': 1}.

    Types are folded into the GRES name's count: policies reason about how many GPUs, not which model.
    """
    counts: dict[str, int] = {}
    if not text or text in {"(null)", "N/A"}:
        return counts
    for item in _split_top_level(text):
        match = _GRES_ITEM_RE.match(item.strip())
        if not match:
            raise UnitError(f"expected NAME:COUNT (e.g. gpu:2), got {item.strip()!r}")
        digits = match.group(3)
        if len(digits) > 16 or int(digits) > MAX_QUANTITY:  # no int() of a 5,000-digit string, no int64 overflow
            raise UnitError(f"GRES count in {item.strip()[:40]!r} is too large")
        name, count = match.group(1), int(digits)
        counts[name] = counts.get(name, 0) + count
    return counts


def _split_top_level(text: str) -> Iterator[str]:
    """Split on commas that are not inside parentheses (`gpu:2(IDX:0,1)` stays whole)."""
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            if text[start:i].strip():
                yield text[start:i]
            start = i + 1
    if text[start:].strip():
        yield text[start:]


_NO_GRES: Mapping[str, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Resources:
    """An immutable amount of cpus, memory (MB) and named generic resources.

    Zero-count GRES are dropped so that equal amounts compare equal however they were built.
    """

    cpus: int = 0
    mem_mb: int = 0
    gres: Mapping[str, int] = field(default_factory=lambda: _NO_GRES)
    # Computed on first use and kept: requests are dict and set keys on every decision (a plan's misses).
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.gres is _NO_GRES:
            return
        if not self.gres:
            object.__setattr__(self, "gres", _NO_GRES)  # the common case, built on every plan: skip the sort
            return
        cleaned = {k: int(v) for k, v in sorted(self.gres.items()) if v}
        object.__setattr__(self, "gres", MappingProxyType(cleaned))

    @classmethod
    def parse(
        cls, cpus: int = 0, mem: str | int = 0, gres: str | Mapping[str, int] | None = None
    ) -> Resources:
        """Build from user spellings: `Resources.parse(4, '16G', 'gpu:1')`."""
        counts = parse_gres(gres) if isinstance(gres, str) or gres is None else dict(gres)
        return cls(int(cpus), parse_mem(mem), counts)

    def __hash__(self) -> int:
        cached = self._hash
        if cached is None:
            cached = hash((self.cpus, self.mem_mb, tuple(self.gres.items())))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Resources):
            return NotImplemented
        # Both `gres` are read-only views of clean dicts (or the one empty view), which compare as dicts do.
        return self.cpus == other.cpus and self.mem_mb == other.mem_mb and self.gres == other.gres

    def gres_count(self, name: str) -> int:
        return self.gres.get(name, 0)

    def _combine(self, other: Resources, sign: int) -> Resources:
        if not self.gres and not other.gres:  # the common case (CPU jobs), on every reservation step
            return Resources(self.cpus + sign * other.cpus, self.mem_mb + sign * other.mem_mb, _NO_GRES)
        names = set(self.gres) | set(other.gres)
        gres = {n: self.gres.get(n, 0) + sign * other.gres.get(n, 0) for n in names}
        return Resources(self.cpus + sign * other.cpus, self.mem_mb + sign * other.mem_mb, gres)

    def __add__(self, other: Resources) -> Resources:
        return self._combine(other, +1)

    def __sub__(self, other: Resources) -> Resources:
        return self._combine(other, -1)

    def scaled(self, factor: int) -> Resources:
        gres = {k: v * factor for k, v in self.gres.items()}
        return Resources(self.cpus * factor, self.mem_mb * factor, gres)

    def fits_in(self, capacity: Resources) -> bool:
        """True when every dimension of self is at most the same dimension of capacity."""
        if self.cpus > capacity.cpus or self.mem_mb > capacity.mem_mb:
            return False
        if not self.gres:
            return True
        return all(count <= capacity.gres.get(name, 0) for name, count in self.gres.items())

    def fits_with(self, other: Resources, capacity: Resources) -> bool:
        """`(self + other).fits_in(capacity)` without building the sum: a plan checks every node it already
        started a job on this way, for each group it places."""
        if self.cpus + other.cpus > capacity.cpus or self.mem_mb + other.mem_mb > capacity.mem_mb:
            return False
        mine, theirs = self.gres, other.gres
        if not mine and not theirs:
            return True
        room = capacity.gres
        for name in mine.keys() | theirs.keys():
            total = mine.get(name, 0) + theirs.get(name, 0)
            if total and total > room.get(name, 0):
                return False
        return True

    def is_nonnegative(self) -> bool:
        return self.cpus >= 0 and self.mem_mb >= 0 and all(v >= 0 for v in self.gres.values())

    def dims(self) -> dict[str, int]:
        """Flat view, one entry per dimension: {'cpus': 4, 'mem_mb': 8192, 'gres/gpu': 1}."""
        flat = {"cpus": self.cpus, "mem_mb": self.mem_mb}
        flat.update({f"gres/{k}": v for k, v in self.gres.items()})
        return flat

    def gres_spec(self) -> str:
        """Slurm's spelling for --gres: 'gpu:2,accel:1' ('' when none)."""
        return ",".join(f"{k}:{v}" for k, v in self.gres.items())

    def __str__(self) -> str:
        from slurmx.core.units import format_mem

        extra = f" {self.gres_spec()}" if self.gres else ""
        return f"cpus={self.cpus} mem={format_mem(self.mem_mb)}{extra}"
