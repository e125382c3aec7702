"""The AlloX estimator: a·n + b from two samples, its fallbacks, cut samples, and the estimate's life in a run."""

from __future__ import annotations

import pytest

from slurmx.profile.estimator import (
    Estimate,
    EstimatorParams,
    ProgressReport,
    SampleRun,
    Source,
    cut_deadline,
    estimate_from_samples,
    fit_linear,
    reconcile,
    update_from_progress,
)


def test_two_point_fit_is_the_digests_formula() -> None:
    # 10 steps in 25 s, 30 steps in 65 s: a = (25 - 65) / (10 - 30) = 2 s/step, b = 25 - 2·10 = 5 s.
    assert fit_linear(10, 25.0, 30, 65.0) == pytest.approx((2.0, 5.0))
    est = estimate_from_samples([SampleRun(10, 25.0), SampleRun(30, 65.0)], total_steps=1000)
    assert est.seconds == pytest.approx(2005.0)
    assert est.source is Source.SAMPLE and not est.lower_bound
    assert est.uncertainty == pytest.approx(0.11)


def test_zero_step_sample_measures_the_start_up_cost() -> None:
    # C-prof's final plan: 0% and 1.5% of the batches. 0 steps in 12 s, 15 steps in 42 s: 2 s/step + 12 s.
    est = estimate_from_samples([SampleRun(15, 42.0), SampleRun(0, 12.0)], total_steps=1000)
    assert est.seconds == pytest.approx(2012.0)


def test_longer_sample_faster_falls_back_to_scaling_the_longer_one() -> None:
    # t2 < t1: no fit. The longer sample (20 steps, 30 s) scaled to 200 steps: 300 s.
    assert fit_linear(10, 40.0, 20, 30.0) is None
    est = estimate_from_samples([SampleRun(10, 40.0), SampleRun(20, 30.0)], total_steps=200)
    assert est.seconds == pytest.approx(300.0)
    assert est.uncertainty == pytest.approx(0.5)


def test_equal_lengths_and_negative_fits_fall_back_and_respect_the_floor() -> None:
    assert fit_linear(10, 5.0, 10, 6.0) is None
    assert estimate_from_samples([SampleRun(10, 5.0), SampleRun(10, 6.0)], 100).seconds == pytest.approx(60.0)
    # a = 0.1 s/step, b = 10 - 0.1·100 = 0 ... total 1 step: 0.1 s, floored to 1 s.
    assert estimate_from_samples([SampleRun(100, 10.0), SampleRun(200, 20.0)], 1).seconds == pytest.approx(1.0)
    # a steep start-up makes a·n + b negative below the samples: a = 1, b = 5 - 1·50 = -45, total 10 -> -35.
    est = estimate_from_samples([SampleRun(50, 5.0), SampleRun(60, 15.0)], 10)
    assert est.seconds == pytest.approx(15.0)  # max(floor, longer sample 15 s, 15/60·10 = 2.5 s)


def test_cut_sample_gives_a_lower_bound_from_its_rate_so_far() -> None:
    # Cut after 90 s at step 3 of 20: at least 30 s/step · 1000 steps.
    est = estimate_from_samples([SampleRun(10, 20.0), SampleRun(20, 90.0, finished=False, steps_done=3)], 1000)
    assert est.lower_bound and est.seconds == pytest.approx(30000.0)
    # Unknown progress: the planned length is assumed done, which still bounds it below: 90/20·1000.
    est = estimate_from_samples([SampleRun(20, 90.0, finished=False)], 1000)
    assert est.seconds == pytest.approx(4500.0)


def test_cut_deadline_is_a_multiple_of_the_fastest_sibling() -> None:
    assert cut_deadline(40.0) == pytest.approx(125.0)  # 3 x 40 s + 5 s of launch slack
    assert cut_deadline(0.2, EstimatorParams(cut_factor=2.0, cut_slack_s=0.0, floor_s=1.0)) == pytest.approx(2.0)


def test_progress_replaces_the_prior_and_shrinks_its_uncertainty() -> None:
    prior = Estimate(1000.0, Source.SAMPLE, 0.11)
    # 250 of 1000 steps after 400 s at 0.625 steps/s: 400 + 750/0.625 = 1600 s, uncertainty 0.11·0.75.
    est = update_from_progress(prior, ProgressReport(250, 1000, 400.0, rate=0.625))
    assert est.source is Source.PROGRESS
    assert est.seconds == pytest.approx(1600.0)
    assert est.uncertainty == pytest.approx(0.0825)
    # Without a rate, steps / elapsed: 100 steps in 50 s -> 50 + 900/2 = 500 s.
    assert update_from_progress(prior, ProgressReport(100, 1000, 50.0)).seconds == pytest.approx(500.0)


def test_too_little_progress_keeps_the_prior() -> None:
    prior = Estimate(1000.0, Source.HISTORY, 0.05)
    assert update_from_progress(prior, ProgressReport(5, 1000, 30.0, rate=0.2)) is prior


def test_a_short_claim_is_capped_by_measurement() -> None:
    claim = Estimate(60.0, Source.DECLARED, 1.0)
    assert reconcile(claim, 30.0) is claim
    capped = reconcile(claim, 600.0)
    assert capped.seconds == pytest.approx(600.0) and capped.lower_bound and capped.source is Source.PROGRESS
    assert "claimed 60s" in capped.detail
    # The same through progress reports too early to extrapolate from.
    early = update_from_progress(claim, ProgressReport(1, 10_000, 600.0, rate=None))
    assert early.seconds == pytest.approx(600.0) and early.lower_bound


def test_bad_input_is_a_one_line_error() -> None:
    with pytest.raises(ValueError, match="total_steps"):
        estimate_from_samples([SampleRun(1, 1.0)], 0)
    with pytest.raises(ValueError, match="finite"):
        Estimate(float("nan"), Source.SAMPLE, 0.1)


def test_in_run_step_time_gives_the_slope_and_the_remainder_the_start_up() -> None:
    # Start-up jitter: 1 step took 3 s (slow start), 50 steps 7 s (fast start). Two points: a = 4/49 s/step.
    # Measured inside the runs: 0.1 s/step; b = mean(3 - 0.1, 7 - 5) = 2.45 s -> 1000 steps: 102.45 s.
    samples = [SampleRun(1, 3.0, step_seconds=None), SampleRun(50, 7.0, step_seconds=0.1)]
    assert estimate_from_samples(samples, 1000).seconds == pytest.approx(102.45)
    two_point = estimate_from_samples(samples, 1000, EstimatorParams(use_step_times=False))
    assert two_point.seconds == pytest.approx(4 / 49 * 1000 + 3 - 4 / 49)
