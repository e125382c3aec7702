"""The FitGpp reproduction's runs: the workload, one simulation per spec, and the runs of a point pooled.

Pure computation: a `RunSpec` (policy, set, overrides) becomes a `RunOutcome` (slowdowns per class,
re-scheduling intervals, preemptions, load); a `Point` (a policy at a sweep point, over all sets) pools them.
Nothing here knows the paper's numbers or claims.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from slurmx.core.model import JobClass
from slurmx.policies.fitgpp import FALLBACK_NOTE
from slurmx.reproduce import UnknownPaper
from slurmx.reproduce.base import ReproOptions
from slurmx.sim.collector import fewer_collections
from slurmx.sim.config import SimConfig, parse_sim_config
from slurmx.sim.jobs import SimJob
from slurmx.sim.metrics import JobRecord, SimResult, utilisation
from slurmx.sim.parallel import parallel_map
from slurmx.sim.runner import run_config
from slurmx.sim.workloads.fitgpp import FitgppParams, fitgpp

__all__ = ["EXPERIMENTS", "POLICIES", "PREEMPTIVE_ARGS", "READINGS", "WORKLOAD", "Point", "Pooled", "Results",
           "RunOutcome", "RunSpec", "Scale", "backlog", "experiment_points", "measured_load", "pool",
           "reading_label", "run_all", "run_on_one_workload", "run_one", "scale_of", "selected", "slowdowns"]

EXPERIMENTS = ("main", "intervals", "preempted", "s", "P", "te_share", "grace_scale", "be_sources", "readings",
               "steady", "restart_cost")
POLICIES = ("fifo", "fitgpp", "lrtp", "rand")
MIN = 60.0
NODE = {"cpus": 32, "mem": "256G", "gres": "gpu:8"}

# The workload every run starts from: the paper's numbers (§4.2) plus our choices where it is silent (the
# CPU/RAM/GPU normals are only in Fig. 2). See ASSUMPTIONS; `FitgppParams` documents each knob.
WORKLOAD: Mapping[str, Any] = {
    "calibration": "fifo_closed_loop",
    "load": 2.0,
    "load_dimension": "bottleneck",
    "te_fraction": 0.3,
    "gp_mean_min": 3.0,
    "gp_sd_min": 3.0,  # unstated: Fig. 4 (s matters) needs a wide grace spread, Table 2 a narrow one; see readings
    "gp_max_min": 20.0,
    "exec_min_min": 3.0,  # the paper's trace keeps jobs longer than 180 s
    "te": {"gpus_mean": 2, "gpus_sd": 2, "cpus_mean": 8, "cpus_sd": 8, "mem_gb_mean": 32, "mem_gb_sd": 32},
    "be": {"exec_sd_min": 60},
}

# How FitGpp, LRTP and RAND treat a TE job whose victims are still in grace: "wait" (the digest's reading, §1.4,
# and the policies' default) or "reselect" (victim selection re-run every minute, room held by victims in grace
# not counted, as a tick simulator without in-flight preemption state would). `readings` shows both.
PREEMPTIVE_ARGS: Mapping[str, Any] = {"in_grace": "wait"}
READINGS = (("wait", 3.0), ("wait", 1.0), ("reselect", 3.0), ("reselect", 1.0))


@dataclass(frozen=True)
class Scale:
    """How big the runs are (full = the paper's main experiment, quick = for tests)."""

    jobs: int
    sets: int
    nodes: int
    sweep_jobs: int
    sweep_sets: int
    sweep_nodes: int
    s_values: tuple[float, ...]
    p_values: tuple[int | None, ...]
    te_shares: tuple[float, ...]
    grace_scales: tuple[float, ...]
    lengths: tuple[int, ...] = ()  # `steady`: run lengths (jobs) on the main experiment's nodes
    steady_sets: int = 1
    restart_costs_min: tuple[float, ...] = ()  # `restart_cost`: minutes a restarted job spends reloading


FULL = Scale(65536, 8, 84, 8192, 2, 84, (0.0, 1.0, 2.0, 4.0, 8.0), (1, 2, None), (0.1, 0.3, 0.5),
             (1.0, 2.0, 4.0, 8.0), (8192, 16384, 32768, 65536, 131072, 262144), 2, (0.0, 1.0, 5.0))
QUICK = Scale(2048, 1, 84, 384, 1, 12, (0.0, 4.0, 8.0), (1, None), (0.3, 0.5), (1.0, 8.0), (512, 1024, 2048), 1,
              (0.0, 5.0))


@dataclass(frozen=True)
class RunSpec:
    """One simulation: a policy with its arguments on one set of the workload (a seed) with overrides."""

    policy: str
    seed: int
    jobs: int
    nodes: int
    policy_params: tuple[tuple[str, Any], ...] = ()
    workload_params: tuple[tuple[str, Any], ...] = ()
    restart_cost_s: float = 0.0

    @property
    def workload(self) -> tuple[int, int, int, tuple[tuple[str, Any], ...]]:
        """What the workload depends on: specs equal here replay the same jobs."""
        return self.seed, self.jobs, self.nodes, self.workload_params

    def params(self) -> FitgppParams:
        return FitgppParams.model_validate({**WORKLOAD, "n_jobs": self.jobs, "nodes": self.nodes,
                                            **dict(self.workload_params)})

    def config(self) -> SimConfig:
        params = {"backfill": False} if self.policy == "fifo" else dict(PREEMPTIVE_ARGS)
        return parse_sim_config({
            "seed": self.seed,
            "cluster": {"partitions": [{"name": "gpu", "kind": "gpu", "nodes": self.nodes, **NODE}]},
            "policy": {"name": self.policy, "params": {**params, **dict(self.policy_params)}},
            "mode": "tick",
            "checkpoint": "keep",
            "restart_cost": self.restart_cost_s,
            "count_notes": [FALLBACK_NOTE],
        }, f"fitgpp reproduction ({self.policy})")


@dataclass(frozen=True)
class RunOutcome:
    """What the report needs of one run: slowdowns per class (for pooled percentiles and the CDF), re-scheduling
    intervals in minutes, preemption counts per job, fallback firings, the load (`measured_load`) and wall
    seconds."""

    te: npt.NDArray[np.float64]
    be: npt.NDArray[np.float64]
    intervals_min: npt.NDArray[np.float64]
    preemptions: npt.NDArray[np.int64]
    fallbacks: int
    load: float
    wall_s: float
    policy_wall_s: float
    cpu_s: float = 0.0
    backlog: tuple[int, ...] = ()
    gpu_alloc: float = math.nan  # allocated share of the GPUs over the submission window (grace holds included)
    # Each job of `te` / `be`: its place in the submission order (0 = the first job, 1 = the last).
    te_at: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    be_at: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))


