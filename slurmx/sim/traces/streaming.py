"""A trace read as the engine asks for its jobs, one row at a time, so a replay holds the jobs in the system and
not the whole log. A stream needs its rows in submit order (the loaders sort them; a stream cannot), which its
format's `stream_*` function checks in a first pass before building one."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping

from slurmx.sim.jobs import SimJob
from slurmx.sim.traces.common import JobRow, job_of

__all__ = ["TraceStream", "ascending"]


class TraceStream:
    """The usable rows of a trace in file order (the first submission at 0). Reading the first row reads a header
    before it, so `info` is known at once; `assumptions` and `skipped` are complete once the stream has been
    read through, and are the whole loader's then."""

    def __init__(self, rows: Iterator[JobRow], assumptions: Callable[[float | None], tuple[str, ...]],
                 skipped: Callable[[], dict[str, int]], info: Callable[[], Mapping[str, str]] | None = None) -> None:
        self._rows = rows
        self._first = next(rows, None)
        self._base = None if self._first is None else self._first.submit
        self._assumptions = assumptions
        self._skipped = skipped
        self.info: Mapping[str, str] = dict(info()) if info is not None else {}
        self.read = 0  # jobs handed out so far

    def __iter__(self) -> Iterator[SimJob]:
        first, self._first = self._first, None
        if first is None:
            return
        base = first.submit
        for row in itertools.chain((first,), self._rows):
            self.read += 1
            yield job_of(row, base)

    @property
    def assumptions(self) -> tuple[str, ...]:
        return self._assumptions(self._base)

    @property
    def skipped(self) -> dict[str, int]:
        return self._skipped()


def ascending(times: Iterable[float]) -> bool:
    """Whether every time is at least the one before (a first pass over a trace's submit times)."""
    last = float("-inf")
    for t in times:
        if t < last:
            return False
        last = t
    return True
