"""`slurmx sacct-export`: one sacct call per window, a job listed by several windows written once, and a dump the
whatif loader reads back."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from slurmx.cli.sacct_export import sacct_export_command
from slurmx.sim.traces import load_trace
from slurmx.slurm.adapter import CliSlurm, RetryPolicy
from slurmx.slurm.export import SACCT_FIELDS, ExportError, export_accounting, windows
from slurmx.slurm.transport import CommandResult, ReplayTransport

HEADER = "|".join(SACCT_FIELDS)
ROW = "{id}|j|alice|cpu|be|2026-10-01T10:00:00|2026-10-01T10:00:05|{end}|60|COMPLETED|cpu=1,mem=1G,node=1|" \
      "cpu=1,mem=1G,node=1|01:00:00|0:0"
DAY1 = "\n".join([HEADER, ROW.format(id=1, end="2026-10-01T10:01:05"), ROW.format(id=2, end="2026-10-02T03:00:00")])
DAY2 = "\n".join([HEADER, ROW.format(id=2, end="2026-10-02T03:00:00"), ROW.format(id=3, end="2026-10-02T11:00:00")])


def test_windows_cover_the_span_once() -> None:
    got = list(windows(datetime(2026, 10, 1), datetime(2026, 10, 3, 12), 24))
    assert [(a.day, b.day, b.hour) for a, b in got] == [(1, 2, 0), (2, 3, 0), (3, 3, 12)]
    with pytest.raises(ExportError, match="is not after"):
        list(windows(datetime(2026, 10, 2), datetime(2026, 10, 1)))


def test_export_keeps_one_row_per_job_and_pauses_between_calls(tmp_path: Path) -> None:
    answers = iter([DAY1.encode(), DAY2.encode()])
    calls: list[list[str]] = []
    pauses: list[int] = []

    def run(options: Sequence[str]) -> bytes:
        calls.append(list(options))
        return next(answers)

    out = tmp_path / "oct.txt"
    jobs = export_accounting(run, datetime(2026, 10, 1), datetime(2026, 10, 3), out, pause=lambda: pauses.append(1))
    assert jobs == 3 and len(pauses) == 1
    assert "--starttime=2026-10-01T00:00:00" in calls[0] and "--endtime=2026-10-02T00:00:00" in calls[0]
    assert "--allocations" in calls[0] and "--parsable2" in calls[0]
    assert out.read_text(encoding="utf-8").splitlines()[0] == HEADER
    assert [j.job_id for j in load_trace(out).jobs] == ["1", "2", "3"]
    assert not (tmp_path / "oct.txt.part").exists()


def test_the_command_through_the_adapter(tmp_path: Path) -> None:
    transport = ReplayTransport({("sacct",): [CommandResult(("sacct",), 0, DAY1, ""),
                                              CommandResult(("sacct",), 0, DAY2, "")]})
    adapter = CliSlurm(transport, RetryPolicy(retries=0))
    out = tmp_path / "oct.txt"
    context = SimpleNamespace(adapter=lambda: adapter)
    argv = ["--since", "2026-10-01", "--until", "2026-10-03", "--out", str(out), "--pause", "0"]
    result = CliRunner().invoke(sacct_export_command, argv, obj=context)
    assert result.exit_code == 0, result.output
    assert "3 jobs" in result.output
    assert [call[0][0] for call in transport.calls] == ["sacct", "sacct"]
    bad = CliRunner().invoke(sacct_export_command, ["--since", "October", "--until", "2026-10-03", "--out", str(out)],
                             obj=context)
    assert bad.exit_code == 1 and "--since 'October'" in bad.output
