"""Synergy's CPU/memory sensitivity search in slurmxd: the one search sample per group, released and read.

`slurmx submit` queues, held beside the variants, one sensitivity sample of Synergy's kind (`sampling.
search_request`): a single allocation in which `slurmx.hooks.search` runs the payload at each point of the CPU
search and appends the measured steps per second to its comment (`w=cpus:rate;...,k=knee`). This stage checks
that queued job against the plan and the group's variant, releases it, reads its points when it ends, keeps them in
the store (a restarted daemon does not search again) and hands them to the policy through the view
(`Variant.cpu_rates`), where `synergy` turns them into the group's best-case demand. A group whose search is under
way is hidden from the policy, as one still being sampled is; one without a search (none queued, a failed or
forged one) is treated as insensitive, as Synergy treats a job it has no profile for. The points are the user's
job's claim: a rate beyond `readings.MAX_RATE` steps/s makes the search no result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from slurmx.core.model import Group, VariantState
from slurmx.daemon.observe import Observation
from slurmx.daemon.profiling_isolation import Isolation
from slurmx.daemon.profiling_samples import VISIBLE_AFTER_S, WAITING, sample_mismatch
from slurmx.daemon.store import SampleRow, Store
from slurmx.hooks.search import parse_points
from slurmx.profile.readings import MAX_RATE
from slurmx.profile.sampling import (
    SEARCH_INDEX,
    GroupToProfile,
    SampleRequest,
    SamplingParams,
    VariantToProfile,
    sample_fields,
    search_request,
)
from slurmx.slurm import SlurmAdapter, SlurmError
from slurmx.slurm.errors import SlurmUnavailable
from slurmx.slurm.records import SlurmJob

__all__ = ["SensitivitySearches"]

Audit = Callable[[str, str, str], None]  # (group, event, detail)


class Queued(Protocol):
    """`SampleLifecycle.queued_samples`: a group's queued samples from the stage's per-cycle index."""

    def __call__(self, group_id: str, kind: str, *, held: bool = True, search: bool = False) -> list[SlurmJob]: ...


class SensitivitySearches:
    """One per profiling stage; `kind` None (a policy that reads no sensitivity) makes every call a no-op."""

    def __init__(self, kind: str | None, params: SamplingParams, adapter: SlurmAdapter, store: Store, *,
                 audit: Audit, isolation: Isolation) -> None:
        self.kind = kind
        self.params = params
        self.adapter = adapter
        self.store = store
        self.audit = audit
        self.isolation = isolation
        self._points: dict[str, tuple[tuple[int, float], ...]] = {}
        self._settled: set[str] = set()  # searched, or never to be: the policy may see the group

    def cycle(self, obs: Observation, now: float, users: dict[str, str], qos: Callable[[SampleRequest], str],
              queued: Queued) -> None:
        """Release, follow and read the search samples of registered groups (`users`: group -> its user;
        `queued`: the profiling stage's look-up of a group's queued samples)."""
        if self.kind is None:
            return
        rows = {sid: row for sid, row in self.store.samples().items() if sid.endswith(f".{SEARCH_INDEX}")}
        for gid, group in obs.view.groups.items():
            if gid in self._settled or gid not in users:
                continue
            variant = group.variant(self.kind)
            if variant is None:
                self._settled.add(gid)
                continue
            sample_id = f"{gid}.{self.kind}.{SEARCH_INDEX}"
            row = rows.get(sample_id)
            with self.isolation.group(gid, "sensitivity search"):
                try:
                    if row is None:
                        self._start(now, group, users[gid], qos, queued)
                    else:
                        self._follow(obs, now, row)
                except SlurmUnavailable:
                    raise
                except SlurmError as exc:
                    self.audit(gid, "error", f"sensitivity search: {' '.join(str(exc).split())}; retried next "
                               "cycle")

    def hidden(self, group: Group) -> bool:
        """Whether the group waits for its search (the policy does not see it yet)."""
        return self.kind is not None and group.group_id not in self._settled and group.state in WAITING

    def rates(self, group_id: str) -> tuple[tuple[int, float], ...]:
        return self._points.get(group_id, ())

    def forget(self, group_ids: set[str]) -> None:
        self._settled -= group_ids
        for gid in group_ids:
            self._points.pop(gid, None)

    # ------------------------------------------------------------------------------------------ stages

    def _start(self, now: float, group: Group, user: str, qos: Callable[[SampleRequest], str],
               queued: Queued) -> None:
        assert self.kind is not None
        variant = group.variant(self.kind)
        assert variant is not None
        if group.state not in WAITING:
            self._settled.add(group.group_id)  # already running: too late to search
            return
        plan = GroupToProfile(group.group_id, user, group.name, "",
                              (VariantToProfile(self.kind, variant.request, None),))
        request = search_request(plan, plan.variants[0], self.params)
        job = next((j for j in queued(group.group_id, self.kind, search=True) if j.comment == request.comment), None)
        if job is None:
            self._give_up(group.group_id, None, now, "no sensitivity sample queued with the group (submitted by "
                          "an older slurmx, or by hand): treated as insensitive")
            return
        problem = sample_mismatch(job, request, variant.request, variant.partition, qos(request))
        if problem:
            self.adapter.cancel([job.job_id])
            self._give_up(group.group_id, job.job_id, now, f"cancelled queued sensitivity sample, job "
                          f"{job.job_id}: {problem}; treated as insensitive")
            return
        self.store.put_sample(SampleRow(request.sample_id, group.group_id, self.kind, request.steps, job.job_id,
                                        "submitted", now), now)
        self.adapter.release([job.job_id])
        self.audit(group.group_id, "profile", f"released the sensitivity sample of {self.kind} (CPU search from "
                   f"{request.search_cpus} CPUs, {request.steps} steps a point), job {job.job_id}")

    def _follow(self, obs: Observation, now: float, row: SampleRow) -> None:
        if row.state == "done":
            points = _points(row.points)
            if points is not None:
                self._points[row.group_id] = tuple(sorted(points.items()))
            self._settled.add(row.group_id)
            return
        if row.state != "submitted" or row.job_id is None:
            self._settled.add(row.group_id)
            return
        job = obs.jobs.get(row.job_id)
        if job is None and now - row.created < VISIBLE_AFTER_S:
            return
        if job is not None and job.state is VariantState.HELD:
            if row.created < now:
                self.adapter.release([job.job_id])  # the release's answer was lost
            return
        if job is not None and job.state.is_active:
            return
        comment = job.comment if job is not None else self._accounted_comment(row.job_id)
        fields = sample_fields(comment) or {}
        points = _points(fields.get("w", ""))
        if points is None:
            state = job.state_text if job is not None else "gone from squeue"
            self._give_up(row.group_id, row.job_id, now, f"sensitivity sample job {row.job_id} ended {state} "
                          "without a search result: treated as insensitive")
            return
        text = ";".join(f"{c}:{w:.4g}" for c, w in sorted(points.items(), reverse=True))
        self.store.put_sample(replace(row, state="done", points=text), now)
        self._points[row.group_id] = tuple(sorted(points.items()))
        self._settled.add(row.group_id)
        self.audit(row.group_id, "profile", f"sensitivity of {row.kind} (steps/s by CPUs): {text}; knee "
                   f"{fields.get('k', '?')} CPUs")

    def _accounted_comment(self, job_id: int) -> str:
        try:
            records = self.adapter.accounting(job_ids=[job_id], since="now-7days")
        except SlurmError:
            return ""
        return next((r.comment for r in records if r.state is VariantState.COMPLETED), "")

    def _give_up(self, group_id: str, job_id: int | None, now: float, why: str) -> None:
        if self.kind is not None:
            self.store.put_sample(SampleRow(f"{group_id}.{self.kind}.{SEARCH_INDEX}", group_id, self.kind, 0, job_id,
                                            "failed", now), now)
        self._settled.add(group_id)
        self.audit(group_id, "profile", why)



def _points(text: str) -> dict[int, float] | None:
    """The search's points (`w=`), or None unless each is well formed and no faster than `MAX_RATE` steps/s."""
    points = parse_points(text)
    return points if points is not None and all(w <= MAX_RATE for w in points.values()) else None
