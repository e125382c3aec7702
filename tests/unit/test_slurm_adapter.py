"""CliSlurm over a ReplayTransport: the commands it sends, how it retries, how it classifies Slurm's errors.

ReplayTransport answers from output recorded on real Slurm 22.05 / 24.11 clusters (tests/fixtures/slurm);
`sleep` is a recorder, so backoff is asserted without waiting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slurmx.core.arrays import task_key
from slurmx.slurm.adapter import CliSlurm, JobUpdate, RetryPolicy
from slurmx.slurm.errors import (
    InvalidJobError,
    SlurmCommandError,
    SlurmParseError,
    SlurmUnavailable,
    TransportError,
)
from slurmx.slurm.transport import CommandResult, ReplayTransport
from slurmx.slurm.versions import TESTED

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
VERSIONS = TESTED

CONNECT_FAILURE = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
SUBMIT_CONNECT_FAILURE = (
    "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n"
)
SUBMIT_SOCKET_TIMEOUT = (
    "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n"
)
SCRIPT = "#!/bin/bash\n#SBATCH --output=/dev/null\nsleep 120\n"


def read(version: str, name: str) -> str:
    return (FIXTURES / version / name).read_text()


def ok(stdout: str = "") -> CommandResult:
    return CommandResult((), 0, stdout, "")


def fail(stderr: str, code: int = 1) -> CommandResult:
    return CommandResult((), code, "", stderr)


class Sleeps(list[float]):
    """Records the waits CliSlurm asks for instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def adapter(answers: dict[tuple[str, ...], Any], retry: RetryPolicy | None = None
            ) -> tuple[CliSlurm, ReplayTransport, Sleeps]:
    transport = ReplayTransport(answers)
    sleeps = Sleeps()
    return CliSlurm(transport, retry or RetryPolicy(), sleep=sleeps), transport, sleeps


def argvs(transport: ReplayTransport) -> list[tuple[str, ...]]:
    return [argv for argv, _ in transport.calls]


# ---------------------------------------------------------------------------------------------- retries


@pytest.mark.parametrize("version", VERSIONS)
def test_read_retries_with_backoff_then_succeeds(version: str) -> None:
    slurm, transport, sleeps = adapter(
        {("squeue",): [fail(CONNECT_FAILURE)] * 3 + [ok(read(version, "squeue.json"))]},
        RetryPolicy(retries=5, backoff_s=1.0, max_backoff_s=30.0),
    )
    jobs = slurm.jobs()
    assert sleeps == [1.0, 2.0, 4.0]
    assert argvs(transport) == [("squeue", "--json", "--states=all")] * 4
    assert {j.name for j in jobs} >= {"rec@gpu", "run@gpu", "run@cpu"}


def test_backoff_doubles_up_to_the_cap() -> None:
    slurm, transport, sleeps = adapter(
        {("squeue",): [fail(CONNECT_FAILURE)] * 6 + [ok(read("24.11", "squeue.json"))]},
        RetryPolicy(retries=6, backoff_s=1.0, max_backoff_s=5.0),
    )
    assert len(slurm.jobs()) == 3
    assert sleeps == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    assert len(transport.calls) == 7


def test_backoff_uses_the_policy_base() -> None:
    slurm, _, sleeps = adapter(
        {("scontrol", "--version"): [fail(CONNECT_FAILURE)] * 4 + [ok("slurm 24.11.5\n")]},
        RetryPolicy(retries=4, backoff_s=0.5, max_backoff_s=30.0),
    )
    assert slurm.version() == "24.11"
    assert sleeps == [0.5, 1.0, 2.0, 4.0]


def test_gives_up_after_retries() -> None:
    slurm, transport, sleeps = adapter(
        {("squeue",): fail(CONNECT_FAILURE)},  # answers the same every time
        RetryPolicy(retries=3, backoff_s=1.0, max_backoff_s=30.0),
    )
    with pytest.raises(SlurmUnavailable) as info:
        slurm.jobs()
    assert len(transport.calls) == 4  # the first try and 3 retries
    assert sleeps == [1.0, 2.0, 4.0]  # no wait after the last attempt
    text = str(info.value)
    assert "\n" not in text
    assert text == ("squeue --json --states=all: exit 1: "
                    "slurm_load_jobs error: Unable to contact slurm controller (connect failure)")
    assert info.value.argv == ("squeue", "--json", "--states=all")
    assert info.value.returncode == 1


