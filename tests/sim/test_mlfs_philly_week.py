"""MLFS's Philly input: one full week of a trace per seed, its jobs drawn uniformly, on a file written here."""

from __future__ import annotations

from pathlib import Path

from slurmx.reproduce.mlfs.philly_week import MAX_GPUS, WEEK_S, philly_week


def _csv(path: Path) -> Path:
    """Three weeks and a day of jobs (2017-10-02 to 10-23), one an hour, every 50th asking for 64 GPUs."""
    lines = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    for hour in range(22 * 24):
        gpus = 64 if hour % 50 == 0 else 1 + hour % 4
        day, rest = divmod(hour, 24)
        lines.append(f"2017-10-{2 + day:02d} {rest:02d}:00:00,{600 + hour},{gpus},{gpus * 600},vc{hour % 3}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_seed_picks_a_full_week_and_draws_its_jobs_uniformly(tmp_path: Path) -> None:
    path = _csv(tmp_path / "philly.csv")
    week = philly_week(3, 100, path)
    assert 0 <= week.index < 3 and week.available == 7 * 24  # the fourth week is not full
    assert len(week.jobs) == 100
    submits = [j.submit_time for j in week.jobs]
    assert submits == sorted(submits) and submits[0] >= 0 and submits[-1] < WEEK_S
    assert max(next(iter(j.variants.values())).request.gres_count("gpu") for j in week.jobs) <= MAX_GPUS
    assert philly_week(3, 100, path) == week  # deterministic per seed
    assert len(philly_week(3, 10_000, path).jobs) == 7 * 24  # a week with fewer jobs gives all of them
