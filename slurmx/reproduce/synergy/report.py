"""The Synergy reproduction's report: the paper's claims beside ours, the tables, the conditions and the plot.

Reads the runs' outcomes (`experiment.Results`) and runs nothing itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from slurmx.policies.synergy import Mechanism
from slurmx.reproduce.base import (
    Claim,
    Reproduction,
    ResultTable,
    band_claim,
    bound_claim,
    change_pct,
    info_claim,
    ordering_claim,
    quick_claims,
)
from slurmx.reproduce.philly_csv import PHILLY_CSV
from slurmx.reproduce.synergy.experiment import (
    BASELINES,
    ENGINE_MECHANISMS,
    LOADS,
    MULTI,
    PHILLY_ORDERS,
    W1,
    W2,
    EngineResults,
    Results,
    Scale,
    base_spec,
    engine_spec,
    gen_spec,
    headline_spec,
    philly_jobs,
    physical_spec,
    ratio_spec,
    specs_of,
)

__all__ = ["ASSUMPTIONS", "ENGINE_CHECK", "INVARIANT", "PEERS", "TITLE", "report"]

TITLE = "Synergy (OSDI'22): resource-sensitive CPU and memory allocation for DNN jobs"
PEERS = {("fifo", "prop"): 81.09, ("fifo", "tune"): 21.88, ("srtf", "prop"): 38.03, ("srtf", "tune"): 16.60}
INVARIANT = "checked every round"
ENGINE_TOLERANCE = 0.05
ENGINE_CHECK = f"|engine / replica - 1| <= {ENGINE_TOLERANCE:.0%}"
ENGINE_CONDITION = ("engine check: the registered `synergy` policy (PROP, TUNE) in slurmx.sim.engine's round mode, "
                    "one node per job, continuous progress, on the headline's trace; the replica beside it with the "
                    "policy's consolidating placement and the trace replayed once")
PAPER_RATIO = {3: "3.4x", 4: "3x", 5: "2.2x", 6: "1.8x"}
# Bands around the paper's PROP / TUNE gains: 20% of the paper's number, cut at 1x (no gain); the headline's
# 0.4x keeps the bar it has always had (>= 3.0x).
HEADLINE_TOLERANCE = 0.4
GAIN_TOLERANCE = 0.2  # relative to the paper's gain
PEER_TOLERANCE = {"fifo": 0.02, "srtf": 0.05}  # same job list as the authors' simulator: relative to their JCT


def _gain_band(paper: float) -> float:
    return GAIN_TOLERANCE * paper


def _cut(prop: float, tune: float) -> float:
    """TUNE's cut of PROP's JCT in %, positive when TUNE is better."""
    return -change_pct(tune, prop)


def _ratio_of(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


def _headline(rep: Reproduction, res: Results, scale: Scale) -> None:
    runs = {m: res[headline_spec(scale, m)] for m in ("prop", "greedy", "tune", "opt")}
    gain = _ratio_of(runs["prop"].mean_h, runs["tune"].mean_h)
    gap = runs["tune"].mean_h / runs["opt"].mean_h - 1
    tune, prop = runs["tune"], runs["prop"]
    seed = [headline_spec(scale, "tune").seed]
    rep.claims.append(band_claim(
        "FIFO 9 jobs/hr: average JCT PROP / TUNE", "3.4x (81 h vs 22 h)",
        f"{gain:.2f}x ({runs['prop'].mean_h:.2f} h vs {runs['tune'].mean_h:.2f} h)", value=gain, paper_value=3.4,
        unit="x", direction="higher", tolerance=HEADLINE_TOLERANCE, neutral=1.0, seeds=seed))
    rep.claims.append(band_claim(
        "§5.6: TUNE's per-round allocation within 10% of OPT's optimum, 128 GPUs", "within 10% of the optimal value",
        f"{tune.opt_ratio:.1%} of OPT summed over {tune.rounds:,} rounds (worst round {tune.opt_worst:.1%}; "
        f"{tune.opt_within:.1%} of rounds >= 90%; {tune.opt_gain_captured:.0%} of OPT's gain over PROP); "
        f"PROP {prop.opt_ratio:.1%}", value=100 * tune.opt_ratio, paper_value=90.0, unit="%", direction="higher",
        band=(90.0, None), seeds=seed, check="sum TUNE / sum OPT >= 90%, same rounds' jobs"))
    rep.claims.append(band_claim(
        "§5.3.2 Fig 9: TUNE's average JCT within 10% of OPT's", "22 h vs 20 h (+10%)",
        f"{runs['tune'].mean_h:.2f} h vs {runs['opt'].mean_h:.2f} h ({gap:+.1%})", value=100 * gap, paper_value=10.0,
        unit="%", direction="lower", band=(None, 10.0), seeds=seed, check="TUNE / OPT - 1 <= 10%"))
    rep.claims.append(info_claim("GREEDY (skip if the best case does not fit)", "fragments GPUs; can trail PROP",
                                 f"{runs['greedy'].mean_h:.2f} h", value=runs["greedy"].mean_h, unit="h",
                                 direction="lower", seeds=seed))
    if scale.peers:
        for m in ("prop", "tune"):
            rep.claims.append(_peer_claim("fifo", m, runs[m].mean_h, seed))
    checked = sum(o.checked_rounds for o in res.values())
    rep.claims.append(bound_claim("no job below its proportional throughput, every round of every run", "by design",
                                  f"0 violations in {checked:,} rounds", value=0.0, band=(0.0, 0.0),
                                  unit="violations", paper_value=0.0, check=INVARIANT))
    rep.tables.append(ResultTable("FIFO, 9 jobs/hr, single-GPU, (20, 70, 10)",
                                  ("mechanism", "avg JCT (h)", "p99 JCT (h)", "rounds", "mechanism s/round"),
                                  tuple((m, f"{o.mean_h:.2f}", f"{o.p99_h:.2f}", str(o.rounds),
                                         f"{o.mechanism_wall_s / max(o.rounds, 1) * 1000:.2f} ms")
                                        for m, o in runs.items())))


def _peer_claim(order: str, mechanism: str, ours: float, seed: list[int]) -> Claim:
    """Ours against the authors' simulator's JCT on the same job list (a band of `PEER_TOLERANCE` around it)."""
    theirs = PEERS[(order, mechanism)]
    tolerance = PEER_TOLERANCE[order]
    return band_claim(f"same job list as the authors' simulator, {order.upper()}+{mechanism}",
                      f"{theirs} h (their run)", f"{ours:.2f} h ({ours / theirs - 1:+.1%})", value=ours,
                      paper_value=theirs, unit="h", direction="lower", tolerance=tolerance * theirs, neutral=None,
                      seeds=seed, check=f"|ours/theirs - 1| <= {tolerance:.0%}")


def _policies(rep: Reproduction, res: Results, scale: Scale) -> None:
    rows = []
    for o in ("srtf", "las", "ftf"):
        prop, tune = res[base_spec(scale, "prop", o)], res[base_spec(scale, "tune", o)]
        gain = _ratio_of(prop.mean_h, tune.mean_h)
        rows.append((o.upper(), f"{prop.mean_h:.2f}", f"{tune.mean_h:.2f}", f"{gain:.2f}x"))
        paper, paper_gain = {"srtf": ("gains up to 3.4x (single-GPU)", 3.4),
                             "las": ("gains up to 3.4x (single-GPU)", 3.4), "ftf": ("2.3x (single-GPU)", 2.3)}[o]
        rep.claims.append(ordering_claim(
            f"{o.upper()} 9 jobs/hr: average JCT PROP / TUNE", paper, f"{gain:.2f}x",
            margin=_cut(prop.mean_h, tune.mean_h), paper_margin=100 * (1 - 1 / paper_gain),
            seeds=[base_spec(scale, "prop", o).seed],
            check="TUNE better than PROP (TUNE's cut of PROP's JCT > 0); the paper's 'up to' is no band"))
        if scale.peers and (o, "prop") in PEERS:
            for m, run in (("prop", prop), ("tune", tune)):
                rep.claims.append(_peer_claim(o, m, run.mean_h, [base_spec(scale, "prop", o).seed]))
    rep.tables.append(ResultTable("Policies at 9 jobs/hr, single-GPU (FTF: largest finish-time ratio first)",
                                  ("policy", "PROP avg JCT (h)", "TUNE avg JCT (h)", "gain"), tuple(rows)))


PAPER_FIG6 = {"fifo": (71.0, 62.0), "srtf": (30.0, 26.0), "las": (32.0, 28.0)}  # avg JCT (h) PROP -> TUNE


def _philly(rep: Reproduction, res: Results, scale: Scale) -> None:
    """Fig. 6 on the Philly-derived CSV with the released selection rules: directions, not the paper's hours (the
    derived CSV is not the raw log, and the selection yields about 6,000 jobs, not 8,000)."""
    specs = specs_of("philly", scale)
    if not specs:
        rep.conditions.append("philly: skipped (quick run; the Philly-derived CSV is outside the repository)")
        return
    rows = []
    for order in PHILLY_ORDERS:
        prop, tune = (next(res[s] for s in specs if s.order == order and s.mechanism == m) for m in ("prop", "tune"))
        paper_prop, paper_tune = PAPER_FIG6[order]
        rows.append((order.upper(), f"{prop.mean_h:.2f} ({paper_prop:g})", f"{tune.mean_h:.2f} ({paper_tune:g})",
                     f"{_cut(prop.mean_h, tune.mean_h):+.1f}% ({_cut(paper_prop, paper_tune):+.1f}%)",
                     f"{prop.p99_h:.1f} / {tune.p99_h:.1f}"))
        rep.claims.append(ordering_claim(
            f"Fig. 6, Philly 512 GPUs, {order.upper()}: average JCT PROP / TUNE", f"{paper_prop:g} -> {paper_tune:g} h",
            f"{prop.mean_h:.2f} -> {tune.mean_h:.2f} h", margin=_cut(prop.mean_h, tune.mean_h),
            paper_margin=_cut(paper_prop, paper_tune), seeds=[specs[0].seed],
            check="TUNE better than PROP (the direction; the hours depend on the raw log we do not have)"))
    jobs = len(philly_jobs(PHILLY_CSV))
    rep.tables.append(ResultTable(
        f"Fig. 6: Philly-derived CSV, {jobs:,} jobs (arrivals 2400-3000 h after 2017-08-07, GPUs 1-16, 31.6 min "
        "to 166.7 h), 64 servers x 8 GPUs; ours (paper)",
        ("policy", "PROP avg JCT (h)", "TUNE avg JCT (h)", "TUNE's cut", "p99 PROP / TUNE (h)"), tuple(rows)))


def _ratio(rep: Reproduction, res: Results, scale: Scale) -> list[float]:
    gains, rows = [], []
    for r in (3, 4, 5, 6):
        prop, tune = res[ratio_spec(scale, "prop", r)], res[ratio_spec(scale, "tune", r)]
        gains.append(_ratio_of(prop.mean_h, tune.mean_h))
        rows.append((str(r), f"{prop.mean_h:.2f}", f"{tune.mean_h:.2f}", f"{gains[-1]:.2f}x", PAPER_RATIO[r]))
    margin = min(min(-change_pct(b, a) for a, b in itertools.pairwise(gains)), -change_pct(gains[-1], gains[0]))
    rep.claims.append(ordering_claim("gains shrink as CPU:GPU grows 3 -> 6", "3.4x, 3x, 2.2x, 1.8x",
                                     ", ".join(f"{g:.2f}x" for g in gains), margin=margin,
                                     paper_margin=-change_pct(3.0, 3.4), strict=False,
                                     seeds=[ratio_spec(scale, "prop", 3).seed],
                                     check="each gain <= the one before (smallest fall >= 0)"))
    rep.tables.append(ResultTable("CPU:GPU ratio, FIFO 9 jobs/hr", ("CPU:GPU", "PROP (h)", "TUNE (h)", "gain", "paper"),
                                  tuple(rows)))
    return gains


def _load(rep: Reproduction, res: Results, scale: Scale) -> None:
    rows, gains, cuts = [], [], []
    for load in LOADS:
        prop, tune = res[gen_spec(scale, "prop", "fifo", load)], res[gen_spec(scale, "tune", "fifo", load)]
        gains.append(_ratio_of(prop.mean_h, tune.mean_h))
        cuts.append(_cut(prop.mean_h, tune.mean_h))
        rows.append((f"{load:g}", f"{prop.mean_h:.2f}", f"{tune.mean_h:.2f}", f"{gains[-1]:.2f}x"))
    rep.claims.append(ordering_claim("load sweep (FIFO, our generator): TUNE never worse, gains grow with load",
                                     "gains grow with load (Fig 9)", ", ".join(f"{g:.2f}x" for g in gains),
                                     margin=min(*cuts, change_pct(gains[-1], gains[0])), strict=False,
                                     seeds=[gen_spec(scale, "prop", "fifo", LOADS[0]).seed],
                                     check="TUNE's cut >= 0 at every load and last gain >= first"))
    rep.tables.append(ResultTable("Load sweep, FIFO, single-GPU, (20, 70, 10), generator seed 42",
                                  ("jobs/hr (x128 GPUs)", "PROP (h)", "TUNE (h)", "gain"), tuple(rows)))


def _multigpu(rep: Reproduction, res: Results, scale: Scale) -> None:
    rows = []
    for o, load in MULTI:
        prop = res[gen_spec(scale, "prop", o, load, multi_gpu=True)]
        tune = res[gen_spec(scale, "tune", o, load, multi_gpu=True)]
        gain = _ratio_of(prop.mean_h, tune.mean_h)
        rows.append((f"{o.upper()} {load:g}/hr", f"{prop.mean_h:.2f}", f"{tune.mean_h:.2f}", f"{gain:.2f}x"))
        rep.claims.append(ordering_claim(f"multi-GPU {o.upper()} at {load:g} jobs/hr: PROP / TUNE", "up to 1.6x",
                                         f"{gain:.2f}x", margin=_cut(prop.mean_h, tune.mean_h),
                                         paper_margin=100 * (1 - 1 / 1.6), strict=False,
                                         seeds=[gen_spec(scale, "prop", o, load, multi_gpu=True).seed],
                                         check="TUNE never worse (cut of PROP's JCT >= 0)"))
    w2 = {m: res[gen_spec(scale, m, "fifo", 5.5, multi_gpu=True, split=W2)] for m in ("prop", "greedy", "tune")}
    rows.extend((f"FIFO W2 {m}", f"{w2[m].mean_h:.2f}", "", "") for m in w2)
    rep.claims.append(ordering_claim("(50, 0, 50), FIFO 5.5 jobs/hr: TUNE never worse than PROP; GREEDY worse",
                                     "Fig 11c: TUNE <= PROP < GREEDY",
                                     f"TUNE {w2['tune'].mean_h:.2f} h, PROP {w2['prop'].mean_h:.2f} h, "
                                     f"GREEDY {w2['greedy'].mean_h:.2f} h",
                                     margin=_cut(w2["prop"].mean_h, w2["tune"].mean_h),
                                     seeds=[gen_spec(scale, "tune", "fifo", 5.5, multi_gpu=True, split=W2).seed],
                                     strict=False, check="TUNE <= PROP"))
    rep.tables.append(ResultTable("Multi-GPU Philly demand mix", ("run", "PROP or plain (h)", "TUNE (h)", "gain"),
                                  tuple(rows)))


def _bigdata(rep: Reproduction, res: Results, scale: Scale) -> None:
    rows = []
    for sp, label in ((W1, "W1 (20, 70, 10)"), (W2, "W2 (50, 0, 50)")):
        for o, paper in BASELINES:
            plain, tuned = res[base_spec(scale, "greedy", o, split=sp)], res[base_spec(scale, "tune", o, split=sp)]
            gain = _ratio_of(plain.mean_h, tuned.mean_h)
            rows.append((o.upper(), label, f"{plain.mean_h:.2f}", f"{tuned.mean_h:.2f}", f"{gain:.2f}x"))
            if sp == W2:
                paper_gain = float(paper.rstrip("x"))
                rep.claims.append(band_claim(
                    f"§5.7 Fig 13: {o.upper()} with Synergy demands, W2: plain / TUNE", paper, f"{gain:.2f}x",
                    value=gain, paper_value=paper_gain, unit="x", direction="higher",
                    tolerance=_gain_band(paper_gain), neutral=1.0, seeds=[base_spec(scale, "tune", o, split=sp).seed]))
    rep.tables.append(ResultTable("DRF and Tetris with Synergy's best-case demands (plain = skip a job whose demand "
                                  "does not fit), single-GPU, 9 jobs/hr at 128 GPUs",
                                  ("policy", "split", "plain (h)", "TUNE (h)", "gain"), tuple(rows)))


def _physical_claims(rep: Reproduction, res: Results, scale: Scale) -> None:
    seeds = range(scale.physical_seeds)

    def values(kind: str, m: Mechanism, what: str) -> list[float]:
        return [float(getattr(res[physical_spec(scale, kind, m, s)], what)) for s in seeds]

    rows = []
    for kind, what, label, paper in (("static", "makespan_h", "FIFO makespan", (15.67, 11.33, 11.01)),
                                     ("dynamic", "mean_h", "SRTF average JCT", (4.52, 3.19, 3.06)),
                                     ("dynamic", "p99_h", "SRTF p99 JCT", (16.85, 8.54, 8.21))):
        per = {m: values(kind, m, what) for m in ("prop", "tune", "opt")}
        ours = [float(np.mean(per[m])) for m in ("prop", "tune", "opt")]
        rows.append((label, *(f"{v:.2f}" for v in ours), " / ".join(f"{p}" for p in paper)))
        gain = _ratio_of(ours[0], ours[1])
        paper_gain = paper[0] / paper[1]
        rep.claims.append(band_claim(
            f"32 GPUs, {label}: PROP / TUNE (simulated)", f"{paper_gain:.2f}x", f"{gain:.2f}x", value=gain,
            paper_value=paper_gain, unit="x", direction="higher", tolerance=_gain_band(paper_gain), neutral=1.0,
            seeds=seeds, per_seed=[_ratio_of(p, t) for p, t in zip(per["prop"], per["tune"], strict=True)]))
    rep.tables.append(ResultTable("32-GPU physical-like traces (Table 5 simulated column), mean over seeds",
                                  ("metric", "PROP", "TUNE", "OPT", "paper PROP / TUNE / OPT"), tuple(rows)))


def _plots(res: Results, scale: Scale, only: Sequence[str], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    figures = []
    if "load" in only:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for m in ("prop", "tune"):
            ax.plot(LOADS, [res[gen_spec(scale, m, "fifo", load)].mean_h for load in LOADS], marker="o",
                    label=m.upper())
        ax.set_xlabel("load (jobs/hr at 128 GPUs)")
        ax.set_ylabel("average JCT (h)")
        ax.set_title("Synergy: FIFO, single-GPU (Fig 9a)")
        ax.legend()
        path = out / "synergy_load.png"
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        figures.append(path)
    return figures


def _conditions(scale: Scale, quick: bool) -> list[str]:
    gpus = scale.servers * 8
    return [
        f"{gpus} GPUs: {scale.servers} servers x (8 GPUs, 24 CPUs, 500 GB); rounds of 300 s; progress credited as "
        "floor(300 / (iteration time / speed)) iterations at round start; completions at lease end",
        ("trace: the authors' job list (6,925 jobs, 9 jobs/hr, seed 42); average over jobs 4000-4999"
         if scale.peers else f"trace: our generator, {scale.n_jobs} jobs, loads scaled by {gpus}/128, "
         f"measured jobs {scale.window[0]}-{scale.window[1] - 1}") + ("" if not quick else " (quick run)"),
        "speeds: the released simulator's two levels for PROP/GREEDY/TUNE (best-case speedup or 1), the full "
        "per-GPU matrix for OPT (LP1 on the super-machine, HiGHS milp, jobs of one model aggregated)",
        "placement: first fit GPU by GPU in server order (the released default); TUNE in policy order",
        "invariants asserted every round: throughput >= proportional, no over-commit, every admitted GPU placed",
        "not run: the 512-GPU Philly experiment (§5.3.1, Fig 6); it needs the raw Philly cluster_job_log, which is "
        "not in ../shared/traces (blocked by data)",
    ]


ASSUMPTIONS = [
    "FTF serves the largest finish-time ratio rho first, as Themis (the released code sorts ascending)",
    "CPU:GPU 4/5/6: speedups re-normalised from the 3:1 matrices, W(c*, m*) / W(ratio CPUs, 62.5 GB); the "
    "released ratio-6 profiles' 24-CPU AlexNet/ShuffleNet values (3.83, 4.54) are not in the matrices, so ours "
    "use 2.94 and 2.89",
    "trace durations stay those drawn at 3:1 for every ratio (only speedups change), as the released code",
    "multi-GPU: best case capped at one server's CPUs and memory, speedup interpolated by CPU (released rule); "
    "jobs above 8 GPUs run proportional",
    "DRF and Tetris order by Synergy's best-case demand (Tetris: no per-machine alignment score, as the released "
    "code); their plain variant is GREEDY, the tuned one TUNE",
    "Fig 13's unstated setting is the released AE readme's: single-GPU, 9 jobs/hr, 128 GPUs, W1 and W2; W2 keeps the "
    "authors' arrivals and durations (their generator draws them independently of the model) with the released "
    "split rule's models, iterations = duration at the proportional share / the model's iteration time",
    "TUNE vs OPT per round (§5.6): TUNE's summed relative throughput against LP1's optimum on the same round's "
    "placed jobs, summed over the run's rounds",
    "physical traces regenerated: 100 single-GPU jobs, durations 10^U(1.5, 3) min (the released files are not "
    "among our inputs), static at t=0 (60, 30, 10); dynamic Poisson 30 jobs/hr (30, 60, 10)",
    "the released starvation bump: a job idle 1000 h since its last round goes to the front for good; no profiling "
    "or restart overhead",
    "arrivals go on until the measured jobs are done, as the released runner generates jobs until then: past the "
    "trace's last arrival (770 h for the authors' list) the trace arrives again, shifted by that time (unmeasured "
    "copies; their generator's later jobs are not known); the physical traces are replayed once, as released",
]


def _engine(rep: Reproduction, checks: EngineResults, scale: Scale) -> None:
    rows = []
    for m in ENGINE_MECHANISMS:
        o = checks[engine_spec(scale, m)]
        rows.append((m, f"{o.engine_mean_h:.2f}", f"{o.replica_mean_h:.2f}", f"{o.gap:+.1%}", f"{o.engine_p99_h:.2f}",
                     f"{o.replica_p99_h:.2f}", f"{o.policy_calls:,}", f"{o.lease_changes:,}"))
        rep.claims.append(bound_claim(f"the registered policy (synergy-{m}) in the engine, as the daemon runs it, vs "
                                      "the replica on the same trace, FIFO 9 jobs/hr", "(ours: one code path)",
                                      f"{o.engine_mean_h:.2f} h vs {o.replica_mean_h:.2f} h ({o.gap:+.1%})",
                                      value=100 * o.gap, band=(-100 * ENGINE_TOLERANCE, 100 * ENGINE_TOLERANCE),
                                      unit="%", paper_value=0.0, check=ENGINE_CHECK))
    rep.tables.append(ResultTable("The registered policy in the engine vs the replica (FIFO, 9 jobs/hr, single-GPU, "
                                  "consolidating placement, trace once)",
                                  ("mechanism", "engine avg JCT (h)", "replica avg JCT (h)", "gap", "engine p99 (h)",
                                   "replica p99 (h)", "policy calls", "lease changes"), tuple(rows)))


def report(res: Results, checks: EngineResults, only: Sequence[str], scale: Scale, quick: bool,
           plot_dir: Path | None) -> Reproduction:
    """The claims, tables and raw numbers of the selected experiments."""
    rep = Reproduction("synergy", TITLE, _conditions(scale, quick), list(ASSUMPTIONS))
    for name, fn in (("headline", _headline), ("policies", _policies), ("ratio", _ratio), ("load", _load),
                     ("multigpu", _multigpu), ("bigdata", _bigdata), ("physical", _physical_claims),
                     ("philly", _philly)):
        if name in only:
            fn(rep, res, scale)
    if "engine" in only:
        rep.conditions.append(ENGINE_CONDITION)
        _engine(rep, checks, scale)
    if quick:  # too small to compare with the paper; the invariants and the engine check hold at any size
        rep.claims = quick_claims(rep.claims)
    rep.data = {"runs": [{**s.__dict__, **o.__dict__} for s, o in res.items()]}
    if checks:
        rep.data["engine"] = [{**s.__dict__, **o.__dict__} for s, o in checks.items()]
    if plot_dir is not None:
        rep.figures = _plots(res, scale, only, plot_dir)
    return rep
