"""`slurmx fidelity WORKLOAD`: how far the simulator's answer is from the live cluster's, for the site's policy."""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from slurmx.cli.context import Context
from slurmx.cli.output import checked_output_file
from slurmx.core.config import SiteConfig
from slurmx.core.tag import readable_fields
from slurmx.core.validation import ConfigError
from slurmx.daemon.loop import AlreadyRunning, acquire_lock
from slurmx.fidelity.compare import Comparison, Outcome, compare, latency_options, model_of, sim_outcome
from slurmx.fidelity.live import LiveGroup, run_live
from slurmx.fidelity.workload import mixed_workload
from slurmx.policies import make_policy
from slurmx.policies.base import declared
from slurmx.slurm import SlurmAdapter, SlurmError

__all__ = ["fidelity_command"]

TE_SHARE = 0.3  # of a mixed workload's groups when the policy's TE groups preempt BE ones (else none)


@click.command("fidelity")
@click.argument("workload", type=click.Choice(["mixed"]))
@click.option("--site", "site_path", type=click.Path(dir_okay=False), help="Site config (an admin's: the cycle "
              "holds and releases jobs).")
@click.option("--policy", help="Policy to compare (default: the site's).")
@click.option("--groups", type=click.IntRange(1, 500), default=30, show_default=True)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--time-scale", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="Multiplies every payload's duration (40-120 s at 1).")
@click.option("--te-fraction", type=click.FloatRange(0, 1), default=None,
              help=f"Share of TE groups (default: {TE_SHARE:g} under a policy whose TE groups preempt BE "
                   "ones, else 0).")
@click.option("--kinds", help="Comma-separated variant kinds (default: the site's first two).")
@click.option("--mean-gap", type=click.FloatRange(min=0.1), default=4.0, show_default=True,
              help="Mean seconds between two arrivals (exponential): lower is a busier cluster.")
@click.option("--interval", type=click.FloatRange(min=0.2), default=1.0, show_default=True,
              help="Seconds between two cycles of the live run.")
