"""`slurmx whatif`: replay the site's own Slurm accounting under other policies and print it beside what Slurm did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from slurmx.cli.context import site_path_or_default
from slurmx.cli.output import checked_output_file, checked_plot_dir
from slurmx.cli.output import console as make_console
from slurmx.core.config import SiteConfig, load_site_config
from slurmx.policies.slurm_model import SLURM_MODEL_NAME, slurm_model
from slurmx.sim.report import PlotError
from slurmx.sim.traces import TraceError
from slurmx.sim.whatif import WhatIf, WhatIfError, load_history, read_nodes, replay
from slurmx.sim.whatif_plot import write_wait_cdf
from slurmx.slurm import adapter_from_config
from slurmx.slurm.errors import SlurmError
from slurmx.slurm.factory import transport_from_config
from slurmx.slurm.scheduler_config import BackfillSettings, ConfigValueError, backfill_settings, parse_show_config

__all__ = ["whatif_command"]

_ACTUAL = "Slurm (actual)"


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _times_table(doc: dict[str, Any], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for header in ("policy", "class", "jobs", "wait mean s", "p50", "p95", "JCT mean s", "p50", "p95", "makespan s"):
        table.add_column(header, justify="left" if header in ("policy", "class") else "right")
    sides = [(_ACTUAL, doc["actual"]), *doc["policies"].items()]
    for name, side in sides:
        for cls in ("all", "te", "be"):
            wait, jct = side[cls]["wait"], side[cls]["jct"]
            if cls != "all" and not wait["count"]:
                continue
            table.add_row(name if cls == "all" else "", cls, f"{wait['count']:,}",
                          *(_num(wait[k]) for k in ("mean", "p50", "p95")),
                          *(_num(jct[k]) for k in ("mean", "p50", "p95")),
                          _num(side["makespan"]) if cls == "all" else "")
    return table


def _util_table(doc: dict[str, Any]) -> Table:
    columns = [c for c in doc["actual"]["utilisation"] if not c.endswith("/mem_mb")]
    table = Table(title="utilisation (requested x run time / capacity x span; memory in the JSON)",
                  title_justify="left")
    table.add_column("policy")
    for column in columns:
        table.add_column(column, justify="right")
    for name, side in [(_ACTUAL, doc["actual"]), *doc["policies"].items()]:
        table.add_row(name, *(f"{100 * side['utilisation'].get(c, 0.0):.1f}%" for c in columns))
    return table


def _moved_table(name: str, rows: list[dict[str, Any]]) -> Table:
    table = Table(title=f"{name}: jobs moved most (change = simulated wait - actual wait)", title_justify="left")
    for header in ("job", "user", "class", "partition", "actual wait s", "wait s", "change s"):
        table.add_column(header, justify="right" if header.endswith("s") and header != "class" else "left")
    for r in rows:
        table.add_row(r["job_id"], r["user"], r["class"], r["partition"], _num(r["actual_wait_s"]), _num(r["wait_s"]),
                      f"{r['change_s']:+,.0f}")
    return table


def _print(console: Console, what: WhatIf, doc: dict[str, Any], title: str) -> None:
    console.print(_times_table(doc, title))
    console.print(_util_table(doc))
    for name, side in doc["policies"].items():
        if side["moved"]:
            console.print(_moved_table(name, side["moved"]))
    skipped = doc["jobs"]["skipped"]
    left = "; ".join(f"{n:,} {reason}" for reason, n in skipped.items()) or "none"
    console.print(f"left out of the replay: {doc['jobs']['skipped_total']:,} ({left})")
    for name, why in what.failed.items():
        console.print(f"[bold]{name}[/bold] could not replay this history: {why}")
    if what.runs:  # wall time stays out of the JSON, which is the same for the same inputs
        console.print("replayed in " + ", ".join(f"{name} {result.stats.wall_s:,.1f} s"
                                                  for name, (result, _) in what.runs.items()))


def _slurm_settings(site: SiteConfig, path: str | None) -> BackfillSettings:
    """The cadence of the site's schedulers, from the saved `scontrol show config` or asked of the cluster."""
    if path is not None:
        try:
            text, source = Path(path).read_text(encoding="utf-8", errors="replace"), path
        except OSError as exc:
            raise click.BadParameter(f"cannot read it: {exc.strerror or exc}", param_hint="--slurm-config") from None
    else:
        try:
            done = transport_from_config(site.transport).run(["scontrol", "show", "config"])
        except SlurmError as exc:
            raise click.ClickException(f"scontrol show config: {exc}; save it on the cluster and pass "
                                       "--slurm-config") from None
        if done.returncode != 0:
            raise click.ClickException(f"scontrol show config failed ({done.stderr.strip()[:200]}); save it on the "
                                       "cluster and pass --slurm-config")
        text, source = done.stdout, "scontrol show config"
    try:
        return backfill_settings(parse_show_config(text), source)
    except ConfigValueError as exc:
        raise click.ClickException(str(exc)) from None


