"""What a paper reproduction returns: the paper's numbers beside ours, with the conditions and assumptions.

Every reproduction module (`slurmx.reproduce.<paper>`) defines `TITLE` and `reproduce(options) ->
Reproduction`. A claim carries the number as the paper prints it and ours, as text for people and as numbers
for machines: `value` (ours), `paper_value`, `unit`, `direction`, the seeds, the value on each seed and a 95%
t-interval across them. Whether a claim holds follows from those numbers alone (`Claim.judge`): the value must lie
in the claim's `band`, and an ordering must also hold on every seed. `slurmx reproduce` prints one table and exits
non-zero under `--strict` when a check fails.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

__all__ = ["Band", "Claim", "ClaimKind", "Direction", "ReproOptions", "Reproduction", "ResultTable", "band_claim",
           "bound_claim", "change_pct", "info_claim", "ordering_claim", "paper_band", "pct", "quick_claims",
           "t_interval", "worst_step"]

Direction = Literal["lower", "higher"]
# band: ours within a band around the paper's number; ordering: the paper's ordering, on the value and on every
# seed; bound: a guarantee that holds at any size (a theorem, an invariant); info: printed, not judged.
ClaimKind = Literal["band", "ordering", "bound", "info"]
Band = tuple[float | None, float | None]  # [lo, hi], inclusive; None: open on that side


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


def _in(x: float, band: Band) -> bool:
    lo, hi = band
    return not math.isnan(x) and (lo is None or x >= lo) and (hi is None or x <= hi)


@dataclass(frozen=True)
class Claim:
    """One headline number: the paper's and ours as text (`paper`, `ours`, `check`) and as numbers.

    `value` is ours as the report computes it (a mean over seeds, or pooled where the paper pools); `per_seed`
    is the same quantity on each of `seeds` alone, `interval` its 95% t-interval (None with one seed).
    `seeds_holding` counts the seeds whose value lies in `band`; `mean_only` marks an ordering that holds on
    `value` but not on every seed.
    """

    what: str
    paper: str
    ours: str
    holds: bool | None = None
    check: str = ""  # the condition `holds` evaluates, in words
    kind: ClaimKind = "info"
    value: float | None = None
    paper_value: float | None = None
    unit: str = ""
    direction: Direction | None = None
    seeds: tuple[int, ...] = ()
    per_seed: tuple[float, ...] = ()
    interval: tuple[float, float] | None = None
    band: Band | None = None
    seeds_holding: int | None = None
    mean_only: bool = False

    def judge(self) -> bool | None:
        """Whether the claim holds, from its numbers alone: `value` in `band`, and for an ordering every seed's
        value in `band` too. None for an informational claim."""
        if self.kind == "info" or self.band is None or self.value is None:
            return None
        if not _in(self.value, self.band):
            return False
        return self.kind != "ordering" or all(_in(v, self.band) for v in self.per_seed)


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
    cpu_s: float = 0.0  # this process and its worker processes

    def failed(self) -> list[Claim]:
        return [c for c in self.claims if c.holds is False]


def pct(value: float, digits: int = 1) -> str:
    """0.953 -> '95.3%'."""
    return f"{100.0 * value:.{digits}f}%"


def change_pct(ours: float, base: float) -> float:
    """The signed change of `ours` against `base` in percent: 10 against 80 -> -87.5 (NaN when base is 0)."""
    return 100.0 * (ours / base - 1.0) if base else math.nan


def t_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """The two-sided t-interval of the mean of `values` (None with fewer than two, as there is no spread)."""
    finite = [v for v in values if not math.isnan(v)]
    n = len(finite)
    if n < 2:
        return None
    from scipy import stats  # here, not at the top: `slurmx` starts without scipy (tests/unit/test_cli_start.py)

    mean = sum(finite) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in finite) / (n - 1))
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return (mean - half, mean + half)


def worst_step(values: Sequence[float], direction: Direction) -> float:
    """The largest step of a sweep against `direction`, relative to the step's start, in percent: 0 or less when
    the values never rise (direction "lower") or never fall ("higher") from one point to the next."""
    sign = 1.0 if direction == "lower" else -1.0
    steps = [sign * change_pct(b, a) for a, b in itertools.pairwise(values)]
    return max(steps) if steps else 0.0


def paper_band(paper_value: float, tolerance: float, neutral: float | None = 0.0) -> Band:
    """paper_value ± tolerance, cut at `neutral` (no change: 0 for a change in %, 1 for a ratio) so that the band
    never admits the opposite sign of the paper's effect."""
    lo, hi = paper_value - tolerance, paper_value + tolerance
    if neutral is not None and paper_value > neutral:
        lo = max(lo, neutral)
    elif neutral is not None and paper_value < neutral:
        hi = min(hi, neutral)
    return (lo, hi)


def _num(x: float) -> str:
    """Three significant digits without exponents: 1,234 / 12.3 / 1.23 / 0.012."""
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:.3g}"
    text = f"{x:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def _unit(x: float, unit: str) -> str:
    return f"{_num(x)}{unit if unit in ('', '%', 'x') else ' ' + unit}"


def _band_text(band: Band, unit: str) -> str:
    lo, hi = band
    if lo is not None and hi is not None:
        return f"in [{_num(lo)}, {_unit(hi, unit)}]" if lo != hi else f"= {_unit(lo, unit)}"
    if lo is not None:
        return f">= {_unit(lo, unit)}"
    return f"<= {_unit(hi, unit)}" if hi is not None else "any value"