@click.option("--timeout", type=click.FloatRange(min=1), default=3600, show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write both runs and the comparison.")
@click.pass_obj
def fidelity_command(obj: Any, workload: str, site_path: str | None, policy: str | None, groups: int, seed: int,
                     time_scale: float, te_fraction: float | None, kinds: str | None, mean_gap: float,
                     interval: float,
                     timeout: float, json_path: str | None) -> None:
    """Run one small workload live (slurmxd's cycle in this process) and in the simulator; compare them.

    \b
    slurmx fidelity mixed --site admin-site.yaml --policy fifo
    slurmx fidelity mixed --site admin-site.yaml --policy fitgpp --json fitgpp.json
    """
    if json_path is not None:
        checked_output_file(json_path, "--json")
    ctx = Context(site_path, getattr(obj, "container", None), getattr(obj, "host", None)) \
        if obj is None or site_path is not None else obj
    with contextlib.ExitStack() as held:
        return _run(ctx, held, json_path, policy, groups, seed, time_scale, te_fraction, kinds, mean_gap, interval,
                    timeout)


def _run(ctx: Any, held: contextlib.ExitStack, json_path: str | None, policy: str | None, groups: int, seed: int,
         time_scale: float, te_fraction: float | None, kinds: str | None, mean_gap: float, interval: float,
         timeout: float) -> None:
    try:
        site = _site_for(ctx.site(), policy)
        # The live run is slurmxd's cycle itself: it takes the site's daemon lock first, so it never runs beside
        # a slurmxd (two cycles would both act on every group).
        held.enter_context(_daemon_lock(site))
        adapter = ctx.adapter()
        _check_no_other_groups(adapter)
        chosen = tuple(k.strip() for k in kinds.split(",")) if kinds else tuple(site.kind_names()[:2])
        for kind in chosen:
            site.kind(kind)
        share = te_fraction if te_fraction is not None else \
            (TE_SHARE if declared(site.policy.name, site.policy.params).te_preempts_be else 0.0)
        jobs = mixed_workload(site, chosen, groups, seed, time_scale, share, mean_gap)
        cluster = model_of(site, adapter.nodes(), adapter.partitions())
        sim = sim_outcome(site, cluster, jobs)
        click.echo(f"simulator: {len(jobs)} groups, makespan {sim.makespan_s:.0f} s; now the live run "
                   f"(policy {site.policy.name}, a cycle every {interval:g} s)", err=True)
        with tempfile.TemporaryDirectory(prefix="slurmx-fidelity-") as state:
            live_groups = run_live(site, adapter, jobs, Path(state), interval=interval, timeout=timeout,
                                   progress=_Progress())
        click.echo("", err=True)
        latency = start_latency(live_groups) or 0.0
        delay = requeue_delay(live_groups)
        modelled = sim_outcome(site, cluster, jobs, options=latency_options(interval, latency, delay))
    except (ConfigError, SlurmError, KeyError, TimeoutError) as exc:
        raise click.ClickException(" ".join(str(exc).split())) from None
    live = _live_outcome(live_groups)
    result, with_latency = compare(sim, live), compare(modelled, live)
    _print(result, with_latency, site.policy.name)
    click.echo(f"Slurm start latency {latency:.1f} s on average (cycle's release to start); the modelled "
               f"simulator decides every {interval:g} s and starts each job that much later")
    if delay is not None:
        click.echo(f"victims back in the queue {delay:.1f} s after the grace signal on average (their hook exits "
                   "on it); the modelled simulator requeues them then, not at the grace deadline")
    if json_path is not None:
        document = _document(result, with_latency, site.policy.name, seed, time_scale, latency)
        document["requeue_delay_s"] = delay
        Path(json_path).write_text(json.dumps(document, indent=1))


def _site_for(site: SiteConfig, policy: str | None) -> SiteConfig:
    """The site with the policy to compare, and no profiling: estimates are exact, the drivers are compared."""
    name = policy or site.policy.name
    params = site.policy.params if policy is None or policy == site.policy.name else {}
    make_policy(name, params, source="--policy")
    return site.model_copy(update={
        "policy": site.policy.model_copy(update={"name": name, "params": params}),
        "profile": site.profile.model_copy(update={"enabled": False})})


@contextlib.contextmanager
def _daemon_lock(site: SiteConfig) -> Iterator[None]:
    try:
        handle = acquire_lock(Path(site.daemon.state_dir))
    except AlreadyRunning:
        raise click.ClickException(f"slurmxd is running on this site (state dir {site.daemon.state_dir}); stop it "
                                   "first: the live run is slurmxd's cycle itself") from None
    except OSError as exc:
        raise click.ClickException(f"cannot take slurmxd's lock in {site.daemon.state_dir} ({exc.strerror}): "
                                   "run as the daemon's user") from None
    try:
        yield
    finally:
        handle.close()


def _check_no_other_groups(adapter: SlurmAdapter) -> None:
    """The live run's cycle acts on every managed group in the queue, from a store of its own that knows none of
    their open intents: it runs only on a queue without other slurmx groups (a test cluster, a quiet moment)."""
    others = sorted({tags["g"] for j in adapter.jobs() if j.state.is_active
                     and (tags := readable_fields(j.comment)).get("g")})
    if others:
        raise click.ClickException(f"{len(others)} slurmx group(s) are in the queue ({', '.join(others[:3])}"
                                   f"{', ...' if len(others) > 3 else ''}); the live run decides for every managed "
                                   "group, so run it when no other is queued")


class _Progress:
    """One line per change (rewritten in place on a terminal)."""

    def __init__(self) -> None:
        self.last = -1
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if done != self.last:
            self.last = done
            click.echo(f"{chr(13) if self.tty else ''}live: {done}/{total} groups finished", nl=not self.tty,
                       err=True)


def _live_outcome(groups: list[LiveGroup]) -> Outcome:
    t0 = min(g.submit for g in groups if g.submit is not None)
    return Outcome({g.job_id: ((g.submit or t0) - t0, (g.start if g.start is not None else g.end or t0) - t0,
                               (g.end or t0) - t0, g.kind or "") for g in groups})


def requeue_delay(groups: list[LiveGroup]) -> float | None:
    """The victims' mean time from the grace signal to squeue showing them requeued (to the cycle's second)."""
    gaps = [r - p for g in groups for p, r in zip(g.preempted, g.requeued, strict=False) if r >= p]
    return sum(gaps) / len(gaps) if gaps else None


def start_latency(groups: list[LiveGroup]) -> float | None:
    """Slurm's mean time from the cycle's release of a variant to its start (whole seconds, as Slurm times)."""
    gaps = [g.start - g.decided for g in groups if g.start is not None and g.decided is not None]
    return sum(gaps) / len(gaps) if gaps else None


def _print(plain: Comparison, modelled: Comparison, policy: str) -> None:
    click.echo(f"{'policy ' + policy:<20} {'simulator':>10} {'live/sim':>8} {'+latency':>10} {'live/sim':>8} "
               f"{'live':>10}")
    for (name, sim, live, diff), (_, model, _, model_diff) in zip(plain.rows(), modelled.rows(), strict=True):
        click.echo(f"{name:<20} {sim:>10.1f} {_pct(sim, diff):>8} {model:>10.1f} {_pct(model, model_diff):>8} "
                   f"{live:>10.1f}")
    for label, result in (("simulator", plain), ("+latency", modelled)):
        first = result.first_order_difference()
        order = "identical" if first is None else f"differs from position {first + 1}"
        click.echo(f"{label:<10} start order {order}; same variant kind for {result.same_kinds() * 100:.0f}% of "
                   "groups")


def _pct(base: float, diff: float) -> str:
    return f"{diff:+.1f}%" if base else "n/a"


def _document(plain: Comparison, modelled: Comparison, policy: str, seed: int, time_scale: float,
              latency: float) -> dict[str, Any]:
    return {"policy": policy, "seed": seed, "time_scale": time_scale, "start_latency_s": latency,
            "rows": [{"metric": n, "simulator": s, "simulator_with_latency": m, "live": v, "live_vs_sim_pct": d,
                      "live_vs_modelled_pct": md}
                     for (n, s, v, d), (_, m, _, md) in zip(plain.rows(), modelled.rows(), strict=True)],
            "same_start_order": plain.same_start_order(), "same_kinds": plain.same_kinds(),
            "same_start_order_modelled": modelled.same_start_order(), "same_kinds_modelled": modelled.same_kinds(),
            "simulator": plain.sim.groups, "simulator_with_latency": modelled.sim.groups, "live": plain.live.groups}
