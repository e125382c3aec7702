"""A long sweep off a terminal (a batch job, a pipe) still says how far it got: a line per 5% on stderr."""

from __future__ import annotations

import pytest

from slurmx.sim.parallel import parallel_map


def test_off_a_terminal_progress_is_a_line_per_five_percent(capsys: pytest.CaptureFixture[str]) -> None:
    assert parallel_map(lambda x: x * 2, list(range(40)), label="points") == [x * 2 for x in range(40)]
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 20 and lines[0].startswith("points: 2/40 (5%) after ")
    assert lines[-1].startswith("points: 40/40 (100%) after ")


def test_quiet_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    parallel_map(lambda x: x, list(range(5)), progress=False)
    assert capsys.readouterr().err == ""
