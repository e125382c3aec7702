"""`slurmx reproduce PAPER`: print conditions, assumptions, then the paper's numbers beside ours."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from slurmx.cli.output import checked_output_file, checked_plot_dir, console
from slurmx.reproduce import PAPERS, Reproduction, ReproOptions, UnknownPaper, run

__all__ = ["render", "reproduce_command", "verdict"]

_MARK = {True: "[green]yes[/green]", False: "[red]NO[/red]", None: ""}


def render(result: Reproduction, console: Console) -> None:
    """The human report: setup, assumptions, claims with checks, then the raw tables."""
    head = f"{result.title}" + ("  [yellow](quick run: smaller than the paper's; do not compare)[/yellow]"
                                if result.quick else "")
    console.print(f"[bold]{head}[/bold]")
    for title, lines in (("conditions", result.conditions), ("assumptions (where the paper is silent)",
                                                               result.assumptions)):
        if lines:
            console.print(f"\n[bold]{title}[/bold]")
            for line in lines:
                console.print(f"  - {line}", highlight=False)
    if result.claims:
        table = Table(title="paper vs ours", title_justify="left")
        for column in ("claim", "paper", "ours", "check", "holds"):
            table.add_column(column)
        for c in result.claims:
            table.add_row(c.what, c.paper, c.ours, c.check, _MARK[c.holds])
        console.print(table)
    for t in result.tables:
        table = Table(title=t.title, title_justify="left")
        for column in t.columns:
            table.add_column(column)
        for row in t.rows:
            table.add_row(*row)
        console.print(table)
    for path in result.figures:
        console.print(f"plot: {path}")
    console.print(f"\n{verdict(result)}; {result.wall_s:.1f} s wall, {result.cpu_s:.1f} s CPU")


def verdict(result: Reproduction) -> str:
    """One line: how many judged checks failed (or that all hold), and the orderings that hold only on the mean."""
    failed = result.failed()
    judged = sum(c.holds is not None for c in result.claims)
    line = f"{len(failed)} of {judged} checks failed" if failed else "all checks hold"
    mean_only = sum(c.mean_only for c in result.claims)
    return line + (f"; {mean_only} ordering(s) hold on the mean only, not in every seed" if mean_only else "")


def _finite(value: Any) -> Any:
    """NaN and infinities as null, so the document is strict JSON any parser reads."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _document(result: Reproduction) -> str:
    data = asdict(result)
    data["figures"] = [str(p) for p in result.figures]
    judged = [c for c in result.claims if c.holds is not None]
    data["summary"] = {"judged": len(judged), "failed": len(result.failed()),
                       "mean_only": sum(c.mean_only for c in result.claims),
                       "all_hold": bool(judged) and not result.failed()}
    return json.dumps(_finite(data), indent=1, sort_keys=True, default=str, allow_nan=False) + "\n"


@click.command("reproduce")
@click.argument("paper", required=False)
@click.option("--list", "list_papers", is_flag=True, help="List the papers and exit.")
@click.option("--quick", is_flag=True, help="A small version of every experiment (seconds; for tests and CI).")
@click.option("--seeds", type=click.IntRange(1, 1000), help="Seeds (sets) per point (default: the paper's).")
@click.option("--workers", type=click.IntRange(1, 256), help="Processes (default: all cores).")
@click.option("--only", multiple=True, metavar="NAME", help="Run only this experiment (repeatable).")
@click.option("--json", "json_path", metavar="PATH", help="Also write the whole report as JSON ('-' for stdout).")
@click.option("--plot", "plot_dir", metavar="DIR", help="Write the paper's figures as PNG into DIR.")
@click.option("--strict", is_flag=True, help="Exit 1 when one of our acceptance checks fails.")
def reproduce_command(paper: str | None, list_papers: bool, quick: bool, seeds: int | None, workers: int | None,
                      only: tuple[str, ...], json_path: str | None, plot_dir: str | None, strict: bool) -> None:
    """Run PAPER's experiments with slurmx's policies and print the paper's numbers beside ours."""
    if list_papers or paper is None:
        for name, (_, what) in PAPERS.items():
            click.echo(f"{name:8} {what}")
        if paper is None and not list_papers:
            raise click.UsageError("name a paper: slurmx reproduce PAPER (see the list above)")
        return
    if json_path and json_path != "-":
        checked_output_file(json_path, "--json")
    if plot_dir:
        checked_plot_dir(plot_dir)
    defaults = ReproOptions()
    options = ReproOptions(quick=quick, seeds=seeds, workers=workers or defaults.workers,
                           plot_dir=Path(plot_dir) if plot_dir else None,
                           progress=sys.stderr.isatty(), only=only)
    try:
        result = run(paper, options)
    except UnknownPaper as exc:
        raise click.ClickException(str(exc)) from None
    out = console(stderr=json_path == "-")
    render(result, out)
    if json_path == "-":
        click.echo(_document(result), nl=False)
    elif json_path:
        Path(json_path).write_text(_document(result), encoding="utf-8")
        out.print(f"result: {json_path}")
    if strict and result.failed():
        sys.exit(1)
