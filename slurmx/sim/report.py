"""Reports of a run: the JSON document (byte-stable), a rich table for the terminal, and PNG plots.

The JSON holds the config and the metrics and nothing that varies between two runs of the same config
(no wall-clock times, no paths other than the config's own), so `diff` of two result files is a regression
test. matplotlib is the optional `plot` extra, so it is imported only when plots are asked for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from slurmx.sim.config import SimConfig, Workload
from slurmx.sim.metrics import SimResult

__all__ = ["FORMAT_VERSION", "PlotError", "pyplot", "result_document", "result_json", "summary_table", "write_plots"]

FORMAT_VERSION = 1


class PlotError(RuntimeError):
    """Plots were asked for but cannot be drawn (matplotlib missing)."""


def result_document(config: SimConfig | None, metrics: dict[str, Any],
                    workload: Workload | None = None) -> dict[str, Any]:
    """Config, workload provenance (with a trace loader's assumptions) and metrics: the whole experiment."""
    return {
        "format": FORMAT_VERSION,
        "config": config.model_dump(mode="json", by_alias=True) if config is not None else None,
        "workload": None if workload is None else {
            "source": workload.source,
            "jobs": workload.job_count,
            "assumptions": list(workload.assumptions),
            "skipped": dict(sorted(workload.skipped.items())),
        },
        "metrics": metrics,
    }


def result_json(document: dict[str, Any]) -> str:
    """Canonical text: sorted keys, fixed separators, a final newline; same document -> same bytes."""
    return json.dumps(document, sort_keys=True, indent=2, allow_nan=False) + "\n"


def _num(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}{unit}" if abs(value) < 1e6 else f"{value:,.0f}{unit}"
    return f"{value:,}{unit}"


def _pcts(stats: dict[str, Any], keys: tuple[str, ...] = ("mean", "p50", "p95", "p99"), unit: str = "") -> str:
    return "  ".join(f"{k} {_num(stats.get(k), unit)}" for k in keys)


def summary_table(metrics: dict[str, Any], title: str, wall_s: float | None = None) -> Table:
    """The headline numbers of a run, one metric per row."""
    table = Table(title=title, box=None, header_style="bold", title_justify="left")
    table.add_column("METRIC")
    table.add_column("VALUE")
    jobs = metrics["jobs"]
    table.add_row("jobs", f"{jobs['completed']:,} completed, {jobs['cancelled']:,} cancelled of {jobs['total']:,}")
    table.add_row("makespan", _num(metrics["makespan"], " s"))
    table.add_row("JCT", _pcts(metrics["jct"], unit=" s"))
    for cls in ("all", "te", "be"):
        stats = metrics["slowdown"][cls]
        if stats["count"]:
            table.add_row(f"slowdown {cls} ({stats['count']:,})", _pcts(stats))
    for name, value in metrics["utilisation"]["mean"].items():
        table.add_row(f"utilisation {name}", f"{value * 100:.1f} %")
    fair = metrics["fairness"]
    if fair["users"]:
        table.add_row(f"fairness ({fair['users']} users)",
                      f"mean slowdown {_num(fair['min'])}..{_num(fair['max'])}  jain {_num(fair['jain'])}")
    pre = metrics["preemptions"]
    table.add_row("preemptions", f"{pre['total']:,} ({pre['jobs_preempted']:,} jobs)")
    if metrics["rescheduling_interval"]["count"]:
        table.add_row("re-scheduling interval", _pcts(metrics["rescheduling_interval"],
                                                      ("p50", "p75", "p95", "p99"), " s"))
    due = metrics["deadlines"]
    if due["jobs"]:
        table.add_row("deadlines met", f"{due['met']:,} of {due['jobs']:,} ({due['fraction_met'] * 100:.1f} %)")
    engine = metrics["engine"]
    rate = f", {engine['events'] / wall_s:,.0f} events/s in {wall_s:.2f} s" if wall_s else ""
    table.add_row("engine", f"{engine['events']:,} events, {engine['policy_calls']:,} policy calls{rate}")
    return table


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend (no display on a login node), or PlotError naming the fix."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("plots need matplotlib: pip install 'slurmx-hpc[plot]'") from None
    return plt


def write_plots(result: SimResult, metrics: dict[str, Any], directory: str | Path, title: str = "") -> list[Path]:
    """jct_cdf.png (per class) and utilisation.png (each partition/dimension over time), each titled with `title`
    (config, policy, workload), so a plot found later in a folder of runs says what it shows."""
    plt = pyplot()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []

    fig, ax = plt.subplots(figsize=(7, 4.5))
    done = [r for r in result.jobs if not r.cancelled]
    for label, keep in (("all", None), ("te", "te"), ("be", "be")):
        jct = np.sort([r.finish - r.submit for r in done if keep is None or r.job_class.value == keep])
        if jct.size:
            ax.step(jct, np.arange(1, jct.size + 1) / jct.size, where="post", label=f"{label} ({jct.size})")
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(f"{title}\nJCT CDF by class (jobs)" if title else "JCT CDF by class (jobs)", fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(title="class", loc="lower right")
    fig.tight_layout()
    written.append(out / "jct_cdf.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    series = metrics["utilisation"]["series"]
    hours = np.asarray(series["t"], dtype=np.float64) / 3600.0
    for name, values in series.items():
        if name != "t":
            ax.plot(hours, np.asarray(values) * 100.0, label=name)
    ax.set_xlabel("simulated time (h)")
    ax.set_ylabel("allocated (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"{title}\nutilisation by partition/resource" if title else "utilisation by partition/resource",
                 fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    written.append(out / "utilisation.png")
    fig.savefig(written[-1], dpi=120, bbox_inches="tight")  # the legend sits right of the axes
    plt.close(fig)
    return written
