"""Slurm output parsers against output recorded from real Slurm 22.05 and 24.11 clusters.

The recording cluster (tests/fixtures/slurm/record.sh): nodes c1, c2 (cpu, 4 cpus, 8000 MB), g1, g2 (gpu,
gres gpu:2), a1 (accel, accel:1, 2 cpus, 4000 MB). Jobs: a held `rec@gpu`, a running `run@gpu` on g1, a
running `run@cpu` on c1 (--time=30) and a finished `done@accel`. The 22.05 queue also still shows three jobs
left from an earlier recording run (1-3); 24.11 had already purged its finished `done@accel` from squeue.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slurmx.core.model import VariantState
from slurmx.core.resources import Resources
from slurmx.slurm import parse
from slurmx.slurm.errors import SlurmError, SlurmParseError
from slurmx.slurm.hostlist import expand_hostlist
from slurmx.slurm.parse import (
    load_json,
    number,
    parse_accounting,
    parse_jobs,
    parse_nodes,
    parse_partitions,
    parse_tres,
    parse_version,
    state_text,
)
from slurmx.slurm.versions import TESTED

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
# Job ids of the recorded jobs (record.sh submits them in this order on each cluster).
IDS = {
    "22.05": {"rec@gpu": 4, "run@gpu": 5, "run@cpu": 6, "done@accel": 7},
    "24.11": {"rec@gpu": 5, "run@gpu": 6, "run@cpu": 7, "done@accel": 8},
}
SUBMIT = {"22.05": 1795329186, "24.11": 1795329201}  # submission time of rec@gpu, run@gpu and run@cpu
START = {"22.05": (1795329186, 1795329188), "24.11": (1795329203, 1795329203)}  # run@gpu, run@cpu
# The releases whose recordings these ids and times describe (the 26.05 recording was made by another script).
VERSIONS = [v for v in TESTED if v in IDS]


def read(version: str, name: str) -> str:
    return (FIXTURES / version / name).read_text()


def loaded(version: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(read(version, name))
    return data


def by_id(items: list[Any]) -> dict[int, Any]:
    return {item.job_id: item for item in items}


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text and "\r" not in text
    return text


# ---------------------------------------------------------------------------------------------- squeue


def test_jobs_22_05_in_slurm_order() -> None:
    jobs = parse_jobs(read("22.05", "squeue.json"))
    assert [(j.job_id, j.name, j.state_text) for j in jobs] == [
        (1, "held@gpu", "CANCELLED"),
        (2, "run@cpu", "CANCELLED"),
        (3, "wrap", "COMPLETED"),
        (4, "rec@gpu", "PENDING"),
        (5, "run@gpu", "RUNNING"),
        (6, "run@cpu", "RUNNING"),
        (7, "done@accel", "COMPLETED"),
    ]


def test_jobs_24_11_in_slurm_order() -> None:
    jobs = parse_jobs(read("24.11", "squeue.json"))
    assert [(j.job_id, j.name, j.state_text) for j in jobs] == [
        (5, "rec@gpu", "PENDING"),
        (6, "run@gpu", "RUNNING"),
        (7, "run@cpu", "RUNNING"),
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_held_job(version: str) -> None:
    job = by_id(parse_jobs(read(version, "squeue.json")))[IDS[version]["rec@gpu"]]
    assert job.name == "rec@gpu"
    assert job.state is VariantState.HELD
    assert job.held is True
    assert job.state_text == "PENDING"
    assert job.reason == "JobHeldUser"
    assert (job.user, job.user_id, job.partition, job.qos) == ("alice", 2001, "gpu", "be")
    assert job.comment == "slurmx:g=rec,v=gpu"
    assert job.slurmx_tags == {"g": "rec", "v": "gpu"}
    assert job.request == Resources(1, 500, {"gpu": 1})
    assert job.allocated == Resources()
    assert job.nodes == ""
    assert (job.priority, job.nice, job.restart_count) == (0, 0, 0)
    assert job.time_limit_s is None
    assert job.submit_time == SUBMIT[version]
    assert (job.start_time, job.end_time) == (None, None)  # Slurm writes 0 for "not yet"


@pytest.mark.parametrize("version", VERSIONS)
def test_running_gpu_job(version: str) -> None:
    job = by_id(parse_jobs(read(version, "squeue.json")))[IDS[version]["run@gpu"]]
    assert job.name == "run@gpu"
    assert (job.state, job.held, job.state_text) == (VariantState.RUNNING, False, "RUNNING")
    assert (job.partition, job.qos, job.nodes) == ("gpu", "te", "g1")
    assert job.request == job.allocated == Resources(2, 1024, {"gpu": 2})
    assert job.priority == 10000
    assert job.comment == "" and job.slurmx_tags == {}
    assert job.time_limit_s is None  # no --time, partition MaxTime=UNLIMITED
    assert job.submit_time == SUBMIT[version]
    assert job.start_time == START[version][0]
    assert job.end_time == job.start_time + 365 * 86400  # Slurm's projected end for an unlimited job


@pytest.mark.parametrize("version", VERSIONS)
def test_running_cpu_job(version: str) -> None:
    job = by_id(parse_jobs(read(version, "squeue.json")))[IDS[version]["run@cpu"]]
    assert job.name == "run@cpu"
    assert (job.state, job.held) == (VariantState.RUNNING, False)
    assert (job.partition, job.qos, job.nodes) == ("cpu", "be", "c1")
    assert job.request == job.allocated == Resources(3, 2048)
    assert job.priority == 100
    assert job.time_limit_s == 1800  # --time=30 is minutes
    assert job.start_time == START[version][1]
    assert job.end_time == job.start_time + 1800


def test_22_05_queue_keeps_finished_jobs() -> None:
    jobs = by_id(parse_jobs(read("22.05", "squeue.json")))
    done = jobs[7]
    assert (done.name, done.state, done.nodes) == ("done@accel", VariantState.COMPLETED, "a1")
    assert done.request == done.allocated == Resources(1, 100, {"accel": 1})
    assert (done.start_time, done.end_time) == (1795329188, 1795329188)
    # A held job that was then cancelled is cancelled, not held, although its reason still says JobHeldUser.
    cancelled = jobs[1]
    assert (cancelled.state, cancelled.held) == (VariantState.CANCELLED, False)
    assert cancelled.reason == "JobHeldUser"
    assert cancelled.request == Resources(1, 8000, {"gpu": 1})


def test_24_11_queue_has_purged_the_finished_job() -> None:
    names = {j.name for j in parse_jobs(read("24.11", "squeue.json"))}
    assert "done@accel" not in names


@pytest.mark.parametrize("version", VERSIONS)
def test_jobs_state_list_with_flags(version: str) -> None:
    data = loaded(version, "squeue.json")
    raw = next(j for j in data["jobs"] if j["job_id"] == IDS[version]["run@cpu"])
    raw["job_state"] = ["PENDING", "REQUEUED"] if version == "24.11" else "PENDING"
    raw["state_reason"] = "BeginTime"
    job = by_id(parse_jobs(json.dumps(data)))[IDS[version]["run@cpu"]]
    assert job.state is VariantState.PENDING
    assert job.held is False
    assert job.state_text == ("PENDING+REQUEUED" if version == "24.11" else "PENDING")


def test_state_text_shapes() -> None:
    assert state_text("RUNNING") == "RUNNING"
    assert state_text(["PENDING", "REQUEUED"]) == "PENDING+REQUEUED"
    assert state_text({"current": ["COMPLETED"], "reason": "None"}) == "COMPLETED"
    assert state_text({"current": "CANCELLED"}) == "CANCELLED"
    assert state_text(None) == ""


# ---------------------------------------------------------------------------------------------- nodes

NODES = {  # name: (partition, capacity, allocated, state)
    "a1": ("accel", Resources(2, 4000, {"accel": 1}), Resources(), "IDLE"),
    "c1": ("cpu", Resources(4, 8000), Resources(3, 2048), "MIXED"),
    "c2": ("cpu", Resources(4, 8000), Resources(), "IDLE"),
    "g1": ("gpu", Resources(4, 8000, {"gpu": 2}), Resources(2, 1024, {"gpu": 2}), "MIXED"),
    "g2": ("gpu", Resources(4, 8000, {"gpu": 2}), Resources(), "IDLE"),
}


@pytest.mark.parametrize("version", VERSIONS)
def test_nodes(version: str) -> None:
    nodes = parse_nodes(read(version, "nodes.json"))
    assert [n.name for n in nodes] == ["a1", "c1", "c2", "g1", "g2"]
    for node in nodes:
        partition, capacity, allocated, state = NODES[node.name]
        assert node.partitions == (partition,), node.name
        assert node.capacity == capacity, node.name
        assert node.allocated == allocated, node.name
        assert node.state == state, node.name
        assert node.features == ()
        assert node.is_usable


@pytest.mark.parametrize("version", VERSIONS)
def test_nodes_free(version: str) -> None:
    free = {n.name: n.free for n in parse_nodes(read(version, "nodes.json"))}
    assert free == {
        "a1": Resources(2, 4000, {"accel": 1}),
        "c1": Resources(1, 8000 - 2048),  # run@cpu: 3 cpus, 2G
        "c2": Resources(4, 8000),
        "g1": Resources(2, 8000 - 1024),  # run@gpu: 2 cpus, 1G, both GPUs
        "g2": Resources(4, 8000, {"gpu": 2}),
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_node_drain_flag_in_either_shape(version: str) -> None:
    data = loaded(version, "nodes.json")
    raw = next(n for n in data["nodes"] if n["name"] == "c2")
    if version == "22.05":  # sinfo keeps flags apart from the base state
        raw["state"], raw["state_flags"] = "idle", ["DRAIN"]
    else:
        raw["state"] = ["IDLE", "DRAIN"]
    node = next(n for n in parse_nodes(json.dumps(data)) if n.name == "c2")
    assert node.state == "IDLE+DRAIN"
    assert not node.is_usable


def test_node_22_05_null_gres_type_and_index() -> None:
    data = loaded("22.05", "nodes.json")
    raw = next(n for n in data["nodes"] if n["name"] == "g2")
    raw["gres"], raw["gres_used"] = "gpu:(null):2", "gpu:(null):1(IDX:0)"
    raw["features"] = "fast,big"
    raw["partitions"] = "gpu,debug"
    node = next(n for n in parse_nodes(json.dumps(data)) if n.name == "g2")
    assert node.capacity.gres == {"gpu": 2}
    assert node.allocated.gres == {"gpu": 1}
    assert node.features == ("fast", "big")
    assert node.partitions == ("gpu", "debug")


# ---------------------------------------------------------------------------------------------- partitions


@pytest.mark.parametrize("version", VERSIONS)
def test_partitions(version: str) -> None:
    parts = parse_partitions(read(version, "partitions.txt"), {"gpu": "gpu", "accel": "accel"})
    assert [(p.name, p.nodes, p.kind, p.max_time_s, p.default) for p in parts] == [
        ("cpu", ("c1", "c2"), None, None, True),
        ("gpu", ("g1", "g2"), "gpu", None, False),
        ("accel", ("a1",), "accel", None, False),
    ]


def test_partitions_without_kinds() -> None:
    assert [p.kind for p in parse_partitions(read("24.11", "partitions.txt"))] == [None, None, None]


def test_partitions_max_time_and_empty_nodes() -> None:
    text = (
        "PartitionName=long Default=NO MaxTime=2-00:00:00 Nodes=n[01-03] State=UP\n"
        "PartitionName=short Default=NO MaxTime=00:30:00 Nodes=(null) State=UP\n"
        "\n"
        "not a partition line\n"
    )
    assert [(p.name, p.nodes, p.max_time_s) for p in parse_partitions(text)] == [
        ("long", ("n01", "n02", "n03"), 2 * 86400),
        ("short", (), 1800),
    ]


# ---------------------------------------------------------------------------------------------- sacct


@pytest.mark.parametrize("version", VERSIONS)
def test_accounting_finished_job(version: str) -> None:
    records = by_id(parse_accounting(read(version, "sacct.json")))
    done = records[IDS[version]["done@accel"]]
    assert done.name == "done@accel"
    assert (done.state, done.state_text) == (VariantState.COMPLETED, "COMPLETED")
    assert (done.user, done.partition, done.qos, done.nodes) == ("alice", "accel", "be", "a1")
    assert done.request == done.allocated == Resources(1, 100, {"accel": 1})
    assert done.elapsed_s == 0
    assert done.exit_code == 0
    assert done.start_time == done.end_time
    assert done.submit_time == done.start_time - 1
    assert done.max_rss_mb is None  # no step recorded a memory peak
    assert done.comment == ""
    assert done.restart_count == 0


@pytest.mark.parametrize("version", VERSIONS)
def test_accounting_running_jobs(version: str) -> None:
    records = by_id(parse_accounting(read(version, "sacct.json")))
    gpu, cpu = records[IDS[version]["run@gpu"]], records[IDS[version]["run@cpu"]]
    assert (gpu.name, gpu.state, gpu.nodes) == ("run@gpu", VariantState.RUNNING, "g1")
    assert gpu.request == gpu.allocated == Resources(2, 1024, {"gpu": 2})
    assert (cpu.name, cpu.state, cpu.nodes) == ("run@cpu", VariantState.RUNNING, "c1")
    assert cpu.request == cpu.allocated == Resources(3, 2048)
    assert gpu.end_time is None and cpu.end_time is None
    assert (gpu.start_time, cpu.start_time) == START[version]
    assert (gpu.elapsed_s, cpu.elapsed_s) == {"22.05": (11, 9), "24.11": (10, 10)}[version]
    assert gpu.exit_code == cpu.exit_code == 0


def test_accounting_ids() -> None:
    # The held job never became eligible, so sacct -S does not list it; the earlier run's jobs are there.
    assert [r.job_id for r in parse_accounting(read("22.05", "sacct.json"))] == [2, 3, 5, 6, 7]
    assert [r.job_id for r in parse_accounting(read("24.11", "sacct.json"))] == [3, 4, 6, 7, 8]


@pytest.mark.parametrize(("version", "job_id", "state"), [
    ("22.05", 2, VariantState.CANCELLED),
    ("24.11", 3, VariantState.COMPLETED),
])
def test_accounting_earlier_job(version: str, job_id: int, state: VariantState) -> None:
    record = by_id(parse_accounting(read(version, "sacct.json")))[job_id]
    assert (record.name, record.state, record.elapsed_s) == ("run@cpu", state, 30)
    assert record.end_time is not None and record.start_time is not None
    assert record.end_time - record.start_time == 30


@pytest.mark.parametrize("version", VERSIONS)
def test_accounting_exit_code_comment_and_max_rss(version: str) -> None:
    data = loaded(version, "sacct.json")
    raw = next(j for j in data["jobs"] if j["job_id"] == IDS[version]["done@accel"])
    raw["exit_code"]["return_code"] = (
        {"set": True, "infinite": False, "number": 3} if version == "24.11" else 3
    )
    raw["comment"]["job"] = "slurmx:g=a,v=accel"
    raw["steps"][0]["tres"]["requested"]["max"] = [
        {"type": "cpu", "name": "", "id": 1, "count": 1000},
        {"type": "mem", "name": "", "id": 2, "count": 50 * 1024 * 1024},  # bytes
    ]
    record = by_id(parse_accounting(json.dumps(data)))[IDS[version]["done@accel"]]
    assert record.exit_code == 3
    assert record.comment == "slurmx:g=a,v=accel"
    assert record.max_rss_mb == 50


# ---------------------------------------------------------------------------------------------- small parsers


@pytest.mark.parametrize(("value", "expected"), [
    (0, 0),
    (42, 42),
    (-1, -1),
    (2.5, 2.5),
    ("17", 17),
    ("-3", -3),
    ({"set": True, "infinite": False, "number": 30}, 30),
    ({"set": True, "infinite": False, "number": 0}, 0),
    ({"number": 7}, 7),
    ({"set": False, "infinite": False, "number": 0}, None),  # unset
    ({"set": False, "infinite": False, "number": 525600}, None),
    ({"set": False, "infinite": True, "number": 0}, None),  # infinite
    ({"set": True, "infinite": True, "number": 0}, None),
    ({"set": True, "infinite": False}, None),
    (None, None),
    (True, None),
    (False, None),
    ("UNLIMITED", None),
    ("", None),
    ([1], None),
])
def test_number(value: Any, expected: int | float | None) -> None:
    got = number(value)
    assert got == expected
    assert type(got) is type(expected)


@pytest.mark.parametrize(("expr", "names"), [
    ("c[1-2],g[01-02,5],login", ["c1", "c2", "g01", "g02", "g5", "login"]),
    ("a1", ["a1"]),
    ("", []),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),
    ("n[08-11]", ["n08", "n09", "n10", "n11"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("gpu[1-2]-ib", ["gpu1-ib", "gpu2-ib"]),
    ("c1, c2", ["c1", "c2"]),
])
def test_expand_hostlist(expr: str, names: list[str]) -> None:
    assert expand_hostlist(expr) == names


@pytest.mark.parametrize(("text", "expected"), [
    ("cpu=2,mem=1G,node=1,billing=2,gres/gpu=2", Resources(2, 1024, {"gpu": 2})),
    ("cpu=1,mem=500M,node=1,billing=1,gres/gpu=1", Resources(1, 500, {"gpu": 1})),
    ("cpu=1,mem=100M,node=1,billing=1,gres/accel=1", Resources(1, 100, {"accel": 1})),
    ("cpu=8,mem=16000M,node=2,billing=8", Resources(8, 16000)),
    ("cpu=2,mem=1.5G", Resources(2, 1536)),
    # the typed entry repeats the untyped one and is not counted twice
    ("cpu=4,mem=2G,gres/gpu=2,gres/gpu:a100=2", Resources(4, 2048, {"gpu": 2})),
    ("", Resources()),
    (None, Resources()),
])
def test_parse_tres(text: str | None, expected: Resources) -> None:
    assert parse_tres(text) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_parse_version_fixture(version: str) -> None:
    assert parse_version(read(version, "version.txt")) == version


@pytest.mark.parametrize(("text", "expected"), [
    ("slurm 24.11.5\n", "24.11"),
    ("slurm-wlm 22.05.8", "22.05"),
    ("slurm 23.2.7", "23.02"),
])
def test_parse_version(text: str, expected: str) -> None:
    assert parse_version(text) == expected


def test_parse_version_garbage() -> None:
    with pytest.raises(SlurmParseError) as info:
        parse_version("scontrol: command not found\n")
    assert one_line(info.value).startswith("scontrol --version: ")


# ---------------------------------------------------------------------------------------------- malformed


PARSERS = [
    pytest.param(parse_jobs, "squeue --json", id="jobs"),
    pytest.param(parse_nodes, "scontrol show nodes --json", id="nodes"),
    pytest.param(parse_accounting, "sacct --json", id="accounting"),
]


@pytest.mark.parametrize(("parser", "shown"), PARSERS)
@pytest.mark.parametrize("text", [
    "slurm_load_jobs error: Unable to contact slurm controller\nsecond line\n",
    "",
    '{"jobs": [',
    "[1, 2]",
])
def test_not_a_json_object(parser: Any, shown: str, text: str) -> None:
    with pytest.raises(SlurmParseError) as info:
        parser(text)
    message = one_line(info.value)
    assert message.startswith(f"{shown}: exit 0: expected")
    assert info.value.returncode == 0


def test_non_json_names_what_it_got() -> None:
    with pytest.raises(SlurmParseError, match="output began: squeue: invalid option"):
        parse_jobs("squeue: invalid option -- 'j'\nTry \"squeue --help\"\n")


@pytest.mark.parametrize(("parser", "shown"), PARSERS)
@pytest.mark.parametrize("errors", [
    [{"error": "Unable to query\nnodes", "errno": 1}],  # openapi v0.0.38 (22.05)
    [{"description": "Unable to query\nnodes", "error_number": 1, "error": "x", "source": "y"}],  # 24.11
])
def test_errors_reported_inside_json(parser: Any, shown: str, errors: list[dict[str, Any]]) -> None:
    with pytest.raises(SlurmParseError) as info:
        parser(json.dumps({"errors": errors, "jobs": [], "nodes": []}))
    assert one_line(info.value) == f"{shown}: exit 0: Slurm reported: Unable to query nodes"


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_errors_list_is_not_an_error(version: str) -> None:
    data = loaded(version, "squeue.json")
    assert data["errors"] == []
    assert load_json(read(version, "squeue.json"), ["squeue", "--json"])["errors"] == []


# A record that cannot be read is left out with a warning; the answer fails only when no record can be read.


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parse, "_warned", set())  # each warning is logged once per process


@pytest.mark.parametrize("version", VERSIONS)
def test_job_without_job_id(version: str, caplog: pytest.LogCaptureFixture) -> None:
    data = loaded(version, "squeue.json")
    del data["jobs"][1]["job_id"]
    jobs = parse_jobs(json.dumps(data))
    assert len(jobs) == len(data["jobs"]) - 1
    assert "squeue --json: skipped record 2, which cannot be read: Object missing required field `job_id`" \
        in caplog.messages
    data["jobs"] = data["jobs"][1:2]
    with pytest.raises(SlurmParseError) as info:
        parse_jobs(json.dumps(data))
    assert isinstance(info.value, SlurmError)
    message = one_line(info.value)
    assert message.startswith("squeue --json: exit 0: unexpected job record: record 1:")
    assert "job_id" in message


@pytest.mark.parametrize("version", VERSIONS)
def test_bad_tres_in_job(version: str, caplog: pytest.LogCaptureFixture) -> None:
    data = loaded(version, "squeue.json")
    data["jobs"][0]["tres_req_str"] = "cpu=two"
    bad = data["jobs"][0]["job_id"]
    jobs = parse_jobs(json.dumps(data), ["squeue", "--json", "--user=alice"])
    assert bad not in by_id(jobs) and len(jobs) == len(data["jobs"]) - 1
    assert any(m.startswith(f"squeue --json --user=alice: skipped job {bad}, which cannot be read: ")
               for m in caplog.messages)
    data["jobs"] = data["jobs"][:1]
    with pytest.raises(SlurmParseError, match=f"unexpected job record: job {bad}: "):
        parse_jobs(json.dumps(data), ["squeue", "--json", "--user=alice"])


@pytest.mark.parametrize("version", VERSIONS)
def test_node_without_name(version: str, caplog: pytest.LogCaptureFixture) -> None:
    data = loaded(version, "nodes.json")
    del data["nodes"][0]["name"]
    assert len(parse_nodes(json.dumps(data))) == len(data["nodes"]) - 1
    assert any("skipped record 1, which cannot be read: 'name'" in m for m in caplog.messages)
    data["nodes"] = data["nodes"][:1]
    with pytest.raises(SlurmParseError, match="unexpected node record"):
        parse_nodes(json.dumps(data))


@pytest.mark.parametrize("version", VERSIONS)
def test_accounting_without_job_id(version: str) -> None:
    data = loaded(version, "sacct.json")
    del data["jobs"][0]["job_id"]
    assert len(parse_accounting(json.dumps(data))) == len(data["jobs"]) - 1
    data["jobs"] = data["jobs"][:1]
    with pytest.raises(SlurmParseError, match="unexpected accounting record"):
        parse_accounting(json.dumps(data))


@pytest.mark.parametrize(("parser", "text"), [
    (parse_jobs, '{"jobs": [17]}'),
    (parse_nodes, '{"nodes": ["c1"]}'),
    (parse_accounting, '{"jobs": [{"job_id": 1, "tres": {"requested": [1]}}]}'),
])
def test_record_that_is_not_an_object(parser: Any, text: str) -> None:
    with pytest.raises(SlurmParseError):
        parser(text)



@pytest.mark.parametrize(("field", "value", "path"), [
    ("job_state", {"current": ["RUNNING"]}, "$.job_state"),  # a shape no supported version writes
    ("priority", "high", "$.priority"),
    ("exit_code", {"status": "SUCCESS"}, "$.exit_code.status"),
])
def test_job_field_in_another_shape_names_its_path_in_one_line(field: str, value: Any, path: str,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    data = loaded("24.11", "squeue.json")
    data["jobs"][0][field] = value
    assert [j.job_id for j in parse_jobs(json.dumps(data))] == [6, 7]  # job 5 left out, the others read
    [warning] = caplog.messages
    assert warning.startswith("squeue --json: skipped job 5, which cannot be read: Expected ")
    assert warning.endswith(f"- at `{path}`")
    data["jobs"] = data["jobs"][:1]
    with pytest.raises(SlurmParseError) as info:
        parse_jobs(json.dumps(data))
    message = one_line(info.value)
    assert message.startswith("squeue --json: exit 0: unexpected job record: job 5: Expected ")
    assert message.endswith(f"- at `{path}`")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_leased_job_shows_its_begin_time_and_no_start_time(version: str) -> None:
    """A managed variant waiting under its lease: `eligible_time` is its begin time; the start time Slurm shows
    for a pending job is only its estimate (here the lease's end), never a start."""
    data = json.loads(read(version, "squeue.json"))
    raw = next(j for j in data["jobs"] if j["name"] == "rec@gpu")
    begin = 4_000_000_000
    stamp: Any = begin if isinstance(raw["submit_time"], int) else {"set": True, "infinite": False, "number": begin}
    raw.update(eligible_time=stamp, start_time=stamp, state_reason="BeginTime", priority=raw["submit_time"])
    if "hold" in raw:
        raw["hold"] = False
    raw["priority"] = 100 if isinstance(raw["submit_time"], int) else {"set": True, "infinite": False, "number": 100}
    [job] = [j for j in parse_jobs(json.dumps({**data, "jobs": [raw]})) if j.name == "rec@gpu"]
    assert (job.state, job.held) == (VariantState.PENDING, False)
    assert job.begin_time == begin and job.start_time is None
