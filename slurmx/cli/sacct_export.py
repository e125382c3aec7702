"""`slurmx sacct-export`: a month of accounting for `slurmx whatif`, asked of slurmdbd a day at a time."""

from __future__ import annotations

import time
from typing import Any

import click

from slurmx.cli.output import checked_output_file
from slurmx.slurm.adapter import CliSlurm
from slurmx.slurm.export import ExportError, export_accounting, parse_moment

__all__ = ["sacct_export_command"]


@click.command("sacct-export")
@click.option("--since", required=True, metavar="DATE", help="First moment, e.g. 2026-10-01 (sacct -S).")
@click.option("--until", required=True, metavar="DATE", help="End, not included, e.g. 2026-11-01 (sacct -E).")
@click.option("--out", "out_path", required=True, metavar="PATH", help="File to write (whole, or not at all).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: sacct -P with the fields whatif reads (about 200 bytes a job); json: sacct --json.")
@click.option("--window-hours", type=click.FloatRange(min=1), default=24.0, show_default=True,
              help="Hours per sacct call.")
@click.option("--pause", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Seconds to wait between calls, so other slurmdbd clients get in.")
@click.pass_obj
def sacct_export_command(obj: Any, since: str, until: str, out_path: str, fmt: str, window_hours: float,
                         pause: float) -> None:
    """Dump accounting for `slurmx whatif`, one sacct call per day so slurmdbd is never asked for a month at once.

    \b
    slurmx --site site.yaml sacct-export --since 2026-10-01 --until 2026-11-01 --out october.txt
    """
    out = checked_output_file(out_path, "--out")
    try:
        start, end = parse_moment(since, "--since"), parse_moment(until, "--until")
    except ExportError as exc:
        raise click.ClickException(str(exc)) from None
    if obj is None:
        raise click.ClickException("sacct-export needs the slurmx command (with --site) to reach a cluster")
    adapter = obj.adapter()
    if not isinstance(adapter, CliSlurm):
        raise click.ClickException("sacct-export runs sacct through the command-line adapter; set the site's "
                                   "transport.implementation to cli")

    def report(moment: Any, jobs: int) -> None:
        click.echo(f"to {moment:%Y-%m-%dT%H:%M}: {jobs:,} jobs", err=True)

    try:
        jobs = export_accounting(adapter.accounting_dump, start, end, out, "json" if fmt == "json" else "text",
                                 window_hours, lambda: time.sleep(pause), report)
    except ExportError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{out}: {jobs:,} jobs from {start:%Y-%m-%dT%H:%M} to {end:%Y-%m-%dT%H:%M}")
