"""SlurmJob.exit_code from squeue: 22.05's raw wait status and 24.11+'s `{status, return_code, signal}`.

The preemption protocol reads it to tell a job that left for requeue (exit 99 by default) from one that finished.
The shapes are those recorded from real clusters (tests/fixtures/slurm), with the exit code swapped in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slurmx.slurm.parse import parse_jobs
from slurmx.slurm.versions import OLDEST, TESTED

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def squeue_with(version: str, exit_code: Any) -> str:
    """The recorded `squeue --json` of `version`, cut to its first job, with `exit_code` in place."""
    data = json.loads((FIXTURES / version / "squeue.json").read_text())
    data["jobs"] = data["jobs"][:1]
    data["jobs"][0]["exit_code"] = exit_code
    return json.dumps(data)


def wrapped(status: list[str], code: int, signal: int | None = None) -> dict[str, Any]:
    """24.11+'s exit code object (as recorded: `signal.id` unset unless a signal ended the job)."""
    return {"status": status, "return_code": {"set": True, "infinite": False, "number": code},
            "signal": {"id": {"set": signal is not None, "infinite": False, "number": signal or 0},
                       "name": "" if signal is None else "SIGTERM"}}


# Recorded jobs -> exit code. 22.05's job 2 was cancelled while running: SIGTERM, raw status 15.
RECORDED = {
    "22.05": {1: 0, 2: 128 + 15, 3: 0, 4: 0, 5: 0, 6: 0, 7: 0},
    "24.11": {5: 0, 6: 0, 7: 0},
    "26.05": {10: 0, 11: 0, 12: 0},
}


@pytest.mark.parametrize("version", sorted(RECORDED))
def test_recorded_jobs_read_their_exit_code(version: str) -> None:
    jobs = parse_jobs((FIXTURES / version / "squeue.json").read_text())
    assert {j.job_id: j.exit_code for j in jobs} == RECORDED[version]


@pytest.mark.parametrize(("raw", "expected"), [
    (0, 0),
    (99 << 8, 99),  # `exit 99`: what the 22.05 cluster reported for it (25344)
    (1 << 8, 1),
    (255 << 8, 255),
    (15, 128 + 15),  # killed by SIGTERM (recorded: a cancelled job), as a shell would report it
    (12, 128 + 12),  # the batch shell killed by SIGUSR2
    (11 | 0x80, 128 + 11),  # SIGSEGV, core dumped
])
def test_22_05_decodes_the_wait_status(raw: int, expected: int | None) -> None:
    [job] = parse_jobs(squeue_with("22.05", raw))
    assert job.exit_code == expected


@pytest.mark.parametrize("version", [v for v in TESTED if v != OLDEST])  # wrapped numbers
@pytest.mark.parametrize(("value", "expected"), [
    (wrapped(["SUCCESS"], 0), 0),
    (wrapped(["ERROR"], 99), 99),  # recorded from the 24.11 cluster for `exit 99`
    (wrapped(["SIGNALED"], 0, signal=15), 128 + 15),
    (wrapped(["SIGNALED", "CORE_DUMPED"], 0, signal=11), 128 + 11),
    (wrapped(["SIGNALED"], 0), None),  # a signal Slurm does not name
    ({"status": ["PENDING"], "return_code": {"set": False, "infinite": False, "number": 0}}, None),
    ({"status": ["ERROR"]}, None),
    (None, None),
])
def test_24_11_reads_status_and_return_code(version: str, value: Any, expected: int | None) -> None:
    [job] = parse_jobs(squeue_with(version, value))
    assert job.exit_code == expected


def test_missing_exit_code_is_none() -> None:
    data = json.loads(squeue_with("24.11", None))
    del data["jobs"][0]["exit_code"]
    [job] = parse_jobs(json.dumps(data))
    assert job.exit_code is None
