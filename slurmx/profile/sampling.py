"""The sample-run plan: how many steps each sample runs, under which QOS, and what the samples may cost.

Each variant gets two samples (AlloX §4.1) of `short` and `long = ratio·short` steps (C-sim: 1% and 2% of the job;
C-prof's last version: 0 steps, which measures only the start-up cost, and 1.5%; here 1 step). The overhead budget
bounds what samples cost in time relative to the job's run on its fastest variant: a variant's samples cost its speed
times their steps, and a slow variant's samples are cut at `cut_factor` times its fastest sibling's, so with k
variants the per-variant step fraction is budget / (1 + (k - 1)·cut_factor): at most the budget in total, start-up
costs aside (they are measured, and reported in the overhead). A job too short to sample within budget is not
sampled: its declared estimate stands.

Samples run the profile template (`slurmx/templates/profile.sh.j2`, which sets `SLURMX_PROFILE_STEPS`; the hooks'
`progress()` ends the run after that many steps) under a high-priority profiling QOS whose `GrpTRES` cap keeps
samples from starving real jobs; the profiler also respects the cap itself so it never queues samples Slurm would
only hold back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from slurmx.core.config import SiteConfig
from slurmx.core.resources import Resources
from slurmx.policies.base import profiled, sensitivity_kind

__all__ = [
    "SAMPLE_TAG",
    "SEARCH_INDEX",
    "GroupToProfile",
    "SampleRequest",
    "SamplingParams",
    "VariantToProfile",
    "profiling_on",
    "sample_fields",
    "sample_requests",
    "sample_steps",
    "sample_time_limit",
    "search_kind",
    "search_request",
    "within_cap",
]


class SamplingParams(BaseModel):
    """How samples are sized, capped and submitted; the defaults follow the AlloX paper (3% overhead)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    overhead_budget: float = Field(0.03, gt=0, lt=1, description="samples cost at most this fraction of the job")
    long_to_short: float = Field(2.0, gt=1, description="long sample steps / short sample steps (C-sim: 2)")
    zero_step_short: bool = Field(False, description="short sample runs 1 step: ~start-up only (C-prof: 0 steps)")
    min_steps: int = Field(1, ge=1, description="a sample shorter than this is not worth running")
    cut_factor: float = Field(3.0, gt=1, description="cut a sample at this multiple of its fastest sibling's time")
    qos: str = Field("slurmx-profile", min_length=1, description="the high-priority profiling QOS")
    max_samples: int = Field(4, ge=1, description="samples running or queued at once (the QOS cap, mirrored)")
    max_cpus: int = Field(0, ge=0, description="CPUs all samples may hold at once (0: no limit)")
    max_gres: Mapping[str, int] = Field(default_factory=dict, description="GRES all samples may hold at once")
    time_limit_factor: float = Field(3.0, gt=1, description="a sample's time limit / its share of the job's")
    default_time_limit_s: int = Field(600, ge=60, description="a sample's time limit when the job declares none")
    search_steps: int = Field(50, ge=2, description="steps per point of Synergy's CPU search (sensitivity sample)")
    search_cpus: int = Field(0, ge=0, description="CPUs the search starts from (0: the variant's own request)")


@dataclass(frozen=True, slots=True)
class VariantToProfile:
    """One variant to estimate: its kind, request, declared steps (None: not step-based) and declared times."""

    kind: str
    request: Resources
    total_steps: int | None
    declared_s: float | None = None
    time_limit_s: int | None = None
    script_hash: str | None = None  # this variant's payload hash (the `h=` tag); None: the group's


@dataclass(frozen=True, slots=True)
class GroupToProfile:
    """A group the daemon wants estimates for; (user, name, script hash, variant kind) is its history key."""

    group_id: str
    user: str
    name: str
    script_hash: str
    variants: tuple[VariantToProfile, ...]
    submit_time: float = 0.0


SAMPLE_TAG = "slurmx-sample:"
"""Comment prefix of sample runs: not `slurmx:`, so the daemon never takes a sample for one of the group's variants."""


def sample_fields(comment: str) -> dict[str, str] | None:
    """The `key=value` fields of a sample's comment (`slurmx-sample:g=…,v=…,s=…,n=…[,t=…,ps=…]`), else None."""
    if not comment.startswith(SAMPLE_TAG) or len(comment) > 1024:
        return None
    fields: dict[str, str] = {}
    for part in comment[len(SAMPLE_TAG):].split(","):
        key, sep, value = part.partition("=")
        if not sep or key in fields:
            return None
        fields[key] = value
    return fields



