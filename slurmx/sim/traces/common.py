"""What every trace loader shares: the one-line error, the result type, streaming row readers, job assembly.

Loaders stream their file row by row (the whole Alibaba pod list and the 82k-row Philly CSV load in well
under a second or two) and reject a malformed file with one `TraceError` line naming the file, the row and
the column and saying what was expected, so `slurmx sim run trace.csv` fails the way a config typo does.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any, NamedTuple, NoReturn

from slurmx.core.model import JobClass
from slurmx.core.placement import ANYWHERE, Placement
from slurmx.core.resources import Resources
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.traces.errors import TraceError
from slurmx.sim.traces.reading import READ_ERRORS, read_failure

__all__ = [
    "CsvRows",
    "JobRow",
    "LoadedTrace",
    "ResourceCache",
    "Row",
    "TraceError",
    "assemble",
    "iso",
    "job_of",
    "open_text",
    "parse_datetime",
]


@dataclass(frozen=True, slots=True)
class LoadedTrace:
    """Jobs of a trace (sorted by submit time, the first at 0) and everything the loader had to assume."""

    jobs: tuple[SimJob, ...]
    assumptions: tuple[str, ...]
    source: str  # "<format>:<path>"
    skipped: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))  # reason -> rows
    info: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # e.g. SWF header fields

    def __post_init__(self) -> None:
        object.__setattr__(self, "skipped", MappingProxyType(dict(self.skipped)))
        object.__setattr__(self, "info", MappingProxyType(dict(self.info)))

    def __len__(self) -> int:
        return len(self.jobs)


def open_text(path: str | Path) -> IO[str]:
    """Open a trace for reading as text, transparently gunzipping `*.gz`; a missing file is a `TraceError`."""
    p = Path(path)
    try:
        if p.suffix == ".gz":
            return io.TextIOWrapper(gzip.open(p, "rb"), encoding="utf-8", newline="")
        return open(p, encoding="utf-8", newline="")  # the caller closes it
    except FileNotFoundError:
        raise TraceError(path, "file not found") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None


_EPOCH = datetime(1970, 1, 1)  # naive: subtracting from a naive wall time is the UTC reading, and 4x faster


def parse_datetime(text: str) -> float:
    """`2017-10-07 01:12:09` (ISO-like, no zone) -> epoch seconds, reading the wall time as UTC.

    Traces give local wall times without a zone; only differences matter to the simulator, so UTC is as good
    as any (a daylight-saving change inside the trace can shift a duration by one hour; loaders say so).
    """
    moment = datetime.fromisoformat(text)
    return moment.timestamp() if moment.tzinfo else (moment - _EPOCH).total_seconds()


class Row:
    """The current row of a CSV stream, with typed accessors that raise `TraceError` naming row and column.

    One object is reused for every row (the stream updates `values` and `line`), which keeps per-row cost low.
    """

    __slots__ = ("index", "line", "path", "values")

    def __init__(self, path: str, index: Mapping[str, int]) -> None:
        self.path, self.index = path, index
        self.values: list[str] = []
        self.line = 0

    def fail(self, column: str | None, expected: str, got: str | None = None) -> NoReturn:
        suffix = f", got {got!r}" if got is not None else ""
        raise TraceError(self.path, f"expected {expected}{suffix}", row=self.line, column=column)

    def text(self, column: str) -> str:
        return self.values[self.index[column]].strip()

    def number(self, column: str, *, low: float | None = None, what: str = "a number") -> float:
        raw = self.values[self.index[column]]
        try:
            value = float(raw)
        except ValueError:
            self.fail(column, what, raw)
        if not math.isfinite(value) or (low is not None and value < low):  # nan and inf are never quantities
            self.fail(column, f"{what} >= {low:g}" if low is not None else what, raw)
        return value

    def whole(self, column: str, *, low: int | None = None) -> int:
        """A whole number; `8.0` is accepted (pandas writes integers that way), `8.5` is not."""
        raw = self.values[self.index[column]]
        try:
            value = int(raw)
        except ValueError:
            try:
                as_float = float(raw)
            except ValueError:
                as_float = 0.5
            if not as_float.is_integer():
                self.fail(column, "a whole number", raw)
            value = int(as_float)
        if low is not None and value < low:
            self.fail(column, f"a whole number >= {low}", raw)
        return value

    def optional_number(self, column: str, *, low: float | None = None) -> float | None:
        """An empty cell is `None` (e.g. the scheduled time of a pod that never ran)."""
        return None if not self.values[self.index[column]].strip() else self.number(column, low=low)

    def timestamp(self, column: str) -> float:
        raw = self.values[self.index[column]]
        try:
            return parse_datetime(raw.strip())
        except ValueError:
            self.fail(column, "a date and time like 2017-10-07 01:12:09", raw)


class CsvRows:
    """Stream a CSV trace (plain or `.gz`): check the header for `required` columns, then yield each row.

    Blank lines are skipped; a row with a different number of fields than the header is a `TraceError`.
    """

    def __init__(self, path: str | Path, required: Sequence[str]) -> None:
        self.path, self.required = str(path), tuple(required)

    def __iter__(self) -> Iterator[Row]:
        with open_text(self.path) as fh:
            reader = csv.reader(fh)
            try:
                header = [h.strip().lstrip("\ufeff") for h in next(reader)]
            except StopIteration:
                raise TraceError(self.path, f"empty file; expected a header with {', '.join(self.required)}") from None
            except csv.Error as exc:
                raise TraceError(self.path, f"unreadable CSV header ({exc}); check its quoting", row=1) from None
            except READ_ERRORS as exc:
                raise read_failure(self.path, exc) from None
            index = {name: i for i, name in enumerate(header)}
            for name in self.required:
                if name not in index:
                    message = f"expected this column in the header, which has {', '.join(header)}"
                    raise TraceError(self.path, message, row=1, column=name)
            row = Row(self.path, index)
            width = len(header)
            try:
                for values in reader:
                    if not values:
                        continue
                    row.line = reader.line_num
                    if len(values) != width:
                        raise TraceError(
                            self.path, f"expected {width} fields like the header, got {len(values)}", row=row.line
                        )
                    row.values = values
                    yield row
            except csv.Error as exc:
                raise TraceError(self.path, f"unreadable CSV ({exc}); check the quoting", row=reader.line_num) from None
            except READ_ERRORS as exc:
                raise read_failure(self.path, exc) from None


class ResourceCache:
    """Share one `Resources` per distinct request: traces have a few hundred shapes over 100k jobs."""

    def __init__(self) -> None:
        self._cache: dict[tuple[int, int, str, int], Resources] = {}

    def get(self, cpus: int, mem_mb: int, gres: str = "", count: int = 0) -> Resources:
        key = (cpus, mem_mb, gres, count)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = Resources(cpus, mem_mb, {gres: count} if gres and count else {})
        return found


class JobRow(NamedTuple):
    """A job read from a trace, before submit times are rebased: what `assemble` turns into a `SimJob`."""

    submit: float
    job_id: str
    user: str
    kind: str
    request: Resources
    duration_s: float
    estimate_s: float | None
    job_class: JobClass
    meta: dict[str, Any]
    nodes: int = 1  # `request` is per node on this many nodes (an HPC job's -N)
    placement: Placement = ANYWHERE  # where it may run, when the trace says (a GPU model asked for)


def assemble(rows: list[JobRow], *, rebase: bool = True) -> tuple[tuple[SimJob, ...], float]:
    """Sort by submit time (stable: file order breaks ties), shift the first submission to 0, build the jobs.

    Returns the jobs and the offset subtracted (the original time of the first submission).
    """
    rows.sort(key=lambda r: r.submit)
    base = rows[0].submit if rows and rebase else 0.0
    return tuple(job_of(r, base) for r in rows), base


def job_of(row: JobRow, base: float) -> SimJob:
    """The job a row describes, its submit time shifted by -`base`."""
    return SimJob(
        job_id=row.job_id,
        user=row.user,
        submit_time=row.submit - base,
        variants={row.kind: SimVariant(row.kind, row.request, row.duration_s, row.estimate_s, row.nodes,
                                       row.placement)},
        job_class=row.job_class,
        meta=row.meta,
    )


def iso(epoch_s: float) -> str:
    """Epoch seconds back to the wall time they were read from (for assumptions that cite the trace origin)."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d %H:%M:%S")
