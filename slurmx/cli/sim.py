"""`slurmx sim ...`: thin commands over the engine, the metrics and the reports."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from slurmx.cli.output import checked_output_file, checked_plot_dir
from slurmx.cli.output import console as make_console
from slurmx.core.validation import ConfigError
from slurmx.sim import engine
from slurmx.sim.cluster import SimulationError
from slurmx.sim.config import load_sim_config, load_workload, resolve_cluster
from slurmx.sim.metrics import compute_metrics
from slurmx.sim.parallel import parallel_map
from slurmx.sim.report import PlotError, result_document, result_json, summary_table, write_plots
from slurmx.sim.runner import run_config, run_streamed
from slurmx.sim.stream import stream_workload
from slurmx.sim.traces.errors import TraceError

if TYPE_CHECKING:  # the sweep modules bring every workload generator (scipy) and the Slurm adapter: `sim run`
    from slurmx.sim.sweep import SweepPoint  # of a trace needs neither, so `sweep` imports them when it runs

__all__ = ["sim_group"]

_PROGRESS_MIN_JOBS = 20_000  # below this a run takes about a second: no bar


@click.group("sim")
def sim_group() -> None:
    """Simulate scheduling policies on workloads and traces (the daemon's policies, unchanged)."""


@sim_group.command("run")
@click.argument("config_path", metavar="CONFIG", type=click.Path(dir_okay=False))
@click.option("--json", "json_path", metavar="PATH",
              help="Write the result JSON here ('-' for stdout; default: CONFIG's name with .result.json in the "
                   "current folder, never beside CONFIG, which may be a shared example).")
@click.option("--plot", "plot_dir", metavar="DIR", help="Write PNG plots (JCT CDF, utilisation) into DIR.")
@click.option("--trace", "trace_path", metavar="PATH", help="Replay this trace file instead of the config's workload.")
def run(config_path: str, json_path: str | None, plot_dir: str | None, trace_path: str | None) -> None:
    """Run the simulation CONFIG describes; print a summary table and write the metrics as JSON."""
    config = load_sim_config(config_path)
    out = None if json_path == "-" else checked_output_file(
        json_path or Path.cwd() / f"{Path(config_path).stem}.result.json", "--json" if json_path else "default --json")
    if plot_dir:
        checked_plot_dir(plot_dir)
    console = make_console(stderr=json_path == "-")
    try:
        # An SWF log in submit order is read as the run goes (memory follows the queue); anything else whole.
        streamed = stream_workload(config, trace_path)
        workload = None if streamed is not None else load_workload(config.workload, config.seed, trace_path)
    except ValueError as exc:  # a trace the loader rejects (TraceError: file, row, column) or a bad generator
        if isinstance(exc, ConfigError):
            raise
        raise click.ClickException(str(exc)) from None
    sized = None
    if workload is not None:
        sized = resolve_cluster(config, workload.jobs, workload.info, trace=workload.source.startswith("trace:"))
        if config.cluster.from_trace is not None or sized.skipped:
            workload = replace(workload.on_cluster(sized.assumptions, sized.skipped), jobs=sized.jobs)
    total = len(workload.jobs) if workload is not None else None
    bar = Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TextColumn("jobs"),
                   TimeElapsedColumn(), console=console, transient=True,
                   disable=not console.is_terminal or (total is not None and total < _PROGRESS_MIN_JOBS))
    with bar:
        task = bar.add_task("run", total=total)

        def advance(p: engine.Progress) -> None:
            bar.update(task, completed=p.done, total=p.total)

        try:
            if streamed is not None:
                result = run_streamed(config, streamed, advance)
                workload = streamed.workload()
            else:
                assert workload is not None and sized is not None
                result = run_config(config, workload.jobs, advance, sized)
        except TraceError as exc:  # a bad line met as the stream reads it: as if the trace had been read first
            raise click.ClickException(str(exc)) from None
        except SimulationError as exc:
            raise click.ClickException(f"{config_path}: simulation failed: {exc}") from None
    metrics = compute_metrics(result, config.report.util_bins)
    text = result_json(result_document(config, metrics, workload))
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
    title = f"{Path(config_path).name}: policy {config.policy.name}, {config.mode} mode, {workload.job_count:,} jobs"
    console.print(summary_table(metrics, title, result.stats.wall_s))
    if out is not None:
        console.print(f"result: {out}")
    if plot_dir:
        try:
            for path in write_plots(result, metrics, plot_dir, f"{title}; workload {workload.source}"):
                console.print(f"plot: {path}")
        except PlotError as exc:
            raise click.ClickException(str(exc)) from None