BACKLOG_AT = (0.25, 0.5, 0.75, 1.0)  # fractions of the submission window where the backlog is counted


def backlog(jobs: Sequence[SimJob], first_start: Mapping[str, float]) -> tuple[int, ...]:
    """BE jobs submitted but not yet started at each `BACKLOG_AT` fraction of the submission window (BE only: the
    preemptive policies start TE jobs at once, FIFO queues them too).

    The closed-loop calibration makes the arrival rate FIFO's saturated throughput, so under any other policy the
    queue is at critical load: it drains if the policy packs better than strict FIFO and grows if worse, and the
    BE slowdowns then depend on the run's length. This trend is what tells the two apart."""
    submits = np.array([j.submit_time for j in jobs])
    starts = np.array([first_start[j.job_id] for j in jobs])
    be = np.array([j.job_class is JobClass.BE for j in jobs])
    start, end = float(submits.min()), float(submits.max())
    return tuple(int(np.sum(be & (submits <= t) & (starts > t))) for t in (start + f * (end - start)
                                                                          for f in BACKLOG_AT))


def measured_load(jobs: Sequence[SimJob], finish: Mapping[str, float], nodes: int) -> float:
    """The load FIFO was calibrated to, measured on a run: at each instant, the demand in the system (queued or
    running, from submission to completion) over capacity in its largest dimension — the calibrator's own
    measure — averaged over the submission window [first submit, last submit] (afterwards the queue only
    drains)."""
    cap = np.array([NODE["cpus"], 256 * 1024, 8], dtype=np.float64) * nodes
    start = min(j.submit_time for j in jobs)
    end = max(j.submit_time for j in jobs)
    if end <= start:
        return 0.0
    requests = [next(iter(job.variants.values())).request for job in jobs]
    share = np.array([(r.cpus, r.mem_mb, r.gres_count("gpu")) for r in requests], dtype=np.float64) / cap
    times = np.empty(2 * len(jobs))
    times[0::2] = [job.submit_time for job in jobs]  # each job's arrival, then its departure
    times[1::2] = np.minimum([finish[job.job_id] for job in jobs], end)
    deltas = np.empty((2 * len(jobs), 3))
    deltas[0::2], deltas[1::2] = share, -share
    order = np.argsort(times, kind="stable")
    at = times[order]
    level = np.cumsum(deltas[order], axis=0).max(axis=1)  # after each change
    widths = np.diff(np.append(at, end))
    return float((level * widths).sum() / (end - start))


