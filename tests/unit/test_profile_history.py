"""History estimates from sacct records: keys, freshness, completed runs only, scaling by steps, peak memory."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from slurmx.core.model import VariantState
from slurmx.profile.estimator import Source
from slurmx.profile.history import (
    MAX_RUNS_PER_KEY,
    History,
    HistoryParams,
    HistoryRun,
    JobKey,
    key_of_record,
    run_of_record,
)
from slurmx.slurm.parse import parse_accounting
from slurmx.slurm.records import AccountingRecord
from slurmx.slurm.versions import TESTED

FIXTURES = Path(__file__).parents[1] / "fixtures" / "slurm"
RUN_CPU = JobKey("alice", "run", "", "cpu")
COMPLETED_RUN = "24.11"  # the one recording whose sacct.json holds a completed run


def recorded(version: str) -> list[AccountingRecord]:
    return parse_accounting((FIXTURES / version / "sacct.json").read_text())


def test_recorded_sacct_gives_the_completed_run_only() -> None:
    records = recorded(COMPLETED_RUN)
    history = History()
    added = history.add_records(records)
    done = [r for r in records if r.state is VariantState.COMPLETED and r.elapsed_s > 0]
    assert added == len(done) >= 1
    first = done[0]
    est = history.estimate(key_of_record(first), now=float(first.end_time or 0) + 60)
    assert est is not None and est.source is Source.HISTORY
    assert est.seconds == pytest.approx(first.elapsed_s)
    assert "1 run(s)" in est.detail


@pytest.mark.parametrize("version", [v for v in TESTED if v != COMPLETED_RUN])
def test_cancelled_running_and_instant_runs_give_no_history(version: str) -> None:
    history = History()
    assert history.add_records(recorded(version)) == 0
    assert history.estimate(RUN_CPU, now=1795329900.0) is None


def test_fixture_run_key_and_numbers() -> None:
    record = next(r for r in recorded("24.11") if r.job_id == 3)
    assert key_of_record(record) == RUN_CPU
    run = run_of_record(record)
    assert run == HistoryRun(RUN_CPU, 1795329186.0, 30.0, None, None)


def test_comment_tags_override_name_and_carry_hash_and_steps() -> None:
    base = next(r for r in recorded("24.11") if r.job_id == 3)
    record = replace(base, comment="slurmx:g=g1,v=gpu,c=be,h=ab12,n=500", max_rss_mb=900)
    assert key_of_record(record) == JobKey("alice", "run", "ab12", "gpu")
    run = run_of_record(record)
    assert run is not None and run.steps == 500 and run.max_rss_mb == 900
    assert run_of_record(replace(base, state=VariantState.FAILED)) is None


def test_median_spread_scaling_and_freshness() -> None:
    history = History(HistoryParams(max_age_s=1000.0, min_runs=2))
    history.add([HistoryRun(RUN_CPU, 100.0, 90.0, 500, steps=100),
                 HistoryRun(RUN_CPU, 900.0, 110.0, 700, steps=100),
                 HistoryRun(RUN_CPU, 950.0, 50.0, 600, steps=50)])
    est = history.estimate(RUN_CPU, now=1000.0, steps=200)
    # Scaled to 200 steps: 180, 220, 200 -> median 200; population std 16.33 -> 8.2%.
    assert est is not None and est.seconds == pytest.approx(200.0)
    assert est.uncertainty == pytest.approx((800 / 3) ** 0.5 / 200)
    assert history.max_rss_mb(RUN_CPU, 1000.0) == 700
    # At t = 1200 the first run (ended at 100) is stale: two left, still enough.
    later = history.estimate(RUN_CPU, now=1200.0)
    assert later is not None and later.seconds == pytest.approx(80.0)
    assert history.estimate(RUN_CPU, now=2000.0) is None  # only the last one is fresh, min_runs = 2
    assert history.estimate(JobKey("bob", "run", "", "cpu"), now=1000.0) is None


def test_one_run_has_the_floor_uncertainty() -> None:
    history = History()
    history.add([HistoryRun(RUN_CPU, 0.0, 42.0)])
    est = history.estimate(RUN_CPU, now=10.0)
    assert est is not None and est.uncertainty == pytest.approx(0.05)


def test_history_holds_what_it_may_still_use_and_no_more() -> None:
    """A user inventing a job name per run, or running one name forever, must not grow slurmxd without bound."""
    history = History(HistoryParams(max_age_s=1000.0))
    history.add([HistoryRun(RUN_CPU, float(t), 10.0) for t in range(10_000)])
    assert len(history) <= 2 * MAX_RUNS_PER_KEY
    assert [r.end_time for r in history.fresh(RUN_CPU, 10_000.0)][-1] == 9999.0  # the newest are the ones kept
    history.add([HistoryRun(JobKey("bob", f"n{i}", "", "cpu"), 5.0, 1.0) for i in range(5000)])
    history.forget_stale(10_000.0)
    assert len(history) <= MAX_RUNS_PER_KEY * 2 and all(k == RUN_CPU for k in history._runs)
