"""`slurmx shadow-report`: the shadow daemon's would-be plan beside what Slurm did, as a table or JSON.

Reads `shadow.sqlite` from the state directory (run it on the daemon host, or pass --state-dir) and the groups'
jobs from squeue and sacct through the site's adapter; `slurmx.daemon.shadow_report` does the comparing.
"""

from __future__ import annotations

import json
import math
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from slurmx.cli.context import Context
from slurmx.cli.output import console
from slurmx.core.units import UnitError, parse_duration
from slurmx.daemon.shadow_report import JCT_BASIS, GroupComparison, ShadowReport, compare
from slurmx.daemon.shadow_store import ShadowStore, shadow_path
from slurmx.slurm import SlurmError
from slurmx.slurm.records import AccountingRecord, SlurmJob

__all__ = ["parse_since", "render", "shadow_report_command"]


def parse_since(text: str, now: float) -> float:
    """A duration ago (90m, 2h, 1d; a bare number is minutes, as in Slurm), an ISO time (local unless it says)
    or epoch seconds."""
    value = text.strip()
    try:
        if value.replace(".", "", 1).isdigit() and float(value) > 1e9:
            return float(value)
        return now - parse_duration(value)
    except UnitError:
        pass
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected a duration ago (90m, 2h, 1d), an ISO time "
                                 "(2026-11-26T06:00) or epoch seconds", param_hint="--since") from None


@click.command("shadow-report")
@click.option("--since", metavar="WHEN", help="Only groups first seen since WHEN: a duration ago (90m, 2h, 1d), "
              "an ISO time or epoch seconds (default: everything recorded).")
@click.option("--json", "json_file", metavar="FILE", help="Write the report as JSON to FILE ('-': stdout, no table).")
@click.option("--state-dir", type=click.Path(file_okay=False), help="The shadow daemon's state directory "
              "(default: the site's daemon.state_dir).")
@click.pass_obj
def shadow_report_command(obj: Context, since: str | None, json_file: str | None, state_dir: str | None) -> None:
    """Compare what `slurmxd --shadow` would have done with what Slurm did, group by group.

    For every group the shadow daemon saw: its would-be decision (first would-be start: when, which kind, where)
    beside the variant Slurm ran, when it started, its wait and JCT; then a summary (groups whose kind differs,
    mean wait actual vs would-be, predicted JCT change and how it is estimated).
    """
    now = time.time()
    cutoff = parse_since(since, now) if since else None
    path = shadow_path(state_dir or obj.site().daemon.state_dir)
    store = ShadowStore(path, create=False)
    try:
        seen, decisions = store.seen(cutoff), store.decisions(cutoff)
    finally:
        store.close()
    if not seen:
        raise click.ClickException(f"{path}: the shadow record holds no groups" + (f" since {since}" if since else "")
                                   + "; let `slurmxd --shadow` run while groups are queued, then ask again")
    jobs, notes = _actual(obj, min(g.first_seen for g in seen), now)
    report = compare(seen, decisions, jobs, notes)
    if json_file:
        text = json.dumps(report.to_json(), indent=2)
        if json_file == "-":
            click.echo(text)
            return
        try:
            Path(json_file).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise click.ClickException(f"--json {json_file}: cannot write it ({exc.strerror}); "
                                       "choose a writable path") from None
    render(report, console())


def _actual(obj: Context, first_seen: float, now: float) -> tuple[list[SlurmJob | AccountingRecord], list[str]]:
    """sacct from a little before the first group was seen, then squeue (the fresher record wins)."""
    adapter = obj.adapter()
    notes: list[str] = []
    jobs: list[SlurmJob | AccountingRecord] = []
    minutes = max(1, math.ceil((now - first_seen) / 60) + 60)  # an hour's margin: groups submitted before
    try:
        jobs += adapter.accounting(since=f"now-{minutes}minutes")
    except SlurmError as exc:
        notes.append(f"accounting (sacct) unavailable, actual runs read from squeue only: {' '.join(str(exc).split())}")
    jobs += adapter.jobs()
    return jobs, notes


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{round(value)}s"


def _signed(value: float | None) -> str:
    """+5s, -3s, 0s (never "-0s")."""
    return "-" if value is None else f"{round(value):+d}s" if round(value) else "0s"


def _clock(value: float | None) -> str:
    return "-" if value is None else time.strftime("%H:%M:%S", time.localtime(value))


def _row(g: GroupComparison) -> list[str]:
    actual = g.actual_kind + (f" on {g.actual_nodes}" if g.actual_nodes else "") if g.actual_kind else g.actual_state
    differs = "" if g.kind_differs is None else ("yes" if g.kind_differs else "no")
    jct = f"{_secs(g.jct_actual_s)} -> {_secs(g.jct_would_s)}" + (f" ({g.jct_basis})" if g.jct_basis else "")
    return [g.group_id, g.user, g.would, _clock(g.would_start), actual, _clock(g.actual_start), differs,
            f"{_secs(g.wait_actual_s)} -> {_secs(g.wait_would_s)}", jct, _signed(g.jct_change_s)]


def render(report: ShadowReport, console: Console) -> None:
    table = Table(box=None, header_style="bold")
    for col in ("GROUP", "USER", "WOULD-BE DECISION", "AT", "SLURM RAN", "AT", "KIND DIFFERS",
                "WAIT actual -> would-be", "JCT actual -> would-be", "JCT CHANGE"):
        table.add_column(col)
    for g in report.groups:
        table.add_row(*_row(g))
    console.print(table)
    s = report.summary
    lines: list[Any] = [
        f"{s.groups} group(s) seen; {s.would_started} with a would-be start; {s.ran} started by Slurm",
        f"kind differs in {s.kind_differs} of the {s.compared} group(s) both started",
        f"mean wait: actual {_secs(s.mean_wait_actual_s)}, would-be {_secs(s.mean_wait_would_s)} "
        f"(over those {s.compared})",
        f"predicted JCT change: {_signed(s.mean_jct_change_s)} mean over "
        f"{s.jct_compared} finished group(s) (actual {_secs(s.mean_jct_actual_s)}, would-be "
        f"{_secs(s.mean_jct_would_s)})",
        f"estimated as: {JCT_BASIS}",
        *[f"note: {n}" for n in report.notes]]
    for line in lines:
        console.print(line, highlight=False, markup=False)