_SWEEP_COLUMNS = {  # point_row key -> (header, format)
    "jobs": ("jobs", "{:,}"),
    "jct_mean_s": ("JCT mean s", "{:,.0f}"),
    "jct_p50_s": ("p50", "{:,.0f}"),
    "jct_p95_s": ("p95", "{:,.0f}"),
    "jct_p99_s": ("p99", "{:,.0f}"),
    "makespan_s": ("makespan s", "{:,.0f}"),
    "slowdown_p95": ("slowdown p95", "{:,.2f}"),
    "te_slowdown_p95": ("TE sd p95", "{:,.2f}"),
    "be_slowdown_p50": ("BE sd p50", "{:,.2f}"),
    "preempted": ("preempted", "{:,}"),
}


def _sweep_table(points: Sequence[SweepPoint], results: Sequence[dict[str, Any]], title: str) -> Table:
    from slurmx.sim.sweep import point_row

    table = Table(title=title, title_justify="left")
    keys = list(points[0].label) if points else []
    for key in keys:
        table.add_column(key)
    for header, _ in _SWEEP_COLUMNS.values():
        table.add_column(header, justify="right")
    for point, metrics in zip(points, results, strict=True):
        row = point_row(metrics)
        cells = [str(point.label[k]) for k in keys]
        cells += ["-" if row[key] is None else fmt.format(row[key]) for key, (_, fmt) in _SWEEP_COLUMNS.items()]
        table.add_row(*cells)
    return table


@sim_group.command("sweep")
@click.argument("config_path", metavar="CONFIG", type=click.Path(dir_okay=False))
@click.option("--param", "params", multiple=True, metavar="KEY=V1,V2",
              help="A grid axis (repeatable): policy=fifo,fitgpp, load=1.5,2.0, policy.params.s=0,4, seed=1,2.")
@click.option("--workers", type=click.IntRange(1, 256), help="Local processes (default: all cores).")
@click.option("--slurm", "on_slurm", is_flag=True,
              help="Run the points as one job array on the site's Slurm cluster (slurmx --site ...).")
@click.option("--timeout", type=click.FloatRange(min=1), help="With --slurm: give up after this many seconds.")
@click.option("--json", "json_path", metavar="PATH", help="Write every point's label and metrics ('-': stdout).")
@click.pass_obj
def sweep(obj: Any, config_path: str, params: tuple[str, ...], workers: int | None, on_slurm: bool,
          timeout: float | None, json_path: str | None) -> None:
    """Run CONFIG over a grid of parameters, locally on a process pool or as a Slurm job array.

    \b
    slurmx sim sweep examples/sim/fitgpp.yaml --param policy=fifo,fitgpp,lrtp,rand --param seed=1,2
    slurmx --site site.yaml sim sweep run.yaml --param load=1,1.5,2 --slurm
    """
    from slurmx.sim.sweep import expand_grid, load_base, parse_param, run_point
    from slurmx.sim.sweep_slurm import SweepError, run_on_slurm

    if json_path and json_path != "-":
        checked_output_file(json_path, "--json")
    base = load_base(config_path)
    points = expand_grid(base, [parse_param(p) for p in params], Path(config_path).name)
    console = make_console(stderr=json_path == "-")
    where: str
    if on_slurm:
        if obj is None:
            raise click.ClickException("--slurm needs the slurmx command (with --site) to reach a cluster")
        site, adapter = obj.site(), obj.adapter()
        bar = Progress(TextColumn("sweep on slurm"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       console=console, transient=True, disable=not console.is_terminal)
        with bar:
            task = bar.add_task("sweep", total=len(points))
            try:
                job, results = run_on_slurm(adapter, site, points, lambda n: bar.update(task, completed=n),
                                            timeout_s=timeout)
            except SweepError as exc:
                raise click.ClickException(str(exc)) from None
        where = f"Slurm job array {job.job_id} ({job.directory})"
    else:
        results = parallel_map(run_point, [p.document for p in points], workers or os.cpu_count() or 1,
                               "sweep points")
        where = f"local pool of {min(workers or os.cpu_count() or 1, len(points))}"
    console.print(_sweep_table(points, results, f"{Path(config_path).name}: {len(points)} points on {where}"))
    if json_path:
        text = json.dumps([{"label": dict(p.label), "metrics": r} for p, r in zip(points, results, strict=True)],
                          sort_keys=True, indent=1, allow_nan=False) + "\n"
        if json_path == "-":
            click.echo(text, nl=False)
        else:
            Path(json_path).write_text(text, encoding="utf-8")
            console.print(f"result: {json_path}")
