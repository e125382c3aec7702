"""The `slurmx` group and the `slurmxd` command: parse the command line and call the packages; no logic of their own.

Every expected failure (bad site config, Slurm refusing, transport down) ends as one line on stderr and a
non-zero exit, never a traceback.
Long because the `submit` command is sbatch's whole command line (its options, notes and outputs); the other
commands live in their modules beside this one, listed in commands.py.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from slurmx.cli.commands import register_lazy_commands
from slurmx.cli.context import Context, site_path_or_default
from slurmx.cli.extras import DISTRIBUTION, missing_extra_message, require_daemon_extra
from slurmx.cli.lazy import LazyGroup
from slurmx.cli.output import console
from slurmx.core.units import format_mem

if TYPE_CHECKING:
    from slurmx.core.config import SiteConfig

__all__ = ["daemon_main", "main"]

pass_ctx = click.make_pass_decorator(Context)


def _console() -> Console:
    """Rich output at the terminal's width; wide when piped, so tables are not wrapped word by word."""
    return console()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--site", "site_path", metavar="PATH",
              help="Site config (default: $SLURMX_SITE, then /etc/slurmx/site.yaml).")
@click.option("--container", metavar="NAME", help="Reach Slurm through `docker exec NAME` (overrides transport).")
@click.option("--host", metavar="[USER@]HOST[:PORT]",
              help="Reach Slurm over SSH on a login node (host key checked against known_hosts).")
@click.version_option(package_name=DISTRIBUTION)
@click.pass_context
def cli(ctx: click.Context, site_path: str | None, container: str | None, host: str | None) -> None:
    """slurmx: one job, many resource variants, scheduled by policies from the literature."""
    ctx.obj = Context(site_path, container, host)


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
    _console().print(table)


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
    _console().print(table)


def _job_dict(job: Any) -> dict[str, Any]:
    """A shallow field walk, not `asdict`: `asdict` deep-copies the read-only `gres` mapping and cannot."""
    data = {f.name: getattr(job, f.name) for f in fields(job)}
    data["state"] = job.state.value
    data["request"] = job.request.dims()
    data["allocated"] = job.allocated.dims()
    return data