def slowdowns(records: Sequence[JobRecord], cls: JobClass) -> npt.NDArray[np.float64]:
    """Eq. 5, 1 + wait / exec = (completion - submission) / execution time, of the completed jobs of `cls`."""
    return np.array([(r.finish - r.submit) / r.exec_s for r in records if r.job_class is cls and not r.cancelled])


def submitted_at(records: Sequence[JobRecord], cls: JobClass) -> npt.NDArray[np.float64]:
    """Each `cls` job's place in the submission order of all jobs (0 the first, 1 the last), in `slowdowns`'
    order: warm-up is cut by jobs, as the closed loop submits its first hundreds at once."""
    order = sorted(range(len(records)), key=lambda i: (records[i].submit, i))
    rank = np.empty(len(records))
    rank[order] = np.arange(len(records)) / max(len(records) - 1, 1)
    return np.array([rank[i] for i, r in enumerate(records) if r.job_class is cls and not r.cancelled])


def run_one(spec: RunSpec) -> RunOutcome:
    """Run one spec on its own workload."""
    return _run_on(spec, fitgpp(spec.params(), spec.seed))


def run_on_one_workload(specs: tuple[RunSpec, ...]) -> list[RunOutcome]:
    """Run specs that share a workload (`RunSpec.workload`): it is generated once and replayed under each, as a
    `SimJob` is immutable (top level, so a process pool can pickle it). The closed loop that times a workload's
    submissions replays it under FIFO, as much work as a run: the main experiment's four policies share one."""
    workloads = {spec.workload for spec in specs}
    if len(workloads) != 1:
        raise ValueError(f"run_on_one_workload: the specs name {len(workloads)} workloads, not one")
    with fewer_collections():  # the workload's generation and the outcomes' arrays too, not only the runs
        jobs = fitgpp(specs[0].params(), specs[0].seed)
        return [_run_on(spec, jobs) for spec in specs]


def _run_on(spec: RunSpec, jobs: Sequence[SimJob]) -> RunOutcome:
    cpu = time.process_time()
    result = run_config(spec.config(), jobs)
    cpu = time.process_time() - cpu
    records = [r for r in result.jobs if not r.cancelled]
    if len(records) != len(jobs):
        raise RuntimeError(f"{spec}: {len(jobs) - len(records)} jobs did not complete")
    finish = {r.job_id: r.finish for r in records}
    return RunOutcome(slowdowns(records, JobClass.TE), slowdowns(records, JobClass.BE),
                      np.array(result.reschedule_intervals, dtype=np.float64) / MIN,
                      np.array([r.preemptions for r in result.jobs], dtype=np.int64),
                      result.stats.notes.get(FALLBACK_NOTE, 0), measured_load(jobs, finish, spec.nodes),
                      result.stats.wall_s, result.stats.policy_wall_s, cpu,
                      backlog(jobs, {r.job_id: r.first_start if r.first_start is not None else r.finish
                                     for r in records}),
                      _gpu_alloc(result, min(j.submit_time for j in jobs), max(j.submit_time for j in jobs)),
                      submitted_at(records, JobClass.TE), submitted_at(records, JobClass.BE))


