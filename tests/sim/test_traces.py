"""Trace loaders: small files written in each published format, the real traces in ../shared/traces, bad rows.

Counts asserted on the real files were read from the files themselves (with the csv module / a line count),
independently of the loaders.
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest

from slurmx.core.model import JobClass
from slurmx.core.resources import Resources
from slurmx.sim.traces import (
    LoadedTrace,
    TraceError,
    detect_format,
    load_alibaba,
    load_alibaba_nodes,
    load_helios,
    load_philly_csv,
    load_philly_job_log,
    load_swf,
    load_trace,
)
from slurmx.sim.workloads import load_synergy_joblist

FIXTURES = Path(__file__).parent / "fixtures"
TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
PEERS = Path(__file__).resolve().parents[2].parent / "shared" / "peers"
ALIBABA = TRACES / "alibaba_gpu_v2023" / "openb_pod_list_default.csv"
PHILLY = TRACES / "philly_derived_pollux_sia" / "philly.csv"
CURIE = TRACES / "pwa_swf" / "CEA-Curie-2011-2.1-cln.swf.gz"
SYNERGY_JOBS = PEERS / "synergy" / "joblist_load9.0.csv"

needs = pytest.mark.skipif


def _variant(trace: LoadedTrace, index: int):  # type: ignore[no-untyped-def]
    return next(iter(trace.jobs[index].variants.values()))


def _sorted_from_zero(trace: LoadedTrace) -> None:
    times = [j.submit_time for j in trace.jobs]
    assert times == sorted(times)
    assert times[0] == 0.0
    assert all(v.duration_s > 0 for j in trace.jobs for v in j.variants.values())


def _one_line_error(exc: pytest.ExceptionInfo[TraceError], path: Path, row: int, column: str | None) -> str:
    text = str(exc.value)
    assert "\n" not in text
    assert text.startswith(str(path))
    assert f"row {row}" in text
    if column:
        assert f"column {column}" in text
    assert exc.value.row == row and exc.value.column == column
    return text


def _rewrite(tmp_path: Path, fixture: str, old: str, new: str) -> Path:
    text = (FIXTURES / fixture).read_text()
    assert old in text
    out = tmp_path / fixture
    out.write_text(text.replace(old, new, 1))
    return out


# --- Alibaba GPU v2023 -------------------------------------------------------------------------------


def test_alibaba_fixture_maps_columns() -> None:
    trace = load_alibaba(FIXTURES / "alibaba_pods.csv")
    _sorted_from_zero(trace)
    assert [j.job_id for j in trace.jobs] == [
        "openb-pod-0000", "openb-pod-0001", "openb-pod-0017", "openb-pod-0022", "openb-pod-0035", "openb-pod-0040",
    ]  # fmt: skip
    assert dict(trace.skipped) == {"pending": 1, "zero_duration": 1}
    first, sharing, big, be, _, cpu_only = trace.jobs
    assert first.variants["gpu"].request == Resources(12, 16384, {"gpu": 1})
    assert first.variants["gpu"].duration_s == 12537496
    assert first.job_class is JobClass.TE and first.meta["censored"] is True
    assert sharing.meta["gpu_milli"] == 460 and sharing.variants["gpu"].request.gres_count("gpu") == 1
    assert big.job_class is JobClass.TE and big.variants["gpu"].request == Resources(88, 327680, {"gpu": 8})
    assert be.job_class is JobClass.BE and be.meta["pod_phase"] == "Failed"
    assert cpu_only.variants["cpu"].request == Resources(4, 8192)  # 3152 milli-CPU rounds up to 4
    assert cpu_only.variants["cpu"].duration_s == 2800 and cpu_only.meta["wait_s"] == 100
    assert trace.jobs[4].meta["gpu_spec"] == "V100M16|V100M32"
    text = " ".join(trace.assumptions)
    assert "right-censored" in text and "Pending" in text and "whole GPU" in text


def test_alibaba_gpu_milli_mode_and_limit() -> None:
    trace = load_alibaba(FIXTURES / "alibaba_pods.csv", gpu_share="milli", limit=2)
    assert len(trace) == 2
    assert trace.jobs[1].variants["gpu"].request.gres == {"gpu_milli": 460}


def test_alibaba_malformed_rows(tmp_path: Path) -> None:
    path = _rewrite(tmp_path, "alibaba_pods.csv", "0001,6000,", "0001,six,")
    with pytest.raises(TraceError) as exc:
        load_alibaba(path)
    assert "expected a whole number" in _one_line_error(exc, path, 3, "cpu_milli")

    path = _rewrite(tmp_path, "alibaba_pods.csv", ",BE,Failed,9679175", ",XX,Failed,9679175")
    with pytest.raises(TraceError) as exc:
        load_alibaba(path)
    assert "one of BE, Burstable, Guaranteed, LS" in _one_line_error(exc, path, 5, "qos")

    path = _rewrite(tmp_path, "alibaba_pods.csv", "9437497,10769854,9437497", "9437497,10769854")
    with pytest.raises(TraceError) as exc:
        load_alibaba(path)
    assert "11 fields" in _one_line_error(exc, path, 4, None)

    path = _rewrite(tmp_path, "alibaba_pods.csv", "name,cpu_milli", "pod,cpu_milli")
    with pytest.raises(TraceError) as exc:
        load_alibaba(path)
    _one_line_error(exc, path, 1, "name")


@needs(not ALIBABA.exists(), reason="../shared/traces not present")
def test_alibaba_real_default_pod_list() -> None:
    start = time.perf_counter()
    trace = load_alibaba(ALIBABA)
    elapsed = time.perf_counter() - start
    assert elapsed < 10, f"{elapsed:.1f}s"  # ~0.4 s on an idle 2-core machine
    # 8,152 pods; 897 Pending (never scheduled) are skipped; every other pod ran for > 0 s.
    assert len(trace) == 7255 and dict(trace.skipped) == {"pending": 897}
    _sorted_from_zero(trace)
    kinds = [next(iter(j.variants)) for j in trace.jobs]
    assert kinds.count("gpu") == 6203 and kinds.count("cpu") == 1052
    assert sum(j.job_class is JobClass.BE for j in trace.jobs) == 2957  # qos == BE
    assert sum(j.meta["censored"] for j in trace.jobs) == 5193  # still Running at trace end
    requests = [next(iter(j.variants.values())).request for j in trace.jobs]
    assert max(r.cpus for r in requests) == 121 and min(r.cpus for r in requests) == 1
    assert max(r.mem_mb for r in requests) == 737280
    assert {r.gres_count("gpu") for r in requests} == {0, 1, 2, 4, 8}
    durations = [next(iter(j.variants.values())).duration_s for j in trace.jobs]
    assert min(durations) == 4 and max(durations) == 12537496
    assert trace.jobs[-1].submit_time == 12901761


# --- Philly-derived CSV -------------------------------------------------------------------------------


def test_philly_csv_fixture() -> None:
    trace = load_philly_csv(FIXTURES / "philly.csv")
    _sorted_from_zero(trace)
    assert [j.job_id for j in trace.jobs] == ["philly-3", "philly-2", "philly-4", "philly-1"]
    big = trace.jobs[0]
    assert big.user == "vc-6c71a0" and big.job_class is JobClass.BE
    assert big.variants["gpu"].request == Resources(24, 8 * 64000, {"gpu": 8})
    assert big.variants["gpu"].duration_s == 860662
    # 2017-09-29 07:58:32 -> 2017-10-09 06:13:03
    assert trace.jobs[1].submit_time == 9 * 86400 + (22 * 3600 + 14 * 60 + 31)
    assert any("3 CPUs and 64000 MB" in a for a in trace.assumptions)
    custom = load_philly_csv(FIXTURES / "philly.csv", cpus_per_gpu=4, mem_per_gpu_mb=1000, job_class=JobClass.TE)
    assert custom.jobs[0].variants["gpu"].request == Resources(32, 8000, {"gpu": 8})
    assert custom.jobs[0].job_class is JobClass.TE


def test_philly_csv_malformed(tmp_path: Path) -> None:
    path = _rewrite(tmp_path, "philly.csv", "2017-10-09 06:13:03", "09/10/2017 06:13")
    with pytest.raises(TraceError) as exc:
        load_philly_csv(path)
    assert "2017-10-07 01:12:09" in _one_line_error(exc, path, 3, "timestamp")
    path = _rewrite(tmp_path, "philly.csv", "2759.0,4,", "2759.0,0,")
    with pytest.raises(TraceError) as exc:
        load_philly_csv(path)
    assert ">= 1" in _one_line_error(exc, path, 5, "num_gpus")
    path = _rewrite(tmp_path, "philly.csv", "66.0,1,66.0", "-5,1,66.0")
    with pytest.raises(TraceError) as exc:
        load_philly_csv(path)
    _one_line_error(exc, path, 2, "duration")


@needs(not PHILLY.exists(), reason="../shared/traces not present")
def test_philly_csv_real_file() -> None:
    start = time.perf_counter()
    trace = load_philly_csv(PHILLY)
    elapsed = time.perf_counter() - start
    assert elapsed < 15, f"{elapsed:.1f}s"  # ~1.5 s on an idle 2-core machine
    assert len(trace) == 82247
    _sorted_from_zero(trace)
    gpus = [j.variants["gpu"].request.gres_count("gpu") for j in trace.jobs]
    counts = {g: gpus.count(g) for g in set(gpus)}
    assert counts == {1: 76627, 2: 1818, 4: 1870, 8: 1643, 16: 199, 32: 67, 12: 7, 24: 7, 64: 6, 128: 3}
    durations = [j.variants["gpu"].duration_s for j in trace.jobs]
    assert min(durations) == 1 and max(durations) == 4628226
    gpu_time = sum(d * g for d, g in zip(durations, gpus, strict=True))
    assert gpu_time == 3521082502  # the file's own gpu_time column, summed
    assert trace.jobs[-1].submit_time == 9408690  # 2017-09-04 10:30:41 -> 2017-12-22 08:02:11
    assert len({j.user for j in trace.jobs}) == 15


# --- raw Philly cluster_job_log (JSON) ------------------------------------------------------------------


def test_philly_job_log_fixture() -> None:
    trace = load_philly_job_log(FIXTURES / "philly_cluster_job_log.json")
    assert dict(trace.skipped) == {"no_attempts": 1, "running_at_snapshot": 1}
    _sorted_from_zero(trace)
    ids = [j.job_id for j in trace.jobs]
    assert ids == ["application_1506638472019_00003", "application_1506638472019_00004",
                   "application_1506638472019_14199"]  # fmt: skip
    two_machines, short, readme = trace.jobs
    assert two_machines.variants["gpu"].duration_s == 1800  # the attempt without a start is left out
    assert two_machines.variants["gpu"].request.gres_count("gpu") == 2 and two_machines.meta["machines"] == 2
    assert short.variants["gpu"].duration_s == 100 and short.submit_time == 9 * 60
    assert readme.variants["gpu"].duration_s == 74 + 2 * 86400 + 5 * 3600 + 39 * 60 + 42
    assert readme.variants["gpu"].request == Resources(24, 8 * 64000, {"gpu": 8})
    assert readme.user == "ce2f4c" and readme.meta["status"] == "Pass" and readme.meta["attempts"] == 2
    span = load_philly_job_log(FIXTURES / "philly_cluster_job_log.json", duration="span")
    assert span.jobs[2].variants["gpu"].duration_s == 2 * 86400 + 5 * 3600 + 41 * 60 + 3
    assert len(load_philly_job_log(FIXTURES / "philly_cluster_job_log.json", limit=1)) == 1


def test_philly_job_log_streams_across_chunks(tmp_path: Path) -> None:
    jobs = json.loads((FIXTURES / "philly_cluster_job_log.json").read_text()) * 50
    path = tmp_path / "log.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump(jobs, fh)
    from slurmx.sim.traces.philly import _json_array_items

    assert sum(1 for _ in _json_array_items(path, chunk_chars=7)) == 250
    assert len(load_philly_job_log(path)) == 150


def test_philly_job_log_malformed(tmp_path: Path) -> None:
    path = _rewrite(tmp_path, "philly_cluster_job_log.json", '"2017-10-03 02:30:00"', '"half past two"')
    with pytest.raises(TraceError) as exc:
        load_philly_job_log(path)
    _one_line_error(exc, path, 4, "attempts[1].end_time")
    path = _rewrite(tmp_path, "philly_cluster_job_log.json", '"user": "d4e5f6"},\n{"status": "Killed"', '"user": 7},{')
    with pytest.raises(TraceError) as exc:
        load_philly_job_log(path)
    _one_line_error(exc, path, 4, "user")
    path = tmp_path / "cut.json"
    path.write_text((FIXTURES / "philly_cluster_job_log.json").read_text()[:-40])
    with pytest.raises(TraceError) as exc:
        load_philly_job_log(path)
    assert "invalid JSON" in _one_line_error(exc, path, 5, None)


# --- Parallel Workloads Archive SWF -------------------------------------------------------------------


def test_swf_fixture() -> None:
    trace = load_swf(FIXTURES / "curie_small.swf")
    _sorted_from_zero(trace)
    assert [j.job_id for j in trace.jobs] == ["swf-1", "swf-3", "swf-4", "swf-5"]
    assert dict(trace.skipped) == {"cancelled_before_start": 1}  # job 2: cancelled with run time 0
    assert trace.info["UnixStartTime"] == "1296571124" and trace.info["Partition 8"] == "hybrid"
    plain, hybrid, used_mem, req_mem = trace.jobs
    assert plain.variants["cpu"].request == Resources(32, 32 * 4096) and plain.user == "u7"
    assert plain.variants["cpu"].estimate_s == 7200 and plain.meta["wait_s"] == 5
    assert hybrid.submit_time == 100 and hybrid.variants["gpu"].request == Resources(8, 8 * 4096, {"gpu": 2})
    assert hybrid.variants["gpu"].estimate_s is None  # INT_MAX means no limit
    assert used_mem.variants["cpu"].request == Resources(4, 8)  # 2048 KB per processor x 4
    assert req_mem.variants["cpu"].request == Resources(2, 2048)  # 1 GB per processor x 2
    assert any("8 (hybrid)" in a for a in trace.assumptions)
    te = load_swf(FIXTURES / "curie_small.swf", gpu_partitions=(), te_partitions=(4,))
    assert "cpu" in te.jobs[1].variants and te.jobs[0].job_class is JobClass.TE


def test_swf_gzip_and_detection(tmp_path: Path) -> None:
    path = tmp_path / "small.swf.gz"
    path.write_bytes(gzip.compress((FIXTURES / "curie_small.swf").read_bytes()))
    assert detect_format(path) == "swf"
    assert len(load_trace(path)) == 4


def test_swf_malformed(tmp_path: Path) -> None:
    path = _rewrite(tmp_path, "curie_small.swf", "4 260 2 120 4", "4 260 2 twelve 4")
    with pytest.raises(TraceError) as exc:
        load_swf(path)
    _one_line_error(exc, path, 16, "run_time")
    path = _rewrite(tmp_path, "curie_small.swf", " 7 3 -1 -1 4 -1 -1", " 7 3 -1 -1 4 -1")
    with pytest.raises(TraceError) as exc:
        load_swf(path)
    assert "18 SWF fields" in _one_line_error(exc, path, 12, None)


@needs(not CURIE.exists(), reason="../shared/traces not present")
def test_swf_real_curie_log() -> None:
    trace = load_swf(CURIE)
    # 312,826 job lines; run time 0 is under a second (the archive's definition): 14,730 of them were cancelled
    # (status 5), i.e. before they started, and 2,556 completed or failed and run for 1 s; 4 have no processor
    # count (run time 0 and no processors). Partition 8 ("hybrid") has 13,577 jobs.
    assert len(trace) == 298092 and dict(trace.skipped) == {"cancelled_before_start": 14730, "no_processors": 4}
    assert "2556 jobs with run time 0 (under a second, as the archive defines it) run for 1 s" in trace.assumptions
    assert trace.info["UnixStartTime"] == "1296571124" and trace.info["Partition 8"] == "hybrid"
    _sorted_from_zero(trace)
    gpu_jobs = [j for j in trace.jobs if "gpu" in j.variants]
    assert len(gpu_jobs) == 13577
    cpus = [next(iter(j.variants.values())).request.cpus for j in trace.jobs]
    assert min(cpus) == 1 and max(cpus) == 79920  # a 1-second job; the widest that ran longer: 79,808
    assert trace.jobs[-1].submit_time == 21923322  # 53580159 - 31656837


# --- Helios --------------------------------------------------------------------------------------------


def test_helios_fixture() -> None:
    trace = load_helios(FIXTURES / "helios_cluster_log.csv")
    _sorted_from_zero(trace)
    assert [j.job_id for j in trace.jobs] == ["6200533", "6200534", "6200536"]
    assert dict(trace.skipped) == {"zero_duration": 1}
    gpu, cpu, zero_cpu = trace.jobs
    assert gpu.variants["gpu"].request == Resources(48, 48 * 8000, {"gpu": 8}) and gpu.user == "uCk6w"
    assert gpu.meta == {"vc": "vc6YE", "state": "COMPLETED", "nodes": 1, "wait_s": 2}
    assert cpu.variants["cpu"].request == Resources(4, 32000) and cpu.submit_time == 50
    assert zero_cpu.variants["gpu"].request == Resources(1, 8000, {"gpu": 2})
    assert zero_cpu.variants["gpu"].duration_s == 86400
    assert any("0 CPUs" in a for a in trace.assumptions)


def test_helios_malformed(tmp_path: Path) -> None:
    path = _rewrite(tmp_path, "helios_cluster_log.csv", "uX1,vchA3,0,4,", "uX1,vchA3,0,four,")
    with pytest.raises(TraceError) as exc:
        load_helios(path)
    _one_line_error(exc, path, 3, "cpu_num")
    path = _rewrite(tmp_path, "helios_cluster_log.csv", ",3600,2", ",3600,-2")
    with pytest.raises(TraceError) as exc:
        load_helios(path)
    _one_line_error(exc, path, 2, "queue")


# --- detection and the Synergy peer job list ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("alibaba_pods.csv", "alibaba"),
        ("philly.csv", "philly-csv"),
        ("curie_small.swf", "swf"),
        ("helios_cluster_log.csv", "helios"),
        ("philly_cluster_job_log.json", "philly-log"),
    ],
)
def test_detect_format(name: str, fmt: str) -> None:
    assert detect_format(FIXTURES / name) == fmt
    assert load_trace(FIXTURES / name).source.startswith(f"{fmt}:")


def test_unknown_format_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(TraceError) as exc:
        load_trace(path)
    _one_line_error(exc, path, 1, None)
    with pytest.raises(TraceError, match="file not found"):
        load_trace(tmp_path / "nope.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(TraceError, match="empty file"):
        load_philly_csv(empty)


def test_synergy_joblist_fixture(tmp_path: Path) -> None:
    jobs = load_synergy_joblist(FIXTURES / "synergy_joblist.csv")
    assert [j.job_id for j in jobs] == ["synergy-0", "synergy-1", "synergy-2"]
    m5 = jobs[2]
    assert m5.variants["gpu"].request == Resources(6, 128000, {"gpu": 2})
    assert m5.variants["gpu"].duration_s == pytest.approx(60.0)
    assert m5.meta["arrived_in_run"] is False and m5.meta["ideal_cpus"] == 12
    assert m5.speed is not None and m5.speed("gpu", 12, 2 * 192000) == 2.5  # binary model at best-case demand
    path = _rewrite(tmp_path, "synergy_joblist.csv", "1,gnmt,", "1,bert,")
    with pytest.raises(TraceError) as exc:
        load_synergy_joblist(path)
    _one_line_error(exc, path, 3, "model")


@needs(not SYNERGY_JOBS.exists(), reason="../shared/peers not present")
def test_synergy_real_joblist() -> None:
    jobs = load_synergy_joblist(SYNERGY_JOBS)
    assert len(jobs) == 6925 and sum(j.meta["measured"] for j in jobs) == 1000
    models = [j.meta["model"] for j in jobs]
    assert models.count("gnmt") == 1616 and models.count("lstm") == 1615 and models.count("alexnet") == 277
    assert jobs[0].submit_time == 409 and jobs[-1].submit_time == 2772049
    assert all(j.variants["gpu"].request == Resources(3, 64000, {"gpu": 1}) for j in jobs)


@needs(not ALIBABA.exists(), reason="../shared/traces not present")
def test_alibaba_real_node_list() -> None:
    nodes = load_alibaba_nodes(ALIBABA.parent / "openb_node_list_all_node.csv")
    assert len(nodes) == 1523
    assert sum(n.capacity.gres_count("gpu") for n in nodes) == 6212
    assert sum(n.capacity.cpus for n in nodes) == 125514
    assert sum(n.capacity.mem_mb for n in nodes) == 612028416
    assert sum(n.gpu_model == "" for n in nodes) == 310
    gpu_nodes = load_alibaba_nodes(ALIBABA.parent / "openb_node_list_gpu_node.csv")
    assert len(gpu_nodes) == 1213 and all(n.capacity.gres_count("gpu") > 0 for n in gpu_nodes)


@needs(not ALIBABA.exists(), reason="../shared/traces not present")
def test_alibaba_placement_only_resample_names_the_missing_column() -> None:
    path = ALIBABA.parent / "openb_pod_list_multigpu20.csv"  # requests only: no qos, phase or times
    assert detect_format(path) == "alibaba"
    with pytest.raises(TraceError) as exc:
        load_trace(path)
    _one_line_error(exc, path, 1, "qos")