def test_no_retries_configured() -> None:
    slurm, transport, sleeps = adapter({("squeue",): fail(CONNECT_FAILURE)}, RetryPolicy(retries=0))
    with pytest.raises(SlurmUnavailable):
        slurm.jobs()
    assert len(transport.calls) == 1
    assert sleeps == []


@pytest.mark.parametrize("stderr", [
    "squeue: error: Socket timed out on send/recv operation\n"
    "slurm_load_jobs error: Socket timed out on send/recv operation\n",
    "slurm_load_jobs error: Zero Bytes were transmitted or received\n",
    "slurm_load_jobs error: Slurm backup controller in standby mode\n",
])
def test_other_unavailable_messages_are_retried_for_reads(stderr: str) -> None:
    slurm, transport, sleeps = adapter(
        {("squeue",): [fail(stderr), ok(read("24.11", "squeue.json"))]}
    )
    assert len(slurm.jobs()) == 3
    assert sleeps == [1.0]
    assert len(transport.calls) == 2


@pytest.mark.parametrize("version", VERSIONS)
def test_invalid_job_from_recorded_error(version: str) -> None:
    slurm, transport, sleeps = adapter({("scontrol", "hold"): fail(read(version, "err-invalid-job.txt"), 1)})
    with pytest.raises(InvalidJobError) as info:
        slurm.hold([999999])
    assert isinstance(info.value, SlurmCommandError)
    assert not isinstance(info.value, SlurmUnavailable)
    # Slurm's own last line: 26.05 leaves out the space after "error:"
    assert str(info.value).replace("error:Invalid", "error: Invalid") == (
        "scontrol hold 999999: exit 1: slurm_suspend error: Invalid job id specified")
    assert argvs(transport) == [("scontrol", "hold", "999999")]
    assert sleeps == []


@pytest.mark.parametrize(("call", "key", "stderr", "shown"), [
    (lambda s: s.hold([5]), ("scontrol", "hold"),
     "Access/permission denied for job 5\nslurm_suspend error: Access/permission denied\n",
     "scontrol hold 5: exit 1: slurm_suspend error: Access/permission denied"),
    (lambda s: s.cancel([5, 6]), ("scancel",),
     "scancel: error: Kill job error on job id 5: Access/permission denied\n",
     "scancel 5 6: exit 1: scancel: error: Kill job error on job id 5: Access/permission denied"),
    (lambda s: s.jobs(user="nobody"), ("squeue",), "squeue: error: Invalid user: nobody\n",
     "squeue --json --states=all --user=nobody: exit 1: squeue: error: Invalid user: nobody"),
])
def test_plain_refusal_is_not_retried(call: Any, key: tuple[str, ...], stderr: str, shown: str) -> None:
    slurm, transport, sleeps = adapter({key: fail(stderr, 1)})
    with pytest.raises(SlurmCommandError) as info:
        call(slurm)
    assert type(info.value) is SlurmCommandError
    assert str(info.value) == shown
    assert len(transport.calls) == 1
    assert sleeps == []


def test_refusal_message_is_the_error_line() -> None:
    slurm, _, _ = adapter({("sbatch",): fail(
        "sbatch: error: invalid partition specified: nope\n"
        "sbatch: error: Batch job submission failed: Invalid partition name specified\n")})
    with pytest.raises(SlurmCommandError) as info:
        slurm.submit(SCRIPT, ["-p", "nope"])
    assert str(info.value) == (
        "sbatch --parsable -p nope: exit 1: sbatch: error: invalid partition specified: nope "
        "(sbatch: error: Batch job submission failed: Invalid partition name specified)"
    )


