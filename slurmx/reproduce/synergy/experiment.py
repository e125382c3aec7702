"""The Synergy reproduction's runs: which points each experiment needs, each point through the round replica
(`round_replica.simulate`), and the engine check's points through the engine too (`engine_run.compare`).
Specs in, outcomes out; the claims and tables are `report.py`'s.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from slurmx.policies.synergy import ClusterShape, Mechanism, Order
from slurmx.reproduce import UnknownPaper
from slurmx.reproduce.base import ReproOptions
from slurmx.reproduce.philly_csv import PHILLY_CSV, philly_csv
from slurmx.reproduce.synergy.engine_run import EngineOutcome, compare
from slurmx.reproduce.synergy.round_replica import RoundJob, RoundSettings, simulate
from slurmx.sim.parallel import parallel_map
from slurmx.sim.workloads.synergy import PHILLY_MULTI_GPU, SynergyParams, assign_models, synergy

__all__ = [
    "BASELINES",
    "ENGINE_MECHANISMS",
    "EXPERIMENTS",
    "FULL",
    "LOADS",
    "MULTI",
    "PEER_JOBLIST",
    "QUICK",
    "W1",
    "W2",
    "EngineResults",
    "Results",
    "RunOutcome",
    "RunSpec",
    "Scale",
    "base_spec",
    "engine_spec",
    "engine_specs_of",
    "gen_spec",
    "headline_spec",
    "peer_jobs",
    "physical_spec",
    "ratio_spec",
    "run_all",
    "run_engine",
    "run_one",
    "scale_of",
    "selected",
    "specs_of",
    "trace_jobs",
]

EXPERIMENTS = ("headline", "policies", "ratio", "load", "multigpu", "bigdata", "physical", "philly", "engine")
ENGINE_MECHANISMS: tuple[Mechanism, ...] = ("prop", "tune")
PEER_JOBLIST = Path(__file__).resolve().parents[4] / "shared" / "peers" / "synergy" / "joblist_load9.0.csv"
# Fig. 6's job list (the released code's `--philly_arrival --no_exp --multigpu`, digest §4.3): arrivals from hour
# 2400 to 3000 after the raw log's first submission, GPU demand in {1, 2, 4, 8, 16}, duration in 10^1.5-10^4 min,
# the first 8,000 such jobs, arrivals re-based to 0, on 64 servers (512 GPUs).
PHILLY_START = datetime(2017, 8, 7)
PHILLY_HOURS = (2400.0, 3000.0)
PHILLY_GPUS = (1, 2, 4, 8, 16)
PHILLY_MINUTES = (10 ** 1.5, 10 ** 4.0)
PHILLY_FIRST = 8000
PHILLY_SERVERS = 64
W1 = (20.0, 70.0, 10.0)
W2 = (50.0, 0.0, 50.0)


@dataclass(frozen=True)
class Scale:
    """Full: the paper's sizes. Quick: 16 GPUs, a few hundred jobs, loads scaled by the GPU count."""

    servers: int
    n_jobs: int
    window: tuple[int, int]
    load_factor: float
    physical_jobs: int
    physical_seeds: int
    peers: bool


FULL = Scale(16, 7000, (4000, 5000), 1.0, 100, 5, True)
QUICK = Scale(2, 100, (30, 70), 2 / 16, 24, 1, False)


@dataclass(frozen=True)
class RunSpec:
    """One simulation: a trace (peers' list or generator settings) and the round settings."""

    mechanism: Mechanism
    order: Order
    trace: str = "peers"  # peers | gen | static | dynamic | philly
    load: float = 9.0
    split: tuple[float, float, float] = W1
    multi_gpu: bool = False
    cpus: float = 24.0
    servers: int = 16
    n_jobs: int = 7000
    window: tuple[int, int] = (4000, 5000)
    seed: int = 42
    compare_opt: bool = False  # also solve OPT's LP1 on every round's admitted jobs (§5.6's comparison)


