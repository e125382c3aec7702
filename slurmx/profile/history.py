"""Estimates from earlier runs of the same job: a job key run recently enough needs no samples.

A key is (user, name, script hash, variant): the same user running the same script under the same name on the
same kind of resource. Runs come from `sacct` (`AccountingRecord`: elapsed, MaxRSS; the name is `<name>@<kind>`,
the script hash an `h=` tag of the comment when the submitter sets one) or from the daemon's store (`HistoryRun`
built directly). Only runs that completed count: a failed or cancelled run says nothing about the full length.
When runs did different amounts of work (`steps`), elapsed time is scaled to the steps asked for.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from slurmx.core.model import VariantState
from slurmx.core.tag import readable_fields, whole_number
from slurmx.profile.estimator import Estimate, Source
from slurmx.slurm.records import AccountingRecord

__all__ = ["MAX_RUNS_PER_KEY", "History", "HistoryParams", "HistoryRun", "JobKey", "key_of_record", "run_of_record"]


@dataclass(frozen=True, slots=True)
class JobKey:
    """What makes two runs "the same job" for estimation."""

    user: str
    name: str
    script_hash: str
    variant: str


@dataclass(frozen=True, slots=True)
class HistoryRun:
    """One completed run: when it ended, how long it ran, its peak memory (MB) and steps, when known."""

    key: JobKey
    end_time: float
    elapsed_s: float
    max_rss_mb: int | None = None
    steps: int | None = None


MAX_RUNS_PER_KEY = 64


@dataclass(frozen=True, slots=True)
class HistoryParams:
    """max_age_s: runs older than this are stale (default a week); min_runs: how many fresh runs it takes;
    min_uncertainty: the floor of the relative spread reported (one run has no spread of its own)."""

    max_age_s: float = 7 * 24 * 3600.0
    min_runs: int = 1
    min_uncertainty: float = 0.05


def key_of_record(record: AccountingRecord) -> JobKey:
    """The job key of a sacct record: `<name>@<kind>` job names, `v=` and `h=` comment tags."""
    tags = readable_fields(record.comment)
    name, _, kind = record.name.rpartition("@")
    if not name:
        name, kind = record.name, ""
    return JobKey(record.user, name, tags.get("h", ""), tags.get("v", kind))


def run_of_record(record: AccountingRecord) -> HistoryRun | None:
    """A completed sacct record as a history run; None for runs that did not complete or have no end time."""
    if record.state is not VariantState.COMPLETED or record.end_time is None or record.elapsed_s <= 0:
        return None
    steps = readable_fields(record.comment).get("n")
    return HistoryRun(key_of_record(record), float(record.end_time), float(record.elapsed_s), record.max_rss_mb,
                      whole_number(steps))


class History:
    """Runs by job key; `estimate(key, now)` from the fresh ones. Feed it sacct records and store rows."""

    def __init__(self, params: HistoryParams | None = None) -> None:
        self.params = params or HistoryParams()
        self._runs: dict[JobKey, list[HistoryRun]] = defaultdict(list)

    def add(self, runs: Iterable[HistoryRun]) -> None:
        """Remember `runs`; a key keeps its newest `MAX_RUNS_PER_KEY` (the median of more says nothing new)."""
        for run in runs:
            kept = self._runs[run.key]
            kept.append(run)
            if len(kept) > 2 * MAX_RUNS_PER_KEY:
                kept.sort(key=lambda r: r.end_time)
                del kept[:-MAX_RUNS_PER_KEY]

    def forget_stale(self, now: float) -> int:
        """Drop runs older than `max_age_s` and keys left without any, so a daemon that runs for months holds
        what it may still use and no more (every job name a user invents is a key); returns the runs dropped."""
        dropped = 0
        for key in list(self._runs):
            fresh = [r for r in self._runs[key] if now - r.end_time <= self.params.max_age_s]
            dropped += len(self._runs[key]) - len(fresh)
            if fresh:
                self._runs[key] = fresh
            else:
                del self._runs[key]
        return dropped

    def __len__(self) -> int:
        """Runs held, over every key."""
        return sum(map(len, self._runs.values()))

    def add_records(self, records: Iterable[AccountingRecord]) -> int:
        """Add the completed ones among sacct records; returns how many were added."""
        added = [run for run in map(run_of_record, records) if run is not None]
        self.add(added)
        return len(added)

    def fresh(self, key: JobKey, now: float) -> list[HistoryRun]:
        return [r for r in self._runs.get(key, ()) if now - r.end_time <= self.params.max_age_s]

    def estimate(self, key: JobKey, now: float, steps: int | None = None) -> Estimate | None:
        """The median of the fresh runs' times (scaled to `steps` where both are known); None when too few."""
        runs = self.fresh(key, now)
        if len(runs) < max(1, self.params.min_runs):
            return None
        times = [r.elapsed_s * steps / r.steps if steps and r.steps else r.elapsed_s for r in runs]
        median = statistics.median(times)
        spread = statistics.pstdev(times) / median if len(times) > 1 and median > 0 else 0.0
        newest = max(r.end_time for r in runs)
        return Estimate(median, Source.HISTORY, max(self.params.min_uncertainty, spread),
                        detail=f"history: median of {len(runs)} run(s) of {key.name}@{key.variant}, "
                               f"newest {now - newest:.0f}s ago")

    def max_rss_mb(self, key: JobKey, now: float) -> int | None:
        """The peak memory of the fresh runs (what a new run should ask for), None when sacct did not say."""
        peaks = [r.max_rss_mb for r in self.fresh(key, now) if r.max_rss_mb is not None]
        return max(peaks) if peaks else None
