"""The AlloX reproduction's report: the paper's claims beside ours, the tables, the conditions and the plots.

Reads the runs' outcomes (`experiment.Results`) and runs nothing itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from pathlib import Path

import numpy as np

from slurmx.reproduce.allox.experiment import (
    ALLOX_PLUS_TIMEOUT_UNITS,
    DEFAULT_ALPHA,
    DEFAULT_ERROR,
    DEFAULT_OVERHEAD,
    MAIN_POLICIES,
    UNIT_S,
    Results,
    RunOutcome,
    RunSpec,
    Scale,
)
from slurmx.reproduce.base import Claim, Reproduction, ResultTable, pct
from slurmx.sim.workloads.allox import AlloxParams

__all__ = ["ASSUMPTIONS", "TITLE", "report"]

TITLE = "AlloX (EuroSys'20): average JCT on 20 GPUs + 20 CPU nodes, α, estimation error and profiling overhead"
PAPER_REDUCTION = {"drff": 0.95, "drfs": 0.84, "es": 0.88, "drfa": 0.53}  # §5.2.2
MONOTONE_TOL = 0.02  # relative slack for "non-increasing / non-decreasing" across sweep points (seed noise)


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


# ---------------------------------------------------------------------------------------------- the report


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


def report(results: Results, only: Sequence[str], scale: Scale, seeds: range, quick: bool,
           plot_dir: Path | None) -> Reproduction:
    """The whole report of the selected experiments, from their runs' outcomes."""
    rep = Reproduction("allox", TITLE, _conditions(scale, seeds, quick), list(ASSUMPTIONS))
    for name, build in (("main", _main), ("alpha", _alpha), ("error", _error), ("overhead", _overhead)):
        if name in only:
            build(rep, results, scale, seeds)
    rep.data["runs"] = len(results)
    rep.data["simulated_s"] = round(sum(o.wall_s for o in results.values()), 1)
    if plot_dir is not None:
        rep.figures = _plots(results, scale, seeds, only, plot_dir)
    return rep