def _seed_text(claim: Claim) -> str:
    parts = []
    if claim.interval is not None:
        parts.append(f"95% CI [{_num(claim.interval[0])}, {_unit(claim.interval[1], claim.unit)}]")
    if claim.seeds_holding is not None and (len(claim.per_seed) > 1 or claim.kind == "ordering"):
        parts.append(f"{'holds' if claim.kind == 'ordering' else 'in band'} in {claim.seeds_holding}/"
                     f"{len(claim.per_seed)} seeds" + (" (on the mean only)" if claim.mean_only else ""))
    return "; ".join(parts)


def _measured(kind: ClaimKind, what: str, paper: str, ours: str, band: Band | None, check: str, value: float,
              paper_value: float | None, unit: str, direction: Direction | None, seeds: Sequence[int],
              per_seed: Sequence[float] | None) -> Claim:
    """A claim with its numbers filled in and `holds` judged from them; the seed summary is appended to `ours`."""
    values = tuple(float(v) for v in per_seed) if per_seed is not None else ()
    if not values and len(seeds) == 1:
        values = (float(value),)  # one seed: its value is the value
    claim = Claim(what, paper, ours, None, check, kind, float(value), paper_value, unit, direction,
                  tuple(int(s) for s in seeds), values, t_interval(values) if values else None, band)
    if band is not None and values:
        holding = sum(_in(v, band) for v in values)
        claim = replace(claim, seeds_holding=holding,
                        mean_only=kind == "ordering" and _in(value, band) and holding < len(values))
    text = _seed_text(claim)
    return replace(claim, holds=claim.judge(), ours=f"{ours} ({text})" if text else ours)


def band_claim(what: str, paper: str, ours: str, *, value: float, paper_value: float | None, unit: str,
               direction: Direction | None, tolerance: float | None = None, band: Band | None = None,
               neutral: float | None = 0.0, seeds: Sequence[int] = (), per_seed: Sequence[float] | None = None,
               check: str = "") -> Claim:
    """Ours against a band around the paper's number: `paper_value ± tolerance` (cut at `neutral`, see
    `paper_band`) or an explicit `band` when the paper's claim is one-sided ("within 10%")."""
    if band is None:
        if tolerance is None or paper_value is None:
            raise ValueError(f"{what}: a band claim needs a tolerance or a band")
        band = paper_band(paper_value, tolerance, neutral)
        spread = f"{_num(tolerance)} points" if unit == "%" else _unit(tolerance, unit)
        check = check or f"paper {_unit(paper_value, unit)} ± {spread}: {_band_text(band, unit)}"
    check = check or _band_text(band, unit)
    return _measured("band", what, paper, ours, band, check, value, paper_value, unit, direction, seeds, per_seed)


def ordering_claim(what: str, paper: str, ours: str, *, margin: float, per_seed: Sequence[float] | None = None,
                   seeds: Sequence[int] = (), paper_margin: float | None = None, unit: str = "%",
                   strict: bool = True, check: str = "") -> Claim:
    """The paper's ordering as a number: `margin` is by how much it holds (for "A better than B", B's excess
    over A, e.g. 1 - A/B in %; for a chain, the smallest link), positive when it holds. It must hold on the
    value and on every seed; `mean_only` marks one that holds only on the mean. `strict=False` accepts a tie."""
    band: Band = (1e-12 if strict else 0.0, None)
    check = check or ("ordering holds (margin > 0)" if strict else "ordering holds or ties (margin >= 0)") + \
        " on the mean and in every seed"
    return _measured("ordering", what, paper, ours, band, check, margin, paper_margin, unit, "higher", seeds,
                     per_seed)


def bound_claim(what: str, paper: str, ours: str, *, value: float, band: Band, unit: str = "",
                direction: Direction = "lower", paper_value: float | None = None, seeds: Sequence[int] = (),
                per_seed: Sequence[float] | None = None, check: str = "") -> Claim:
    """A guarantee that must hold at any size (a theorem's bound, an invariant): judged in quick runs too."""
    return _measured("bound", what, paper, ours, band, check or _band_text(band, unit), value, paper_value, unit,
                     direction, seeds, per_seed)


def info_claim(what: str, paper: str, ours: str, *, value: float | None = None, paper_value: float | None = None,
               unit: str = "", direction: Direction | None = None, seeds: Sequence[int] = (),
               per_seed: Sequence[float] | None = None, check: str = "informational") -> Claim:
    """A number printed beside the paper's and not judged (no tolerance makes sense for it)."""
    values = tuple(float(v) for v in per_seed) if per_seed is not None else ()
    claim = Claim(what, paper, ours, None, check, "info", None if value is None else float(value), paper_value,
                  unit, direction, tuple(int(s) for s in seeds), values, t_interval(values) if values else None)
    text = _seed_text(claim)
    return replace(claim, ours=f"{ours} ({text})" if text else ours)


def quick_claims(claims: Sequence[Claim]) -> list[Claim]:
    """A quick run is too small to compare with the paper: its band and ordering claims are printed, not judged
    (bounds and invariants hold at any size and stay judged)."""
    return [c if c.kind == "bound" else replace(c, holds=None, check=f"(quick run) {c.check}")
            for c in claims]
