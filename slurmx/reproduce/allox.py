"""`slurmx reproduce allox`: the AlloX paper's large-scale simulation (EuroSys '20, §5.2.2-§5.3) in our engine.

Setup (§5.1, digest `allox.md` §4.2): 20 GPUs and 20 whole CPU nodes, 10 users x 1,000 jobs with bursty
arrivals standing in for the Google trace, ~10% estimation error, 3% profiling overhead, α = 0.1, five seeds.
Four experiments, selectable with `--only`:

- `main`: average JCT of SRPT, AlloX, AlloX+, DRFA, ES, DRFS, DRFF (Fig. 13): the ordering and the reductions;
- `alpha`: AlloX for α = 0.1 ... 1 (Fig. 16): JCT and the spread of users' progress, gap to SRPT at α = 1;
- `error`: estimation error σ = 0 ... 0.6 for ES, AlloX, SRPT (Fig. 17);
- `overhead`: profiling overhead 0 ... 15% for DRFF, ES, AlloX, SRPT (Fig. 18).

Every run is one `RunSpec`; the experiments share identical runs (AlloX at α = 0.1, σ = 0.1, 3% is one run
for all four), and the distinct ones go through `parallel_map`. Times are reported in the workload's time
unit (60 s; the authors' plots call it "mins").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from slurmx.reproduce import UnknownPaper
from slurmx.reproduce.base import Claim, Reproduction, ReproOptions, ResultTable, pct
from slurmx.sim.config import SimConfig, parse_sim_config
from slurmx.sim.jobs import SimJob
from slurmx.sim.metrics import JobRecord
from slurmx.sim.parallel import parallel_map
from slurmx.sim.runner import run_config
from slurmx.sim.workloads.allox import AlloxParams, allox

__all__ = ["EXPERIMENTS", "TITLE", "RunOutcome", "RunSpec", "average_speedup", "progress_spread", "reproduce",
           "run_one"]

TITLE = "AlloX (EuroSys'20): average JCT on 20 GPUs + 20 CPU nodes, α, estimation error and profiling overhead"
EXPERIMENTS = ("main", "alpha", "error", "overhead")

UNIT_S = 60.0  # the workload's time unit (AlloxParams.time_unit_s)
GPU_NODE = {"nodes": 20, "cpus": 4, "mem": "61G", "gres": "gpu:1"}  # EC2 p2.xlarge: 1 K80, 4 cores, 61 GB
CPU_NODE = {"nodes": 20, "cpus": 32, "mem": "64G"}  # the authors' simulator: 32 cores, 64 GB per machine
MACHINES = {"gpu": 20, "cpu": 20}
TOTAL_MEM_MB = 20 * 61 * 1024 + 20 * 64 * 1024
MAIN_POLICIES = ("srpt", "allox", "allox_plus", "drfa", "es", "drfs", "drff")
PAPER_REDUCTION = {"drff": 0.95, "drfs": 0.84, "es": 0.88, "drfa": 0.53}  # §5.2.2
MONOTONE_TOL = 0.02  # relative slack for "non-increasing / non-decreasing" across sweep points (seed noise)
ALLOX_PLUS_TIMEOUT_UNITS = 500.0  # ALLOX_TIME_OUT in the authors' simulator


@dataclass(frozen=True)
class Scale:
    """How big the runs are: jobs per user, seeds and sweep points (full = the paper's, quick = for tests)."""

    jobs_per_user: int
    seeds: int
    alphas: tuple[float, ...]
    errors: tuple[float, ...]
    overheads: tuple[float, ...]


FULL = Scale(1000, 5, tuple(round(0.1 * i, 1) for i in range(1, 11)), (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6),
             (0.0, 0.03, 0.06, 0.09, 0.12, 0.15))
QUICK = Scale(15, 1, (0.1, 0.5, 1.0), (0.0, 0.1, 0.6), (0.0, 0.03, 0.15))
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

    @staticmethod
    def make(policy: str, seed: int, scale: Scale, alpha: float = DEFAULT_ALPHA, error_sd: float = DEFAULT_ERROR,
             overhead: float = DEFAULT_OVERHEAD) -> RunSpec:
        return RunSpec(policy, seed, scale.jobs_per_user, alpha if policy in ("allox", "allox_plus") else 0.0,
                       error_sd if policy != "drff" else 0.0, overhead if policy != "drff" else 0.0)

    def config(self, jobs: Sequence[SimJob] = ()) -> SimConfig:
        """The run's config; DRFA's β is the workload's average speedup, as the authors compute it, and ES
        splits the machines statically among all the workload's users (the paper's "statically")."""
        params: dict[str, Any] = {}
        if self.policy == "drfa" and jobs:
            params["beta"] = {"cpu": 1.0, "gpu": average_speedup(jobs)}
        if self.policy == "es" and jobs:
            params["users"] = sorted({j.user for j in jobs})
        if self.policy in ("allox", "allox_plus"):
            params["alpha"] = self.alpha
        if self.policy == "allox_plus":
            params["timeout_s"] = ALLOX_PLUS_TIMEOUT_UNITS * UNIT_S
        return parse_sim_config({
            "seed": self.seed,
            "cluster": {"partitions": [{"name": "gpu", "kind": "gpu", **GPU_NODE},
                                       {"name": "cpu", "kind": "cpu", **CPU_NODE}]},
            "policy": {"name": self.policy, "params": params},
            "profiling": {"fraction": self.overhead},
        }, f"allox reproduction ({self.policy})")

    def workload(self) -> list[SimJob]:
        return allox(AlloxParams(jobs_per_user=self.jobs_per_user, estimate_error_sd=self.error_sd), self.seed)


@dataclass(frozen=True)
class RunOutcome:
    """What the report needs of one run, in time units: JCTs (for the CDF), their mean and the mean of the
    longest 1%, the time-averaged spread of users' progress (None for SRPT: it preempts), wall seconds."""

    jct: npt.NDArray[np.float64]
    mean_jct: float
    top1_jct: float
    spread: float | None
    wall_s: float


def run_one(spec: RunSpec) -> RunOutcome:
    """Run one spec (top level, so a process pool can pickle it)."""
    jobs = spec.workload()
    result = run_config(spec.config(jobs), jobs)
    records = [r for r in result.jobs if not r.cancelled]
    if len(records) != len(jobs):
        raise RuntimeError(f"{spec}: {len(jobs) - len(records)} jobs did not complete")
    jct = np.sort(np.array([(r.finish - r.submit) / UNIT_S for r in records]))
    top = jct[-max(1, math.ceil(0.01 * jct.size)):]
    preemptive = any(r.preemptions for r in records)
    spread = None if preemptive else progress_spread(jobs, records)
    return RunOutcome(jct, float(jct.mean()), float(top.mean()), spread, result.stats.wall_s)


def average_speedup(jobs: Sequence[SimJob]) -> float:
    """Mean over the workload of CPU time / GPU time: DRFA's β in CPU machines per GPU (the authors' simulator
    averages (cores x CPU time) / (GPUs x GPU time) over all jobs; a machine here is a whole CPU node)."""
    return float(np.mean([j.variants["cpu"].duration_s / j.variants["gpu"].duration_s for j in jobs]))


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


# ---------------------------------------------------------------------------------------------- experiments

Results = Mapping[RunSpec, RunOutcome]


def _specs(experiment: str, scale: Scale, seeds: range) -> list[RunSpec]:
    out: list[RunSpec] = []
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


def _mean(results: Results, specs: Sequence[RunSpec], what: Callable[[RunOutcome], float | None]) -> float:
    values = [v for s in specs if (v := what(results[s])) is not None]
    return float(np.mean(values)) if values else math.nan


def _jct(results: Results, policy: str, scale: Scale, seeds: range, **kw: float) -> float:
    return _mean(results, [RunSpec.make(policy, s, scale, **kw) for s in seeds], lambda o: o.mean_jct)


def _label(policy: str) -> str:
    return {"allox": "AlloX", "allox_plus": "AlloX+"}.get(policy, policy.upper())


def _fmt(x: float) -> str:
    return f"{x:,.1f}"


def _main(rep: Reproduction, results: Results, scale: Scale, seeds: range) -> None:
    jct = {p: _jct(results, p, scale, seeds) for p in MAIN_POLICIES}
    top1 = {p: _mean(results, [RunSpec.make(p, s, scale) for s in seeds], lambda o: o.top1_jct) for p in jct}
    spread = {p: _mean(results, [RunSpec.make(p, s, scale) for s in seeds], lambda o: o.spread) for p in jct}

    def ordered(values: Mapping[str, float]) -> bool:
        v = values
        return bool(v["srpt"] < v["allox"] < v["drfa"] < min(v["es"], v["drfs"]) <= max(v["es"], v["drfs"]) < v["drff"])

    per_seed = [ordered({p: results[RunSpec.make(p, s, scale)].mean_jct for p in MAIN_POLICIES}) for s in seeds]
    ranking = " < ".join(_label(p) for p in sorted(MAIN_POLICIES, key=jct.__getitem__))
    rep.claims.append(Claim(
        "main: average JCT ordering", "SRPT < AlloX < DRFA < {ES, DRFS} < DRFF (Fig. 13)",
        f"{ranking}; in {sum(per_seed)}/{len(per_seed)} seeds",
        all(per_seed), "SRPT < AlloX < DRFA < {ES, DRFS} < DRFF in every seed"))
    for base, paper in PAPER_REDUCTION.items():
        cut = 1.0 - jct["allox"] / jct[base]
        rep.claims.append(Claim(f"main: AlloX's JCT reduction vs {base.upper()}", f"{paper:.0%} (§5.2.2)", pct(cut),
                                cut > 0, "ours > 0 (size: beside the paper's)"))
    gap = jct["allox"] / jct["srpt"] - 1.0
    rep.claims.append(Claim("main: AlloX (α = 0.1) above SRPT", "30% (§5.2.2; 'not far from SRPT')",
                            f"{pct(gap)} (or SRPT {pct(1 - jct['srpt'] / jct['allox'])} below AlloX)", None,
                            "informational: SRPT preempts for free"))
    rep.claims.append(Claim("main: longest 1% of jobs, AlloX vs SRPT", "AlloX beats SRPT (Fig. 13 caption)",
                            f"AlloX {_fmt(top1['allox'])} vs SRPT {_fmt(top1['srpt'])}",
                            top1["allox"] < top1["srpt"], "AlloX < SRPT (mean JCT of the longest 1%)"))
    rows = tuple((_label(p), _fmt(jct[p]), _fmt(top1[p]),
                  f"{spread[p]:.4f}" if not math.isnan(spread[p]) else "n/a (preempts)",
                  pct(1.0 - jct["allox"] / jct[p]) if p != "allox" else "")
                 for p in sorted(MAIN_POLICIES, key=jct.__getitem__))
    rep.tables.append(ResultTable(f"main: mean over {len(seeds)} seeds (time unit {UNIT_S:g} s)",
                                  ("policy", "avg JCT", "avg JCT longest 1%", "progress std", "AlloX reduction"),
                                  rows))
    rep.data["main"] = {"mean_jct": jct, "top1_jct": top1, "progress_std": spread, "ordered_per_seed": per_seed,
                        "mean_jct_per_seed": {p: [results[RunSpec.make(p, s, scale)].mean_jct for s in seeds]
                                              for p in MAIN_POLICIES}}


def _monotone(values: Sequence[float], direction: int) -> bool:
    """Non-increasing (direction -1) or non-decreasing (+1), each step within MONOTONE_TOL of the last."""
    return all(direction * (b - a) >= -MONOTONE_TOL * abs(a) for a, b in pairwise(values))


def _alpha(rep: Reproduction, results: Results, scale: Scale, seeds: range) -> None:
    jct = [_jct(results, "allox", scale, seeds, alpha=a) for a in scale.alphas]
    spread = [_mean(results, [RunSpec.make("allox", s, scale, alpha=a) for s in seeds], lambda o: o.spread)
              for a in scale.alphas]
    srpt = _jct(results, "srpt", scale, seeds)
    tol = f"each step within {MONOTONE_TOL:.0%}"
    rep.claims.append(Claim("alpha: AlloX's JCT non-increasing in α", "falls monotonically toward SRPT (Fig. 16)",
                            " → ".join(_fmt(v) for v in jct), _monotone(jct, -1), f"non-increasing ({tol})"))
    rep.claims.append(Claim("alpha: spread of users' progress non-decreasing in α", "rises with α (Fig. 16)",
                            " → ".join(f"{v:.4f}" for v in spread), _monotone(spread, +1),
                            f"non-decreasing ({tol})"))
    if scale.alphas[-1] == 1.0:
        rep.claims.append(Claim("alpha: gap to SRPT at α = 1", "9% (§5.2.4)", pct(jct[-1] / srpt - 1.0), None,
                                "informational: printed beside the paper's"))
    rep.tables.append(ResultTable(f"alpha: AlloX, mean over {len(seeds)} seeds (SRPT {_fmt(srpt)})",
                                  ("α", "avg JCT", "progress std", "above SRPT"),
                                  tuple((f"{a:g}", _fmt(j), f"{s:.4f}", pct(j / srpt - 1.0))
                                        for a, j, s in zip(scale.alphas, jct, spread, strict=True))))
    rep.data["alpha"] = {"alphas": list(scale.alphas), "mean_jct": jct, "progress_std": spread, "srpt": srpt}


def _sweep(rep: Reproduction, results: Results, scale: Scale, seeds: range, name: str,
           points: Sequence[float], policies: Sequence[str]) -> dict[str, list[float]]:
    key = "error_sd" if name == "error" else "overhead"
    jct = {p: [_jct(results, p, scale, seeds, **{key: x}) for x in points] for p in policies}
    label = "σ of error" if name == "error" else "profiling overhead"
    rep.tables.append(ResultTable(f"{name}: average JCT, mean over {len(seeds)} seeds",
                                  (label, *(_label(p) for p in policies)),
                                  tuple((pct(x, 0), *(_fmt(jct[p][i]) for p in policies))
                                        for i, x in enumerate(points))))
    rep.data[name] = {"points": list(points), "mean_jct": jct}
    return jct


def _error(rep: Reproduction, results: Results, scale: Scale, seeds: range) -> None:
    jct = _sweep(rep, results, scale, seeds, "error", scale.errors, ("es", "allox", "srpt"))
    cuts = [1.0 - a / e for a, e in zip(jct["allox"], jct["es"], strict=True)]
    rep.claims.append(Claim("error: AlloX's reduction vs ES across σ = 0 … " + pct(scale.errors[-1], 0),
                            "large improvements persist (Fig. 17)", " → ".join(pct(c, 0) for c in cuts),
                            min(cuts) > 0, "AlloX < ES at every σ"))
    gaps = [a / s - 1.0 for a, s in zip(jct["allox"], jct["srpt"], strict=True)]
    rep.claims.append(Claim("error: AlloX above SRPT across σ", "similar to SRPT (§5.3.1)",
                            " → ".join(pct(g, 0) for g in gaps), None, "informational"))


def _overhead(rep: Reproduction, results: Results, scale: Scale, seeds: range) -> None:
    jct = _sweep(rep, results, scale, seeds, "overhead", scale.overheads, ("drff", "es", "allox", "srpt"))
    rep.claims.append(Claim("overhead: DRFF unchanged", "flat: DRFF profiles nothing (Fig. 18)",
                            f"{_fmt(jct['drff'][0])} at every point", len(set(jct["drff"])) == 1,
                            "identical JCT (by construction: no profiling)"))
    worse = {p: jct[p][-1] > jct[p][0] for p in ("es", "allox", "srpt")}
    rep.claims.append(Claim("overhead: the profiling methods degrade", "all others degrade (Fig. 18)",
                            ", ".join(f"{_label(p)} {_fmt(jct[p][0])} → {_fmt(jct[p][-1])}"
                                      for p in worse), all(worse.values()),
                            f"JCT at {pct(scale.overheads[-1], 0)} > at {pct(scale.overheads[0], 0)}"))
    best = all(a < min(e, d) for a, e, d in zip(jct["allox"], jct["es"], jct["drff"], strict=True))
    cuts = [1.0 - a / d for a, d in zip(jct["allox"], jct["drff"], strict=True)]
    rep.claims.append(Claim("overhead: AlloX best of the non-preemptive methods",
                            "consistent, significant improvements (§5.3.2)",
                            "vs DRFF " + " → ".join(pct(c, 0) for c in cuts), best,
                            "AlloX < ES and < DRFF at every overhead"))


# ---------------------------------------------------------------------------------------------- plots


def _plots(results: Results, scale: Scale, seeds: range, only: Sequence[str], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    if "main" in only:
        fig, ax = plt.subplots(figsize=(6, 4))
        for p in MAIN_POLICIES:
            jct = np.sort(np.concatenate([results[RunSpec.make(p, s, scale)].jct for s in seeds]))
            ax.plot(jct, np.arange(1, jct.size + 1) / jct.size, label=_label(p))
        ax.set(xscale="log", xlabel=f"JCT (units of {UNIT_S:g} s)", ylabel="fraction of jobs",
               title="AlloX reproduction: JCT CDF")
        ax.legend()
        paths.append(out / "allox_jct_cdf.png")
        fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
        plt.close(fig)
    if "alpha" in only:
        fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
        alpha_jct = [_jct(results, "allox", scale, seeds, alpha=a) for a in scale.alphas]
        spread = [_mean(results, [RunSpec.make("allox", s, scale, alpha=a) for s in seeds], lambda o: o.spread)
                  for a in scale.alphas]
        left.plot(scale.alphas, alpha_jct, "o-", label="AlloX")
        left.axhline(_jct(results, "srpt", scale, seeds), color="k", ls="--", label="SRPT")
        left.set(xlabel="α", ylabel="average JCT", title="JCT vs α")
        left.legend()
        right.plot(scale.alphas, spread, "o-")
        right.set(xlabel="α", ylabel="std. of users' progress", title="fairness vs α")
        paths.append(out / "allox_alpha.png")
        fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
        plt.close(fig)
    return paths


# ---------------------------------------------------------------------------------------------- entry point


def _conditions(scale: Scale, seeds: range, quick: bool) -> list[str]:
    return [
        "cluster: 20 GPU nodes (1 GPU, 4 cores, 61 GB each) + 20 CPU nodes (32 cores, 64 GB each): 40 machines",
        f"workload: {AlloxParams().n_users} users x {scale.jobs_per_user:,} jobs, bursty arrivals "
        f"(slurmx.sim.workloads.allox), time unit {UNIT_S:g} s" + (" (quick: far fewer jobs)" if quick else ""),
        f"seeds: {len(seeds)} (workload seeds {seeds.start}..{seeds.stop - 1}); the tables show seed means",
        f"defaults: α = {DEFAULT_ALPHA}, estimation error σ = {DEFAULT_ERROR} (per device, clamped to ±99%), "
        f"profiling overhead {DEFAULT_OVERHEAD:.0%} (none for DRFF)",
        "AlloX: exact matching over all waiting jobs of the α-selected users (no N_max cap), one start per solve, "
        "α doubles while nothing starts; SRPT preempts for free (grace 0); a preempted job resumes on the kind it "
        "started on (the engine keeps only a started job's variant), so unlike the paper's SRPT it never migrates",
    ]


ASSUMPTIONS = [
    "Google-like arrivals: the 2011 trace is not available; a two-state Markov-modulated Poisson process of "
    "geometric batches (0.31 and 0.60 jobs per unit, dwell 1,000 units, mean batch 2) with the first 100 units "
    "collapsed to t = 0, matching the 310-600 jobs per 1,000 units of the authors' job_google_m1.txt",
    "job sizes: the authors' simulator pipeline: CPU time of user u ~ N(80 + 30u, 15) on [40, 450] units; "
    "per-job speedup ~ N(s_u, 1.2 s_u) on [0.7, 60] with s = [33, 40, 64, 96, 96, 160, 192, 224, 256, 480] / 32; "
    "GPU time = CPU time / speedup on [1, 400]; CPU variant = a whole node, GPU variant = 1 GPU + 1 core + 2 GB",
    "estimation error: estimate = truth x (1 + ε), ε ~ N(0, σ) per device, clamped to ±0.99; the truths do not "
    "change with σ (the draws are made at every σ)",
    "profiling: '3%' read as samples of 1% + 2% per device (authors' simulator), CPU and GPU samples run side by "
    "side, so a job becomes schedulable after 3% of its longer (CPU) time; the samples do not occupy machines "
    "(strict priority in the paper), so overhead here only delays jobs",
    "progress spread: the paper's value (dominant share on the favoured kind x favoured / actual time) from the "
    "true times, sample std over users with a job in the system, time-averaged over [0, last arrival]",
    "DRFA's β is the average speedup over the whole workload (true times), as the authors' simulator computes it "
    "(the policy's default, the average over the jobs in view, is for a live cluster)",
    "ES splits each kind statically over all 10 users of the workload (2 GPUs + 2 CPU nodes each), as the paper "
    "and the authors' simulator do: a user with nothing to run leaves her share idle",
    f"AlloX+ times out after {ALLOX_PLUS_TIMEOUT_UNITS:g} units, as the authors' simulator",
    "JCT includes profiling, queueing and run time; all jobs run to completion (no end-of-simulation cut)",
]


def reproduce(options: ReproOptions, jobs_per_user: int | None = None) -> Reproduction:
    """Run the selected experiments and compare them with the paper. `jobs_per_user` overrides the scale's
    (the paper's 1,000; quick 15), for a smaller full run on a busy machine."""
    unknown = sorted(set(options.only) - set(EXPERIMENTS))
    if unknown:
        raise UnknownPaper(f"allox: unknown experiment(s) {', '.join(unknown)}; choose from {', '.join(EXPERIMENTS)}")
    only = options.only or EXPERIMENTS
    base = QUICK if options.quick else FULL
    scale = Scale(jobs_per_user or base.jobs_per_user, options.seeds or base.seeds, base.alphas, base.errors,
                  base.overheads)
    seeds = range(scale.seeds)
    specs = list(dict.fromkeys(s for e in EXPERIMENTS if e in only for s in _specs(e, scale, seeds)))
    outcomes = parallel_map(run_one, specs, options.workers, "allox runs", options.progress)
    results = dict(zip(specs, outcomes, strict=True))
    rep = Reproduction("allox", TITLE, _conditions(scale, seeds, options.quick), list(ASSUMPTIONS))
    for name, build in (("main", _main), ("alpha", _alpha), ("error", _error), ("overhead", _overhead)):
        if name in only:
            build(rep, results, scale, seeds)
    rep.data["runs"] = len(specs)
    rep.data["simulated_s"] = round(sum(o.wall_s for o in outcomes), 1)
    if options.plot_dir is not None:
        rep.figures = _plots(results, scale, seeds, only, options.plot_dir)
    return rep
