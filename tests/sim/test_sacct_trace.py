"""The Slurm accounting loader on recorded `sacct --json` of three Slurm versions and on hand-written `sacct -P`.

Every job of a dump is either replayed or counted under the reason it was left out; malformed rows are one
`TraceError` line naming the file, the row and the column, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from slurmx.core.config import load_site_config
from slurmx.core.model import JobClass, Node
from slurmx.core.resources import Resources
from slurmx.sim.traces import TraceError, detect_format, load_trace
from slurmx.sim.traces.sacct import load_sacct
from slurmx.sim.traces.sacct_text import SACCT_FIELDS
from slurmx.sim.whatif import WhatIfError, replay

FIXTURES = Path(__file__).parents[1] / "fixtures"
ALONE = FIXTURES / "sacct" / "alone.txt"
KINDS = ("cpu=cpu", "gpu=gpu", "accel=accel")
SITE = load_site_config(Path(__file__).parents[2] / "site-config" / "test-cluster.yaml")
NODES = [Node("c1", ("cpu",), Resources(4, 8000), Resources(), "IDLE")]
QUIET: dict[str, Any] = {"deadline": None, "database": None, "phases": [Phase.explicit, Phase.generate, Phase.shrink],
                         "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]}

# What each recorded dump holds (tests/fixtures/slurm/record.sh): job id -> (kind, class, run seconds), and the jobs
# still running when it was recorded.
RECORDED = {
    "22.05": ({"2": ("cpu", JobClass.TE, 30.0), "3": ("accel", JobClass.BE, 1.0), "7": ("accel", JobClass.BE, 1.0)}, 2),
    "24.11": ({"3": ("cpu", JobClass.TE, 30.0), "4": ("accel", JobClass.BE, 1.0), "8": ("accel", JobClass.BE, 1.0)}, 2),
    "26.05": ({"1": ("gpu", JobClass.BE, 1.0), "2": ("cpu", JobClass.BE, 1.0), "8": ("accel", JobClass.BE, 1.0),
               "13": ("accel", JobClass.BE, 1.0)}, 2),
}


@pytest.mark.parametrize("version", sorted(RECORDED))
def test_recorded_json_of_each_version(version: str) -> None:
    path = FIXTURES / "slurm" / version / "sacct.json"
    assert detect_format(path) == "sacct"
    trace = load_trace(path, kinds=KINDS)
    expected, running = RECORDED[version]
    got = {j.job_id: (next(iter(j.variants)), j.job_class, next(iter(j.variants.values())).duration_s)
           for j in trace.jobs}
    assert got == expected
    assert dict(trace.skipped) == {"running when dumped (no end time)": running}
    assert trace.jobs[0].submit_time == 0.0
    for job in trace.jobs:  # what Slurm did stays with the job, as epochs
        meta = job.meta
        assert meta["submit_epoch"] <= meta["start_epoch"] <= meta["end_epoch"]


def test_sacct_p_text() -> None:
    trace = load_trace(ALONE, kinds=KINDS)
    assert [j.job_id for j in trace.jobs] == ["101", "102", "103", "104", "105", "107"]
    by_id = {j.job_id: j for j in trace.jobs}
    wide = by_id["104"].variants["cpu"]  # 8 CPUs and 16,000 MB on 2 nodes: half on each
    assert (wide.nodes, wide.request) == (2, Resources(4, 8000))
    assert by_id["102"].job_class is JobClass.TE and by_id["101"].job_class is JobClass.BE
    gpu = by_id["105"].variants["gpu"]
    assert (gpu.request.cpus, gpu.request.mem_mb, dict(gpu.request.gres), gpu.duration_s) == (2, 1024, {"gpu": 2}, 1200)
    assert by_id["102"].submit_time == 60.0
    assert dict(trace.skipped) == {
        "job step": 1, "never started (CANCELLED)": 1, "never started (PENDING)": 1,
        "running when dumped (no end time)": 1}
    assert any("-P fields read: JobID" in a for a in trace.assumptions)


def test_unmapped_partition_is_counted(tmp_path: Path) -> None:
    trace = load_sacct(ALONE, kinds=["cpu=cpu"])
    assert [j.job_id for j in trace.jobs] == ["101", "102", "103", "104", "107"]
    assert trace.skipped["partition gpu has no kind in the site config"] == 1


def test_te_qos_and_limit() -> None:
    trace = load_sacct(ALONE, te_qos="be", limit=2)
    assert [(j.job_id, j.job_class) for j in trace.jobs] == [("101", JobClass.TE), ("102", JobClass.BE)]


@pytest.mark.parametrize(("line", "place"), [
    ("1|a|u|cpu|be|yesterday|2026-11-02T09:00:01|2026-11-02T09:10:01|600|COMPLETED|cpu=1|cpu=1|1:00|0:0",
     "row 2: column Submit"),
    ("1|a|u|cpu|be|2026-11-02T09:00:00|2026-11-02T09:00:01|2026-11-02T09:10:01|600|COMPLETED|cpu=x|cpu=x|1:00|0:0",
     "row 2: column ReqTRES"),
    ("1|a|u|cpu|be|2026-11-02T09:00:00|2026-11-02T09:00:01|2026-11-02T09:10:01|600|COMPLETED|cpu=-4|cpu=-4|1:00|0:0",
     "row 2: column ReqTRES"),
    ("1|a|u|cpu|be|2026-11-02T09:00:00|2026-11-02T09:00:01|2026-11-02T09:10:01|600|COMPLETED|cpu=1|cpu=1|soon|0:0",
     "row 2: column Timelimit"),
    ("1|a|u|cpu|be|2026-11-02T09:00:00", "row 2: expected 14 fields"),
    ("1|a|u|cpu|be|2026-11-02T09:00:00|2026-11-02T09:10:01|2026-11-02T09:00:01|600|COMPLETED|cpu=1|cpu=1|1:00|0:0",
     "row 2: job 1 ends before it starts"),
])
def test_bad_rows_name_the_place(tmp_path: Path, line: str, place: str) -> None:
    path = tmp_path / "dump.txt"
    path.write_text("|".join(SACCT_FIELDS) + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(TraceError) as caught:
        load_sacct(path)
    assert str(caught.value).startswith(f"{path}: {place}")


def test_header_without_a_required_column(tmp_path: Path) -> None:
    path = tmp_path / "dump.txt"
    path.write_text("JobID|Partition|Submit|End|State|ReqTRES\n", encoding="utf-8")
    with pytest.raises(TraceError, match="row 1: column Start: expected this column"):
        load_sacct(path)


def test_json_that_is_not_sacct(tmp_path: Path) -> None:
    path = tmp_path / "dump.json"
    path.write_text('{"jobs": 3}', encoding="utf-8")
    with pytest.raises(TraceError, match="not a `sacct --json` answer"):
        load_sacct(path)


FIELD_TEXT = st.one_of(
    st.sampled_from(["", "Unknown", "None", "UNLIMITED", "2026-11-02T09:00:00", "2026-11-02T10:00:00", "cpu", "te",
                     "2026-13-40T99:00:00", "cpu=2,mem=1G", "cpu=9,mem=1G", "cpu=1,mem=99999G", "cpu=0,gres/gpu=1",
                     "cpu=-1", "mem=1e400", "gres/gpu=x", "node=0", "node=99", "9" * 400, "1.5", "-3", "nan",
                     "COMPLETED", "CANCELLED by 0", "1-00:00:00", "30", "1.2.3", "a=b=c", "\u00e9"]),
    st.text(alphabet=st.characters(blacklist_characters="|\n\r", blacklist_categories=("Cs",)), max_size=12),
)


@settings(max_examples=400, **QUIET)
@given(rows=st.lists(st.lists(FIELD_TEXT, min_size=len(SACCT_FIELDS), max_size=len(SACCT_FIELDS)), min_size=1,
                     max_size=4))
def test_malformed_rows_are_a_trace_error_never_a_traceback(tmp_path: Path, rows: list[list[str]]) -> None:
    path = tmp_path / "dump.txt"
    path.write_text("\n".join(["|".join(SACCT_FIELDS), *("|".join(r) for r in rows)]) + "\n", encoding="utf-8")
    try:
        trace = load_sacct(path)
    except TraceError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(f"{path}: ")
    else:
        assert len(trace.jobs) + sum(trace.skipped.values()) == len(rows)  # every row replayed or counted
        if trace.jobs:  # and whatever loads, replays (or says in one line why not)
            try:
                replay(trace, NODES, SITE, ["fifo"])
            except WhatIfError as exc:
                assert "\n" not in str(exc)
