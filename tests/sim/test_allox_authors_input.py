"""The AlloX authors' simulator input format, read from a file written here (theirs is outside the repository)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmx.reproduce import UnknownPaper
from slurmx.reproduce.allox.authors_input import authors_jobs

TWO_JOBS = """# 0
1 0 1 0 queue3
stage -1.0 32.0 14.0 97.0 1.0 2.0 49.0 1 -0.05 0.2
0
# 1
1 1 1 7 queue0
stage -1.0 32.0 1.0 90.0 1.0 2.0 26.0 1 1.5 -0.1
0
"""


def test_each_job_becomes_a_cpu_and_a_gpu_variant_with_the_files_errors(tmp_path: Path) -> None:
    path = tmp_path / "jobs.txt"
    path.write_text(TWO_JOBS)
    first, second = authors_jobs(path)
    assert (first.job_id, first.user, first.submit_time) == ("allox-00000", "user3", 0.0)
    assert (second.submit_time, second.user) == (7 * 60.0, "user0")
    cpu, gpu = first.variants["cpu"], first.variants["gpu"]
    assert (cpu.request.cpus, cpu.request.mem_mb, cpu.duration_s) == (32, 14 * 1024, 97 * 60.0)
    assert (gpu.request.gres_count("gpu"), gpu.duration_s) == (1, 49 * 60.0)
    assert cpu.estimate_s == pytest.approx(97 * 60 * 0.95) and gpu.estimate_s == pytest.approx(49 * 60 * 1.2)
    assert second.variants["cpu"].estimate_s == pytest.approx(90 * 60 * 1.99)  # +150% clamped to +99%
    assert authors_jobs(path, with_errors=False)[0].variants["cpu"].estimate_s is None


def test_a_file_in_another_format_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text("# 0\n1 0 1 zero queue0\nstage -1.0 32.0 14.0 97.0 1.0 2.0 49.0 1 0 0\n0\n")
    with pytest.raises(UnknownPaper, match=r"bad.txt:2: not a job of the authors' input format"):
        authors_jobs(path)