def _gpu_alloc(result: SimResult, start: float, end: float) -> float:
    """Allocated GPU share over [start, end]: under the same arrivals, more packing is what drains a queue."""
    means = utilisation(result, start, end, 1)["mean"]
    return float(next((v for k, v in means.items() if k.endswith("/gpu")), math.nan))


# ---------------------------------------------------------------------------------------------- specs

Results = dict[RunSpec, RunOutcome]


@dataclass(frozen=True)
class Point:
    """One policy at one sweep point: the runs over all sets, pooled."""

    label: str
    policy: str
    specs: tuple[RunSpec, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)


def _rand_params(seed: int) -> tuple[tuple[str, Any], ...]:
    """RAND draws a different random stream per set (the paper averages 4 repetitions; we average the sets)."""
    return (("seed", seed),)


# Values the runs have anyway: dropped from a spec, so that e.g. "s = 4" and "TE share 0.3" are one run.
_DEFAULTS: Mapping[str, Any] = {"s": 4.0, "max_preemptions": 1, "te_fraction": 0.3, "gp_scale": 1.0,
                                 "in_grace": PREEMPTIVE_ARGS["in_grace"], "gp_sd_min": WORKLOAD["gp_sd_min"]}


def _non_default(params: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (params or {}).items() if k not in _DEFAULTS or _DEFAULTS[k] != v}


def _point(label: str, policy: str, scale: Scale, main: bool, policy_params: Mapping[str, Any] | None = None,
           workload_params: Mapping[str, Any] | None = None, *, jobs_sets: tuple[int, int] | None = None,
           restart_cost_s: float = 0.0) -> Point:
    jobs, sets, nodes = (scale.jobs, scale.sets, scale.nodes) if main else (
        scale.sweep_jobs, scale.sweep_sets, scale.sweep_nodes)
    if jobs_sets is not None:  # `steady`: another length on the main experiment's nodes
        (jobs, sets), nodes = jobs_sets, scale.nodes
    specs = []
    for seed in range(sets):
        params = _non_default(policy_params)
        if policy == "rand":
            params = {**dict(_rand_params(seed)), **params}
        specs.append(RunSpec(policy, seed, jobs, nodes, tuple(sorted(params.items())),
                             tuple(sorted(_non_default(workload_params).items())), restart_cost_s))
    return Point(label, policy, tuple(specs))


def reading_label(in_grace: str, gp_sd: float) -> str:
    """The `readings` experiment's label of one reading (also the report's row name)."""
    return f"{in_grace}, GP sd {gp_sd:g}"


def experiment_points(experiment: str, scale: Scale) -> list[Point]:
    """The points one experiment reports, each with its runs (equal specs are one run: dedupe before running)."""
    if experiment in ("main", "intervals", "preempted"):
        return [_point("main", p, scale, True) for p in POLICIES]
    if experiment == "s":
        return [_point(f"s={s:g}", "fitgpp", scale, False, {"s": s}) for s in scale.s_values]
    if experiment == "P":
        return [_point(f"P={'inf' if p is None else p}", policy, scale, False, {"max_preemptions": p})
                for p in scale.p_values for policy in ("fitgpp", "lrtp", "rand")]
    if experiment == "te_share":
        return [_point(f"TE={share:g}", policy, scale, False, None, {"te_fraction": share})
                for share in scale.te_shares for policy in POLICIES]
    if experiment == "be_sources":
        return [_point("FIFO", "fifo", scale, False), _point("TE first, P=0", "fitgpp", scale, False,
                                                             {"max_preemptions": 0}),
                _point("FitGpp, P=1", "fitgpp", scale, False)]
    if experiment == "steady":
        return [_point(f"{n} jobs", policy, scale, False, jobs_sets=(n, scale.steady_sets))
                for n in scale.lengths for policy in ("fifo", "fitgpp")]
    if experiment == "restart_cost":
        return [_point("FIFO", "fifo", scale, False)] + [
            _point(f"restart {m:g} min", "fitgpp", scale, False, restart_cost_s=m * MIN)
            for m in scale.restart_costs_min]
    if experiment == "readings":
        return [_point(reading_label(g, sd), policy, scale, False, None if policy == "fifo" else {"in_grace": g},
                       {"gp_sd_min": sd}) for g, sd in READINGS for policy in POLICIES]
    points = []
    for k in scale.grace_scales:
        for policy, params in (("fitgpp", {"s": 4.0}), ("fitgpp", {"s": 8.0}), ("lrtp", {}), ("rand", {})):
            label = f"GP x{k:g}" + (f" s={params['s']:g}" if policy == "fitgpp" else "")
            points.append(_point(label, policy, scale, False, params, {"gp_scale": k}))
    return points


