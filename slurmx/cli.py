"""`slurmx` entry point: parses the command line and calls the packages; no logic of its own.

Every expected failure (bad site config, Slurm refusing, transport down) ends as one line on stderr and a
non-zero exit, never a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from slurmx.core.config import ConfigError, SiteConfig, load_site_config
from slurmx.core.units import UnitError, format_mem
from slurmx.slurm import SlurmAdapter, SlurmError, adapter_from_config

__all__ = ["daemon_main", "main"]

DEFAULT_SITE = "/etc/slurmx/site.yaml"


@dataclass
class Context:
    site_path: str | None
    container: str | None

    def site(self) -> SiteConfig:
        path = self.site_path or os.environ.get("SLURMX_SITE") or DEFAULT_SITE
        site = load_site_config(path)
        if self.container:
            transport = site.transport.model_copy(update={"kind": "docker", "container": self.container})
            site = site.model_copy(update={"transport": transport})
        return site

    def adapter(self) -> SlurmAdapter:
        return adapter_from_config(self.site().transport)


pass_ctx = click.make_pass_decorator(Context)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--site", "site_path", metavar="PATH",
              help="Site config (default: $SLURMX_SITE, then /etc/slurmx/site.yaml).")
@click.option("--container", metavar="NAME", help="Reach Slurm through `docker exec NAME` (overrides transport).")
@click.version_option(package_name="slurmx")
@click.pass_context
def cli(ctx: click.Context, site_path: str | None, container: str | None) -> None:
    """slurmx: one job, many resource variants, scheduled by policies from the literature."""
    ctx.obj = Context(site_path, container)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@pass_ctx
def nodes(ctx: Context, as_json: bool) -> None:
    """List compute nodes: partition, state, CPUs, memory and GRES (free / total)."""
    found = ctx.adapter().nodes()
    if as_json:
        click.echo(json.dumps([{
            "name": n.name, "partitions": list(n.partitions), "state": n.state, "usable": n.is_usable,
            "capacity": n.capacity.dims(), "allocated": n.allocated.dims(), "free": n.free.dims(),
        } for n in found], indent=2))
        return
    table = Table(box=None, header_style="bold")
    for col in ("NODE", "PARTITION", "STATE", "CPUS(free/total)", "MEM(free/total)", "GRES(free/total)"):
        table.add_column(col)
    for n in found:
        gres = ",".join(f"{k}:{n.free.gres_count(k)}/{v}" for k, v in n.capacity.gres.items()) or "-"
        table.add_row(n.name, ",".join(n.partitions), n.state.lower(), f"{n.free.cpus}/{n.capacity.cpus}",
                      f"{format_mem(n.free.mem_mb)}/{format_mem(n.capacity.mem_mb)}", gres)
    Console().print(table)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.option("--user", help="Only this user's jobs.")
@pass_ctx
def jobs(ctx: Context, as_json: bool, user: str | None) -> None:
    """List Slurm jobs as slurmx reads them (state, request, slurmx group tags)."""
    found = ctx.adapter().jobs(user=user)
    if as_json:
        click.echo(json.dumps([_job_dict(j) for j in found], indent=2))
        return
    table = Table(box=None, header_style="bold")
    for col in ("JOBID", "NAME", "USER", "STATE", "PARTITION", "QOS", "REQUEST", "NODES", "REASON"):
        table.add_column(col)
    for j in found:
        table.add_row(str(j.job_id), j.name, j.user, j.state.value, j.partition, j.qos, str(j.request),
                      j.nodes or "-", j.reason)
    Console().print(table)


def _job_dict(job: Any) -> dict[str, Any]:
    data = asdict(job)
    data["state"] = job.state.value
    data["request"] = job.request.dims()
    data["allocated"] = job.allocated.dims()
    return data


@cli.command()
@pass_ctx
def doctor(ctx: Context) -> None:
    """Check the site config against the live cluster: version, partitions, GRES, accounting."""
    site = ctx.site()
    adapter = ctx.adapter()
    console = Console()
    version = adapter.version()
    console.print(f"[bold]Slurm[/bold] {version} via {site.transport.kind}")
    partitions = {p.name: p for p in adapter.partitions({k.partition: n for n, k in site.resources.items()})}
    node_map = {n.name: n for n in adapter.nodes()}
    problems = 0
    for kind in site.kind_names():
        cfg = site.kind(kind)
        part = partitions.get(cfg.partition)
        if part is None:
            console.print(f"[red]✗[/red] kind {kind}: partition {cfg.partition!r} does not exist")
            problems += 1
            continue
        members = [node_map[n] for n in part.nodes if n in node_map]
        need = site.resources_for(kind)
        fitting = [n.name for n in members if need.fits_in(n.capacity)]
        mark = "[green]✓[/green]" if fitting else "[red]✗[/red]"
        problems += not fitting
        console.print(f"{mark} kind {kind}: partition {cfg.partition} nodes {','.join(part.nodes)}; "
                      f"a variant ({need}) fits on {len(fitting)} of {len(members)}")
    records = adapter.accounting(since="now-1hour")
    console.print(f"[green]✓[/green] accounting answers ({len(records)} jobs in the last hour)")
    if problems:
        raise click.ClickException(f"{problems} problem(s) between the site config and the cluster")


@cli.group()
def config() -> None:
    """Site config tools."""


@config.command("check")
@click.argument("path", type=click.Path(dir_okay=False))
def config_check(path: str) -> None:
    """Validate a site config file; prints the first problem as FILE: KEY: what to fix."""
    site = load_site_config(path)
    click.echo(f"{path}: ok ({len(site.resources)} resource kinds: {', '.join(site.kind_names())}; "
               f"policy {site.policy.name}; transport {site.transport.kind})")


def _run(entry: Callable[..., Any], prog: str) -> None:
    """Turn expected failures into one line on stderr and exit status 1."""
    try:
        entry(prog_name=prog, standalone_mode=False)
    except (ConfigError, SlurmError, UnitError) as exc:
        click.echo(f"{prog}: {exc}", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        click.echo(f"{prog}: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo(f"{prog}: aborted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


def main() -> None:
    _run(cli, "slurmx")


@click.command()
@click.option("--site", "site_path", metavar="PATH")
def _daemon(site_path: str | None) -> None:
    """slurmxd: the scheduling daemon (observe -> decide -> enforce)."""
    path = site_path or os.environ.get("SLURMX_SITE") or DEFAULT_SITE
    site = load_site_config(Path(path))
    raise click.ClickException(
        f"the control loop is not built yet (roadmap issue 9); {path} is valid (policy {site.policy.name})")


def daemon_main() -> None:
    _run(_daemon, "slurmxd")


if __name__ == "__main__":
    main()
