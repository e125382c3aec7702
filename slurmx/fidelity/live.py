"""Run a fidelity workload on the live cluster: slurmxd's cycle in this process, the groups submitted on time.

The groups are submitted as `slurmx submit` submits them (managed: held variants, the group tag), each variant's
payload a `sleep` of its duration; the cycle runs every `interval` seconds until every group has finished. The
times are Slurm's own (submit, start and end of the variant that ran), read from squeue while it still lists the
jobs. The daemon's state lives in a folder of its own, so this never touches a running slurmxd's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slurmx.core.config import SiteConfig
from slurmx.core.model import VariantState
from slurmx.cycle import DecisionLog
from slurmx.cycle.log import APPLIED
from slurmx.daemon.loop import Daemon
from slurmx.daemon.store import Store
from slurmx.policies import make_policy
from slurmx.sim.jobs import SimJob
from slurmx.slurm import SlurmAdapter
from slurmx.slurm.records import SlurmJob
from slurmx.submit.spec import parse_spec
from slurmx.submit.submitter import submit_group

__all__ = ["LiveGroup", "run_live"]

_RAN = (VariantState.RUNNING, VariantState.COMPLETING, VariantState.COMPLETED)


@dataclass
class LiveGroup:
    """One workload group on Slurm: its jobs, and what Slurm said of them."""

    job_id: str  # the workload's id
    group_id: str = ""
    jobs: dict[int, str] = field(default_factory=dict)  # Slurm job id -> kind
    submit: float | None = None
    start: float | None = None  # the first start of any variant
    end: float | None = None
    kind: str | None = None
    restarts: int = 0
    decided: float | None = None  # when the cycle first applied a Start of it (epoch s): Slurm's start latency
    preempted: list[float] = field(default_factory=list)  # when the cycle signalled it (epoch s)
    requeued: list[float] = field(default_factory=list)  # when squeue first showed it back in the queue


def run_live(site: SiteConfig, adapter: SlurmAdapter, jobs: Sequence[SimJob], state_dir: Path, *,
             interval: float = 1.0, timeout: float = 3600.0,
             progress: Callable[[int, int], None] | None = None,
             decisions: DecisionLog | None = None) -> list[LiveGroup]:
    """Submit `jobs` at their (relative) submit times, decide every `interval` s, until all have finished;
    `decisions` receives the cycle's decision log (group ids are Slurm's: `LiveGroup.group_id`)."""
    decisions = decisions if decisions is not None else DecisionLog()
    daemon = Daemon(site, adapter, Store(state_dir / "slurmxd.sqlite"),
                    make_policy(site.policy.name, site.policy.params), decisions=decisions)
    order = sorted(jobs, key=lambda j: j.submit_time)
    groups = {j.job_id: LiveGroup(j.job_id) for j in order}
    t0 = time.time()
    seen = 0
    try:
        while True:
            now = time.time() - t0
            while order and order[0].submit_time <= now:
                _submit(site, adapter, order.pop(0), groups)
            daemon.cycle()
            _observe(adapter, groups, time.time())
            seen = _decided(decisions, groups, seen)
            done = sum(g.end is not None for g in groups.values())
            if progress is not None:
                progress(done, len(groups))
            if not order and done == len(groups):
                return list(groups.values())
            if now > timeout:
                raise TimeoutError(f"fidelity: {len(groups) - done} groups still unfinished after {timeout:g} s")
            time.sleep(max(0.0, interval - (time.time() - t0 - now)))
    finally:
        leftover = [i for g in groups.values() if g.end is None for i in g.jobs]
        if leftover:
            adapter.cancel(leftover)


def _submit(site: SiteConfig, adapter: SlurmAdapter, job: SimJob, groups: dict[str, LiveGroup]) -> None:
    overrides = {kind: {"command": f"sleep {round(v.duration_s)}", "cpus": v.request.cpus,
                        "mem": f"{v.request.mem_mb}M"} for kind, v in job.variants.items()}
    spec = parse_spec({"name": job.job_id, "command": "true", "variants": list(job.variants),
                       "class": job.job_class.value, "estimates": {k: round(v.estimate_s or v.duration_s)
                                                                     for k, v in job.variants.items()},
                       "overrides": overrides}, source=f"fidelity group {job.job_id}")
    submitted = submit_group(spec, site, adapter, mode="managed")
    group = groups[job.job_id]
    group.group_id = submitted.group_id
    group.jobs = {job_id: kind for kind, job_id in submitted.variants}


def _decided(decisions: DecisionLog, groups: dict[str, LiveGroup], seen: int) -> int:
    """Note when each group was first released, from the records after the first `seen`; the new count."""
    by_group = {g.group_id: g for g in groups.values()}
    for record in decisions.records[seen:]:
        group = by_group.get(record.group_id)
        if group is None or record.outcome.status != APPLIED:
            continue
        if group.decided is None and record.action == "Start":
            group.decided = record.t
        elif record.action == "Preempt":
            group.preempted.append(record.t)
    return len(decisions.records)


def _observe(adapter: SlurmAdapter, groups: dict[str, LiveGroup], now: float) -> None:
    ids = [i for g in groups.values() if g.end is None for i in g.jobs]
    if not ids:
        return
    seen = {j.job_id: j for j in adapter.jobs(ids)}
    for group in groups.values():
        if group.end is None:
            _update(group, [seen[i] for i in group.jobs if i in seen], now)


def _update(group: LiveGroup, jobs: list[SlurmJob], now: float) -> None:
    for job in jobs:
        if job.submit_time and (group.submit is None or job.submit_time < group.submit):
            group.submit = float(job.submit_time)
        if job.start_time and job.state in _RAN:  # a pending job's start_time is only Slurm's forecast
            first = float(job.start_time)
            group.start = first if group.start is None else min(group.start, first)
        if job.restart_count > group.restarts:  # back in the queue since the last look
            group.requeued.append(now)
            group.restarts = job.restart_count
        if job.state is VariantState.COMPLETED and job.end_time:
            group.end, group.kind = float(job.end_time), group.jobs[job.job_id]
        elif job.state.is_finished and job.state is not VariantState.CANCELLED and job.end_time:
            group.end, group.kind = float(job.end_time), group.jobs[job.job_id]  # failed: ended all the same