# ---------------------------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Pooled:
    """A point's runs pooled: slowdown percentiles per class, intervals, preemption proportions."""

    te: npt.NDArray[np.float64]
    be: npt.NDArray[np.float64]
    intervals: npt.NDArray[np.float64]
    preemptions: npt.NDArray[np.int64]
    fallbacks: int
    load: float
    backlog: tuple[float, ...] = ()
    gpu_alloc: float = math.nan

    def pct(self, cls: str, q: float) -> float:
        values = self.te if cls == "te" else self.be
        return float(np.percentile(values, q)) if values.size else math.nan

    def row(self) -> tuple[float, ...]:
        return tuple(self.pct(c, q) for c in ("te", "be") for q in (50, 95, 99))

    def preempted(self, at_least: int = 1, exactly: bool = False) -> float:
        """Share of all jobs preempted `at_least` (or `exactly`) times."""
        hits = self.preemptions == at_least if exactly else self.preemptions >= at_least
        return float(hits.mean()) if self.preemptions.size else 0.0

    def preempted_be(self) -> float:
        """Share of BE jobs preempted at least once (only BE jobs can be; the paper's denominator is unstated)."""
        return float((self.preemptions >= 1).sum()) / self.be.size if self.be.size else 0.0


def pool(results: Results, point: Point) -> Pooled:
    """The outcomes of a point's runs (one per set) as one distribution."""
    outs = [results[s] for s in point.specs]
    return Pooled(np.concatenate([o.te for o in outs]), np.concatenate([o.be for o in outs]),
                  np.concatenate([o.intervals_min for o in outs]), np.concatenate([o.preemptions for o in outs]),
                  sum(o.fallbacks for o in outs), float(np.mean([o.load for o in outs])),
                  tuple(float(x) for x in np.mean([o.backlog for o in outs], axis=0)) if outs[0].backlog else (),
                  float(np.mean([o.gpu_alloc for o in outs])))



def scale_of(options: ReproOptions) -> Scale:
    """The run size `options` ask for (`--seeds` sets the main experiment's sets only)."""
    base = QUICK if options.quick else FULL
    return replace(base, sets=options.seeds or base.sets)


def selected(options: ReproOptions) -> tuple[str, ...]:
    """The experiments `--only` names (all by default); an unknown name is a one-line error."""
    unknown = sorted(set(options.only) - set(EXPERIMENTS))
    if unknown:
        raise UnknownPaper(f"fitgpp: unknown experiment(s) {', '.join(unknown)}; choose from {', '.join(EXPERIMENTS)}")
    return options.only or EXPERIMENTS


def run_all(only: Sequence[str], scale: Scale, workers: int, progress: bool) -> Results:
    """Every distinct run the selected experiments need, on `workers` processes, longest first."""
    specs = list(dict.fromkeys(s for e in EXPERIMENTS if e in only for p in experiment_points(e, scale)
                               for s in p.specs))
    by_workload: dict[tuple[Any, ...], list[RunSpec]] = {}
    for spec in specs:
        by_workload.setdefault(spec.workload, []).append(spec)
    tasks = sorted((tuple(group) for group in by_workload.values()), key=lambda g: -g[0].jobs * len(g))
    # the longest tasks first, so the pool does not end on one of them
    outcomes = parallel_map(run_on_one_workload, tasks, workers, f"fitgpp workloads ({len(specs)} runs)", progress)
    return {spec: outcome for task, done in zip(tasks, outcomes, strict=True)
            for spec, outcome in zip(task, done, strict=True)}