@dataclass(frozen=True)
class RunOutcome:
    mean_h: float
    p99_h: float
    makespan_h: float
    rounds: int
    checked_rounds: int
    mechanism_wall_s: float
    max_speed: float
    opt_ratio: float = math.nan  # summed throughput / OPT's LP1 optimum on the same rounds' jobs
    opt_worst: float = math.nan  # the lowest per-round ratio
    opt_within: float = math.nan  # share of rounds at >= 90% of OPT
    opt_gain_captured: float = math.nan  # share of OPT's gain over PROP reached, same rounds


def peer_jobs(window: tuple[int, int], split: tuple[float, float, float] = W1) -> list[RoundJob]:
    """The authors' job list; for another split, their arrivals and durations with the split's models (their
    generator draws durations and arrivals independently of the model, so its stream is the same), iterations
    re-derived from the duration at the proportional share."""
    try:
        with PEER_JOBLIST.open() as fh:
            rows = sorted(csv.DictReader(fh), key=lambda r: int(r["job_id"]))
    except OSError as exc:
        raise UnknownPaper(f"synergy: cannot read the authors' job list {PEER_JOBLIST} ({exc.strerror}); "
                           "run with --quick to use the generator instead") from None
    if split == W1:
        return [RoundJob(int(r["job_id"]), float(r["arrival_s"]), int(r["gpu_demand"]), r["model"],
                         int(r["total_iters"]), float(r["iter_time_s"]), window[0] <= int(r["job_id"]) < window[1])
                for r in rows]
    models = assign_models(len(rows), split)
    return [RoundJob(int(r["job_id"]), float(r["arrival_s"]), int(r["gpu_demand"]), m.name,
                     max(1, int(float(r["duration_fairshare_s"]) / m.iter_time_s + 1e-9)), m.iter_time_s,
                     window[0] <= int(r["job_id"]) < window[1])
            for r, m in zip(rows, models, strict=True)]


def _generated(spec: RunSpec) -> list[RoundJob]:
    static = spec.trace == "static"
    params = SynergyParams(
        n_jobs=spec.n_jobs, jobs_per_hour=spec.load, split=spec.split, arrivals="static" if static else "poisson",
        gpu_demand=PHILLY_MULTI_GPU if spec.multi_gpu else {1: 1.0}, measure_window=spec.window,
        short_prob=1.0 if spec.trace in ("static", "dynamic") else 0.8)
    return [RoundJob(int(j.job_id.split("-")[1]), j.submit_time,
                     next(iter(j.variants.values())).request.gres_count("gpu"), str(j.meta["model"]),
                     int(j.meta["total_iters"]), float(j.meta["iter_time_s"]), bool(j.meta["measured"]))
            for j in synergy(params, spec.seed)]


def philly_jobs(path: Path, split: tuple[float, float, float] = W1, first: int = PHILLY_FIRST) -> list[RoundJob]:
    """Fig. 6's selection from the Philly-derived CSV: the trace's arrivals, GPU demands and durations; models by
    the released mix for `split`, iterations from the duration at the proportional share. Every job is
    measured."""
    trace = philly_csv("synergy", path)
    if not trace.jobs:
        raise UnknownPaper(f"synergy: {path} holds no job")
    # The loader counts seconds from the CSV's first submission; the window counts hours from the raw log's.
    shift = float(trace.info["first_submission_epoch"]) - PHILLY_START.replace(tzinfo=UTC).timestamp()
    low, high = (h * 3600.0 for h in PHILLY_HOURS)
    picked = [(job.submit_time + shift, variant.duration_s, variant.request.gres_count("gpu"))
              for job in trace.jobs for variant in job.variants.values()
              if low <= job.submit_time + shift < high and variant.request.gres_count("gpu") in PHILLY_GPUS
              and PHILLY_MINUTES[0] * 60 < variant.duration_s < PHILLY_MINUTES[1] * 60][:first]
    if not picked:
        raise UnknownPaper(f"synergy: no job of {path} passes Fig. 6's selection")
    start = picked[0][0]
    models = assign_models(len(picked), split)
    return [RoundJob(i, at - start, gpus, m.name, max(1, int(seconds / m.iter_time_s + 1e-9)), m.iter_time_s)
            for i, ((at, seconds, gpus), m) in enumerate(zip(picked, models, strict=True))]


