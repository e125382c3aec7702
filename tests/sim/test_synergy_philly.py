"""Fig. 6's job list from a Philly-derived CSV: the released selection rules, on a file written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmx.reproduce import UnknownPaper
from slurmx.reproduce.synergy.experiment import W1, philly_jobs

ROWS = [  # timestamp, duration (s), GPUs; hour 2400 after 2017-08-07 is 2017-11-15 00:00, hour 3000 2017-12-10
    ("2017-11-14 23:59:59", 3600, 1),  # before the window
    ("2017-11-15 00:00:00", 3600, 1),  # first in
    ("2017-11-15 02:00:00", 1800, 1),  # 30 min: too short (<= 31.6 min)
    ("2017-11-15 01:00:00", 7200, 3),  # 3 GPUs: not a folded demand
    ("2017-11-15 01:30:00", 7200, 16),  # in, spans two servers
    ("2017-11-16 00:00:00", 599_999, 8),  # just under 10^4 min (600,000 s): in
    ("2017-11-17 00:00:00", 600_000, 8),  # 10^4 min: too long (strictly between)
    ("2017-12-10 00:00:00", 3600, 1),  # hour 3000: outside (half-open)
]


def _csv(path: Path) -> Path:
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n" +
                    "".join(f"{t},{d},{g},{d * g},vc\n" for t, d, g in ROWS))
    return path


def test_the_selection_keeps_the_window_the_demands_and_the_durations_and_rebases_arrivals(tmp_path: Path) -> None:
    jobs = philly_jobs(_csv(tmp_path / "philly.csv"), W1)
    assert [(j.arrival, j.gpus) for j in jobs] == [(0.0, 1), (5400.0, 16), (86400.0, 8)]
    assert [j.job_id for j in jobs] == [0, 1, 2] and all(j.measured for j in jobs)
    first = jobs[0]  # the released mix starts with an image model: iterations from the duration at its pace
    assert first.model == "alexnet" and first.total_iters == int(3600 / first.iter_time_s)


def test_only_the_first_jobs_are_kept_and_a_missing_file_is_one_line(tmp_path: Path) -> None:
    assert len(philly_jobs(_csv(tmp_path / "philly.csv"), W1, first=2)) == 2
    with pytest.raises(UnknownPaper, match="cannot read the Philly-derived trace"):
        philly_jobs(tmp_path / "missing.csv", W1)