@dataclass(frozen=True, slots=True)
class SampleRequest:
    """One sample run to submit: the variant's script rendered with `profile_steps=steps`, plus these overrides."""

    group_id: str
    kind: str
    index: int  # 0: short, 1: long
    steps: int
    qos: str
    time_limit_s: int
    request: Resources
    job_name: str = field(default="")
    search_cpus: int = 0  # a sensitivity sample (index SEARCH_INDEX): the CPUs its in-job search starts from
    search_step: int = 1  # and its steep-region step (the variant's GPU count)

    @property
    def sample_id(self) -> str:
        return f"{self.group_id}.{self.kind}.{self.index}"

    def sbatch_overrides(self) -> list[str]:
        """sbatch command-line options that override the rendered script's `#SBATCH` lines for a sample run."""
        minutes = max(1, math.ceil(self.time_limit_s / 60))
        name = self.job_name or self.group_id
        options = [f"--qos={self.qos}", f"--time={minutes}", f"--job-name={name}@{self.kind}~s{self.index}",
                   f"--comment={self.comment}", f"--export=ALL,SLURMX_SAMPLE_STEPS={self.steps}", "--no-requeue"]
        if self.search_cpus:
            options[4] += f",SLURMX_SEARCH_STEP={self.search_step}"
            options.append(f"--cpus-per-task={self.search_cpus}")
        return options

    @property
    def comment(self) -> str:
        """The sample's comment tag: how slurmxd finds the sample the user's `slurmx submit` queued for it."""
        return f"{SAMPLE_TAG}g={self.group_id},v={self.kind},s={self.index},n={self.steps}"

    @property
    def time_limit_rounded_s(self) -> int:
        """The time limit Slurm records for this sample (sbatch takes whole minutes)."""
        return max(1, math.ceil(self.time_limit_s / 60)) * 60


SEARCH_INDEX = 2
"""The sample index of a group's sensitivity sample (0 and 1 are the short and long run-time samples)."""


def profiling_on(site: SiteConfig) -> bool:
    """Whether slurmxd profiles on this site: `profile.enabled`, else whether the site's policy declares that it
    reads profiled estimates (and is not in `profile.off_for`)."""
    return site.profile.active_for(site.policy.name, profiled(site.policy.name))


def search_kind(site: SiteConfig) -> str | None:
    """The kind whose variants get the CPU/memory sensitivity search (Synergy's): what the site's policy declares
    as its `sensitivity_kind`, when it profiles; None for a policy that reads no sensitivity."""
    if not profiling_on(site):
        return None
    return sensitivity_kind(site.policy.name, site.policy.params)


def search_request(group: GroupToProfile, variant: VariantToProfile, params: SamplingParams) -> SampleRequest:
    """The one sensitivity sample of Synergy's kind: Synergy's CPU search runs inside it (`slurmx.hooks.search`),
    from `search_cpus` (else the variant's own CPUs) down, `search_steps` steps per point."""
    cpus = params.search_cpus or variant.request.cpus
    return SampleRequest(group.group_id, variant.kind, SEARCH_INDEX, params.search_steps, params.qos,
                         params.default_time_limit_s, variant.request, group.name, search_cpus=max(1, cpus),
                         search_step=max(1, variant.request.gres_count("gpu")))


def sample_requests(group: GroupToProfile, variant: VariantToProfile,
                    params: SamplingParams) -> list[SampleRequest]:
    """The samples of one variant (short, then long), or none when the job is too short to sample within budget.

    Pure and shared: `slurmx submit` queues exactly these (held) beside the variants, and slurmxd's profiler plans
    exactly these, so the daemon only ever releases samples the user's own submission created.
    """
    if not variant.total_steps:
        return []
    steps = sample_steps(variant.total_steps, len(group.variants), params)
    if steps is None:
        return []
    return [SampleRequest(group.group_id, variant.kind, i, n, params.qos, sample_time_limit(variant, n, params),
                          variant.request, group.name) for i, n in enumerate(steps)]


def sample_steps(total_steps: int, n_variants: int, params: SamplingParams) -> tuple[int, int] | None:
    """(short, long) sample steps of one variant within the overhead budget; None if the job is too short."""
    per_variant = params.overhead_budget / (1.0 + (n_variants - 1) * params.cut_factor) * total_steps
    if params.zero_step_short:
        # One step, not zero: `SLURMX_PROFILE_STEPS=0` means "not profiling" to the hooks.
        long = math.floor(per_variant) - 1
        return (1, long) if long >= max(2, params.min_steps) else None
    short = math.floor(per_variant / (1.0 + params.long_to_short))
    if short < params.min_steps:
        return None
    return short, max(short + 1, math.floor(short * params.long_to_short))


def sample_time_limit(variant: VariantToProfile, steps: int, params: SamplingParams) -> int:
    """The sample's share of the variant's time limit, times a safety factor, at least a minute."""
    if variant.time_limit_s is None or not variant.total_steps:
        return params.default_time_limit_s
    share = variant.time_limit_s * max(steps, 1) / variant.total_steps
    return max(60, math.ceil(share * params.time_limit_factor))


def within_cap(held: Resources, count: int, extra: Resources, params: SamplingParams) -> bool:
    """Whether one more sample asking `extra` fits the profiling cap, `count` samples holding `held` already."""
    if count + 1 > params.max_samples:
        return False
    if params.max_cpus and held.cpus + extra.cpus > params.max_cpus:
        return False
    return all(held.gres_count(name) + extra.gres_count(name) <= cap for name, cap in params.max_gres.items())
