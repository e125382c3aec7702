"""The numbers a reproduction claim carries and the verdict that follows from them alone."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

import slurmx.cli.reproduce as reproduce_cli
from slurmx.cli.app import cli
from slurmx.cli.reproduce import verdict
from slurmx.reproduce import Reproduction
from slurmx.reproduce.base import (
    band_claim,
    bound_claim,
    change_pct,
    info_claim,
    ordering_claim,
    paper_band,
    quick_claims,
    t_interval,
    worst_step,
)


def test_t_interval_by_hand_and_none_with_one_seed() -> None:
    # mean 2, sd 1, n 3: half-width t(0.975, 2) / sqrt 3 = 4.302653 / 1.732051 = 2.484138
    lo, hi = t_interval([1.0, 2.0, 3.0]) or (math.nan, math.nan)
    assert lo == pytest.approx(2 - 2.484138, abs=1e-6) and hi == pytest.approx(2 + 2.484138, abs=1e-6)
    assert t_interval([5.0]) is None and t_interval([]) is None


def test_a_paper_band_never_admits_the_opposite_sign() -> None:
    assert paper_band(-88.0, 10.0) == (-98.0, -78.0)
    assert paper_band(-8.0, 10.0) == (-18.0, 0.0)  # cut at "no change"
    assert paper_band(18.0, 20.0) == (0.0, 38.0)
    assert paper_band(1.2, 0.5, neutral=1.0) == (1.0, 1.7)  # a ratio: cut at 1x
    assert paper_band(2.0, 0.05, neutral=None) == (1.95, 2.05)


def test_change_and_worst_step() -> None:
    assert change_pct(10.0, 80.0) == -87.5 and math.isnan(change_pct(1.0, 0.0))
    assert worst_step([10.0, 9.0, 9.18, 8.0], "lower") == pytest.approx(2.0)  # the one rise, 9 -> 9.18
    assert worst_step([1.0, 2.0, 3.0], "higher") == pytest.approx(-50.0)  # never falls: every step below 0


def test_a_band_claim_holds_only_inside_the_band_around_the_paper() -> None:
    """The AlloX case: paper -88%, ours -41%, the old check (any cut) passed it; ± 10 points does not."""
    off = band_claim("cut vs ES", "88%", "41%", value=-41.3, paper_value=-88.0, unit="%", direction="lower",
                     tolerance=10.0, seeds=[0, 1, 2], per_seed=[-40.0, -41.0, -43.0])
    assert off.holds is False and off.band == (-98.0, -78.0) and off.seeds_holding == 0
    assert off.check == "paper -88% ± 10 points: in [-98, -78%]"
    assert off.interval is not None and off.interval[0] < -41.33 < off.interval[1]
    near = band_claim("cut vs ES", "88%", "85%", value=-85.0, paper_value=-88.0, unit="%", direction="lower",
                      tolerance=10.0, seeds=[0, 1], per_seed=[-75.0, -95.0])
    assert near.holds is True and near.seeds_holding == 1  # judged on the value; per seed shown beside it
    assert "in band in 1/2 seeds" in near.ours
    wrong_sign = band_claim("BE p50", "+18%", "-23%", value=-23.3, paper_value=18.0, unit="%", direction="lower",
                            tolerance=10.0)
    assert wrong_sign.holds is False


def test_an_ordering_must_hold_in_every_seed_and_one_on_the_mean_only_says_so() -> None:
    every = ordering_claim("A < B", "A < B", "A 1 vs B 2", margin=30.0, per_seed=[10.0, 50.0], seeds=[0, 1])
    assert every.holds is True and every.seeds_holding == 2 and not every.mean_only
    assert "holds in 2/2 seeds" in every.ours
    mean_only = ordering_claim("A < B", "A < B", "A 1 vs B 2", margin=12.0, per_seed=[18, 26, 65, -6],
                               seeds=[0, 1, 2, 3])
    assert mean_only.holds is False and mean_only.mean_only and mean_only.seeds_holding == 3
    assert "holds in 3/4 seeds (on the mean only)" in mean_only.ours
    tie = ordering_claim("A <= B", "A <= B", "tie", margin=0.0, per_seed=[0.0], strict=False)
    assert tie.holds is True
    assert ordering_claim("A < B", "A < B", "tie", margin=0.0).holds is False


def test_judge_recomputes_the_verdict_from_the_numbers_alone() -> None:
    claims = [band_claim("x", "1", "1", value=1.0, paper_value=1.0, unit="", direction=None, tolerance=0.1,
                         neutral=None),
              ordering_claim("o", "o", "o", margin=5.0, per_seed=[5.0, -1.0]),
              bound_claim("b", "<= 4", "3", value=3.0, band=(None, 4.0)),
              info_claim("i", "40 ms", "14 ms", value=14.0, paper_value=40.0, unit="ms")]
    assert [c.holds for c in claims] == [True, False, True, None]
    assert all(c.holds == c.judge() for c in claims)
    # a claim's holds is not stored opinion: change a number and the verdict changes with it
    moved = replace(claims[0], value=1.2)
    assert moved.judge() is False


def test_a_quick_run_judges_only_bounds() -> None:
    claims = quick_claims([band_claim("x", "1", "1", value=5.0, paper_value=1.0, unit="", direction=None,
                                      tolerance=0.1, neutral=None),
                           bound_claim("b", "<= 4", "9", value=9.0, band=(None, 4.0))])
    assert [c.holds for c in claims] == [None, False]
    assert claims[0].check.startswith("(quick run)")


def test_verdict_counts_failures_and_orderings_on_the_mean_only() -> None:
    rep = Reproduction("demo", "Demo", claims=[ordering_claim("o", "o", "o", margin=5.0, per_seed=[5.0, -1.0]),
                                               bound_claim("b", "<= 4", "3", value=3.0, band=(None, 4.0))])
    assert verdict(rep) == "1 of 2 checks failed; 1 ordering(s) hold on the mean only, not in every seed"
    assert verdict(Reproduction("demo", "Demo")) == "all checks hold"


def test_json_carries_the_numbers_and_is_strict_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    rep = Reproduction("demo", "Demo", claims=[
        band_claim("cut", "88%", "41%", value=-41.0, paper_value=-88.0, unit="%", direction="lower", tolerance=10.0,
                   seeds=[0, 1], per_seed=[-40.0, -42.0]),
        info_claim("none yet", "> 40%", "never", value=math.nan)])
    monkeypatch.setattr(reproduce_cli, "run", lambda paper, options: rep)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(cli, ["reproduce", "allox", "--json", str(out), "--strict"])
    assert result.exit_code == 1
    text = out.read_text()
    assert "NaN" not in text
    cut, none = json.loads(text)["claims"]
    assert (cut["value"], cut["paper_value"], cut["unit"], cut["direction"]) == (-41.0, -88.0, "%", "lower")
    assert (cut["seeds"], cut["per_seed"], cut["band"], cut["holds"]) == ([0, 1], [-40.0, -42.0], [-98.0, -78.0],
                                                                         False)
    assert len(cut["interval"]) == 2 and none["value"] is None
    assert json.loads(text)["summary"] == {"judged": 1, "failed": 1, "mean_only": 0, "all_hold": False}
