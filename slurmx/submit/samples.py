"""The profiling samples of a managed group, queued held by the user's own `slurmx submit`.

AlloX-style profiling runs a few steps of each variant before the policy decides. Those sample runs are the user's
code, so the user submits them, not slurmxd: this module plans them with the very function the daemon's profiler
plans with (`slurmx.profile.sampling.sample_requests`), and queues each one held (`--hold`) under the profiling
QOS. slurmxd releases the ones its profiler wants, reads their timings and cancels the rest; it needs no root.
`site-config/job_submit.lua` keeps the held samples the daemon's: their owner may not release them, and no other
job may use the profiling QOS. A site without that QOS gets the samples under the group's own QOS.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from slurmx.core.config import SiteConfig
from slurmx.core.resources import Resources, parse_gres
from slurmx.core.validation import validate_model
from slurmx.profile.sampling import (
    GroupToProfile,
    SampleRequest,
    SamplingParams,
    VariantToProfile,
    profiling_on,
    sample_requests,
    search_request,
)
from slurmx.slurm import SlurmAdapter, SlurmError
from slurmx.submit.render import RenderedVariant
from slurmx.submit.spec import JobSpec

__all__ = ["QueuedSamples", "plan_samples", "queue_samples"]


@dataclass(frozen=True, slots=True)
class QueuedSamples:
    job_ids: tuple[int, ...]
    note: str  # empty, or one line on what could not be queued (the group is submitted all the same)


def plan_samples(spec: JobSpec, site: SiteConfig, group_id: str,
                 rendered: Sequence[RenderedVariant]) -> list[tuple[SampleRequest, str]]:
    """(request, script) of every sample slurmxd's profiler would ask for; none when the site's policy reads no
    estimates, the spec declares no `work` in steps, or the group waits on another (its input may not exist
    yet: slurmxd goes by history or the declared estimates)."""
    if not profiling_on(site) or spec.work is None or spec.dependency:
        return []
    params = validate_model(SamplingParams, site.profile.sampling, "site profile.sampling")
    steps = round(spec.work)
    variants = {v.kind: VariantToProfile(v.kind, _request(spec, site, v.kind), steps,
                                         time_limit_s=_slurm_time_limit(spec, site, v.kind)) for v in rendered}
    group = GroupToProfile(group_id, "", spec.name, "", tuple(variants.values()))
    planned = [(request, v.sample_script) for v in rendered if v.sample_script is not None
               for request in sample_requests(group, variants[v.kind], params)]
    planned += [(search_request(group, variants[v.kind], params), v.search_script) for v in rendered
                if v.search_script is not None]
    return planned


def _request(spec: JobSpec, site: SiteConfig, kind: str) -> Resources:
    """The variant's CPUs, memory and GRES as its `#SBATCH` lines ask for them."""
    cfg = site.kind(kind)
    return Resources(spec.variant_field(kind, "cpus") or cfg.cpus, spec.variant_field(kind, "mem_mb") or cfg.mem_mb,
                     parse_gres(spec.variant_field(kind, "gres") or cfg.gres))


def _slurm_time_limit(spec: JobSpec, site: SiteConfig, kind: str) -> int | None:
    """The variant's time limit as Slurm keeps it (whole minutes, rounded up), which is what slurmxd reads."""
    seconds = spec.variant_field(kind, "time_s") or site.kind(kind).time_s
    return math.ceil(seconds / 60) * 60 if seconds else None


def queue_samples(adapter: SlurmAdapter, samples: Sequence[tuple[SampleRequest, str]]) -> QueuedSamples:
    """sbatch every sample held; a site without the profiling QOS gets them under the group's own QOS. A failure
    leaves the group to history or its declared estimates, never unsubmitted."""
    queued: list[int] = []
    drop_qos = False
    for request, script in samples:
        while True:
            options = [o for o in (*request.sbatch_overrides(), "--hold") if not (drop_qos and o.startswith("--qos="))]
            try:
                queued.append(adapter.submit(script, options))
                break
            except SlurmError as exc:
                if drop_qos or "invalid qos" not in exc.message.lower():
                    return QueuedSamples(tuple(queued), f"profiling samples not queued ({exc.message}); slurmxd "
                                         "uses history or the declared estimates")
                drop_qos = True  # no profiling QOS here (or not for this user): the script's own QOS
    return QueuedSamples(tuple(queued), "")
