"""`slurmx config`: check site files as slurmxd would, and print the site file's JSON Schema for editors.

Kept out of `slurmx.cli.app` and loaded lazily: the full check imports every policy (numpy, scipy), which
`slurmx --help` and `slurmx submit` must not pay for.
"""

from __future__ import annotations

import json

import click

from slurmx.cli.context import Context, site_path_or_default
from slurmx.daemon.site_check import check_site_file, site_json_schema
from slurmx.slurm.versions import shape_for

__all__ = ["config_group"]


@click.group("config")
def config_group() -> None:
    """Site config tools: check files as slurmxd would, print the JSON Schema."""


@config_group.command("check")
@click.argument("paths", nargs=-1, metavar="[FILE]...", type=click.Path(dir_okay=False))
@click.pass_context
def config_check(ctx: click.Context, paths: tuple[str, ...]) -> None:
    """Check site files as slurmxd does at start-up: every problem of every file, one line each.

    \b
    Without FILE: the site slurmx uses (--site, $SLURMX_SITE, /etc/slurmx/site.yaml).
    A problem reads FILE: KEY: what is wrong; how to fix it (on stderr); a good file prints FILE: ok.
    A Slurm release slurmx was not tested on is a warning, not a problem.
    The exit status is 1 if any file has a problem.
    """
    if not paths:
        given = ctx.find_object(Context)
        paths = (site_path_or_default(given.site_path if given is not None else None),)
    failed = 0
    for path in paths:
        site, problems = check_site_file(path)
        for line in problems:
            click.echo(line, err=True)
        if site is None:
            failed += 1
            continue
        click.echo(f"{path}: ok ({len(site.resources)} resource kinds: {', '.join(site.kind_names())}; "
                   f"policy {site.policy.name}; transport {site.transport.kind})")
        if site.cluster.slurm_version is not None:  # accepted, but not a release slurmx was tested on
            warning = shape_for(site.cluster.slurm_version)[1]
            if warning:
                click.echo(f"{path}: cluster.slurm_version: warning: {warning}", err=True)
    if failed:
        raise click.ClickException(f"{failed} of {len(paths)} file(s) have problems; fix each line above")


@config_group.command("schema")
def config_schema() -> None:
    """Print the site file's JSON Schema to stdout (for editors: completion and checks as you type)."""
    click.echo(json.dumps(site_json_schema(), indent=2))