def test_ping_does_not_retry() -> None:
    slurm, transport, sleeps = adapter({("scontrol", "ping"): fail(CONNECT_FAILURE)})
    assert slurm.ping() is False
    assert len(transport.calls) == 1 and sleeps == []
    slurm, _, _ = adapter({("scontrol", "ping"): ok("Slurmctld(primary) at slurmctld is UP\n")})
    assert slurm.ping() is True


def test_no_recorded_answer_is_a_transport_error() -> None:
    slurm, transport, sleeps = adapter({})
    with pytest.raises(TransportError):
        slurm.jobs()
    assert len(transport.calls) == 1 and sleeps == []


# ---------------------------------------------------------------------------------------------- submit


def test_submit_sends_script_on_stdin() -> None:
    slurm, transport, _ = adapter({("sbatch",): ok("1234\n")})
    job_id = slurm.submit(SCRIPT, ["-p", "gpu", "--gres=gpu:1", "--comment=slurmx:g=a,v=gpu"])
    assert job_id == 1234
    assert transport.calls == [
        (("sbatch", "--parsable", "-p", "gpu", "--gres=gpu:1", "--comment=slurmx:g=a,v=gpu"), SCRIPT)
    ]


@pytest.mark.parametrize(("stdout", "job_id"), [
    ("1234", 1234),
    ("1234\n", 1234),
    ("1234;cluster\n", 1234),
    ("1234;slurmx2411\n", 1234),
])
def test_submit_parses_job_id(stdout: str, job_id: int) -> None:
    slurm, _, _ = adapter({("sbatch",): ok(stdout)})
    assert slurm.submit(SCRIPT, []) == job_id


@pytest.mark.parametrize("stdout", ["", "Submitted batch job\n", "cluster;1234\n"])
def test_submit_without_job_id(stdout: str) -> None:
    slurm, _, _ = adapter({("sbatch",): ok(stdout)})
    with pytest.raises(SlurmParseError, match="sbatch printed no job id"):
        slurm.submit(SCRIPT, [])


@pytest.mark.parametrize("script", ["sleep 120\n", "", " #!/bin/bash\nsleep 1\n", "\n#!/bin/bash\n"])
def test_submit_refuses_script_without_shebang(script: str) -> None:
    slurm, transport, _ = adapter({("sbatch",): ok("1234\n")})
    with pytest.raises(SlurmCommandError, match="#!"):
        slurm.submit(script, ["-p", "cpu"])
    assert transport.calls == []


def test_submit_not_retried_after_socket_timeout() -> None:
    # The request may have reached slurmctld: a retry could create the job twice.
    slurm, transport, sleeps = adapter({("sbatch",): [fail(SUBMIT_SOCKET_TIMEOUT), ok("1234\n")]})
    with pytest.raises(SlurmUnavailable) as info:
        slurm.submit(SCRIPT, ["-p", "cpu"])
    assert "Socket timed out" in str(info.value)
    assert len(transport.calls) == 1
    assert sleeps == []


def test_submit_retried_after_connect_failure() -> None:
    slurm, transport, sleeps = adapter(
        {("sbatch",): [fail(SUBMIT_CONNECT_FAILURE), fail(SUBMIT_CONNECT_FAILURE), ok("1234;cluster\n")]}
    )
    assert slurm.submit(SCRIPT, ["-p", "cpu"]) == 1234
    assert sleeps == [1.0, 2.0]
    assert transport.calls == [(("sbatch", "--parsable", "-p", "cpu"), SCRIPT)] * 3


def test_submit_gives_up_on_connect_failure() -> None:
    slurm, transport, sleeps = adapter({("sbatch",): fail(SUBMIT_CONNECT_FAILURE)}, RetryPolicy(retries=2))
    with pytest.raises(SlurmUnavailable, match=r"\(connect failure\)"):
        slurm.submit(SCRIPT, [])
    assert len(transport.calls) == 3
    assert sleeps == [1.0, 2.0]


# ---------------------------------------------------------------------------------------------- controls


