"""What a paper reproduction returns: the paper's numbers beside ours, with the conditions and assumptions.

Every reproduction module (`slurmx.reproduce.<paper>`) defines `TITLE` and `reproduce(options) ->
Reproduction`. A claim carries the number exactly as the paper prints it, ours, and whether ours meets the
acceptance check we hold ourselves to (`None` when a line is informational), so `slurmx reproduce` can
print one honest table and exit non-zero under `--strict` when a check fails.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Claim", "ReproOptions", "Reproduction", "ResultTable", "pct"]


@dataclass(frozen=True)
class ReproOptions:
    """How big and how parallel a reproduction run is.

    `quick` shrinks the experiment (fewer jobs, seeds and sweep points) so tests and CI exercise the whole
    pipeline in seconds; the numbers it prints are then labelled as a quick run, not compared to the paper's.
    """

    quick: bool = False
    seeds: int | None = None  # None: the paper's (or the module's documented default) number of seeds
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    plot_dir: Path | None = None
    progress: bool = True
    only: tuple[str, ...] = ()  # experiment names to run (empty: all); each module lists its own


@dataclass(frozen=True)
class Claim:
    """One headline number: the paper's (as printed), ours (formatted), and our acceptance check."""

    what: str
    paper: str
    ours: str
    holds: bool | None = None
    check: str = ""  # the condition `holds` evaluates, e.g. "ours >= 90%"


@dataclass(frozen=True)
class ResultTable:
    """A table of raw results (one row per policy / sweep point), printed after the claims."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass
class Reproduction:
    """The whole report of one `slurmx reproduce PAPER` run."""

    paper: str
    title: str
    conditions: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    tables: list[ResultTable] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)  # raw numbers for the JSON output
    quick: bool = False
    wall_s: float = 0.0

    def failed(self) -> list[Claim]:
        return [c for c in self.claims if c.holds is False]


def pct(value: float, digits: int = 1) -> str:
    """0.953 -> '95.3%'."""
    return f"{100.0 * value:.{digits}f}%"
