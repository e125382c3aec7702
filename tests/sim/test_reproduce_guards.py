"""Guard rails: each paper's headline ordering on a reduced run (seconds of CPU each), asserted seed by seed on the
numbers the report prints, so that a code change that breaks a reproduction fails here and not months later in a
full run. The sizes and the margins in the comments were measured on these exact runs; each assertion is the
ordering the paper claims, with room for small changes but not for a reversal."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slurmx.reproduce import Claim, Reproduction, ReproOptions, run
from slurmx.reproduce.allox import reproduce as allox_reproduce
from slurmx.reproduce.mlfs.experiment import WEEK_H
from slurmx.reproduce.mlfs.experiment import Run as MlfsRun
from slurmx.reproduce.mlfs.experiment import run_one as mlfs_run_one
from slurmx.reproduce.synergy.experiment import QUICK as SYNERGY_QUICK
from slurmx.reproduce.synergy.experiment import base_spec, run_one
from tests.sim.claims import assert_machine_checkable


def _claim(rep: Reproduction, what: str) -> Claim:
    return next(c for c in rep.claims if c.what.startswith(what))


@pytest.fixture(scope="module")
def allox() -> Reproduction:
    """Fig. 13's main experiment at 10 users x 20 jobs, seeds 0-3 (about 7 s of CPU)."""
    return allox_reproduce(ReproOptions(seeds=4, workers=1, progress=False, only=("main",)), jobs_per_user=20)


def test_allox_beats_es_and_drfa_on_mean_jct_in_every_seed(allox: Reproduction) -> None:
    """Measured: AlloX's change vs ES -36 / -28 / -24 / -27%, vs DRFA -37 / -31 / -29 / -22%. At this size the
    rest of Fig. 13's chain does not hold (SRPT and the DRF variants need the paper's 1,000 jobs per user to
    separate), so only these two links are guarded."""
    assert_machine_checkable(allox)  # a full-size (not quick) report: its claims are judged
    for base in ("ES", "DRFA"):
        claim = _claim(allox, f"main: AlloX's JCT reduction vs {base}")
        assert claim.seeds == (0, 1, 2, 3) and len(claim.per_seed) == 4
        assert all(change < -10.0 for change in claim.per_seed), (base, claim.per_seed)


def test_allox_beats_srpt_on_the_longest_jobs_in_every_seed(allox: Reproduction) -> None:
    """Fig. 13's caption: AlloX's longest 1% finish sooner than SRPT's (measured margins 20-37%)."""
    claim = _claim(allox, "main: longest 1% of jobs, AlloX vs SRPT")
    assert claim.judge() is True and claim.seeds_holding == 4 and not claim.mean_only


def test_fitgpp_cuts_te_p95_by_90_percent_in_every_set() -> None:
    """Table 1's headline on the quick main experiment (2,048 jobs on 84 nodes), sets 0-2 (about 8 s of CPU):
    measured -93.4% in each set, inside the band the full run is judged by (paper -96.6% ± 6.6 points)."""
    rep = run("fitgpp", ReproOptions(quick=True, seeds=3, workers=1, progress=False, only=("main",)))
    claim = _claim(rep, "TE p95 slowdown, FitGpp vs FIFO")
    assert claim.seeds == (0, 1, 2)
    assert all(change <= -90.0 for change in claim.per_seed), claim.per_seed
    assert claim.judge() is True  # the value the full run reports lies in the paper's band


def test_synergy_tune_beats_prop_under_fifo_in_every_seed() -> None:
    """The headline's direction (FIFO, PROP vs TUNE) on the quick trace (16 GPUs, 100 generated jobs) for
    generator seeds 0-4 (about 2 s of CPU): measured gains 1.04x / 1.13x / 1.10x / 1.14x / 1.06x. The size
    of the paper's 3.4x needs its 128 GPUs and the authors' job list; the direction holds at any size."""
    for seed in range(5):
        prop, tune = (run_one(replace(base_spec(SYNERGY_QUICK, m), seed=seed)) for m in ("prop", "tune"))
        assert tune.mean_h < prop.mean_h, (seed, prop.mean_h, tune.mean_h)


def test_zhao_ours_beats_mmi_and_sct_in_every_seed() -> None:
    """Fig. 2's ordering ours <= MMI < SCT on the quick sweep (10 responders, 120-160 jobs), seeds 0-5 (about
    1.5 s of CPU): measured smallest margins 3.6-15.9%, and ours 15-34% below SCT in every seed."""
    rep = run("accel", ReproOptions(quick=True, seeds=6, workers=1, progress=False, only=("fig2",)))
    order = _claim(rep, "Fig. 2, 10 responders, 120-160 jobs: order of make-spans")
    assert order.seeds == tuple(range(6)) and order.judge() is True and order.seeds_holding == 6
    assert min(order.per_seed) > 1.0, order.per_seed  # strictly: a tie of ours and MMI would not be the paper's
    vs_sct = _claim(rep, "Fig. 2, 10 responders, 120-160 jobs: make-span reduction vs SCT")
    assert all(change < -10.0 for change in vs_sct.per_seed), vs_sct.per_seed


def test_mlfs_mlf_h_beats_slaq_on_mean_jct_in_every_seed() -> None:
    """The real setting's arrival density (1,860 jobs a week on 80 GPUs) cut to 400 jobs, seeds 0-3 (about 20 s
    of CPU): measured MLF-H 32.2 / 45.6 / 40.2 / 35.3 min against SLAQ 35.9 / 69.7 / 58.2 / 47.7, a 10-35% cut in
    every seed. At 150 jobs the queue never builds and MLF-H loses seeds 1 and 3; Tiresias is not guarded (at
    this size MLF-H leads it by only 4% on seed 0, and at full size loses seed 0)."""
    n = 400
    for seed in range(4):
        jct = {p: mlfs_run_one(MlfsRun("real", p, n, n * WEEK_H / 1860, 20, seed))[1]["avg_jct_min"]
               for p in ("MLF-H", "SLAQ")}
        assert jct["MLF-H"] < 0.95 * jct["SLAQ"], (seed, jct)
