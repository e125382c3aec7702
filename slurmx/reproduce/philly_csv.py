"""The Philly-derived CSV the MLFS and Synergy reproductions read (`../shared/traces/philly_derived_pollux_sia/`),
loaded once per process by the simulator's own loader."""

from __future__ import annotations

import functools
from pathlib import Path

from slurmx.reproduce import UnknownPaper
from slurmx.sim.traces import LoadedTrace, TraceError, load_trace

__all__ = ["PHILLY_CSV", "philly_csv"]

PHILLY_CSV = Path(__file__).resolve().parents[3] / "shared" / "traces" / "philly_derived_pollux_sia" / "philly.csv"


@functools.cache
def philly_csv(paper: str, path: Path = PHILLY_CSV) -> LoadedTrace:
    """The CSV's jobs (submit times from its first submission, `info["first_submission_epoch"]`); UnknownPaper
    naming `paper` and the fix when it cannot be read."""
    try:
        return load_trace(path, "philly-csv")
    except TraceError as exc:
        raise UnknownPaper(f"{paper}: cannot read the Philly-derived trace ({exc}); it is in "
                           "../shared/traces/philly_derived_pollux_sia/") from None
