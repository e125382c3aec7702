"""Corpus of bad trace inputs (issue 19): each ends in one `TraceError` line naming the file, the place and the fix.

Every case below once ended in a traceback (TypeError, OverflowError, zlib.error, EOFError shown as "Aborted",
RecursionError, UnicodeDecodeError) or was taken silently; the expected message is spelled out in full.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slurmx.core.model import JobClass
from slurmx.sim.traces import LOADERS, TraceError, load_alibaba, load_swf, load_trace
from slurmx.sim.traces.options import _convert, _option_kinds

FIXTURES = Path(__file__).parent / "fixtures"
SWF = (FIXTURES / "curie_small.swf").read_text()
HELIOS = (FIXTURES / "helios_cluster_log.csv").read_bytes()
BODY = HELIOS.split(b"\n", 1)[1]  # the data rows, to make a file longer than the reader's read-ahead
PHILLY_LOG = json.loads((FIXTURES / "philly_cluster_job_log.json").read_text())


def one_line(call: Callable[[], Any], path: object) -> str:
    """The message of the `TraceError` that `call` raises, without the leading path (checked to be there)."""
    with pytest.raises(TraceError) as exc:
        call()
    text = str(exc.value)
    assert "\n" not in text
    prefix = f"{path}: "
    assert text.startswith(prefix), text
    return text[len(prefix) :]


def write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)
    return path


# --- loader options: misspelt, mistyped, out of range (a TypeError or taken silently before) ------------------

SWF_OPTIONS = "limit, mem_per_cpu_mb, gpu_partitions, cpus_per_gpu, te_partitions, cpus_per_node, max_mem_per_cpu_mb"
DEEP: list[Any] = []
for _ in range(100_000):  # a value whose plain repr() would be a RecursionError
    DEEP = [DEEP]


@pytest.mark.parametrize(
    ("fixture", "options", "expected"),
    [
        ("curie_small.swf", {"limt": 3},
         f"unknown option 'limt' for load_swf; did you mean limit? its options are {SWF_OPTIONS}"),
        ("curie_small.swf", {"colour": "red"}, f"unknown option 'colour' for load_swf; its options are {SWF_OPTIONS}"),
        ("curie_small.swf", {"limit": "3"}, "option limit: expected a whole number >= 0 or null, got '3'"),
        ("curie_small.swf", {"limit": -1}, "option limit: expected a whole number >= 0 or null, got -1"),
        ("curie_small.swf", {"cpus_per_gpu": 0}, "option cpus_per_gpu: expected a whole number >= 1, got 0"),
        ("curie_small.swf", {"mem_per_cpu_mb": True}, "option mem_per_cpu_mb: expected a whole number >= 1, got True"),
        ("curie_small.swf", {"gpu_partitions": 8},
         "option gpu_partitions: expected a list of whole numbers or null, got 8"),
        ("curie_small.swf", {"te_partitions": ["a"]},
         "option te_partitions: expected a list of whole numbers, got ['a']"),
        ("philly_cluster_job_log.json", {"duration": "span2"},
         "option duration: expected one of attempts, span, got 'span2'"),
        ("helios_cluster_log.csv", {"job_class": "xx"}, "option job_class: expected one of te, be, got 'xx'"),
        ("alibaba_pods.csv", {"be_qos": "BE"}, "option be_qos: expected a list of strings, got 'BE'"),
        ("alibaba_pods.csv", {"gpu_share": "mili"}, "option gpu_share: expected one of whole, milli, got 'mili'"),
        ("alibaba_pods.csv", {"user": 5}, "option user: expected a string, got 5"),
        ("helios_cluster_log.csv", {"job_class": DEEP},
         "option job_class: expected one of te, be, got [[[[[[[...]]]]]]]"),
        ("helios_cluster_log.csv", {"limit": "9" * 500},
         f"option limit: expected a whole number >= 0 or null, got '{'9' * 12}...{'9' * 13}'"),
        ("philly.csv", {"fmt": ["x"]},
         "unknown trace format ['x']; expected one of alibaba, philly-csv, philly-log, swf, helios, sacct"),
    ],
)  # fmt: skip
def test_wrong_option_is_one_line(fixture: str, options: dict[str, Any], expected: str) -> None:
    path = FIXTURES / fixture
    assert one_line(lambda: load_trace(path, **options), path) == expected


def test_options_by_position_and_paths_that_are_not_paths() -> None:
    path = FIXTURES / "curie_small.swf"
    assert one_line(lambda: load_swf(path, 3), path) == "load_swf takes options by name (limit=1000), got 3"  # type: ignore[call-arg]
    assert one_line(lambda: load_trace(5), 5) == "expected the trace's path as a string, got int"  # type: ignore[arg-type]


def test_options_from_yaml_are_converted() -> None:
    """YAML writes `job_class: te` and lists; the loaders get a JobClass and tuples."""
    trace = load_trace(FIXTURES / "helios_cluster_log.csv", job_class="TE")
    assert {j.job_class for j in trace.jobs} == {JobClass.TE}
    trace = load_alibaba(FIXTURES / "alibaba_pods.csv", be_qos=["BE", "LS"], te_qos=["Burstable", "Guaranteed"])
    assert all(j.job_class is (JobClass.BE if j.meta["qos"] in ("BE", "LS") else JobClass.TE) for j in trace.jobs)
    assert any(j.meta["qos"] == "LS" for j in trace.jobs)


@pytest.mark.parametrize("fmt", sorted(LOADERS))
def test_every_option_type_has_a_check(fmt: str) -> None:
    """A loader option of a type the checker does not know would fail at run time, not as a TraceError."""
    loader = LOADERS[fmt]
    if fmt == "sacct":  # the package imports it on first use; its options are declared by the module's loader
        from slurmx.sim.traces.sacct import load_sacct as loader
    for name, kind in _option_kinds(loader.__wrapped__).items():  # type: ignore[attr-defined]
        assert _convert(kind, object(), 1)[1], f"{fmt} option {name} accepts anything"


# --- gzip: cut, damaged, not gzip (zlib.error, BadGzipFile, EOFError shown as "Aborted" before) --------------


def test_truncated_gzip(tmp_path: Path) -> None:
    path = write(tmp_path, "log.swf.gz", gzip.compress(SWF.encode())[:-20])
    assert one_line(lambda: load_trace(path), path) == (
        "line 17: the gzip data is cut short after 16 complete lines (truncated file); "
        "download or compress the file again"
    )
    path = write(tmp_path, "log.csv.gz", gzip.compress(HELIOS)[:15])
    assert one_line(lambda: load_trace(path), path) == (
        "line 1: the gzip data is cut short after 0 complete lines (truncated file); "
        "download or compress the file again"
    )


def test_damaged_gzip(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(HELIOS))
    data[-6] ^= 0xFF  # the CRC-32 of the data
    path = write(tmp_path, "crc.csv.gz", bytes(data))
    message = one_line(lambda: load_trace(path, fmt="helios"), path)
    assert message.startswith("line 6: the gzip data is damaged (CRC check failed 0x")
    assert message.endswith("); download or compress the file again")
    data = bytearray(gzip.compress(HELIOS))
    data[10] |= 0b110  # deflate block type 3 does not exist
    path = write(tmp_path, "block.csv.gz", bytes(data))
    assert one_line(lambda: load_trace(path, fmt="helios"), path) == (
        "line 1: the gzip data is damaged (Error -3 while decompressing data: invalid block type); "
        "download or compress the file again"
    )
    path = write(tmp_path, "plain.swf.gz", SWF)
    assert one_line(lambda: load_trace(path), path) == (
        "line 1: not gzip data although the name ends in .gz; compress it with gzip or drop .gz from its name"
    )


# --- not UTF-8 (UnicodeDecodeError before): the exact line, whatever the read-ahead ------------------------


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("log.csv", HELIOS.replace(b"uX1", b"u\xe9X1"), "line 3: byte 0xe9 at character 10 is not UTF-8"),
        ("log.swf", SWF.encode().replace(b"; UnixStartTime", b"; \xe9UnixStartTime"),
         "line 5: byte 0xe9 at character 3 is not UTF-8"),
        ("log.json", (FIXTURES / "philly_cluster_job_log.json").read_bytes().replace(b"ce2f4c", b"ce\xff2f4c"),
         "line 19: byte 0xff at character 16 is not UTF-8"),
        ("log.csv.gz", gzip.compress(HELIOS + BODY * 3000 + b"\xc3("),
         "line 12006: byte 0xc3 at character 1 is not UTF-8"),
    ],
)  # fmt: skip
def test_not_utf8(tmp_path: Path, name: str, data: bytes, expected: str) -> None:
    path = write(tmp_path, name, data)
    assert one_line(lambda: load_trace(path), path) == f"{expected}; save the file as UTF-8"


# --- SWF numbers: inf, 1e400, NaN, absurd magnitudes (OverflowError / ValueError before) ---------------------


@pytest.mark.parametrize(
    ("new", "column", "value"),
    [
        ("4 260 2 inf 4", "run_time", "inf"),
        ("4 260 2 1e400 4", "run_time", "1e400"),
        ("4 260 2 120 NaN", "allocated_processors", "NaN"),
        ("4 -Infinity 2 120 4", "submit_time", "-Infinity"),
        ("4 260 2 120 1e30", "allocated_processors", "1e30"),
        ("4 -1e300 2 120 4", "submit_time", "-1e300"),
    ],
)
def test_swf_numbers_out_of_range(tmp_path: Path, new: str, column: str, value: str) -> None:
    path = write(tmp_path, "log.swf", SWF.replace("4 260 2 120 4", new))
    assert one_line(lambda: load_trace(path), path) == (
        f"row 16: column {column}: expected a number of magnitude below 2^53 (-1 if unknown), got {value!r}"
    )


def test_swf_header_with_a_huge_partition_number_is_kept_as_text(tmp_path: Path) -> None:
    path = write(tmp_path, "log.swf", SWF.replace("; Partition: 8 hybrid", f"; Partition: {'9' * 5000} hybrid"))
    assert len(load_trace(path)) == 4


# --- Philly job log: detail shapes, deep nesting (TypeError, RecursionError before) --------------------------


def _philly(tmp_path: Path, detail: Any) -> Path:
    jobs = json.loads(json.dumps(PHILLY_LOG))
    jobs[0]["attempts"][0]["detail"] = detail
    return write(tmp_path, "log.json", json.dumps(jobs))


PLACEMENTS = 'expected a list of placements like [{"ip": "m47", "gpus": ["gpu0"]}]'


@pytest.mark.parametrize(
    ("detail", "expected"),
    [
        ({"ip": "m1", "gpus": ["gpu0"]}, f"column attempts[0].detail: {PLACEMENTS}, got dict"),
        ("m1", f"column attempts[0].detail: {PLACEMENTS}, got str"),
        (["m1"], f"column attempts[0].detail[0]: {PLACEMENTS}, got str"),
        ([{"ip": "m1", "gpus": 3}],
         'column attempts[0].detail[0].gpus: expected a list of GPU names like ["gpu0"], got int'),
        ([{"ip": "m1", "gpus": "gpu0"}],
         'column attempts[0].detail[0].gpus: expected a list of GPU names like ["gpu0"], got str'),
    ],
)  # fmt: skip
def test_philly_detail_shape(tmp_path: Path, detail: Any, expected: str) -> None:
    path = _philly(tmp_path, detail)
    assert one_line(lambda: load_trace(path), path) == f"row 1: {expected}"


@pytest.mark.parametrize("nested", ["[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000])
def test_philly_deep_nesting(tmp_path: Path, nested: str) -> None:
    path = write(tmp_path, "log.json", f"[{json.dumps(PHILLY_LOG[0])}, {nested}]")
    assert one_line(lambda: load_trace(path), path) == (
        "row 2: JSON nested too deeply; a job is an object of strings, lists and placement objects"
    )


def test_philly_number_too_long_for_python(tmp_path: Path) -> None:
    path = write(tmp_path, "log.json", f'[{json.dumps(PHILLY_LOG[0])}, {{"vc": {"9" * 5000}}}]')
    assert one_line(lambda: load_trace(path), path) == (
        "row 2: a number with thousands of digits; no job value is that long"
    )


def test_path_with_a_newline_stays_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "two\nlines.swf", "; header\n1 2\n")
    with pytest.raises(TraceError) as exc:
        load_trace(path)
    assert str(exc.value) == f"{tmp_path}/two\\nlines.swf: row 2: expected the 18 SWF fields, got 2"


# --- CSV the csv module refuses ----------------------------------------------------------------------------


def test_csv_field_over_the_csv_module_limit(tmp_path: Path) -> None:
    path = write(tmp_path, "log.csv", HELIOS + b'"' + b"x" * 200_000 + b'"\n')
    assert one_line(lambda: load_trace(path), path) == (
        "row 6: unreadable CSV (field larger than field limit (131072)); check the quoting"
    )