def trace_jobs(spec: RunSpec) -> list[RoundJob]:
    """The spec's trace: the authors' job list, the Philly selection, or our generator's."""
    if spec.trace == "philly":
        return philly_jobs(PHILLY_CSV, spec.split, spec.n_jobs)
    return peer_jobs(spec.window, spec.split) if spec.trace == "peers" else _generated(spec)


def run_one(spec: RunSpec) -> RunOutcome:
    """Run one spec in the round replica (top level so the process pool can pickle it)."""
    jobs = trace_jobs(spec)
    settings = RoundSettings(mechanism=spec.mechanism, order=spec.order,
                             shape=ClusterShape(spec.servers, 8, spec.cpus, 500.0),
                             stop_when_measured_done=spec.trace not in ("static",), compare_opt=spec.compare_opt,
                             after_trace="repeat" if spec.trace in ("peers", "gen") else "stop")
    run = simulate(jobs, settings)
    cmp = run.opt_compare
    vs_opt = (cmp.ratio, cmp.worst, cmp.within_10pct / max(cmp.rounds, 1), cmp.gain_captured) if cmp else ()
    return RunOutcome(run.mean_h(), run.pct_h(99), run.makespan_s / 3600, run.rounds, run.checked_rounds,
                      run.mechanism_wall_s, run.max_speed, *vs_opt)


def run_engine(spec: RunSpec) -> EngineOutcome:
    """Run one spec's trace with the registered policy in the engine, and in the replica alike."""
    return compare(trace_jobs(spec), spec.mechanism, spec.order, ClusterShape(spec.servers, 8, spec.cpus, 500.0))


# ---- the experiments' specs ------------------------------------------------------------------------------


def base_spec(scale: Scale, mechanism: Mechanism, order: Order = "fifo", **kw: object) -> RunSpec:
    trace = "peers" if scale.peers else "gen"
    spec = RunSpec(mechanism, order, trace, 9.0 * scale.load_factor, servers=scale.servers, n_jobs=scale.n_jobs,
                   window=scale.window)
    return replace(spec, **kw)  # type: ignore[arg-type]


def headline_spec(scale: Scale, mechanism: Mechanism) -> RunSpec:
    """FIFO at 9 jobs/hr; PROP and TUNE also compared with OPT's LP1 round by round."""
    return base_spec(scale, mechanism, compare_opt=mechanism in ("prop", "tune"))


def ratio_spec(scale: Scale, mechanism: Mechanism, ratio: int) -> RunSpec:
    return headline_spec(scale, mechanism) if ratio == 3 else base_spec(scale, mechanism, cpus=8.0 * ratio)


def gen_spec(scale: Scale, mechanism: Mechanism, order: Order, load: float, **kw: object) -> RunSpec:
    spec = RunSpec(mechanism, order, "gen", load * scale.load_factor, servers=scale.servers, n_jobs=scale.n_jobs,
                   window=scale.window)
    return replace(spec, **kw)  # type: ignore[arg-type]


LOADS = (3.0, 5.0, 7.0, 9.0)
PHILLY_ORDERS: tuple[Order, ...] = ("fifo", "srtf", "las")
MULTI: tuple[tuple[Order, float], ...] = (("las", 4.0), ("srtf", 5.5))
BASELINES: tuple[tuple[Order, str], ...] = (("drf", "7.2x"), ("tetris", "1.8x"))


def physical_spec(scale: Scale, kind: str, mechanism: Mechanism, seed: int) -> RunSpec:
    dynamic = kind == "dynamic"
    return RunSpec(mechanism, "srtf" if dynamic else "fifo", kind, 30.0 if dynamic else 1.0,
                   (30.0, 60.0, 10.0) if dynamic else (60.0, 30.0, 10.0), servers=4, n_jobs=scale.physical_jobs,
                   window=(0, scale.physical_jobs), seed=seed)


def engine_spec(scale: Scale, mechanism: Mechanism) -> RunSpec:
    """The engine check's point: the headline's trace (FIFO, 9 jobs/hr, single-GPU)."""
    return base_spec(scale, mechanism)


