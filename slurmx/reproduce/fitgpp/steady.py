"""FitGpp's claims at steady state and with a restart cost: two questions the paper leaves open.

- `steady`: FitGpp's BE change against FIFO moves with the run's length (FitGpp's BE backlog drains while
  FIFO's stays level), so one length's value is not the policy's. The same workload at growing lengths on the main
  experiment's nodes; each measured over all jobs and over the middle half of the jobs in submission order (the
  first quarter is warm-up, the last quarter drains after submissions stop). The
  longest length's middle-half value is the steady-state one when the last doubling moved it by at most
  `DRIFT_POINTS`.
- `restart_cost`: the paper's preemptions are free; a restarted job here reloads for 0, 1 or 5 minutes on its node
  (`restart_cost` in the sim config), at the sweep's size.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from slurmx.reproduce.base import Reproduction, ResultTable, band_claim, change_pct, info_claim, pct
from slurmx.reproduce.fitgpp.experiment import Point, Results, RunOutcome, Scale, experiment_points, pool

__all__ = ["DRIFT_POINTS", "WINDOW", "restart_cost", "steady"]

WINDOW = (0.25, 0.75)  # the middle half of the jobs, in submission order
DRIFT_POINTS = 3.0  # the last doubling of the length moves the middle-half BE p50 change by at most this
BE_TOLERANCE = 10.0  # points around the paper's +18% (as the main claim)


def _windowed(outcomes: Sequence[RunOutcome], cls: str) -> npt.NDArray[np.float64]:
    """The slowdowns of `cls` jobs submitted inside `WINDOW`, pooled over the outcomes."""
    parts = []
    for o in outcomes:
        values, at = (o.te, o.te_at) if cls == "te" else (o.be, o.be_at)
        parts.append(values[(at >= WINDOW[0]) & (at <= WINDOW[1])])
    return np.concatenate(parts) if parts else np.zeros(0)


def _pct(values: npt.NDArray[np.float64], q: float) -> float:
    return float(np.percentile(values, q)) if values.size else float("nan")


def _changes(results: Results, fifo: Point, fit: Point) -> dict[str, float]:
    """FitGpp vs FIFO in % at one length: BE p50 and TE p95, over all jobs and the middle half."""
    base, ours = pool(results, fifo), pool(results, fit)
    mid_base = {c: _windowed([results[s] for s in fifo.specs], c) for c in ("te", "be")}
    mid_ours = {c: _windowed([results[s] for s in fit.specs], c) for c in ("te", "be")}
    return {"be_p50_all": change_pct(ours.pct("be", 50), base.pct("be", 50)),
            "be_p50_mid": change_pct(_pct(mid_ours["be"], 50), _pct(mid_base["be"], 50)),
            "te_p95_all": change_pct(ours.pct("te", 95), base.pct("te", 95)),
            "te_p95_mid": change_pct(_pct(mid_ours["te"], 95), _pct(mid_base["te"], 95)),
            "be_backlog_end_fifo": base.backlog[-1] if base.backlog else float("nan"),
            "be_backlog_end_fitgpp": ours.backlog[-1] if ours.backlog else float("nan")}


def steady(rep: Reproduction, results: Results, scale: Scale) -> None:
    points = experiment_points("steady", scale)
    by_length = {n: _changes(results, *[p for p in points if p.label == f"{n} jobs"]) for n in scale.lengths}
    rows = tuple((f"{n:,}", *(f"{v[k]:+.1f}%" for k in ("be_p50_all", "be_p50_mid", "te_p95_all", "te_p95_mid")),
                  f"{v['be_backlog_end_fifo']:.0f} / {v['be_backlog_end_fitgpp']:.0f}")
                 for n, v in by_length.items())
    rep.tables.append(ResultTable(
        f"Steady state (not in the paper): FitGpp vs FIFO by run length, {scale.steady_sets} set(s) each on "
        f"{scale.nodes} nodes; 'middle' = the middle half of the jobs in submission order",
        ("jobs", "BE p50 all", "BE p50 middle", "TE p95 all", "TE p95 middle", "BE queue at the end FIFO / FitGpp"),
        rows))
    rep.data["steady"] = {str(n): v for n, v in by_length.items()}
    lengths = list(by_length)
    last = by_length[lengths[-1]]
    drift = abs(last["be_p50_mid"] - by_length[lengths[-2]]["be_p50_mid"]) if len(lengths) > 1 else float("nan")
    rep.claims.append(band_claim(
        f"steady state: BE p50 change (middle half) moves little from {lengths[-2]:,} to {lengths[-1]:,} jobs"
        if len(lengths) > 1 else "steady state: one length only",
        "0 (one value, as if it did not drift)", f"{drift:.1f} points", value=drift, paper_value=0.0,
        unit="points", direction="lower", band=(None, DRIFT_POINTS),
        check=f"<= {DRIFT_POINTS:g} points: the measure stopped drifting"))
    rep.claims.append(band_claim(
        f"steady state: BE p50 slowdown, FitGpp vs FIFO ({lengths[-1]:,} jobs, middle half)",
        "+18.0% (2.78 -> 3.28)", f"{last['be_p50_mid']:+.1f}% (all jobs {last['be_p50_all']:+.1f}%)",
        value=last["be_p50_mid"], paper_value=18.0, unit="%", direction="lower", tolerance=BE_TOLERANCE))
    rep.claims.append(band_claim(
        f"steady state: TE p95 slowdown, FitGpp vs FIFO ({lengths[-1]:,} jobs, middle half)", "-96.6%",
        f"{last['te_p95_mid']:+.1f}%", value=last["te_p95_mid"], paper_value=-96.6, unit="%", direction="lower",
        band=(None, -90.0), check="a reduction of at least 90%"))


def restart_cost(rep: Reproduction, results: Results, scale: Scale) -> None:
    points = experiment_points("restart_cost", scale)
    fifo = pool(results, points[0])
    rows, data = [], {}
    for point in points[1:]:
        ours = pool(results, point)
        values = {"be_p50": change_pct(ours.pct("be", 50), fifo.pct("be", 50)),
                  "be_p95": change_pct(ours.pct("be", 95), fifo.pct("be", 95)),
                  "te_p95": change_pct(ours.pct("te", 95), fifo.pct("te", 95)),
                  "preempted_be": ours.preempted_be()}
        data[point.label] = values
        rows.append((point.label, *(f"{values[k]:+.1f}%" for k in ("be_p50", "be_p95", "te_p95")),
                     pct(values["preempted_be"], 2)))
    rep.tables.append(ResultTable(
        f"Restart cost (not in the paper): FitGpp vs FIFO when a restarted job reloads on its node first; "
        f"{scale.sweep_sets} set(s) of {scale.sweep_jobs:,} jobs on {scale.sweep_nodes} nodes",
        ("FitGpp", "BE p50", "BE p95", "TE p95", "preempted (BE)"), tuple(rows)))
    rep.data["restart_cost"] = data
    labels = list(data)
    free, dearest = data[labels[0]], data[labels[-1]]
    rep.claims.append(info_claim(
        f"BE p50 change vs FIFO: free restarts -> {labels[-1]}", "preemption is free (no resume cost)",
        f"{free['be_p50']:+.1f}% -> {dearest['be_p50']:+.1f}%", value=dearest["be_p50"] - free["be_p50"],
        paper_value=None, unit="points", direction="lower"))