def _cadence_line(settings: BackfillSettings) -> str:
    if not settings.backfill:
        return f"{settings.scheduler_type}: strict FIFO (main scheduler only), queue in submit order"
    own = f" (set by the site: {', '.join(settings.stated)})" if settings.stated else " (Slurm's defaults)"
    return (f"EASY backfill every {settings.interval_s:g} s, window {settings.window_s / 60:g} min, resolution "
            f"{settings.resolution_s:g} s, {settings.max_job_test} jobs per pass{own}; queue in submit order")


@click.command("whatif")
@click.option("--site", "site_path", metavar="PATH",
              help="Site config: partitions -> kinds, the TE QOS, the grace (default: slurmx --site, $SLURMX_SITE, "
                   "then /etc/slurmx/site.yaml).")
@click.option("--sacct", "sacct_path", required=True, metavar="PATH",
              help="Accounting dump: `sacct --json` or `sacct -P` text (see slurmx sacct-export).")
@click.option("--nodes", "nodes_path", metavar="PATH",
              help="The cluster's nodes: `scontrol show nodes --json` (`sinfo --json` on 22.05) saved in a file "
                   "(default: asked of the site's cluster now, through its transport).")
@click.option("--policy", "policies", default="fifo,fitgpp,allox", show_default=True, metavar="A,B",
              help="Policies to replay, comma-separated (the site's own policy gets the site's params).")
@click.option("--slurm-config", "slurm_config_path", metavar="PATH",
              help="`scontrol show config` saved in a file: the cadence of Slurm's backfill that `--policy slurm` "
                   "models (default: asked of the site's cluster now, when `slurm` is among the policies).")
@click.option("--limit", type=click.IntRange(min=1), help="Replay only the first N usable jobs of the dump.")
@click.option("--moved", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many most-moved jobs to list per policy.")
@click.option("--json", "json_path", metavar="PATH", help="Write the comparison as JSON here ('-' for stdout).")
@click.option("--plot", "plot_dir", metavar="DIR", help="Write wait_cdf.png (each policy vs Slurm) into DIR.")
@click.pass_obj
def whatif_command(obj: Any, site_path: str | None, sacct_path: str, nodes_path: str | None, policies: str,
                   slurm_config_path: str | None, limit: int | None, moved: int, json_path: str | None,
                   plot_dir: str | None) -> None:
    """Replay the site's own Slurm accounting under other policies and print it beside what Slurm did.

    `slurm` among the policies is the model of Slurm's own scheduling: FIFO with EASY backfill at the site's
    cadence (bf_interval, bf_window, bf_resolution, bf_max_job_test from `scontrol show config`).

    \b
    slurmx whatif --site site.yaml --sacct month.txt --nodes nodes.json --policy fifo,fitgpp,allox --plot out/
    slurmx whatif --sacct month.txt --nodes nodes.json --slurm-config config.txt --policy slurm,fifo
    """
    names = [p.strip() for p in policies.split(",") if p.strip()]
    if not names:
        raise click.BadParameter("expected one or more policy names, e.g. fifo,fitgpp", param_hint="--policy")
    out = checked_output_file(json_path, "--json") if json_path and json_path != "-" else None
    if plot_dir:
        checked_plot_dir(plot_dir)
    site = load_site_config(site_path_or_default(site_path or getattr(obj, "site_path", None)))
    console = make_console(stderr=json_path == "-")
    models = {}
    said: list[str] = []  # what the replay assumed beyond the history, for the JSON's assumptions too
    if SLURM_MODEL_NAME in names:
        settings = _slurm_settings(site, slurm_config_path)
        models[SLURM_MODEL_NAME] = lambda: slurm_model(settings)[0]
        said.append(f"slurm: {_cadence_line(settings)}")
        console.print(said[-1])
    try:
        history = load_history(sacct_path, site, limit)
        nodes = read_nodes(nodes_path) if nodes_path else adapter_from_config(site.transport).nodes()
        with console.status("replaying") as status:
            what = replay(history, nodes, site, names,
                          lambda name: status.update(f"replaying under {name}"), models)
    except (TraceError, WhatIfError) as exc:
        raise click.ClickException(str(exc)) from None
    doc = what.document(moved)
    doc["assumptions"] += said
    text = json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n"
    if json_path == "-":
        click.echo(text, nl=False)
    elif out is not None:
        out.write_text(text, encoding="utf-8")
    where = Path(nodes_path).name if nodes_path else f"the nodes of {site.cluster.name}"
    title = f"{Path(sacct_path).name}: {len(what.jobs):,} jobs replayed on {where}"
    _print(console, what, doc, title)
    if out is not None:
        console.print(f"result: {out}")
    if plot_dir:
        try:
            runs = {name: times for name, (_, times) in what.runs.items()}
            console.print(f"plot: {write_wait_cdf(what.actual, runs, plot_dir, title)}")
        except PlotError as exc:
            raise click.ClickException(str(exc)) from None