def specs_of(experiment: str, scale: Scale) -> list[RunSpec]:
    """The replica runs an experiment needs (the engine check's are `engine_specs_of`)."""
    if experiment == "engine":
        return []
    if experiment == "headline":
        return [headline_spec(scale, m) for m in ("prop", "greedy", "tune", "opt")]
    if experiment == "policies":
        return [base_spec(scale, m, o) for o in ("srtf", "las", "ftf") for m in ("prop", "tune")]
    if experiment == "ratio":
        return [ratio_spec(scale, m, r) for r in (3, 4, 5, 6) for m in ("prop", "tune")]
    if experiment == "load":
        return [gen_spec(scale, m, "fifo", load) for load in LOADS for m in ("prop", "tune")]
    if experiment == "multigpu":
        return ([gen_spec(scale, m, o, load, multi_gpu=True) for o, load in MULTI
                 for m in ("prop", "tune")]
                + [gen_spec(scale, m, "fifo", 5.5, multi_gpu=True, split=W2) for m in ("prop", "greedy", "tune")])
    if experiment == "philly":  # the file is outside the repository: full runs only
        return [] if not scale.peers else [
            RunSpec(m, o, "philly", 0.0, servers=PHILLY_SERVERS, n_jobs=PHILLY_FIRST, window=(0, PHILLY_FIRST))
            for o in PHILLY_ORDERS for m in ("prop", "tune")]
    if experiment == "bigdata":
        return [base_spec(scale, m, o, split=sp) for sp in (W1, W2) for o, _ in BASELINES for m in ("greedy", "tune")]
    return [physical_spec(scale, k, m, s) for k in ("static", "dynamic") for m in ("prop", "tune", "opt")
            for s in range(scale.physical_seeds)]


def engine_specs_of(experiment: str, scale: Scale) -> list[RunSpec]:
    """The engine runs an experiment needs: PROP and TUNE for the engine check, none for the others."""
    return [engine_spec(scale, m) for m in ENGINE_MECHANISMS] if experiment == "engine" else []


Results = dict[RunSpec, RunOutcome]
EngineResults = dict[RunSpec, EngineOutcome]


def selected(options: ReproOptions) -> tuple[str, ...]:
    """The experiments asked for (all by default); an unknown name is an error naming the valid ones."""
    unknown = sorted(set(options.only) - set(EXPERIMENTS))
    if unknown:
        raise UnknownPaper(f"synergy: unknown experiment(s) {', '.join(unknown)}; choose from {', '.join(EXPERIMENTS)}")
    return tuple(options.only) or EXPERIMENTS


def scale_of(options: ReproOptions) -> Scale:
    """The paper's sizes or the quick ones; `--seeds` sets the physical traces' seed count."""
    scale = QUICK if options.quick else FULL
    if options.seeds is not None:
        scale = replace(scale, physical_seeds=max(1, options.seeds))
    return scale


def _run(task: tuple[bool, RunSpec]) -> RunOutcome | EngineOutcome:
    engine, spec = task
    return run_engine(spec) if engine else run_one(spec)


def run_all(only: Sequence[str], scale: Scale, workers: int, progress: bool) -> tuple[Results, EngineResults]:
    """Every distinct point of the selected experiments, once each, on one process pool: the replica's runs
    and the engine check's."""
    specs = list(dict.fromkeys(s for e in EXPERIMENTS if e in only for s in specs_of(e, scale)))
    engine = list(dict.fromkeys(s for e in EXPERIMENTS if e in only for s in engine_specs_of(e, scale)))
    # Longest first, so the pool's last worker is not left with the OPT run.
    ordered = sorted(specs, key=lambda s: (s.trace == "peers", s.mechanism == "opt", s.n_jobs), reverse=True)
    tasks = [(True, s) for s in engine] + [(False, s) for s in ordered]
    outcomes = parallel_map(_run, tasks, workers, "synergy runs", progress)
    runs: Results = {}
    checks: EngineResults = {}
    for (is_engine, spec), outcome in zip(tasks, outcomes, strict=True):
        if isinstance(outcome, EngineOutcome):
            assert is_engine
            checks[spec] = outcome
        else:
            runs[spec] = outcome
    return runs, checks
