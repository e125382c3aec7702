"""The CPU search as a sensitivity sample runs it: the payload re-run on fewer CPUs each point, its step times read
from the hooks' profile file, the points printed for the sample's comment, and read back by the daemon."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmx.hooks.search import format_points, parse_points

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to search over")
def test_the_job_side_search_finds_the_knee_of_a_payload_that_scales_to_two_cpus(tmp_path: Path) -> None:
    env = {**os.environ, "SLURMX_SPOOL_DIR": str(tmp_path), "SLURM_JOB_ID": "7", "SLURMX_VARIANT": "cpu",
           "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "slurmx.hooks.search", "--max-cpus", "2", "--steps", "20", "--",
                           sys.executable, str(REPO / "examples" / "rate_payload.py"), "100000", "--rate", "cpu=100",
                           "--knee", "2"], env=env, capture_output=True, text=True, timeout=120, check=True)
    fields = dict(part.split("=", 1) for part in proc.stdout.split(","))
    points = parse_points(fields["w"])
    assert points is not None and sorted(points) == [1, 2] and fields["k"] == "2"
    assert points[2] / points[1] == pytest.approx(2.0, rel=0.15)  # 100 vs 50 steps/s, less Python's own time
    assert "order [2, 2, 1]" in proc.stderr  # the released search: start, warm-up, then steep: down by one


def test_points_round_trip_and_hostile_ones_are_refused() -> None:
    text = format_points({4: 57.31, 2: 38.0, 1: 19.4}, 3)
    assert text == "w=4:57.31;2:38;1:19.4,k=3"
    assert parse_points(text.split(",")[0][2:]) == {4: 57.31, 2: 38.0, 1: 19.4}
    for bad in ("", "4", "4:", "0:5", "4:-1", "4:nan", "4:inf", "4:1e999", "x:1", "4:1;4:2", "9999:1",
                ";".join(f"{c}:1" for c in range(1, 70))):
        assert parse_points(bad) is None, bad
