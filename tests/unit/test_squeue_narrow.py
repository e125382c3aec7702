"""The narrow queue read (`slurm/squeue_narrow.py`): the same jobs as `squeue --json` on recorded output of real
Slurm, the rest named for the JSON read, and no name or comment able to forge a field or a job."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.slurm import parse
from slurmx.slurm.adapter import CliSlurm, RetryPolicy
from slurmx.slurm.errors import SlurmParseError
from slurmx.slurm.parse import parse_jobs
from slurmx.slurm.records import SlurmJob
from slurmx.slurm.squeue_narrow import FIELDS, NarrowRead, NarrowStream, narrow_argv, new_token, parse_narrow
from slurmx.slurm.transport import CommandResult

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
TOKEN = "Q5eed0f1xture0000000000000000000000"  # tests/fixtures/slurm/record_narrow.sh
RECORDED = sorted(p.parent.name for p in FIXTURES.glob("*/squeue-narrow.txt"))


def _shape(version: str) -> dict[str, bool]:
    return {"says_hold": version >= "23.02", "shows_exclusive": version < "26.05"}


def _recorded(version: str) -> tuple[bytes, bytes]:
    folder = FIXTURES / version
    return (folder / "squeue-narrow.txt").read_bytes(), (folder / "squeue-narrow.json").read_bytes()


def _named(job: SlurmJob) -> str:
    return str(job.array_job_id or job.job_id)


@pytest.mark.parametrize("version", RECORDED)
def test_recorded_queue_reads_the_same_jobs_both_ways(version: str) -> None:
    """Every job the narrow read gives is the JSON read's job, field for field; every other job of the queue is one
    the narrow read names for the JSON read (running, finished, arrays, requeued held, the forger's and its victim)."""
    text, answer = _recorded(version)
    read = parse_narrow(text, TOKEN, **_shape(version))
    whole = {job.job_id: job for job in parse_jobs(answer)}
    assert read.jobs, "the recording holds plain pending jobs"
    for job in read.jobs:
        assert job == whole[job.job_id]
    narrow_ids = {job.job_id for job in read.jobs}
    assert {key for key, job in whole.items() if key not in narrow_ids and _named(job) not in read.full} == set()
    assert len(read.full) == len(set(read.full))


@pytest.mark.parametrize("version", RECORDED)
def test_the_recorded_forgery_is_read_from_the_json(version: str, caplog: pytest.LogCaptureFixture,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The recording holds a comment carrying this read's token and a whole record claiming job 1 as root, and a
    name carrying both separators: neither record is read from the text, and the jobs they name go to the JSON."""
    monkeypatch.setattr(parse, "_warned", set())  # each warning is logged once a process
    text, answer = _recorded(version)
    whole = parse_jobs(answer)
    forger = next(job for job in whole if job.name == "forger")
    splitter = next(job for job in whole if job.name.startswith("sep"))
    with caplog.at_level(logging.WARNING, "slurmxd"):
        read = parse_narrow(text, TOKEN, **_shape(version))
    assert {str(forger.job_id), str(splitter.job_id), "1"} <= set(read.full)
    assert all(job.user == "alice" for job in read.jobs)
    assert f"job {forger.job_id}" in caplog.text or f"and {forger.job_id}" in caplog.text


class _Slurm:
    """A transport answering the narrow read with the recording (under the read's own token) and every
    `squeue --json --jobs` with the recorded JSON answer, as Slurm does, only the jobs asked for."""

    def __init__(self, version: str) -> None:
        self.text, self.answer = _recorded(version)
        self.version = version
        self.calls: list[list[str]] = []

    def run(self, argv: Any, stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
        argv = list(argv)
        self.calls.append(argv)
        if argv[:2] == ["scontrol", "--version"]:
            return CommandResult(tuple(argv), 0, f"slurm {self.version}.1\n", "")
        fmt = next((a for a in argv if a.startswith("--Format=")), None)
        if fmt is not None:
            token = fmt.split(",", 1)[0].removeprefix("--Format=JobId:0")[:-1]
            return CommandResult(tuple(argv), 0, self.text.replace(TOKEN.encode(), token.encode()), "")
        wanted = next(a for a in argv if a.startswith("--jobs=")).removeprefix("--jobs=").split(",")
        data = json.loads(self.answer)
        number = lambda v: v["number"] if isinstance(v, dict) else v  # noqa: E731
        data["jobs"] = [j for j in data["jobs"]
                        if str(j["job_id"]) in wanted or str(number(j["array_job_id"])) in wanted]
        return CommandResult(tuple(argv), 0, json.dumps(data).encode(), "")


@pytest.mark.parametrize("version", [v for v in RECORDED if v >= "24.11"])
def test_the_adapter_reads_narrow_then_the_rest_as_json(version: str) -> None:
    """`CliSlurm(narrow_queue=True).jobs()`: the queue the JSON read gives, from one narrow read and one
    `squeue --json --jobs` of what the text cannot say."""
    slurm = _Slurm(version)
    adapter = CliSlurm(slurm, RetryPolicy(retries=0), narrow_queue=True)
    got = sorted(adapter.jobs(), key=lambda job: job.job_id)
    assert got == sorted(parse_jobs(slurm.answer), key=lambda job: job.job_id)
    squeues = [argv for argv in slurm.calls if argv[0] == "squeue"]
    assert len(squeues) == 2 and squeues[0][:3] == ["squeue", "--states=all", "--noheader"]
    assert squeues[1][:3] == ["squeue", "--json", "--states=all"]
    assert adapter.command_counts()["squeue"] == 2
    assert [job for job in adapter.jobs(user="bob")] == []


def test_each_read_draws_a_fresh_token() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100 and all(t[0].isalpha() and len(t) >= 32 for t in tokens)
    argv = narrow_argv("Qabc", user="alice")
    assert argv[-1] == "--user=alice"
    assert argv[3].count("Qabcf") == len(FIELDS) - 1 and argv[3].endswith("JobId:0Qabce")


def test_output_that_is_not_the_listing_is_one_line_naming_it() -> None:
    with pytest.raises(SlurmParseError, match="closed by its token"):
        parse_narrow(b'{"jobs": []}', "Qabc", says_hold=True)
    assert parse_narrow(b"", "Qabc", says_hold=True) == NarrowRead()


# --- hostile names, comments and constraints ------------------------------------------------------------------------

def _template() -> tuple[list[str], dict[str, Any]]:
    """A plain held job as 24.11 printed it both ways (`held@cpu` of the recording)."""
    text, answer = _recorded("24.11")
    record = next(j for j in json.loads(answer)["jobs"] if j["name"] == "held@cpu")
    line = next(p for p in text.decode().split(TOKEN + "e\n") if p.startswith(f"{record['job_id']}{TOKEN}"))
    return line.split(TOKEN + "f"), record


_TEMPLATE = _template()
_PIECES = st.sampled_from(["f", "e", "\n", "(null)", "Q", "1", "N/A", "PENDING", "root", "0", ",", "|", "%"])


def _hostile(token: str) -> st.SearchStrategy[str]:
    pieces = st.one_of(_PIECES, st.sampled_from([token, token + "f", token + "e\n", token + "e"]),
                       st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=6))
    return st.lists(pieces, max_size=12).map("".join)


def _queue(texts: list[tuple[str, str, str]], token: str) -> tuple[str, bytes, dict[int, tuple[str, str, str]]]:
    """The narrow listing and the JSON answer of jobs 1001, 1002, ... with these names, comments and constraints."""
    fields, record = _TEMPLATE
    lines, jobs, truth = [], [], {}
    for i, (name, comment, features) in enumerate(texts):
        job_id = str(1001 + i)
        printed = [job_id, job_id, *fields[2:23], name or "(null)", comment or "(null)", features or "(null)", job_id]
        lines.append((token + "f").join(printed) + token + "e\n")
        jobs.append({**record, "job_id": int(job_id), "name": name, "comment": comment, "features": features})
        truth[int(job_id)] = (name, comment, features)
    return "".join(lines), json.dumps({"jobs": jobs}).encode(), truth


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_no_text_forges_a_field_or_a_job(data: st.DataObject) -> None:
    """Names, comments and constraints holding the read's own separators, newlines, `(null)` and forged records:
    every job the narrow read gives is exactly that job as the JSON read gives it (a comment that is literally
    `(null)` reads as empty); no job is given twice or made up; every job it does not give, it names for the JSON."""
    token = "Q" + data.draw(st.text("0123456789abcdef", min_size=4, max_size=8))
    hostile = _hostile(token)
    texts = data.draw(st.lists(st.tuples(hostile, hostile, hostile), min_size=1, max_size=5))
    listing, answer, truth = _queue(texts, token)
    read = parse_narrow(listing, token, says_hold=True)
    expected = {job.job_id: job for job in parse_jobs(answer)}
    ids = [job.job_id for job in read.jobs]
    assert len(ids) == len(set(ids)) and set(ids) <= set(truth)
    for job in read.jobs:
        want = expected[job.job_id]
        if want.comment == "(null)":
            assert job.comment == ""
            job.comment = "(null)"
        if want.features == "(null)":
            assert job.features == ""
            job.features = "(null)"
        assert job == want
    assert {str(i) for i in truth if i not in set(ids)} <= set(read.full)
    if not any(token in t for texts in truth.values() for t in texts):  # no separator: nothing to read again
        assert {i for i, (name, _, _) in truth.items() if name and name != "(null)"} <= set(ids)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4000), st.sampled_from(RECORDED))
def test_the_stream_reads_what_the_whole_answer_holds(chunk: int, version: str) -> None:
    """Fed as the pipe cuts it (a run of records once enough waits: here every chunk), the same read."""
    text, _ = _recorded(version)
    reader = NarrowStream(TOKEN, **_shape(version), run_bytes=1)
    for at in range(0, len(text), chunk):
        reader.feed(text[at:at + chunk])
    assert reader.finish() == parse_narrow(text, TOKEN, **_shape(version))
