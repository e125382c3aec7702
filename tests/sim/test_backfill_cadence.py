"""Slurm's backfill cadence as an option of FIFO (`cadence: slurm`): full passes every `bf_interval`, Slurm's main
scheduler (FIFO without backfill) at the events between them, reservations only within `bf_window` and on a
`bf_resolution` grid.

One node of 3 CPUs. `a` (2 CPUs, 100 s, estimate 100) starts at t=0; `head` (3 CPUs) arrives at t=1 and fits
nowhere until t=100, where it is reserved; later jobs of 1 CPU may backfill beside `a` where they cannot delay it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.core.validation import ConfigError
from slurmx.policies import make_policy
from slurmx.policies.base import backfill_passes, waits_for_release
from slurmx.sim.metrics import SimResult
from tests.sim import cluster, job, run

BASE = [job("a", 0, duration=100, cpus=2, estimate_s=100), job("head", 1, duration=10, cpus=3, estimate_s=10)]


def _run(extra: list[Any], **params: Any) -> SimResult:
    return run([*BASE, *extra], make_policy("fifo", {"backfill": "easy", **params}), cluster(cpus=3))


def _start(result: SimResult, job_id: str) -> float:
    start = next(r.first_start for r in result.jobs if r.job_id == job_id)
    assert start is not None
    return start


def test_between_passes_only_the_main_scheduler_runs_so_a_backfill_waits_for_the_next_pass() -> None:
    short = job("short", 5, duration=10, cpus=1, estimate_s=10)  # ends before t=100: EASY may start it
    assert _start(_run([short]), "short") == 5  # a pass at every decision: at once
    assert _start(_run([short], cadence="slurm"), "short") == 30  # Slurm's: at the next pass (bf_interval 30 s)
    assert _start(_run([short], cadence="slurm", backfill_interval_s=7), "short") == 7
    # the head itself is never delayed by the cadence: the main scheduler starts it when `a` ends
    assert _start(_run([short], cadence="slurm"), "head") == _start(_run([short]), "head") == 100


def test_a_group_that_fits_at_once_starts_at_its_arrival_under_either_cadence() -> None:
    alone = [job("x", 3, duration=5, cpus=1, estimate_s=5)]
    for params in ({}, {"cadence": "slurm"}):
        result = run(alone, make_policy("fifo", {"backfill": "easy", **params}), cluster(cpus=3))
        assert _start(result, "x") == 3


def test_no_reservation_past_the_window_lets_a_long_job_pass_the_head() -> None:
    long = job("long", 5, duration=500, cpus=1, estimate_s=500)  # would hold the node past t=100
    assert _start(_run([long], cadence="slurm"), "long") == 110  # default window (a day): it waits for the head
    # a 50 s window: at the pass at t=30 the head's start (t=100) is 70 s away, past it: not protected
    assert _start(_run([long], cadence="slurm", backfill_window_s=50), "long") == 30


def test_reservations_sit_on_the_resolution_grid() -> None:
    near = job("near", 5, duration=85, cpus=1, estimate_s=85)  # started at t=30, ends at 115 > 100
    assert _start(_run([near], cadence="slurm", backfill_resolution_s=0), "near") == 110  # after the head
    assert _start(_run([near], cadence="slurm"), "near") == 30  # the reservation at t=120 on a 60 s grid


def test_cadence_knobs_without_the_cadence_are_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as refused:
        make_policy("fifo", {"backfill": "easy", "backfill_interval_s": 10})
    assert "add `cadence: slurm`" in str(refused.value) and "\n" not in str(refused.value)
    for tiny in (0, 1e-6):  # under a second, a run would be all ticks
        with pytest.raises(ConfigError):
            make_policy("fifo", {"cadence": "slurm", "backfill_interval_s": tiny})


def test_the_policy_declares_its_passes_and_a_strict_fifo_between_them() -> None:
    passes = backfill_passes(make_policy("fifo", {"backfill": "easy", "cadence": "slurm",
                                                  "backfill_interval_s": 45}))
    assert passes is not None and passes.period_s == 45 and waits_for_release(passes.between)
    assert backfill_passes(make_policy("fifo", {"backfill": "easy"})) is None
    assert backfill_passes(make_policy("fifo", {"cadence": "slurm"})) is None  # strict FIFO has no backfill pass


def test_a_pass_is_skipped_when_nothing_changed_since_the_last_one() -> None:
    """A queue blocked for a long time: passes every 30 s while `a` runs 3,000 s, but only those after a change."""
    jobs = [job("a", 0, duration=3000, cpus=3, estimate_s=3000), job("b", 1, duration=10, cpus=3, estimate_s=10)]
    result = run(jobs, make_policy("fifo", {"backfill": "easy", "cadence": "slurm"}), cluster(cpus=3))
    assert _start(result, "b") == 3000
    assert result.stats.by_event["tick"] >= 99  # a tick every 30 s while b waited
    assert result.stats.policy_calls <= 6  # a's arrival, b's, the first pass, a's end: not one per tick


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 400), st.integers(1, 200), st.integers(1, 3)), min_size=1, max_size=25),
       st.sampled_from([5, 30, 60]))
def test_under_any_workload_each_job_runs_once_starting_at_an_event_or_on_the_pass_grid(
        shape: list[tuple[int, int, int]], interval: int) -> None:
    """Between passes only events start jobs (the main scheduler runs on them); a job starting at any other time
    was started by a pass, which falls on a multiple of `bf_interval`."""
    jobs = [job(f"j{i}", submit, duration=duration, cpus=cpus, estimate_s=duration)
            for i, (submit, duration, cpus) in enumerate(sorted(shape))]
    slurm = run(jobs, make_policy("fifo", {"backfill": "easy", "cadence": "slurm", "backfill_interval_s": interval,
                                           "backfill_resolution_s": 0}), cluster(cpus=3))
    assert sorted(r.job_id for r in slurm.jobs) == sorted(j.job_id for j in jobs)
    events = {r.submit for r in slurm.jobs} | {r.finish for r in slurm.jobs}
    for record in slurm.jobs:
        assert record.first_start is not None and record.first_start >= record.submit
        assert record.first_start in events or record.first_start % interval == 0, record
