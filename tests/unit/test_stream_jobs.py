"""squeue's answer read as it arrives (`slurm/stream_jobs.py`): the same jobs as the whole read, on every version
and every way the pipe may cut it; anything it cannot read on its own is read whole."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.slurm import CliSlurm, RetryPolicy
from slurmx.slurm.errors import SlurmParseError
from slurmx.slurm.parse import parse_jobs
from slurmx.slurm.records import SlurmJob
from slurmx.slurm.stream_jobs import JobStream, NotStreamable
from slurmx.slurm.transport import LocalTransport
from slurmx.slurm.versions import TESTED

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
VERSIONS = TESTED


def many(version: str, copies: int = 40) -> dict[str, Any]:
    """The recorded answer with its jobs repeated under new ids: enough records for several runs."""
    data: dict[str, Any] = json.loads((FIXTURES / version / "squeue.json").read_text())
    jobs = []
    for k in range(copies):
        for job in data["jobs"]:
            copy = dict(job)
            copy["job_id"] = 10_000 * (k + 1) + int(job["job_id"])
            jobs.append(copy)
    data["jobs"] = jobs
    return data


def streamed(data: bytes, chunk: int, run: int) -> list[SlurmJob]:
    reader = JobStream(["squeue", "--json"], run)
    for at in range(0, len(data), chunk):
        reader.feed(data[at:at + chunk])
    return reader.finish()


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(VERSIONS), st.integers(1, 5000), st.integers(1, 20_000), st.booleans())
def test_the_stream_reads_the_jobs_the_whole_answer_holds(version: str, chunk: int, run: int, pretty: bool) -> None:
    data = json.dumps(many(version), indent=2 if pretty else None).encode()
    assert streamed(data, chunk, run) == parse_jobs(data)


@pytest.mark.parametrize("version", VERSIONS)
def test_an_answer_without_jobs_and_an_error_inside_it_read_as_whole(version: str) -> None:
    data = many(version)
    data["jobs"] = []
    assert streamed(json.dumps(data).encode(), 7, 10) == []
    data = many(version)
    data["errors"] = [{"description": "Invalid user", "error_number": 1}]
    with pytest.raises(SlurmParseError, match="Slurm reported: Invalid user"):
        streamed(json.dumps(data).encode(), 100, 1000)


def test_bytes_that_are_not_utf8_are_read_as_the_whole_read_reads_them(caplog: pytest.LogCaptureFixture) -> None:
    data = many("24.11")
    data["jobs"][5]["name"] = "NAME"
    text = json.dumps(data).encode().replace(b"NAME", b"bad\xffname")
    assert streamed(text, 300, 2000) == parse_jobs(text)
    assert [job.name for job in streamed(text, 300, 2000) if "\ufffd" in job.name] == ["bad\ufffdname"]
    assert any("is not UTF-8" in m for m in caplog.messages)


def test_a_run_it_cannot_read_makes_the_caller_read_whole_and_feeding_never_raises() -> None:
    data = json.dumps(many("24.11")).encode()
    cut = data.index(b'"account"', len(data) // 2)
    broken = data[:cut - 1] + b'{"account": [1, ' + data[cut - 1:]  # a nested record that starts with the key
    reader = JobStream(["squeue", "--json"], 500)
    for at in range(0, len(broken), 256):
        reader.feed(broken[at:at + 256])
    with pytest.raises(NotStreamable):
        reader.finish()


class Counting(LocalTransport):
    """The local transport, counting the reads it streams."""

    streams: ClassVar[list[int]] = []

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        Counting.streams.append(1)
        return super().stream(*args, **kwargs)


def fake_squeue(folder: Path, answer: bytes, code: int = 0) -> None:
    (folder / "answer.json").write_bytes(answer)
    script = folder / "squeue"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.buffer.write(open({str(folder / 'answer.json')!r}, "
                      f"'rb').read())\nsys.stderr.write('squeue: error: Unable to contact slurm controller' if {code} "
                      f"else '')\nsys.exit({code})\n")
    script.chmod(0o755)


def test_the_adapter_streams_a_full_read_and_reads_whole_after_a_failed_one(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    answer = json.dumps(many("24.11"), indent=2).encode()
    fake_squeue(tmp_path, answer)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    Counting.streams = []
    adapter = CliSlurm(Counting(), RetryPolicy(retries=0))
    assert adapter.jobs() == parse_jobs(answer)
    assert Counting.streams == [1] and adapter.command_counts()["squeue"] == 1
    fake_squeue(tmp_path, b"", code=1)  # Slurm down: the usual read names it
    with pytest.raises(Exception, match="Unable to contact"):
        adapter.jobs()
    assert adapter.command_counts()["squeue"] == 3  # the streamed try, then the usual one
