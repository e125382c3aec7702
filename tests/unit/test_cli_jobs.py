"""`slurmx jobs --json` on squeue output recorded from every tested Slurm release: valid JSON, every job kept."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from slurmx.cli import app
from slurmx.cli.context import Context
from slurmx.slurm.adapter import CliSlurm, RetryPolicy
from slurmx.slurm.transport import ReplayTransport
from slurmx.slurm.versions import TESTED
from tests.unit.test_slurm_adapter import ok, read


@pytest.mark.parametrize("version", TESTED)
def test_jobs_json_prints_every_recorded_job_as_json(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = CliSlurm(ReplayTransport({("squeue",): ok(read(version, "squeue.json"))}), RetryPolicy())
    expected = recorded.jobs()
    assert expected, "fixture holds no jobs"
    monkeypatch.setattr(Context, "adapter", lambda self: recorded)
    result = CliRunner().invoke(app.cli, ["jobs", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert [j["job_id"] for j in found] == [j.job_id for j in expected]
    assert [j["request"] for j in found] == [j.request.dims() for j in expected]
    assert all(isinstance(j["state"], str) for j in found)
