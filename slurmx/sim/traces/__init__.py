"""Loaders for real job traces: each maps a published format onto `SimJob`s and says what it had to assume.

`load_trace(path)` picks the loader from the file itself (SWF by its `;` header or `.swf` name, the Philly
job log by its JSON array, Slurm accounting by its JSON object or `JobID|` header, the CSVs by their header),
so `slurmx sim run` can take any supported trace path.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from slurmx.sim.traces.alibaba import ALIBABA_COLUMNS, TraceNode, load_alibaba, load_alibaba_nodes
from slurmx.sim.traces.common import LoadedTrace, TraceError, open_text
from slurmx.sim.traces.helios import HELIOS_COLUMNS, load_helios
from slurmx.sim.traces.options import check_path
from slurmx.sim.traces.philly import PHILLY_CSV_COLUMNS, load_philly_csv, load_philly_job_log
from slurmx.sim.traces.reading import READ_ERRORS, read_failure
from slurmx.sim.traces.swf import load_swf

__all__ = [
    "LOADERS",
    "LoadedTrace",
    "TraceError",
    "TraceFormat",
    "TraceNode",
    "detect_format",
    "load_alibaba",
    "load_alibaba_nodes",
    "load_helios",
    "load_philly_csv",
    "load_philly_job_log",
    "load_sacct",
    "load_swf",
    "load_trace",
]

def load_sacct(path: str | Path, **options: Any) -> LoadedTrace:
    """Slurm's accounting, `sacct --json` or `sacct -P` (`slurmx.sim.traces.sacct.load_sacct`, its options and
    errors): imported on first use, since it brings the Slurm adapter's parsers, which other traces do not need."""
    from slurmx.sim.traces.sacct import load_sacct as load

    return load(path, **options)


TraceFormat = Literal["alibaba", "philly-csv", "philly-log", "swf", "helios", "sacct"]
LOADERS: dict[str, Callable[..., LoadedTrace]] = {
    "alibaba": load_alibaba,
    "philly-csv": load_philly_csv,
    "philly-log": load_philly_job_log,
    "swf": load_swf,
    "helios": load_helios,
    "sacct": load_sacct,
}
# Columns that identify a CSV format; the loader then checks all the columns it needs and names a missing one
# (the Alibaba multigpu* resamples, for instance, have requests but no QoS or times).
_CSV_FORMATS: tuple[tuple[TraceFormat, tuple[str, ...]], ...] = (
    ("alibaba", ALIBABA_COLUMNS[:5]),
    ("helios", HELIOS_COLUMNS),
    ("philly-csv", PHILLY_CSV_COLUMNS),
)


def detect_format(path: str | Path) -> TraceFormat:
    """Recognise a trace by its first bytes; a `TraceError` lists the formats when none matches."""
    name = Path(check_path(path)).name.lower()
    if name.endswith((".swf", ".swf.gz")):
        return "swf"
    try:
        with open_text(path) as fh:
            head = fh.read(4096)
    except READ_ERRORS as exc:
        raise read_failure(path, exc) from None
    text = head.lstrip("\ufeff \t\r\n")
    if text.startswith(";"):
        return "swf"
    if text.startswith("["):
        return "philly-log"
    if text.startswith("{") or "JobID|" in text.split("\n", 1)[0]:
        return "sacct"
    columns = {c.strip() for c in text.splitlines()[0].split(",")} if text else set()
    for fmt, required in _CSV_FORMATS:
        if set(required) <= columns:
            return fmt
    raise TraceError(
        path,
        "unknown trace format; expected an SWF log, the Philly JSON job log, Slurm accounting (sacct --json or "
        "-P), or a CSV with the columns of the Alibaba v2023 pod list, Helios cluster_log.csv or the Philly-derived "
        "CSV",
        row=1,
    )


def load_trace(path: str | Path, fmt: TraceFormat | None = None, **options: Any) -> LoadedTrace:
    """Load any supported trace; `fmt` overrides detection, `options` go to the loader (e.g. `limit=1000`)."""
    chosen = fmt or detect_format(path)
    if not isinstance(chosen, str) or chosen not in LOADERS:
        raise TraceError(path, f"unknown trace format {chosen!r}; expected one of {', '.join(LOADERS)}")
    return LOADERS[chosen](path, **options)
