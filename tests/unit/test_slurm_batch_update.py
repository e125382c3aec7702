"""`CliSlurm.update_each` (many jobs' changes through one scontrol's stdin), the per-command counts, and the big
reads handed to the parsers as bytes.

The failure text is what scontrol 24.11 printed on the live test cluster for
`update JobId=5 ReqNodeList=c1 / JobId=999999 ... / JobId=7 ReqNodeList=nosuchnode / JobId=5,999998,6 Nice=10`
(exit 1; the good lines applied).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from slurmx.slurm.adapter import CliSlurm, JobUpdate, RetryPolicy
from slurmx.slurm.errors import InvalidJobError, SlurmCommandError, SlurmUnavailable
from slurmx.slurm.transport import CommandResult, ReplayTransport
from slurmx.slurm.versions import TESTED

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"

LIVE_24_11_STDERR = ("scontrol: error: Could not load state information for job 999999: Invalid job id specified\n"
                     "Invalid node name specified for job 7\n"
                     "Invalid job id specified for job 999998\n")


def ok(stdout: str | bytes = "") -> CommandResult:
    return CommandResult((), 0, stdout, "")


def fail(stderr: str, code: int = 1) -> CommandResult:
    return CommandResult((), code, "", stderr)


def slurm(answers: dict[tuple[str, ...], Any]) -> tuple[CliSlurm, ReplayTransport]:
    transport = ReplayTransport(answers)
    return CliSlurm(transport, RetryPolicy(retries=1), sleep=lambda s: None), transport


def test_identical_changes_share_a_line_and_every_job_is_steered_on_its_own_line_all_in_one_process() -> None:
    adapter, transport = slurm({("scontrol",): ok()})
    failed = adapter.update_each([(1, JobUpdate(nice=5)), (2, JobUpdate(nice=5)), (3, JobUpdate(nodelist="c1")),
                                  (4, JobUpdate(nodelist="c1")), (5, JobUpdate(cpus=2, mem_mb=900))])
    assert failed == {}
    assert transport.calls == [(("scontrol",), "update JobId=1,2 Nice=5\n"
                                               "update JobId=3 ReqNodeList=c1\n"
                                               "update JobId=4 ReqNodeList=c1\n"
                                               "update JobId=5 NumCPUs=2\n"
                                               "update JobId=5 MinMemoryNode=900\n")]


def test_each_failed_job_gets_its_own_error_and_the_others_none_from_one_process() -> None:
    adapter, transport = slurm({("scontrol",): fail(LIVE_24_11_STDERR)})
    failed = adapter.update_each([(5, JobUpdate(nodelist="c1")), (999999, JobUpdate(nodelist="c1")),
                                  (6, JobUpdate(nodelist="c2")), (7, JobUpdate(nodelist="nosuchnode")),
                                  (5, JobUpdate(nice=10)), (999998, JobUpdate(nice=10)), (6, JobUpdate(nice=10))])
    assert len(transport.calls) == 1
    assert sorted(failed) == [7, 999998, 999999]
    assert isinstance(failed[999999], InvalidJobError) and isinstance(failed[999998], InvalidJobError)
    assert type(failed[7]) is SlurmCommandError and "Invalid node name specified for job 7" in failed[7].message


def test_a_failure_that_names_no_job_is_told_by_running_each_line_on_its_own() -> None:
    adapter, transport = slurm({("scontrol",): fail("scontrol: error: something went wrong\n"),
                                ("scontrol", "update", "JobId=1,2"): ok(),
                                ("scontrol", "update", "JobId=3"): fail("slurm_update error: Requested node "
                                                                        "configuration is not available\n")})
    failed = adapter.update_each([(1, JobUpdate(nice=1)), (2, JobUpdate(nice=1)), (3, JobUpdate(nodelist="c9"))])
    assert list(failed) == [3] and "not available" in failed[3].message
    assert [c[0] for c in transport.calls] == [("scontrol",), ("scontrol", "update", "JobId=1,2", "Nice=1"),
                                               ("scontrol", "update", "JobId=3", "ReqNodeList=c9")]


def test_an_unreachable_controller_raises_after_the_retries() -> None:
    adapter, transport = slurm({("scontrol",): fail("slurm_update error: Unable to contact slurm controller "
                                                    "(connect failure)\n")})
    with pytest.raises(SlurmUnavailable):
        adapter.update_each([(1, JobUpdate(nodelist="c1"))])
    assert len(transport.calls) == 2


@pytest.mark.parametrize("comment", ["two words", "a\nupdate JobId=9 Priority=0", 'q"uote'])
def test_a_value_that_cannot_go_on_a_stdin_line_goes_through_its_own_argv(comment: str) -> None:
    adapter, transport = slurm({("scontrol",): ok()})
    assert adapter.update_each([(1, JobUpdate(comment=comment)), (2, JobUpdate(nice=3))]) == {}
    assert transport.calls == [(("scontrol", "update", "JobId=1", f"Comment={comment}"), None),
                               (("scontrol",), "update JobId=2 Nice=3\n")]


def test_nothing_to_change_runs_nothing() -> None:
    adapter, transport = slurm({})
    assert adapter.update_each([]) == {} and transport.calls == []


def test_commands_are_counted_by_name_each_retry_included() -> None:
    squeue = (FIXTURES / "24.11" / "squeue.json").read_text()
    adapter, _ = slurm({("squeue",): ok(squeue), ("scontrol", "--version"): ok("slurm 24.11.5\n"),
                        ("scontrol", "show", "nodes"): ok((FIXTURES / "24.11" / "nodes.json").read_text()),
                        ("scancel",): [fail("Socket timed out on send/recv operation\n"), ok()],
                        ("scontrol",): ok()})
    assert adapter.command_counts() == {}
    adapter.jobs()
    adapter.nodes()
    adapter.cancel([1])
    adapter.update_each([(1, JobUpdate(nodelist="c1")), (2, JobUpdate(nodelist="c2"))])
    assert adapter.command_counts() == {"squeue": 1, "scontrol": 3, "scancel": 2}


class _BytesOnly(CommandResult):
    """A result whose text must not be asked for: the big reads go to the parsers as bytes."""

    @property
    def stdout(self) -> str:
        raise AssertionError("stdout decoded to text")


class _BytesTransport:
    """Answers each read with a `_BytesOnly` result from the recorded files of one version."""

    def __init__(self, version: str) -> None:
        self.folder = FIXTURES / version

    def describe(self) -> str:
        return "bytes"

    def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
        if list(argv[:2]) == ["scontrol", "--version"]:
            return CommandResult(tuple(argv), 0, (self.folder / "version.txt").read_text(), "")
        name = {"squeue": "squeue.json", "sacct": "sacct.json"}.get(argv[0], "nodes.json")
        return _BytesOnly(tuple(argv), 0, (self.folder / name).read_bytes(), "")


@pytest.mark.parametrize("version", TESTED)
def test_big_reads_hand_the_parsers_bytes_and_never_decode_them_to_text(version: str) -> None:
    adapter = CliSlurm(_BytesTransport(version), RetryPolicy(retries=0))
    assert adapter.jobs() and adapter.nodes() and adapter.accounting()


def test_a_result_reads_as_text_or_bytes_whichever_the_transport_gave() -> None:
    raw = CommandResult(("x",), 0, b"caf\xc3\xa9 \xff", "")
    assert (raw.data, raw.stdout, raw.empty) == (b"caf\xc3\xa9 \xff", "caf\u00e9 \ufffd", False)
    text = CommandResult(("x",), 0, "caf\u00e9", "")
    assert (text.data, text.stdout) == (b"caf\xc3\xa9", "caf\u00e9")
    assert CommandResult(("x",), 0, b"", "").empty and CommandResult(("x",), 0, b"ab", "") == \
        CommandResult(("x",), 0, "ab", "")