@pytest.mark.parametrize(("call", "argv"), [
    (lambda s: s.hold([1, 2, 3]), ("scontrol", "hold", "1,2,3")),
    (lambda s: s.release([1, 2, 3]), ("scontrol", "release", "1,2,3")),
    (lambda s: s.requeue([1, 2, 3]), ("scontrol", "requeue", "1,2,3")),
    (lambda s: s.requeue([1, 2, 3], hold=True), ("scontrol", "requeuehold", "1,2,3")),
    (lambda s: s.cancel([1, 2, 3]), ("scancel", "1", "2", "3")),
    (lambda s: s.signal([1, 2], "USR2"), ("scancel", "--signal=USR2", "--batch", "1", "2")),
    (lambda s: s.signal([1, 2], "SIGUSR2"), ("scancel", "--signal=USR2", "--batch", "1", "2")),
    (lambda s: s.signal([1, 2], "TERM", batch_only=False), ("scancel", "--signal=TERM", "--full", "1", "2")),
])
def test_controls_send_many_ids_in_one_call(call: Any, argv: tuple[str, ...]) -> None:
    slurm, transport, _ = adapter({("scontrol",): ok(), ("scancel",): ok()})
    call(slurm)
    assert transport.calls == [(argv, None)]


@pytest.mark.parametrize(("call", "argv"), [
    (lambda s: s.hold([3, 1, 3, 2, 1]), ("scontrol", "hold", "3,1,2")),
    (lambda s: s.release(iter([7, 7, 7])), ("scontrol", "release", "7")),
    (lambda s: s.requeue((5, 4, 5), hold=True), ("scontrol", "requeuehold", "5,4")),
    (lambda s: s.cancel([2, 2, 9]), ("scancel", "2", "9")),
    (lambda s: s.signal([4, 4], "USR1"), ("scancel", "--signal=USR1", "--batch", "4")),
])
def test_duplicate_ids_collapse_in_order(call: Any, argv: tuple[str, ...]) -> None:
    slurm, transport, _ = adapter({("scontrol",): ok(), ("scancel",): ok()})
    call(slurm)
    assert argvs(transport) == [argv]


@pytest.mark.parametrize("call", [
    lambda s: s.hold([]),
    lambda s: s.release([]),
    lambda s: s.requeue([]),
    lambda s: s.requeue([], hold=True),
    lambda s: s.cancel([]),
    lambda s: s.signal([], "USR2"),
    lambda s: s.update([], JobUpdate(partition="gpu", nodelist="g1")),
    lambda s: s.hold(iter(())),
])
def test_empty_id_list_makes_no_call(call: Any) -> None:
    slurm, transport, _ = adapter({("scontrol",): ok(), ("scancel",): ok()})
    call(slurm)
    assert transport.calls == []


def test_control_retried_while_controller_unreachable() -> None:
    slurm, transport, sleeps = adapter(
        {("scontrol", "hold"): [
            fail("slurm_suspend error: Unable to contact slurm controller (connect failure)\n"), ok()]}
    )
    slurm.hold([1, 2])
    assert argvs(transport) == [("scontrol", "hold", "1,2")] * 2
    assert sleeps == [1.0]


def test_update_one_call_per_field_in_order() -> None:
    slurm, transport, _ = adapter({("scontrol",): ok()})
    change = JobUpdate(partition="gpu", gres="gpu:1", cpus=2, mem_mb=2048, priority=100, nice=10,
                       nodelist="g1", comment="slurmx:g=a,v=gpu")
    slurm.update([11, 12, 11], change)
    assert transport.calls == [
        (("scontrol", "update", "JobId=11,12", "Partition=gpu"), None),
        (("scontrol", "update", "JobId=11,12", "Gres=gpu:1"), None),
        (("scontrol", "update", "JobId=11,12", "NumCPUs=2"), None),
        (("scontrol", "update", "JobId=11,12", "MinMemoryNode=2048"), None),
        (("scontrol", "update", "JobId=11,12", "Priority=100"), None),
        (("scontrol", "update", "JobId=11,12", "Nice=10"), None),
        (("scontrol", "update", "JobId=11,12", "Comment=slurmx:g=a,v=gpu"), None),
        (("scontrol", "update", "JobId=11", "ReqNodeList=g1"), None),
        (("scontrol", "update", "JobId=12", "ReqNodeList=g1"), None),
    ]


