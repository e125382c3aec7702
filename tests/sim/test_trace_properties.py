"""Property tests (hypothesis): mutated versions of small traces never end in anything but one `TraceError` line.

Seeds are the fixtures written in each published format and, when ../shared/traces is present, the first lines
of the real traces (read at test time; the project does not vendor them). Mutations are those a download, an
editor or a script produces: truncation, flipped bytes, inserted garbage, a field too many or too few, numbers
that are huge, negative, inf or NaN, JSON of the wrong shape, gzip damage. Each load must also take under 2 s.
"""

from __future__ import annotations

import gzip
import json
import re
import time
from collections.abc import Callable
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from slurmx.sim.traces import LOADERS, TraceError, load_alibaba_nodes, load_trace

FIXTURES = Path(__file__).parent / "fixtures"
SACCT = Path(__file__).parents[1] / "fixtures" / "sacct"
SLURM = Path(__file__).parents[1] / "fixtures" / "slurm"
TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
# No example database and no explain phase: nothing is written into the repository (.hypothesis/).
QUIET: dict[str, Any] = {
    "deadline": None,
    "database": None,
    "phases": [Phase.explicit, Phase.generate, Phase.shrink],
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


def _head(path: Path, lines: int) -> bytes:
    with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as fh:
        return b"".join(islice(fh, lines))


def _seeds() -> dict[str, tuple[str, bytes]]:
    """name -> (format, bytes): every fixture, plus heads of the real traces that are here."""
    seeds = {
        "alibaba_pods.csv": ("alibaba", (FIXTURES / "alibaba_pods.csv").read_bytes()),
        "curie_small.swf": ("swf", (FIXTURES / "curie_small.swf").read_bytes()),
        "helios_cluster_log.csv": ("helios", (FIXTURES / "helios_cluster_log.csv").read_bytes()),
        "philly.csv": ("philly-csv", (FIXTURES / "philly.csv").read_bytes()),
        "philly_cluster_job_log.json": ("philly-log", (FIXTURES / "philly_cluster_job_log.json").read_bytes()),
        "sacct_alone.txt": ("sacct", (SACCT / "alone.txt").read_bytes()),
        "sacct_26.05.json": ("sacct", (SLURM / "26.05" / "sacct.json").read_bytes()),
    }
    real = {
        "curie_head.swf": ("swf", TRACES / "pwa_swf" / "CEA-Curie-2011-2.1-cln.swf.gz", 60),
        "kth_head.swf": ("swf", TRACES / "pwa_swf" / "KTH-SP2-1996-2.1-cln.swf.gz", 60),
        "openb_head.csv": ("alibaba", TRACES / "alibaba_gpu_v2023" / "openb_pod_list_default.csv", 30),
        "philly_head.csv": ("philly-csv", TRACES / "philly_derived_pollux_sia" / "philly.csv", 30),
    }
    for name, (fmt, path, lines) in real.items():
        if path.exists():
            seeds[name] = (fmt, _head(path, lines))
    return seeds


SEEDS = _seeds()
HOSTILE_NUMBERS = [b"inf", b"-inf", b"1e400", b"-1e400", b"nan", b"NaN", b"Infinity", b"-1e300", b"1e30",
                   b"99999999999999999999999", b"9" * 5000, b"-5", b"-0", b"0", b"1e-400", b"0x10", b"1_0", b"",
                   b"-"]  # fmt: skip
GARBAGE = [b"\x00", b"\xff\xfe", b"\xc3(", b'"', b"'", b"[", b"]", b"{", b"}", b",", b";", b"\n", b"\r", b"\r\n",
           b"\t", b" ", b"null", b"true", b'{"a": 1}', b"[" * 3000, b"\xef\xbb\xbf", b"\x1f\x8b", b"\\",
           b"; Partition: 99999999999999999999 gpu\n", b"1 2 3\n", b",,,,\n", b"\xe2\x80\xa8"]  # fmt: skip
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?")


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` after one to four byte-level mutations."""
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "number", "field", "line"]))
        at = draw(st.integers(0, len(data)))
        if op == "truncate":
            data = data[:at]
        elif op == "flip" and data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
        elif op == "insert":
            data = data[:at] + draw(st.one_of(st.sampled_from(GARBAGE), st.binary(max_size=8))) + data[at:]
        elif op == "delete":
            data = data[:at] + data[at + draw(st.integers(1, 40)) :]
        elif op == "number":
            numbers = list(_NUMBER.finditer(data))
            if numbers:
                m = numbers[draw(st.integers(0, len(numbers) - 1))]
                data = data[: m.start()] + draw(st.sampled_from(HOSTILE_NUMBERS)) + data[m.end() :]
        elif op == "field":  # a column too many or too few
            sep = draw(st.sampled_from([b",", b" ", b"|"]))
            hits = [i for i in range(len(data)) if data[i : i + 1] == sep]
            if hits:
                i = hits[draw(st.integers(0, len(hits) - 1))]
                data = data[:i] + (sep * 2 if draw(st.booleans()) else b"") + data[i + 1 :]
        elif op == "line":  # a line dropped or repeated
            lines = data.splitlines(keepends=True)
            if lines:
                i = draw(st.integers(0, len(lines) - 1))
                lines[i : i + 1] = [] if draw(st.booleans()) else [lines[i], lines[i]]
                data = b"".join(lines)
    return data


def _gzip_maybe(draw: st.DrawFn, data: bytes) -> tuple[bytes, bool]:
    """Now and then compress the file, and now and then damage the compressed bytes."""
    if draw(st.integers(0, 4)) != 0:
        return data, False
    packed = gzip.compress(data)
    return (draw(mutated(packed)) if draw(st.booleans()) else packed), True


@st.composite
def bad_files(draw: st.DrawFn, seed: str) -> tuple[str, bytes]:
    data = draw(mutated(SEEDS[seed][1]))
    data, packed = _gzip_maybe(draw, data)
    return seed + (".gz" if packed else ""), data


BIG = "<an integer of 5000 digits>"
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12) | st.just(BIG),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
PHILLY_KEYS = ["status", "vc", "jobid", "attempts", "submitted_time", "user", "start_time", "end_time", "detail",
               "ip", "gpus"]  # fmt: skip


@st.composite
def philly_shapes(draw: st.DrawFn) -> bytes:
    """The Philly job log with one value somewhere replaced by JSON of another shape (or a key removed)."""
    jobs: Any = json.loads(SEEDS["philly_cluster_job_log.json"][1])
    for _ in range(draw(st.integers(1, 3))):
        node, path = jobs, []
        while isinstance(node, list | dict) and node and draw(st.integers(0, 3)):
            key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
            path.append((node, key))
            node = node[key]
        if not path:
            jobs = draw(JSON_VALUES)
            continue
        parent, key = path[-1]
        if isinstance(parent, dict) and draw(st.integers(0, 4)) == 0:
            del parent[key]
        elif isinstance(parent, dict) and draw(st.booleans()):
            parent[draw(st.sampled_from(PHILLY_KEYS))] = draw(JSON_VALUES)
        else:
            parent[key] = draw(JSON_VALUES)
    return json.dumps(jobs).replace(f'"{BIG}"', "9" * 5000).encode()  # json cannot write that number itself


def _loads_or_one_line(path: Path, load: Callable[[], object]) -> None:
    start = time.process_time()  # CPU time: a busy 2-core machine (a cluster starting beside) slows the wall clock
    try:
        load()
    except TraceError as exc:
        text = str(exc)
        assert "\n" not in text and text.startswith(f"{path}: "), text
    elapsed = time.process_time() - start
    assert elapsed < 2.0, f"{path.name}: {elapsed:.2f} s of CPU"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bad-traces")


@pytest.mark.parametrize("seed", sorted(SEEDS))
@settings(max_examples=500, **QUIET)
@given(data=st.data())
def test_mutated_trace_loads_or_fails_with_one_line(workdir: Path, seed: str, data: st.DataObject) -> None:
    name, content = data.draw(bad_files(seed))
    path = workdir / name
    path.write_bytes(content)
    forced = data.draw(st.booleans())  # detection, or the seed's own loader reaching past a broken header
    _loads_or_one_line(path, lambda: load_trace(path, SEEDS[seed][0] if forced else None))  # type: ignore[arg-type]


@settings(max_examples=600, **QUIET)
@given(content=philly_shapes())
def test_philly_log_of_any_shape_loads_or_fails_with_one_line(workdir: Path, content: bytes) -> None:
    path = workdir / "shapes.json"
    path.write_bytes(content)
    _loads_or_one_line(path, lambda: load_trace(path, "philly-log"))


@settings(max_examples=300, **QUIET)
@given(data=st.data())
def test_alibaba_node_list_loads_or_fails_with_one_line(workdir: Path, data: st.DataObject) -> None:
    seed = b"sn,cpu_milli,memory_mib,gpu,model\nnode-1,96000,786432,8,V100M32\nnode-2,64000,262144,0,\n"
    content = data.draw(mutated(seed))
    content, packed = _gzip_maybe(data.draw, content)
    path = workdir / ("nodes.csv.gz" if packed else "nodes.csv")
    path.write_bytes(content)
    _loads_or_one_line(path, lambda: load_alibaba_nodes(path))


OPTION_NAMES = sorted({name for loader in LOADERS.values() for name in loader.__annotations__} - {"path", "return"})
OPTION_VALUES = st.one_of(JSON_VALUES, st.sampled_from(["te", "BE", "span", "milli", "whole"]), st.integers(-3, 9))


@settings(max_examples=400, **QUIET)
@given(
    fmt=st.sampled_from(sorted(LOADERS)),
    options=st.dictionaries(st.one_of(st.sampled_from(OPTION_NAMES), st.text(max_size=10)), OPTION_VALUES, max_size=3),
)
def test_any_options_load_or_fail_with_one_line(fmt: str, options: dict[str, Any]) -> None:
    fixture = {"alibaba": "alibaba_pods.csv", "helios": "helios_cluster_log.csv", "philly-csv": "philly.csv",
               "philly-log": "philly_cluster_job_log.json", "swf": "curie_small.swf"}.get(fmt)  # fmt: skip
    path = FIXTURES / fixture if fixture else SACCT / "alone.txt"
    options.pop("fmt", None)
    _loads_or_one_line(path, lambda: load_trace(path, fmt, **options))  # type: ignore[arg-type]