@cli.command()
@pass_ctx
def doctor(ctx: Context) -> None:
    """Check the site config against the live cluster: version, partitions, GRES, accounting, the spool, the lease
    guard, and the fields slurmx reads in squeue, the node listing and sacct (read-only)."""
    from slurmx.slurm.versions import shape_for

    site = ctx.site()
    adapter = ctx.adapter()
    console = _console()
    version = adapter.version()
    shape, newer = shape_for(version)
    console.print(f"[bold]Slurm[/bold] {version} via {site.transport.kind}, read as {shape.since}")
    if newer:
        console.print(f"[yellow]![/yellow] {newer}")
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
    transport = getattr(adapter, "transport", None)
    if transport is not None:
        from rich.markup import escape

        from slurmx.daemon.checks import lease_guard_problem, parse_config
        from slurmx.slurm.adapter import spool_root_problem_via

        spool = spool_root_problem_via(transport, site.submit.spool_dir)  # where `submit` makes group folders
        problems += bool(spool)
        console.print(f"[red]✗[/red] {escape(spool)}" if spool else
                      f"[green]✓[/green] spool root {escape(site.submit.spool_dir)}: root's, sticky, not a link")

        from slurmx.slurm.conformance import probe

        for finding in probe(transport, shape.nodes_argv):  # the fields slurmx reads, as this release writes them
            console.print(f"{'[green]✓[/green]' if finding.ok else '[yellow]![/yellow]'} {escape(finding.line)}")
        shown = transport.run(["scontrol", "show", "config"], timeout=30.0)
        problem = lease_guard_problem(parse_config(shown.stdout)) if shown.returncode == 0 else \
            "cannot read `scontrol show config`"
        if problem:
            console.print(f"[yellow]![/yellow] managed variants: {problem}")
        else:
            console.print("[green]✓[/green] managed variants: only slurmxd may move their leases (job_submit/lua)")
    if problems:
        raise click.ClickException(f"{problems} problem(s) between the site config and the cluster")


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--variants", metavar="KIND,...", help="Resource kinds to submit (default: the spec's, else all).")
@click.option("--mode", type=click.Choice(["managed", "race", "pick"]), help="Default: the site's submit.mode.")
@click.option("--pick", metavar="KIND", help="Submit only this variant.")
@click.option("--dry-run", is_flag=True, help="Print each variant's sbatch options; submit nothing.")
@click.option("--scripts", is_flag=True, help="With --dry-run: print each variant's whole script too.")
@click.option("--parsable", is_flag=True, help="Print the group id only (for `slurmx status/cancel GROUP`).")
@click.option("--wait", is_flag=True, help="Wait until the group ends; exit 0 only if it completed.")
@click.option("--json", "as_json", is_flag=True, help="Print the submitted group as JSON.")
@click.argument("words", nargs=-1, type=click.UNPROCESSED)
@pass_ctx
def submit(ctx: Context, variants: str | None, mode: str | None, pick: str | None, dry_run: bool, scripts: bool,
           parsable: bool, wait: bool, as_json: bool, words: tuple[str, ...]) -> None:
    """Submit a job spec (.yaml) or an sbatch script as one group of variants.

    \b
    slurmx submit job.yaml
    slurmx submit --time=1:00:00 --variants cpu,gpu train.sh --epochs 5   (docs/submit.md)
    """
    from slurmx.submit.array import array_text
    from slurmx.submit.directives import split_command_line
    from slurmx.submit.entry import build_submission
    from slurmx.submit.submitter import array_specs, as_slurm_arrays, fit_to_cluster, plan_group, submit_groups

    if scripts and not dry_run:
        raise click.UsageError("--scripts shows what --dry-run would submit; give both, or neither to submit")
    options, path, args = split_command_line(words)
    _did_you_mean(options, [opt.lstrip("-") for param in submit.params for opt in param.opts if opt.startswith("--")])
    if path is None:
        raise click.UsageError("give a job spec (.yaml) or a batch script to submit")
    site = ctx.site()
    only = tuple(v.strip() for v in variants.split(",") if v.strip()) if variants else None
    submission = build_submission(path, options, args, site, only)
    spec, parsable, wait = submission.spec, parsable or submission.parsable, wait or submission.wait
    dry_run = dry_run or submission.test_only  # sbatch --test-only submits nothing
    # The kinds whose nodes can satisfy the job's placement (one read of the nodes, only when it asks for one).
    only, placed = fit_to_cluster(spec, site, ctx.adapter(), only=only, source=path, strict=not dry_run)
    for note in [*submission.notes, *placed]:
        click.echo(f"slurmx: note: {note}", err=True)
    if dry_run:
        if spec.dependency:
            click.echo("# --dependency names groups here; at submission each becomes its variants' job ids")
        arrays = as_slurm_arrays(spec, site, mode, pick)  # one Slurm array per kind, else one group per index
        extra = f" --array={array_text(spec.array, spec.array_throttle)}" if arrays and spec.array else ""
        for one in [spec] if arrays else array_specs(spec):
            gid, chosen, rendered = plan_group(one, site, mode=mode, pick=pick, only=only, source=path, array=arrays)
            for variant in rendered:
                click.echo(f"# ---- group {gid} variant {variant.kind} ({chosen}): sbatch "
                           f"{' '.join(variant.options)}{extra}")
                if scripts:  # tens of KB each (the hook is embedded): only on request
                    click.echo(variant.script)
        return
    groups = submit_groups(spec, site, ctx.adapter(), mode=mode, pick=pick, only=only, source=path, fitted=True)
    for group in groups:
        if group.note:
            click.echo(f"slurmx: note: {group.note}", err=True)
    if parsable:  # one id, or an array's ids joined as a dependency takes them (afterany:$(slurmx submit ...))
        click.echo(":".join(group.group_id for group in groups))
    elif as_json:
        shown = [{"group": group.group_id, "name": group.name, "mode": group.mode, "variants": dict(group.variants),
                  "samples": list(group.samples), "spool": group.spool_dir} for group in groups]
        click.echo(json.dumps(shown if spec.array is not None else shown[0]))
    else:
        for group in groups:
            jobs = ", ".join(f"{kind}={job_id}" for kind, job_id in group.variants)
            queued = f"; {len(group.samples)} profiling sample(s) queued held for slurmxd" if group.samples else ""
            click.echo(f"Submitted group {group.group_id} ({group.mode}): {jobs}{queued}")
    if wait:  # as sbatch --wait: SubmitError (one line, status 1) unless every group completed
        from slurmx.submit.api import GroupHandle, wait_for
        for group in groups:
            click.echo(wait_for(GroupHandle(group, ctx.adapter())), err=True)


# Option names the docs once used, and the option that does the job now.
_RENAMED_SUBMIT_OPTIONS = {"kinds": "variants", "kind": "variants", "variant": "variants"}


def _did_you_mean(options: list[str], own: list[str]) -> None:
    """An option before the script that neither `slurmx submit` nor sbatch knows, but that looks like one of
    submit's own, is a typo: say which it meant (sbatch's own typos are named by the sbatch check after this)."""
    import difflib

    from slurmx.submit.directives import canonical_long_option

    for word in options:
        name = word[2:].partition("=")[0] if word.startswith("--") else ""
        if not name or name in own or canonical_long_option(name) is not None:
            continue
        guess = _RENAMED_SUBMIT_OPTIONS.get(name) or next(iter(difflib.get_close_matches(name, own, 1)), None)
        if guess is not None:
            raise click.UsageError(f"no such option --{name} (neither slurmx submit nor sbatch has it); did you "
                                   f"mean --{guess}?")


def _status_rows(groups: list[Any]) -> Table:
    from slurmx.core.arrays import job_text

    table = Table(box=None, header_style="bold")
    for col in ("GROUP", "NAME", "USER", "CLASS", "STATE", "VARIANT", "JOBID", "VSTATE", "NODES", "WHY"):
        table.add_column(col)
    for group in groups:
        for i, v in enumerate(group.variants):
            first = i == 0
            state = group.state.value + ("" if group.valid else " (INVALID: mixed users)")
            table.add_row(group.group_id if first else "", group.name if first else "", group.user if first else "",
                          group.job_class if first else "", state if first else "", v.kind, job_text(v.job_id),
                          v.state.value, v.nodes or "-", v.why)
    return table


def _job_json(job_id: int) -> int | str:
    """A job id as JSON: a number, or an array task's `A_i` (its key is slurmxd's, not Slurm's)."""
    from slurmx.core.arrays import is_task_key, job_text

    return job_text(job_id) if is_task_key(job_id) else job_id


def _group_json(group: Any) -> dict[str, Any]:
    return {"group": group.group_id, "name": group.name, "user": group.user, "class": group.job_class,
            "state": group.state.value, "valid": group.valid, "foreign_jobs": [_job_json(j) for j in group.foreign],
            "note": group.note,
            "running": group.running.kind if group.running else None,
            "variants": [{"kind": v.kind, "job_id": _job_json(v.job_id), "state": v.state.value, "reason": v.reason,
                          "why": v.why, "nodes": v.nodes, "partition": v.partition,
                          "restart_count": v.restart_count, "exit_code": v.exit_code} for v in group.variants]}


@cli.command()
@click.argument("group_id", required=False)
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def status(ctx: Context, group_id: str | None, as_json: bool) -> None:
    """One group's variants, their states, which one runs and why the others wait (all of yours without GROUP).
    An array's GROUP lists each of its indices; GROUP[i] is index i alone."""
    from slurmx.submit.groups import find_groups, list_groups

    if group_id:
        groups = find_groups(ctx.adapter(), group_id, spool_dir=ctx.site().submit.spool_dir)
        if not groups:
            raise click.ClickException(f"no group {group_id} in squeue or the last 7 days of accounting")
    else:
        groups = list_groups(ctx.adapter(), user=_me(ctx), spool_dir=ctx.site().submit.spool_dir)
    decisions = _daemon_decisions(ctx.site())
    if as_json:
        click.echo(json.dumps([{**_group_json(g), "decision": decisions.get(g.group_id)} for g in groups], indent=2))
    else:
        _console().print(_status_rows(groups))
        for g in groups:
            if g.note:
                click.echo(f"{g.group_id}: {g.note}")
            if g.group_id in decisions:
                click.echo(f"slurmxd on {g.group_id}: {decisions[g.group_id]}")


def _open_store(site: SiteConfig) -> Any:
    """The daemon's store when this host can read it (the daemon host), else None."""
    from slurmx.daemon.store import Store, StoreError, store_path

    path = store_path(site)
    try:
        if not path.exists():
            return None
        return Store(path)
    except (StoreError, OSError):  # the unit keeps the store to slurmxd's own user (UMask=0077)
        return None


def _daemon_decisions(site: SiteConfig) -> dict[str, str]:
    """group -> the daemon's latest decision or action on it, as one line."""
    store = _open_store(site)
    if store is None:
        return {}
    try:
        return {g: f"{e.event}: {e.detail}" for g, e in store.last_decisions().items()}
    finally:
        store.close()


@cli.command()
@click.argument("group_id")
@pass_ctx
def explain(ctx: Context, group_id: str) -> None:
    """Why GROUP waits, why it got its variant, why it was preempted (from slurmxd's audit log)."""
    from slurmx.daemon.explain import explain as explain_group
    from slurmx.daemon.store import store_path

    store = _open_store(ctx.site())
    if store is None:
        raise click.ClickException(f"no slurmxd state store readable at {store_path(ctx.site())}; run this on the "
                                   "daemon's host or pass --site with its daemon.state_dir")
    try:
        for line in explain_group(group_id, store.history(group_id)):
            click.echo(line)
    finally:
        store.close()


def _me(ctx: Context) -> str | None:
    """The user whose groups `slurmx groups` shows: the transport's user, else the local one."""
    site = ctx.site()
    if site.transport.kind == "docker":
        return site.transport.docker_user
    if site.transport.kind == "ssh" and site.transport.user:
        return site.transport.user
    import getpass

    return getpass.getuser()


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--all", "all_users", is_flag=True, help="Every user's groups, not only mine.")
@pass_ctx
def groups(ctx: Context, as_json: bool, all_users: bool) -> None:
    """My groups (pending, running and recently finished)."""
    from slurmx.submit.groups import list_groups

    found = list_groups(ctx.adapter(), user=None if all_users else _me(ctx),
                        spool_dir=ctx.site().submit.spool_dir)
    if as_json:
        click.echo(json.dumps([_group_json(g) for g in found], indent=2))
    else:
        _console().print(_status_rows(found))


@cli.command()
@click.argument("group_id")
@pass_ctx
def cancel(ctx: Context, group_id: str) -> None:
    """Cancel every variant of a group: of an array's GROUP, every index (its kind arrays whole); GROUP[i], index
    i alone."""
    from slurmx.core.arrays import job_text
    from slurmx.submit.groups import cancel_array, cancel_group, find_groups

    adapter = ctx.adapter()
    found = find_groups(adapter, group_id, since="now-1day", spool_dir=ctx.site().submit.spool_dir)
    if not found:
        raise click.ClickException(f"no group {group_id} in squeue or the last day of accounting")
    try:
        if len(found) == 1 and found[0].group_id == group_id:
            cancelled = cancel_group(adapter, found[0])
        else:
            cancelled = cancel_array(adapter, found)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"Cancelled group {group_id}: jobs {', '.join(map(job_text, cancelled)) or 'none active'}")