def test_update_names_an_arrays_tasks_together_so_slurm_can_update_its_pending_record_whole() -> None:
    slurm, transport, _ = adapter({("scontrol",): ok()})
    tasks = [task_key(80, i) for i in (9, 0, 1, 2, 5)]
    slurm.update([7, *tasks, task_key(95, 3), 8], JobUpdate(begin="now+600", nodelist="c1"))
    assert argvs(transport) == [
        ("scontrol", "update", "JobId=7,80_[0-2,5,9],95_3,8", "StartTime=now+600"),
        *(("scontrol", "update", f"JobId={one}", "ReqNodeList=c1")  # one by one, as before
          for one in ("7", "80_9", "80_0", "80_1", "80_2", "80_5", "95_3", "8")),
    ]


def test_update_only_given_fields_and_clearing() -> None:
    slurm, transport, _ = adapter({("scontrol",): ok()})
    slurm.update([3], JobUpdate(gres="", mem_mb=1500, nice=0, nodelist=""))
    assert argvs(transport) == [
        ("scontrol", "update", "JobId=3", "Gres="),
        ("scontrol", "update", "JobId=3", "MinMemoryNode=1500"),
        ("scontrol", "update", "JobId=3", "Nice=0"),
        ("scontrol", "update", "JobId=3", "ReqNodeList="),
    ]


def test_update_with_nothing_to_change() -> None:
    slurm, transport, _ = adapter({("scontrol",): ok()})
    slurm.update([1, 2], JobUpdate())
    assert transport.calls == []


def test_update_stops_at_the_first_refusal() -> None:
    slurm, transport, _ = adapter({
        ("scontrol", "update", "JobId=4", "Partition=gpu"): ok(),
        ("scontrol", "update", "JobId=4", "Gres=gpu:4"): fail(
            "Requested node configuration is not available\nslurm_update error: Requested node configuration "
            "is not available\n"),
    })
    with pytest.raises(SlurmCommandError, match="Requested node configuration is not available"):
        slurm.update([4], JobUpdate(partition="gpu", gres="gpu:4", cpus=2))
    assert len(transport.calls) == 2


# ---------------------------------------------------------------------------------------------- reads


@pytest.mark.parametrize(("version", "argv"), [
    ("22.05", ("sinfo", "--json")),
    ("24.11", ("scontrol", "show", "nodes", "--json")),
])
def test_nodes_command_depends_on_version(version: str, argv: tuple[str, ...]) -> None:
    slurm, transport, _ = adapter({
        ("scontrol", "--version"): ok(read(version, "version.txt")),
        argv: ok(read(version, "nodes.json")),
    })
    nodes = slurm.nodes()
    assert [n.name for n in nodes] == ["a1", "c1", "c2", "g1", "g2"]
    assert {n.name: n.allocated.cpus for n in nodes} == {"a1": 0, "c1": 3, "c2": 0, "g1": 2, "g2": 0}
    slurm.nodes()  # the version is asked once
    assert argvs(transport) == [("scontrol", "--version"), argv, argv]


@pytest.mark.parametrize("version", VERSIONS)
def test_version_cached(version: str) -> None:
    slurm, transport, _ = adapter({("scontrol", "--version"): ok(read(version, "version.txt"))})
    assert slurm.version() == version
    assert slurm.version() == version
    assert len(transport.calls) == 1


@pytest.mark.parametrize(("version", "wanted", "found"), [
    ("22.05", [5, 4, 999999], [4, 5]),  # Slurm's order; unknown ids are simply absent
    ("24.11", [6, 999999], [6]),
    ("22.05", iter([7, 1]), [1, 7]),
])
def test_jobs_filtered_client_side(version: str, wanted: Any, found: list[int]) -> None:
    slurm, transport, _ = adapter({("squeue",): ok(read(version, "squeue.json"))})
    ids = list(wanted) if not isinstance(wanted, list) else wanted
    assert [j.job_id for j in slurm.jobs(job_ids=iter(ids) if not isinstance(wanted, list) else ids)] == found
    # named to squeue (24.11 answers only those jobs), filtered here too: 22.05's --json ignores squeue's filters
    assert argvs(transport) == [("squeue", "--json", "--states=all", "--jobs=" + ",".join(map(str, ids)))]


