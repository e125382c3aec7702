"""`slurmx sim ...`: thin commands over the engine, the metrics and the reports."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from slurmx.core.validation import ConfigError
from slurmx.policies.base import make_policy
from slurmx.sim import engine
from slurmx.sim.cluster import ModelCluster, SimulationError
from slurmx.sim.config import SimConfig, load_sim_config, load_workload
from slurmx.sim.jobs import SimJob
from slurmx.sim.metrics import SimResult, compute_metrics
from slurmx.sim.report import PlotError, result_document, result_json, summary_table, write_plots

__all__ = ["run_config", "sim_group"]

_PROGRESS_MIN_JOBS = 20_000  # below this a run takes about a second: no bar


def run_config(config: SimConfig, jobs: Sequence[SimJob],
               progress: Callable[[engine.Progress], None] | None = None) -> SimResult:
    """One run of `config` on `jobs`: the policy is built by name, exactly as the daemon builds it."""
    policy = make_policy(config.policy.name, config.policy.params)
    cluster = ModelCluster(config.cluster.shapes())
    return engine.Engine(cluster, policy, jobs, config.engine_options(), progress).run()


@click.group("sim")
def sim_group() -> None:
    """Simulate scheduling policies on workloads and traces (the daemon's policies, unchanged)."""


@sim_group.command("run")
@click.argument("config_path", metavar="CONFIG", type=click.Path(dir_okay=False))
@click.option("--json", "json_path", metavar="PATH",
              help="Write the result JSON here ('-' for stdout; default: CONFIG's name with .result.json).")
@click.option("--plot", "plot_dir", metavar="DIR", help="Write PNG plots (JCT CDF, utilisation) into DIR.")
@click.option("--trace", "trace_path", metavar="PATH", help="Replay this trace file instead of the config's workload.")
def run(config_path: str, json_path: str | None, plot_dir: str | None, trace_path: str | None) -> None:
    """Run the simulation CONFIG describes; print a summary table and write the metrics as JSON."""
    config = load_sim_config(config_path)
    try:
        workload = load_workload(config.workload, config.seed, trace_path)
    except ValueError as exc:  # a trace the loader rejects (TraceError: file, row, column) or a bad generator
        if isinstance(exc, ConfigError):
            raise
        raise click.ClickException(str(exc)) from None
    jobs = workload.jobs
    console = Console(stderr=True) if json_path == "-" else (
        Console() if sys.stdout.isatty() else Console(width=200))
    bar = Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TextColumn("jobs"),
                   TimeElapsedColumn(), console=console, transient=True,
                   disable=not console.is_terminal or len(jobs) < _PROGRESS_MIN_JOBS)
    with bar:
        task = bar.add_task("run", total=len(jobs))
        try:
            result = run_config(config, jobs, lambda p: bar.update(task, completed=p.done, total=p.total))
        except SimulationError as exc:
            raise click.ClickException(f"{config_path}: simulation failed: {exc}") from None
    metrics = compute_metrics(result, config.report.util_bins)
    text = result_json(result_document(config, metrics, workload))
    if json_path == "-":
        click.echo(text, nl=False)
    else:
        out = Path(json_path) if json_path else Path(config_path).with_suffix(".result.json")
        out.write_text(text, encoding="utf-8")
    title = f"{Path(config_path).name}: policy {config.policy.name}, {config.mode} mode, {len(jobs):,} jobs"
    console.print(summary_table(metrics, title, result.stats.wall_s))
    if json_path != "-":
        console.print(f"result: {out}")
    if plot_dir:
        try:
            for path in write_plots(result, metrics, plot_dir):
                console.print(f"plot: {path}")
        except PlotError as exc:
            raise click.ClickException(str(exc)) from None
