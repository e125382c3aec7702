"""Where a job may run, as squeue shows it: `--constraint`, `-N`, `--exclusive`, `-w`, `-x` on every version.

24.11 from the test cluster (tests/fixtures/slurm/24.11/squeue-placement.json: held `two@gpu` with
`-C 'nvlink|bigmem' -N 2 --exclusive`, held `over@cpu` with `--oversubscribe -w c2`, held `user@cpu` with
`--exclusive=user -x c1 -C x86`, `run2@cpu` running `-N 2` on c[1-2]). 22.05 and 26.05 write these fields as their
source does (openapi v0.0.38 `jobs.c`; data_parser v0.0.45 `parsers.c`, where `shared` is a removed field that is
always written empty): their recorded queues are given those values here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmx.slurm.parse import parse_jobs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def _job(version: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / version / "squeue.json").read_text())
    raw: dict[str, Any] = next(j for j in data["jobs"] if j["name"] == "rec@gpu")
    return raw


def _read(version: str, **fields: Any) -> tuple[str, int, bool]:
    raw = {**_job(version), **fields}
    [job] = parse_jobs(json.dumps({"jobs": [raw], "errors": []}))
    return job.features, job.node_count, job.exclusive


def _n(value: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": value}


def test_24_11_as_recorded() -> None:
    jobs = parse_jobs((FIXTURES / "24.11" / "squeue-placement.json").read_text())
    assert [(j.name, j.features, j.node_count, j.exclusive, j.required_nodes, j.excluded_nodes, j.nodes)
            for j in jobs] == [
        ("two@gpu", "nvlink|bigmem", 2, True, "", "", ""),
        ("over@cpu", "", 1, False, "c2", "", ""),
        ("user@cpu", "x86", 1, False, "", "c1", ""),  # --exclusive=user shares nodes: not whole nodes
        ("run2@cpu", "", 2, False, "", "", "c[1-2]"),
    ]


@pytest.mark.parametrize(("shared", "exclusive"), [
    ("none", True), ("shared", False), ("user", False), ("mcs", False), (None, False), (3, False),
])
def test_22_05_shared_is_one_string(shared: Any, exclusive: bool) -> None:
    assert _read("22.05", features="nvlink&x86", node_count=2, shared=shared) == ("nvlink&x86", 2, exclusive)


@pytest.mark.parametrize(("shared", "exclusive"), [
    (["none"], True), (["oversubscribe"], False), (["user"], False), (["topo"], False), ([], False),
])
def test_24_11_shared_is_a_list_of_flags(shared: list[str], exclusive: bool) -> None:
    assert _read("24.11", features="x86", node_count=_n(3), shared=shared) == ("x86", 3, exclusive)


def test_26_05_reads_features_and_node_count_and_cannot_tell_exclusive() -> None:
    assert _job("26.05")["shared"] == []  # as recorded: removed in data_parser v0.0.45, written empty
    assert _read("26.05", features="bigmem|nvlink", node_count=_n(2)) == ("bigmem|nvlink", 2, False)


@pytest.mark.parametrize(("version", "count"), [
    ("22.05", 0), ("22.05", 0xFFFFFFFE), ("24.11", {"set": False, "infinite": False, "number": 0}),
    ("24.11", {"set": True, "infinite": True, "number": 0}), ("24.11", None),
])
def test_an_unset_node_count_reads_as_one_node(version: str, count: Any) -> None:
    assert _read(version, node_count=count)[1] == 1


@given(features=st.text(max_size=200), shared=st.one_of(st.none(), st.text(max_size=10),
                                                          st.lists(st.text(max_size=10), max_size=4)))
def test_any_user_constraint_is_read_as_written(features: str, shared: Any) -> None:
    """A constraint is the user's text: read as it is (placement parses it), whatever flags come with it."""
    got_features, _, exclusive = _read("24.11", features=features, shared=shared)
    assert got_features == features
    assert exclusive == (shared == "none" or (isinstance(shared, list) and "none" in shared))


def test_a_node_count_in_another_shape_leaves_that_job_out(caplog: pytest.LogCaptureFixture) -> None:
    raw = {**_job("24.11"), "node_count": "two"}
    good = _job("24.11")
    assert [j.job_id for j in parse_jobs(json.dumps({"jobs": [raw, {**good, "job_id": 99}]}))] == [99]
    assert "- at `$.node_count`" in caplog.messages[0]