def test_jobs_of_ids_slurm_no_longer_knows_are_none() -> None:
    # what squeue --json --states=all --jobs=999999 answered on the live 24.11 cluster: no output, exit 1
    slurm, _, _ = adapter({("squeue",): fail("slurm_load_jobs error: Invalid job id specified\n")})
    assert slurm.jobs(job_ids=[999999]) == []
    with pytest.raises(InvalidJobError):
        slurm.jobs()


def test_many_ids_read_the_whole_queue() -> None:
    slurm, transport, _ = adapter({("squeue",): ok(read("24.11", "squeue.json"))})
    slurm.jobs(job_ids=range(1, 1000))
    assert argvs(transport) == [("squeue", "--json", "--states=all")]


def test_jobs_of_no_ids_asks_nothing() -> None:
    slurm, transport, _ = adapter({})
    assert slurm.jobs(job_ids=[]) == []
    assert transport.calls == []


@pytest.mark.parametrize("version", VERSIONS)
def test_jobs_by_user(version: str) -> None:
    slurm, transport, _ = adapter({("squeue",): ok(read(version, "squeue.json"))})
    assert {j.user for j in slurm.jobs(user="alice")} == {"alice"}
    assert slurm.jobs(user="bob") == []  # 22.05 returns alice's jobs despite --user=bob
    assert argvs(transport) == [("squeue", "--json", "--states=all", "--user=alice"),
                                ("squeue", "--json", "--states=all", "--user=bob")]


@pytest.mark.parametrize("version", VERSIONS)
def test_jobs_parse_error_names_the_command(version: str) -> None:
    slurm, _, _ = adapter({("squeue",): ok("squeue: error: unrecognized option '--json'\n")})
    with pytest.raises(SlurmParseError) as info:
        slurm.jobs(user="alice")
    assert str(info.value).startswith("squeue --json --states=all --user=alice: exit 0: expected JSON")


@pytest.mark.parametrize("version", VERSIONS)
def test_partitions(version: str) -> None:
    slurm, transport, _ = adapter({("scontrol", "show", "partition"): ok(read(version, "partitions.txt"))})
    parts = slurm.partitions({"gpu": "gpu"})
    assert [(p.name, p.nodes, p.kind) for p in parts] == [
        ("cpu", ("c1", "c2"), None),
        ("gpu", ("g1", "g2"), "gpu"),
        ("accel", ("a1",), None),
    ]
    assert argvs(transport) == [("scontrol", "show", "partition", "-o")]


@pytest.mark.parametrize(("version", "done"), [("22.05", 7), ("24.11", 8)])
def test_accounting(version: str, done: int) -> None:
    slurm, transport, _ = adapter({("sacct",): ok(read(version, "sacct.json"))})
    records = slurm.accounting(job_ids=[done, done, 999999], since="now-1hour")
    assert [(r.job_id, r.name, r.elapsed_s, r.exit_code) for r in records] == [(done, "done@accel", 0, 0)]
    assert argvs(transport) == [
        ("sacct", "--json", "--allusers", "--starttime=now-1hour", f"--jobs={done},999999")
    ]


def test_accounting_all_and_none() -> None:
    slurm, transport, _ = adapter({("sacct",): ok(read("24.11", "sacct.json"))})
    assert slurm.accounting(job_ids=[]) == []
    assert transport.calls == []
    assert [r.job_id for r in slurm.accounting()] == [3, 4, 6, 7, 8]
    assert argvs(transport) == [("sacct", "--json", "--allusers", "--starttime=now-1day")]


def test_signal_not_retried_after_socket_timeout() -> None:
    slurm, transport, _ = adapter({("scancel",): [
        fail("scancel: error: Kill job error on job id 5: Socket timed out on send/recv operation\n"), ok()]})
    with pytest.raises(SlurmUnavailable):
        slurm.signal([5], "USR2")
    assert len(transport.calls) == 1
