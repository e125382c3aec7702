"""`slurmx preempt JOB... --grace 60`: the admin's hand on the preemption protocol the daemon uses.

Signals each job's batch shell, waits for its grace period or for it to leave, then requeues it — through
`slurmx.daemon.preemption`, the same code slurmxd runs, so what an admin tries by hand is what the daemon does.
Defaults (signal, requeue exit code, requeue mode) come from the site config's `preemption:` section; the grace
period is each job's own, exactly what slurmxd would grant it (its spec's `grace:`, carried by the group tag and
clamped to `preemption.max_grace`, else `preemption.grace`).
"""

from __future__ import annotations

import re
import signal as signals
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import click

from slurmx.cli.context import Context
from slurmx.core.config import ConfigError, SiteConfig
from slurmx.core.units import UnitError, parse_duration
from slurmx.daemon.preemption import Ending, group_spool_dir, preempt_many
from slurmx.daemon.trust import job_grace
from slurmx.slurm import SlurmAdapter, SlurmError

if TYPE_CHECKING:
    from slurmx.slurm.records import SlurmJob

__all__ = ["parse_grace", "preempt_command"]

_SECONDS = re.compile(r"^\s*\d+(\.\d+)?\s*$")


class _CliContext(Protocol):
    """What `slurmx.cli.context.Context` offers (a test passes a fake with the same two methods)."""

    def site(self) -> SiteConfig: ...
    def adapter(self) -> SlurmAdapter: ...


def parse_grace(text: str) -> float:
    """`60` (seconds, as the issue and `scontrol` users expect), or a duration such as `90s`, `2m`, `1:30`."""
    if _SECONDS.match(text):
        return float(text)
    try:
        return float(parse_duration(text))
    except UnitError as exc:
        raise click.BadParameter(str(exc), param_hint="--grace") from None


def _context(obj: Any, site_path: str | None) -> _CliContext:
    """The `slurmx` group's context; a fresh one when run on its own or when `--site` is given here."""
    if obj is not None and site_path is None:
        context: _CliContext = obj
        return context
    return Context(site_path, getattr(obj, "container", None), getattr(obj, "host", None))


@click.command("preempt")
@click.argument("job_ids", metavar="JOB [JOB...]", nargs=-1, required=True, type=click.IntRange(min=1))
@click.option("--grace", metavar="SECONDS", help="Time between the signal and the requeue: 60, 90s, 2m "
              "(default: the job's own, as slurmxd grants it: its spec's grace, else the site's preemption.grace).")
@click.option("--signal", "signal_name", metavar="NAME", help="Grace signal (default: the site's preemption.signal).")
@click.option("--hold", is_flag=True, help="Requeue held (`requeuehold`): the job waits for `scontrol release`.")
@click.option("--reason", default="slurmx preempt (admin)", show_default=True,
              help="Recorded in the intent file the job's hook reads.")
@click.option("--poll", type=click.FloatRange(min=0.1), default=1.0, show_default=True, hidden=True,
              help="Seconds between two squeue calls while waiting.")
@click.option("--site", "site_path", metavar="PATH", help="Site config (default: slurmx's --site, $SLURMX_SITE).")
@click.pass_obj
def preempt_command(obj: Any, job_ids: tuple[int, ...], grace: str | None, signal_name: str | None, hold: bool,
                    reason: str, poll: float, site_path: str | None) -> None:
    """Preempt running jobs: grace signal to the batch shell, wait for the checkpoint, requeue.

    \b
    Each job gets the signal at once; it is requeued when it exits with the requeue code (it checkpointed),
    or at the end of its grace period if it is still running; a job that completes meanwhile is left alone.
    One line per job says what happened; the exit status is 1 if any job could not be preempted.

    \b
    slurmx preempt 1234 --grace 60
    slurmx preempt 1234 1235 --hold      # requeued held: `scontrol release` decides when they return
    """
    ctx = _context(obj, site_path)
    try:
        site = ctx.site()
        adapter = ctx.adapter()
        grace_s = parse_grace(grace) if grace is not None else float(site.preemption.grace_s)
        # Without --grace, each job gets the grace slurmxd would grant it (its spec's own), one protocol for both.
        grace_for = None if grace is not None else (lambda job: float(job_grace(site, job)))
        signal = (signal_name or site.preemption.signal).strip().upper().removeprefix("SIG")
        if not (signal.isdigit() or f"SIG{signal}" in signals.Signals.__members__):
            raise click.BadParameter(f"expected a signal name such as USR2, got {signal_name!r}",
                                     param_hint="--signal")
        notes: list[str] = []

        def spool_for(job: SlurmJob) -> Path | None:
            folder = group_spool_dir(site, job)
            if folder is None and job.slurmx_tags.get("g"):
                notes.append(f"job {job.job_id}: the group spool of {job.slurmx_tags['g']} is not visible here; "
                             "no intent file, the job's hook counts its own grace")
            return folder

        def report(outcome: Ending) -> None:
            if outcome.note is not None:
                notes.append(f"job {outcome.job_id}: {outcome.note}")
            for note in notes:
                click.echo(f"slurmx preempt: note: {note}", err=True)
            notes.clear()
            if outcome.error is None:
                click.echo(outcome.line())
            else:
                click.echo(f"slurmx preempt: {outcome.line()}", err=True)

        mode = "requeuehold" if hold else site.preemption.mode
        outcomes = preempt_many(adapter, job_ids, grace_s, signal=signal, spool_for=spool_for, reason=reason,
                                requeue_exit_code=site.preemption.requeue_exit_code, mode=mode, release=not hold,
                                poll=poll, on_outcome=report, grace_for=grace_for)
    except (ConfigError, SlurmError) as exc:
        raise click.ClickException(" ".join(str(exc).split())) from None
    if any(o.error is not None for o in outcomes):
        # Each failure already has its line; SystemExit (not click's Exit, which `slurmx`'s non-standalone
        # runner turns into a return value) makes the status 1 without another message.
        raise SystemExit(1)
