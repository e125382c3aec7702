"""slurmxd's profiling stage: sample runs, sacct history and progress turn into each variant's `estimate_s`.

Per cycle, between reconcile and decide (docs/profiler.md, "Wiring into slurmxd"):

1. new pending groups are registered with the profiler: history (sacct at start-up, completed runs seen since)
   answers where it can, and samples are planned for the rest, within the profiling QOS cap;
2. the samples the user's `slurmx submit` queued held beside the variants are released, after a check that each
   is the planned sample of its variant (the daemon never submits or runs a user's script itself); queued samples
   nothing will need are cancelled;
3. finished samples are read (the timing each appended to its comment, else the spool, else Slurm's times),
   samples far slower than their siblings are cut, running variants' progress files update their estimates;
4. the policy's view gets the estimates, and a pending group stays hidden from the policy until its profiling is
   done (AlloX's "a job becomes ready when profiling is done").

The sample lifecycle (release, following, cutting, crash-safe replay) is
`profiling_samples.SampleLifecycle`; this module registers groups, feeds progress and builds the policy's view.

Everything a user controls is read bounded (progress files: `readings.progress_report`; estimates: at most the
variant's time limit), and every step works group by group under `profiling_isolation.Isolation`: a group whose
data makes a step raise is set aside from profiling, said once in the audit, and the stage goes on for the others.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from slurmx.core.arrays import folder_group, job_text
from slurmx.core.config import SiteConfig
from slurmx.core.model import ClusterView, Group, Variant, VariantState
from slurmx.core.spool import group_spool
from slurmx.core.tag import readable_fields, whole_number
from slurmx.core.validation import validate_model
from slurmx.daemon.observe import Observation
from slurmx.daemon.profiling_isolation import Isolation
from slurmx.daemon.profiling_samples import WAITING, AuditRow, SampleLifecycle, read_progress
from slurmx.daemon.profiling_search import SensitivitySearches
from slurmx.daemon.store import EstimateRow, Store
from slurmx.daemon.trust import TrustedGroup
from slurmx.profile.estimator import Estimate
from slurmx.profile.history import History, HistoryParams, HistoryRun, JobKey
from slurmx.profile.profiler import Profiler
from slurmx.profile.readings import progress_report
from slurmx.profile.sampling import (
    SEARCH_INDEX,
    GroupToProfile,
    SampleRequest,
    SamplingParams,
    VariantToProfile,
    search_kind,
)
from slurmx.slurm import SlurmAdapter, SlurmError
from slurmx.slurm.records import SlurmJob

__all__ = ["AuditRow", "ProfilingStage"]

log = logging.getLogger("slurmxd")

AUDIT_CHANGE = 0.05  # a progress estimate is audited again once it moved by more than this fraction
# A waiting group with work to sample (`n=`) whose newest job is younger than this is registered a cycle later: its
# submission may still be queueing variants (sbatch runs one by one), and a group seen by half gets the wrong plan.
SETTLE_S = 5.0
FORGET_HISTORY_EVERY = 100  # cycles between drops of history runs past their age


def _int_tag(tags: Mapping[str, str], key: str) -> int | None:
    text = tags.get(key, "")
    value = whole_number(text)
    return value if value is not None and value > 0 else None


class ProfilingStage(SampleLifecycle):
    """The profiler driven against Slurm: one per daemon; `cycle(obs, now, n)` -> (view for the policy, audit)."""

    def __init__(self, site: SiteConfig, adapter: SlurmAdapter, store: Store) -> None:
        self.site = site
        self.adapter = adapter
        self.store = store
        self.params = validate_model(SamplingParams, site.profile.sampling, "site profile.sampling")
        self.profiler = Profiler(History(HistoryParams(max_age_s=float(site.profile.history_max_age_s))),
                                 self.params)
        # Groups set aside from profiling (their data raised): never retried while queued, never in the way.
        self.isolation = Isolation(self._audit, self._forget_group)
        self.searches = SensitivitySearches(search_kind(site), self.params, adapter, store, audit=self._audit,
                                            isolation=self.isolation)
        self.seeded = False
        self._seen_runs: set[int] = set()
        self._variants: dict[tuple[str, str], SlurmJob] = {}  # (group, kind) -> the variant its samples match
        self.sample_jobs = {}
        self._users: dict[str, str] = {}
        self._uids: dict[str, int] = {}
        self._refused: dict[str, str] = {}  # group -> why its progress file was refused (audited when it changes)
        self._audited: dict[tuple[str, str], tuple[str, float]] = {}
        self._ready: set[str] = set()
        self._settling: set[str] = set()  # waiting groups too young to register this cycle
        self._requests: dict[str, SampleRequest] = {}  # sample id -> what the profiler asked for
        self._qos: dict[str, str] = {}  # group -> its own QOS (the fallback when the profiling QOS is missing)
        self.qos_missing = False
        self._rows: list[AuditRow] = []
        self._cycle = 0
        self._now = 0.0

    # ------------------------------------------------------------------------------------------ the cycle

    def cycle(self, obs: Observation, now: float, cycle: int) -> tuple[Observation, list[AuditRow]]:
        self._rows, self._cycle, self._now = [], cycle, now
        if not self.seeded:
            self.seed_history(now)
            self.check_qos()
        self.index_samples(obs)
        self._learn_runs(obs)
        self._register(obs, now)
        self._follow_samples(obs, now)
        self._replay_and_submit(obs, self.store.samples(), self.profiler.plan([], now), now)  # next samples
        self.searches.cycle(obs, now, self._users, self._qos_of, self.queued_samples)
        self.cancel_unneeded(obs, now)
        self._feed_progress(obs, now)
        self._record(obs.view, now)
        self._forget_gone(obs.view)
        self._seen_runs.intersection_update(obs.jobs)  # a run squeue forgot cannot come back through squeue
        if cycle % FORGET_HISTORY_EVERY == 0:
            self.profiler.history.forget_stale(now)
        return replace(obs, view=self._view(obs.view)), self._rows

    def seed_history(self, now: float) -> int:
        """Completed runs from sacct (once per daemon life); a failing sacct leaves history to what runs later."""
        self.seeded = True
        try:
            records = self.adapter.accounting(since=self.site.profile.history_since)
        except SlurmError as exc:
            log.warning("profiling: no history from sacct (%s); estimates start from samples", exc,
                        extra={"event": "profile"})
            return 0
        self._seen_runs.update(r.job_id for r in records)
        added = self.profiler.history.add_records(records)
        log.info("profiling: %d completed run(s) from sacct seed the history", added, extra={"event": "profile"})
        return added

    # ------------------------------------------------------------------------------------------ history

    def _learn_runs(self, obs: Observation) -> None:
        """Completed variants squeue still shows become history, so a job key run again needs no samples."""
        for tg in obs.groups.values():
            with self.isolation.group(tg.group_id, "learning history"):
                for kind, job in tg.jobs.items():
                    if job.state is not VariantState.COMPLETED or job.job_id in self._seen_runs:
                        continue
                    self._seen_runs.add(job.job_id)
                    if job.start_time and job.end_time and job.end_time > job.start_time:
                        tags = readable_fields(job.comment)
                        name = job.name.rpartition("@")[0] or job.name
                        run = HistoryRun(JobKey(tg.user, name, tags.get("h", ""), kind), float(job.end_time),
                                         float(job.end_time - job.start_time), None, _int_tag(tags, "n"))
                        self.profiler.history.add([run])

    # ------------------------------------------------------------------------------------------ registration

    def _register(self, obs: Observation, now: float) -> None:
        """Groups the profiler has not seen: pending ones may be sampled; running ones only follow progress."""
        new: list[GroupToProfile] = []
        self._settling = set()
        for group in obs.view.groups.values():
            if self.profiler.known(group.group_id):
                continue
            tg = obs.groups.get(group.group_id)
            if tg is None or group.group_id in self.isolation:
                continue
            newest = max((job.submit_time or 0 for job in tg.jobs.values()), default=0)
            sampled = any(_int_tag(readable_fields(job.comment), "n") for job in tg.jobs.values())
            if sampled and group.state in WAITING and now - newest < SETTLE_S:
                self._settling.add(group.group_id)  # `slurmx submit` may still be queueing its variants
                continue
            with self.isolation.group(group.group_id, "registering"):
                new.append(self._to_profile(obs, group, tg))
        if not new:
            return
        self._replay_and_submit(obs, self.store.samples(), self.profiler.plan(new, now), now)
        for g in new:
            with self.isolation.group(g.group_id, "registering"):
                for kind, how in self.profiler.sources(g.group_id).items():
                    estimate = self.profiler.estimates(g.group_id).get(kind)
                    if how == "history" and estimate is not None:
                        self._audit(g.group_id, "profile", f"{kind}: history replaces sampling ({estimate.detail})")

    def _to_profile(self, obs: Observation, group: Group, tg: TrustedGroup) -> GroupToProfile:
        """What the profiler needs of a new group; a variant is sampled only if its user queued its samples."""
        waiting = group.state in WAITING
        self._users[group.group_id] = tg.user
        self._uids[group.group_id] = tg.user_id
        self._qos[group.group_id] = next(iter(tg.jobs.values())).qos
        variants = []
        for variant in group.variants:
            job = tg.jobs.get(variant.kind)
            tags = readable_fields(job.comment) if job is not None else {}
            steps = _int_tag(tags, "n")
            if job is not None:
                self._variants[(group.group_id, variant.kind)] = job
            if waiting and steps and not self._sampled_here(obs, group.group_id, variant.kind):
                self._audit(group.group_id, "profile", f"{variant.kind}: no samples queued with the group: not "
                            "sampled (history or the declared estimate)")
                steps = None
            variants.append(VariantToProfile(variant.kind, variant.request, steps if waiting else None,
                                             tg.estimates.get(variant.kind),
                                             job.time_limit_s if job is not None else None,
                                             script_hash=tags.get("h", "")))
        return GroupToProfile(group.group_id, tg.user, group.name, "", tuple(variants), group.submit_time)

    def _sampled_here(self, obs: Observation, group_id: str, kind: str) -> bool:
        """Whether the variant has samples: queued in squeue (held, or released by an earlier life of this daemon)
        or already in the store."""
        return bool(self.queued_samples(group_id, kind, held=False)) or \
            any(row.kind == kind and not sid.endswith(f".{SEARCH_INDEX}")
                for sid, row in self.store.samples(group_id).items())

    def _feed_progress(self, obs: Observation, now: float) -> None:
        """A running variant's progress file (or, without one, its elapsed time) updates its estimate."""
        for group in obs.view.running_groups():
            if self.profiler.known(group.group_id):
                with self.isolation.group(group.group_id, "reading progress"):
                    self._progress(group, now)

    def _progress(self, group: Group, now: float) -> None:
        """One running group's progress: its file's report, or one audit line on why the file is refused (said
        again only when the reason changes); a refused file counts as none, so the estimate follows elapsed time."""
        variant = group.running_variant()
        if variant is None or variant.job_id is None or variant.start_time is None:
            return
        name = f"progress-{job_text(variant.job_id)}.json"  # an array task's: `A_i` (core/arrays.py)
        folder = group_spool(self.site, folder_group(group.group_id))  # an index group's files are its array's
        data = read_progress(Path(folder) / name, self._uids.get(group.group_id))
        elapsed = max(0.0, now - variant.start_time)
        report = progress_report(data, elapsed)
        if isinstance(report, str):
            if self._refused.get(group.group_id) != report:
                self._refused[group.group_id] = report
                self._audit(group.group_id, "error", f"{variant.kind}: {name} refused ({report}); the estimate "
                            "follows elapsed time only")
            report = progress_report(None, elapsed)
        assert not isinstance(report, str)
        self.profiler.on_progress(group.group_id, variant.kind, report)

    # ------------------------------------------------------------------------------------------ the view

    def _view(self, view: ClusterView) -> ClusterView:
        """Estimates into the variants; pending groups still profiling left out of the policy's sight."""
        groups: dict[str, Group] = {}
        changed = False
        for gid, group in view.groups.items():
            shown: Group | None = group
            with self.isolation.group(gid, "building the view"):
                shown = self._shown(group)
            if shown is not None:
                groups[gid] = shown
            changed = changed or shown is not group
        if not changed:
            return view
        return ClusterView(now=view.now, nodes=view.nodes, partitions=view.partitions, groups=groups,
                           kinds=view.kinds)

    def _shown(self, group: Group) -> Group | None:
        """The group as the policy sees it (its estimates in), or None while it is hidden (settling, profiling)."""
        gid = group.group_id
        if gid in self._settling:
            return None  # not registered yet: neither the profiler nor the policy sees half a group
        if not self.profiler.known(gid):
            return group
        if (group.state in WAITING and not self.profiler.ready(gid)) or self.searches.hidden(group):
            return None
        estimates, rates = self.profiler.estimates(gid), self.searches.rates(gid)
        variants = tuple(self._profiled(v, estimates, rates) for v in group.variants)
        if any(a is not b for a, b in zip(variants, group.variants, strict=True)):
            return replace(group, variants=variants)
        return group

    def _profiled(self, variant: Variant, estimates: Mapping[str, Estimate],
                  rates: tuple[tuple[int, float], ...]) -> Variant:
        """The variant with its estimate and, on Synergy's kind, its measured CPU sensitivity."""
        estimate = estimates.get(variant.kind)
        seconds = estimate.seconds if estimate is not None else variant.estimate_s
        cpu_rates = rates if rates and variant.kind == self.searches.kind else variant.cpu_rates
        if seconds == variant.estimate_s and cpu_rates == variant.cpu_rates:
            return variant
        return replace(variant, estimate_s=seconds, cpu_rates=cpu_rates)

    def _record(self, view: ClusterView, now: float) -> None:
        """Changed estimates into the store and the audit log; groups done profiling announced; gone ones forgotten."""
        rows: list[EstimateRow] = []
        for gid in list(self._users):
            if gid in view.groups:
                with self.isolation.group(gid, "recording estimates"):
                    rows.extend(self._estimate_rows(gid, now))
        if rows:
            self.store.put_estimates(rows)

    def _estimate_rows(self, gid: str, now: float) -> list[EstimateRow]:
        """The group's changed estimates (audited), and its announcement when its profiling is done."""
        if gid not in self._ready and self.profiler.ready(gid):
            self._ready.add(gid)
            spent, fraction = self.profiler.overhead(gid)
            if spent > 0:
                self._audit(gid, "profile", f"profiling done: samples ran {spent:.1f}s, {fraction:.2%} of the "
                            "fastest estimate; ready for the policy")
        rows = []
        for kind, estimate in self.profiler.estimates(gid).items():
            if self._worth_recording(gid, kind, estimate):
                rows.append(EstimateRow(gid, kind, estimate.seconds, estimate.source.value, estimate.uncertainty,
                                        estimate.lower_bound, estimate.detail, now))
                self._audit(gid, "estimate", describe(kind, estimate))
        return rows

    def _forget_group(self, gid: str) -> None:
        """Everything profiling holds of one group set aside (`isolation`): it is as if profiling were off for it.
        Its store rows go too, so its open samples are not followed again (the audit log keeps its story)."""
        self.profiler.forget([gid])
        self.searches.forget({gid})
        self.store.forget_profiles([gid])
        for memo in (self._users, self._uids, self._qos, self._refused):
            memo.pop(gid, None)
        self._ready.discard(gid)
        self._settling.discard(gid)
        self._audited = {k: v for k, v in self._audited.items() if k[0] != gid}
        self._variants = {k: v for k, v in self._variants.items() if k[0] != gid}
        self._requests = {k: v for k, v in self._requests.items() if k.rsplit(".", 2)[0] != gid}

    def _forget_gone(self, view: ClusterView) -> None:
        """Groups that left the snapshot (finished, cancelled, forgotten by squeue) leave the profiler too."""
        self.isolation.keep_only(view.groups.keys())
        gone = [gid for gid in self._users if gid not in view.groups]
        if not gone:
            return
        self.profiler.forget(gone)
        self.searches.forget(set(gone))
        self.store.forget_profiles(gone)  # the audit log keeps their story for `slurmx explain`
        for gid in gone:
            self._users.pop(gid, None)
            self._uids.pop(gid, None)
            self._refused.pop(gid, None)
            self._ready.discard(gid)
        self._audited = {k: v for k, v in self._audited.items() if k[0] in self._users}
        self._variants = {k: v for k, v in self._variants.items() if k[0] in self._users}
        self._qos = {k: v for k, v in self._qos.items() if k in self._users}
        self._requests = {k: v for k, v in self._requests.items() if k.rsplit(".", 2)[0] in self._users}

    def _worth_recording(self, gid: str, kind: str, estimate: Estimate) -> bool:
        last = self._audited.get((gid, kind))
        source = estimate.source.value + ("+" if estimate.lower_bound else "")
        if last is not None and last[0] == source and \
                abs(estimate.seconds - last[1]) <= AUDIT_CHANGE * max(last[1], 1e-9):
            return False
        self._audited[(gid, kind)] = (source, estimate.seconds)
        return True


def describe(kind: str, estimate: Estimate) -> str:
    """One line for `slurmx explain`: `cpu: 1234s ±11% from sample (detail)`."""
    bound = "at least " if estimate.lower_bound else ""
    spread = "" if math.isnan(estimate.uncertainty) else f" ±{estimate.uncertainty:.0%}"
    return f"{kind}: {bound}{estimate.seconds:.0f}s{spread} from {estimate.source.value} ({estimate.detail})"
