"""The AlloX reproduction's runs: specs, one simulation per spec, and the numbers the report reads off them.

Pure computation: a `RunSpec` (policy, seed, α, estimation error, profiling overhead) becomes a `RunOutcome`
(JCTs in the workload's time unit, the spread of users' progress); nothing here knows the paper's claims.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from slurmx.core.model import JobClass
from slurmx.reproduce import UnknownPaper
from slurmx.reproduce.allox.authors_input import authors_jobs
from slurmx.reproduce.allox.samples import is_sample, with_samples
from slurmx.reproduce.base import ReproOptions
from slurmx.sim.config import SimConfig, parse_sim_config
from slurmx.sim.jobs import SimJob
from slurmx.sim.metrics import JobRecord
from slurmx.sim.parallel import parallel_map
from slurmx.sim.runner import run_config
from slurmx.sim.workloads.allox import AlloxParams, allox

__all__ = [
    "ALLOX_PLUS_TIMEOUT_UNITS",
    "AS_AUTHORS_SIM",
    "AUTHORS_SIM_OPTIONS",
    "CPU_NODE_CORES",
    "DEFAULT_ALPHA",
    "DEFAULT_ERROR",
    "DEFAULT_OVERHEAD",
    "EXPERIMENTS",
    "FULL",
    "MAIN_POLICIES",
    "ON_REQUEST",
    "PROFILING_SAMPLES",
    "QUICK",
    "STORED_CODE",
    "STORED_DRFA_BETA_CORES",
    "UNIT_S",
    "Results",
    "RunOutcome",
    "RunSpec",
    "Scale",
    "authors_sim_options",
    "average_speedup",
    "experiment_specs",
    "progress_spread",
    "run_all",
    "run_one",
    "scale_of",
    "selected",
]

EXPERIMENTS = ("authors", "main", "alpha", "error", "overhead")
# Run only when named: the authors' own simulator beside ours (`authors_sim`; needs their pack and a JDK).
ON_REQUEST = ("authors-sim",)

UNIT_S = 60.0  # the workload's time unit (AlloxParams.time_unit_s)
GPU_NODE = {"nodes": 20, "cpus": 4, "mem": "61G", "gres": "gpu:1"}  # EC2 p2.xlarge: 1 K80, 4 cores, 61 GB
CPU_NODE_CORES = 32
CPU_NODE = {"nodes": 20, "cpus": CPU_NODE_CORES, "mem": "64G"}  # the authors' simulator: 32 cores, 64 GB per machine
MACHINES = {"gpu": 20, "cpu": 20}
TOTAL_MEM_MB = 20 * 61 * 1024 + 20 * 64 * 1024
MAIN_POLICIES = ("srpt", "allox", "allox_plus", "drfa", "es", "drfs", "drff")
ALLOX_PLUS_TIMEOUT_UNITS = 500.0  # ALLOX_TIME_OUT in the authors' simulator
# The authors' simulator as stored in their IRFsim repository (not necessarily the commit behind the paper):
# DRFExtScheduler sets β = 69 cores per GPU; EqualShareScheduler runs onlineEqualShare (work-conserving).
STORED_DRFA_BETA_CORES = 69.0
STORED_CODE = "stored_code"  # RunSpec.variant of the runs that follow the stored code, not the paper's text
# Behaviours of the authors' simulator (IRFsim at the paper's commit) that move the numbers, as named policy
# options of ours: option name -> policy -> params. RunSpec.variant AS_AUTHORS_SIM turns them all on,
# AS_AUTHORS_SIM + ":" + name one of them (the ablation). All are artifacts: off in our defaults.
AS_AUTHORS_SIM = "authors_sim"
PROFILING_SAMPLES = "profiling_samples"
AUTHORS_SIM_OPTIONS: dict[str, dict[str, dict[str, Any]]] = {
    "drf_ties": {p: {"ties": "by_name"} for p in ("drff", "drfs", "drfa")},  # equal shares: lowest queue index
    "es_gpu_pass": {"es": {"base_blocks_accelerators": True}},  # a user on CPU gets no GPU pass
    "allox_ties": {"allox": {"ties": "by_name"}},  # equal progress: lowest queue index
    "allox_nmax": {"allox": {"n_max": 50}},  # MAX_N_JOB_AlloX: the matching sees at most 50 jobs
    # their schedulers sort a user's queue in place (samples among her jobs): the samples' round robin reads it
    "sample_order": {"es": {"samples_order": "base_kind"}, "drfs": {"samples_order": "fastest"},
                     "drfa": {"samples_order": "accelerator"}},
    # their ES passes check every resource of share - usage: a user over any share (samples) starts nothing
    "es_over_share": {"es": {"over_share_blocks": True}},
    # their ES's base-kind pass picks a job's kind by her share's room alone: no free machine of it ends her pass
    "es_share_kind": {"es": {"share_picks_kind": True}},
    # their AlloX plans every machine not running a scheduled job as free now, sample-held ones included
    "allox_sample_machines": {"allox": {"sample_machines_free": True}},
    # their AlloX starts down the machine index: CPU nodes (after the GPUs in it) first
    "allox_order": {"allox": {"first_start": "base_kind"}},
    # their AlloX books a started machine busy until all the jobs planned on it end (within a decision here)
    "allox_omega": {"allox": {"omega_planned": True}},
    # their AlloX's books across decisions (numbered machines, bookings, progress sums; the memo): `allox_books`
    "allox_books": {"allox": {"books": True}},
    # profiling samples hold machines, first, against the owner's share (`samples`); DRFF never profiles
    PROFILING_SAMPLES: {**{p: {"samples_first": True} for p in ("drfs", "drfa", "allox")},
                        "es": {"samples_first": True, "samples_in_passes": True}},
}


@dataclass(frozen=True)
class Scale:
    """How big the runs are: jobs per user, seeds and sweep points (full = the paper's, quick = for tests)."""

    jobs_per_user: int
    seeds: int
    alphas: tuple[float, ...]
    errors: tuple[float, ...]
    overheads: tuple[float, ...]
    authors: bool = True  # run the `authors` experiment (their input file is outside the repository)


FULL = Scale(1000, 5, tuple(round(0.1 * i, 1) for i in range(1, 11)), (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6),
             (0.0, 0.03, 0.06, 0.09, 0.12, 0.15))
QUICK = Scale(15, 1, (0.1, 0.5, 1.0), (0.0, 0.1, 0.6), (0.0, 0.03, 0.15), authors=False)
DEFAULT_ERROR, DEFAULT_OVERHEAD, DEFAULT_ALPHA = 0.1, 0.03, 0.1


@dataclass(frozen=True)
class RunSpec:
    """One simulation: a policy (with AlloX's α where it applies) on one seed's workload, at one estimation
    error and profiling overhead. DRFF profiles nothing, so its overhead is always 0 (runs dedupe)."""

    policy: str
    seed: int
    jobs_per_user: int
    alpha: float = DEFAULT_ALPHA
    error_sd: float = DEFAULT_ERROR
    overhead: float = DEFAULT_OVERHEAD
    source: str = "generator"  # "generator": the stand-in workload; "authors": their simulator's input file
    variant: str = ""  # STORED_CODE: ES or DRFA as the authors' stored simulator runs them (a sensitivity run);
    # AS_AUTHORS_SIM[:option]: the options that follow the authors' simulator (`authors_sim_options`)

    @staticmethod
    def make(policy: str, seed: int, scale: Scale, alpha: float = DEFAULT_ALPHA, error_sd: float = DEFAULT_ERROR,
             overhead: float = DEFAULT_OVERHEAD, source: str = "generator", variant: str = "") -> RunSpec:
        return RunSpec(policy, seed, scale.jobs_per_user if source == "generator" else 1000,
                       alpha if policy in ("allox", "allox_plus") else 0.0, error_sd if policy != "drff" else 0.0,
                       overhead if policy != "drff" else 0.0, source, variant)

    def config(self, jobs: Sequence[SimJob] = ()) -> SimConfig:
        """The run's config; DRFA's β is the workload's average speedup, as the authors compute it, and ES
        splits the machines statically among all the workload's users (the paper's "statically"); the
        STORED_CODE variant takes the stored simulator's β and its online ES instead."""
        params: dict[str, Any] = {}
        stored = self.variant == STORED_CODE
        if self.policy == "drfa" and jobs:
            beta = STORED_DRFA_BETA_CORES / CPU_NODE_CORES if stored else average_speedup(jobs)
            params["beta"] = {"cpu": 1.0, "gpu": beta}
        if self.policy == "es" and stored:
            params["split"] = "online"
        elif self.policy == "es" and jobs:
            params["users"] = sorted({j.user for j in jobs})
        if self.policy in ("allox", "allox_plus"):
            params["alpha"] = self.alpha
        if self.policy == "allox_plus":
            params["timeout_s"] = ALLOX_PLUS_TIMEOUT_UNITS * UNIT_S
        for option in authors_sim_options(self.variant):
            params.update(AUTHORS_SIM_OPTIONS[option].get(self.policy, {}))
        return parse_sim_config({
            "seed": self.seed,
            "cluster": {"partitions": [{"name": "gpu", "kind": "gpu", **GPU_NODE},
                                       {"name": "cpu", "kind": "cpu", **CPU_NODE}]},
            "policy": {"name": self.policy, "params": params},
            "profiling": {"fraction": 0.0 if self.samples else self.overhead},
        }, f"allox reproduction ({self.policy})")

    @property
    def samples(self) -> bool:
        """Whether profiling runs as samples holding machines (the PROFILING_SAMPLES option) instead of a delay."""
        return PROFILING_SAMPLES in authors_sim_options(self.variant) and self.policy in \
            AUTHORS_SIM_OPTIONS[PROFILING_SAMPLES] and self.overhead > 0

    def with_samples(self, jobs: Sequence[SimJob]) -> list[SimJob]:
        """`jobs`, with their profiling samples when the spec runs them (`samples.with_samples`)."""
        if not self.samples:
            return list(jobs)
        params = AUTHORS_SIM_OPTIONS[PROFILING_SAMPLES][self.policy]
        sorted_order = "sample_order" in authors_sim_options(self.variant)  # the sort reads every kind's time
        return with_samples(jobs, UNIT_S, any_kind=bool(params.get("samples_in_passes")) or sorted_order)

    def workload(self) -> list[SimJob]:
        if self.source == "authors":  # one fixed input: their drawn errors (sd 0.1), or none (DRFF)
            return self.with_samples(authors_jobs(with_errors=self.error_sd > 0))
        return self.with_samples(
            allox(AlloxParams(jobs_per_user=self.jobs_per_user, estimate_error_sd=self.error_sd), self.seed))


@dataclass(frozen=True)
class RunOutcome:
    """What the report needs of one run, in time units: JCTs (for the CDF), their mean and the mean of the
    longest 1%, the time-averaged spread of users' progress (None for SRPT: it preempts), wall seconds."""

    jct: npt.NDArray[np.float64]
    mean_jct: float
    top1_jct: float
    spread: float | None
    wall_s: float


def authors_sim_options(variant: str) -> tuple[str, ...]:
    """The authors'-simulator options a RunSpec.variant turns on: all for AS_AUTHORS_SIM, one for
    "AS_AUTHORS_SIM:name", all but one for "AS_AUTHORS_SIM:-name" (the ablation), none otherwise."""
    if variant == AS_AUTHORS_SIM:
        return tuple(AUTHORS_SIM_OPTIONS)
    head, _, name = variant.partition(":")
    if head == AS_AUTHORS_SIM and name in AUTHORS_SIM_OPTIONS:
        return (name,)
    if head == AS_AUTHORS_SIM and name.startswith("-") and name[1:] in AUTHORS_SIM_OPTIONS:
        return tuple(o for o in AUTHORS_SIM_OPTIONS if o != name[1:])
    return ()


def run_one(spec: RunSpec) -> RunOutcome:
    """Run one spec (top level, so a process pool can pickle it)."""
    jobs = spec.workload()
    result = run_config(spec.config(jobs), jobs)
    records = [r for r in result.jobs if not r.cancelled]
    if len(records) != len(jobs):
        raise RuntimeError(f"{spec}: {len(jobs) - len(records)} jobs did not complete")
    if spec.samples:  # the samples are not jobs of the workload: JCTs and progress are the jobs'
        jobs = [j for j in jobs if not is_sample(j.job_id)]
        records = [r for r in records if not is_sample(r.job_id)]
    jct = np.sort(np.array([(r.finish - r.submit) / UNIT_S for r in records]))
    top = jct[-max(1, math.ceil(0.01 * jct.size)):]
    preemptive = any(r.preemptions for r in records)
    spread = None if preemptive else progress_spread(jobs, records)
    return RunOutcome(jct, float(jct.mean()), float(top.mean()), spread, result.stats.wall_s)


def average_speedup(jobs: Sequence[SimJob]) -> float:
    """Mean over the workload of CPU time / GPU time: DRFA's β in CPU machines per GPU (the authors' simulator
    averages (cores x CPU time) / (GPUs x GPU time) over all jobs; a machine here is a whole CPU node)."""
    return float(np.mean([j.variants["cpu"].duration_s / j.variants["gpu"].duration_s for j in jobs
                          if j.job_class is not JobClass.TE]))  # not the profiling samples


def _value(job: SimJob, kind: str) -> float:
    """The paper's value of a running job from the true times (as the authors' simulator computes it):
    dominant share on the favoured kind (ties to the GPU), times favoured time / actual time."""
    times = {k: v.duration_s for k, v in job.variants.items()}
    fav = min(times, key=lambda k: (times[k], k != "gpu"))
    request = job.variants[fav].request
    share = max(1.0 / MACHINES[fav], request.mem_mb / TOTAL_MEM_MB)
    return share * min(1.0, times[fav] / times[kind])


def progress_spread(jobs: Sequence[SimJob], records: Sequence[JobRecord]) -> float:
    """Time-averaged sample standard deviation of users' progress over the users with a job in the system
    (submitted, not finished), over [0, last arrival] (the authors average over the first 20,000 of their
    22,520 units, i.e. while jobs arrive). Non-preemptive runs only: a job runs from its first start to finish."""
    by_id = {j.job_id: j for j in jobs}
    users = sorted({r.user for r in records})
    index = {u: i for i, u in enumerate(users)}
    rows: list[tuple[float, int, float, int]] = []  # time, user, progress delta, active delta
    for r in records:
        u = index[r.user]
        rows += [(r.submit, u, 0.0, 1), (r.finish, u, 0.0, -1)]
        if r.first_start is not None and r.kind is not None:
            v = _value(by_id[r.job_id], r.kind)
            rows += [(r.first_start, u, v, 0), (r.finish, u, -v, 0)]
    horizon = max(r.submit for r in records)
    if not rows or horizon <= 0:
        return 0.0
    rows.sort(key=lambda e: e[0])
    t = np.array([e[0] for e in rows])
    progress = np.zeros((len(rows), len(users)))
    active = np.zeros((len(rows), len(users)))
    at = np.arange(len(rows))
    progress[at, [e[1] for e in rows]] = [e[2] for e in rows]
    active[at, [e[1] for e in rows]] = [e[3] for e in rows]
    progress = progress.cumsum(axis=0)
    active = (active.cumsum(axis=0) > 0).astype(np.float64)
    weight = np.clip(np.minimum(np.append(t[1:], horizon), horizon) - np.minimum(t, horizon), 0.0, None)
    counts = active.sum(axis=1)
    many = np.maximum(counts, 2)  # rows with fewer than two active users have no spread: std 0
    mean = (progress * active).sum(axis=1) / many
    var = (active * (progress - mean[:, None]) ** 2).sum(axis=1) / (many - 1)
    std = np.where(counts >= 2, np.sqrt(np.maximum(var, 0.0)), 0.0)
    return float((weight * std).sum() / weight.sum()) if weight.sum() > 0 else 0.0


Results = Mapping[RunSpec, RunOutcome]


def experiment_specs(experiment: str, scale: Scale, seeds: range) -> list[RunSpec]:
    """The runs one experiment needs (runs the experiments share are equal specs: dedupe before running)."""
    out: list[RunSpec] = []
    if experiment == "authors":  # one fixed input, no seeds; its file is outside the repository: full runs only
        if not scale.authors:
            return []
        return ([RunSpec.make(p, 0, scale, source="authors") for p in MAIN_POLICIES]
                + [RunSpec.make(p, 0, scale, source="authors", variant=STORED_CODE) for p in ("es", "drfa")])
    for s in seeds:
        if experiment == "main":
            out += [RunSpec.make(p, s, scale) for p in MAIN_POLICIES]
        elif experiment == "alpha":
            out += [RunSpec.make("allox", s, scale, alpha=a) for a in scale.alphas] + [RunSpec.make("srpt", s, scale)]
        elif experiment == "error":
            out += [RunSpec.make(p, s, scale, error_sd=e) for e in scale.errors for p in ("es", "allox", "srpt")]
        else:
            out += [RunSpec.make(p, s, scale, overhead=o) for o in scale.overheads
                    for p in ("drff", "es", "allox", "srpt")]
    return out


def scale_of(options: ReproOptions, jobs_per_user: int | None = None) -> Scale:
    """The run size `options` ask for; `jobs_per_user` overrides the scale's (the paper's 1,000; quick 15)."""
    base = QUICK if options.quick else FULL
    return Scale(jobs_per_user or base.jobs_per_user, options.seeds or base.seeds, base.alphas, base.errors,
                 base.overheads, base.authors)


def selected(options: ReproOptions) -> tuple[str, ...]:
    """The experiments `--only` names (all of EXPERIMENTS by default, ON_REQUEST only when named); an unknown
    name is a one-line error."""
    unknown = sorted(set(options.only) - set(EXPERIMENTS) - set(ON_REQUEST))
    if unknown:
        raise UnknownPaper(f"allox: unknown experiment(s) {', '.join(unknown)}; choose from "
                           f"{', '.join(EXPERIMENTS + ON_REQUEST)}")
    return options.only or EXPERIMENTS


def run_all(only: Sequence[str], scale: Scale, seeds: range, workers: int, progress: bool) -> dict[RunSpec, RunOutcome]:
    """Every distinct run the selected experiments need, on `workers` processes, in a stable order."""
    specs = list(dict.fromkeys(s for e in EXPERIMENTS if e in only for s in experiment_specs(e, scale, seeds)))
    outcomes = parallel_map(run_one, specs, workers, "allox runs", progress)
    return dict(zip(specs, outcomes, strict=True))