@cli.command()
@click.option("--path", "lang", type=click.Choice(["bash"]), required=True,
              help="Print the path of the hook file for this language.")
def hook(lang: str) -> None:
    """Where the job-side hook lives: `source "$(slurmx hook --path bash)"` in a job script."""
    from importlib import resources

    click.echo(str(resources.files("slurmx.hooks").joinpath("hook.sh")))


register_lazy_commands(cli)


def _run(entry: Callable[..., Any], prog: str) -> None:
    """Turn expected failures into one line on stderr and exit status 1."""
    try:
        entry(prog_name=prog, standalone_mode=False)
    except click.ClickException as exc:
        click.echo(f"{prog}: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo(f"{prog}: aborted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except _expected_errors() as exc:  # evaluated only once something was raised
        click.echo(f"{prog}: {exc}", err=True)
        sys.exit(1)
    except ModuleNotFoundError as exc:  # a lean client install running a daemon or simulator command
        message = missing_extra_message(exc, prog)
        if message is None:
            raise
        click.echo(message, err=True)
        sys.exit(1)


def _expected_errors() -> tuple[type[Exception], ...]:
    """The failures `_run` reports in one line; imported here, when an exception is raised, not at every start."""
    from slurmx.core.config import ConfigError
    from slurmx.core.units import UnitError
    from slurmx.daemon.errors import DaemonError
    from slurmx.slurm import SlurmError
    from slurmx.submit.submitter import SubmitError

    return ConfigError, SlurmError, UnitError, SubmitError, DaemonError


def main() -> None:
    _run(cli, "slurmx")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name=DISTRIBUTION, prog_name="slurmxd")
@click.option("--site", "site_path", metavar="PATH",
              help="Site config (default: $SLURMX_SITE, then /etc/slurmx/site.yaml).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
              help="Least severe log records written (default: info; warning with --once).")
@click.option("--once", is_flag=True, help="Run one cycle and exit.")
@click.option("--dry-run", is_flag=True, help="Decide and print the plan; enforce nothing, write nothing.")
@click.option("--json-logs", is_flag=True, help="One JSON object per log line (overrides daemon.log_format).")
@click.option("--state-dir", type=click.Path(file_okay=False), help="Override daemon.state_dir.")
@click.option("--shadow", is_flag=True, help="Act on nothing; record what would be done in STATE_DIR/shadow.sqlite "
              "(read it with `slurmx shadow-report`). Runs beside an enforcing slurmxd or none.")
@click.argument("command", required=False, type=click.Choice(["drain", "resume", "backup", "restore"]))
@click.argument("file", required=False, metavar="[FILE]")
def _daemon(site_path: str | None, log_level: str | None, once: bool, dry_run: bool, json_logs: bool,
            state_dir: str | None, shadow: bool, command: str | None, file: str | None) -> None:
    """slurmxd: the scheduling daemon (observe -> decide -> enforce).

    `slurmxd drain` hands every managed group to Slurm now (one variant per group runs) and makes any running
    slurmxd on this state directory decide nothing; `slurmxd resume` undoes it. `slurmxd backup FILE` copies the
    state store while slurmxd runs; `slurmxd restore FILE` puts a backup back while it does not (docs/upgrade.md).
    """
    from slurmx.core.config import load_site_config
    from slurmx.daemon.main import run_daemon, run_drain
    from slurmx.daemon.site_check import load_checked_site

    # Running checks the file as `slurmx config check` does; drain and resume (the way out) need only its shape.
    path = Path(site_path_or_default(site_path))
    site = load_site_config(path) if command is not None else load_checked_site(path)
    update: dict[str, Any] = {}
    if json_logs:
        update["log_format"] = "json"
    if state_dir:
        update["state_dir"] = Path(state_dir)
    if update:
        site = site.model_copy(update={"daemon": site.daemon.model_copy(update=update)})
    if command in ("backup", "restore"):
        from slurmx.cli.backup import run_store_command

        run_store_command(site, command, file)
        return
    if file is not None:
        raise click.ClickException(f"unexpected argument {file!r}: only backup and restore take a FILE")
    if command is not None:
        run_drain(site, command)
        return
    require_daemon_extra()  # drain and resume, the way out, work on any install
    level = getattr(logging, log_level.upper()) if log_level is not None else None
    if shadow:
        from slurmx.daemon.shadow import run_shadow

        run_shadow(site, once=once, log_level=level)
        return
    run_daemon(site, once=once, dry_run=dry_run, log_level=level)


def daemon_main() -> None:
    _run(_daemon, "slurmxd")

