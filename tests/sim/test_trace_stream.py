"""SWF and Helios logs read as the run goes: the same jobs, assumptions and result as loading them whole, a log out
of submit order loaded whole instead, and `slurmx sim run` producing the same document either way."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmx.sim.config import load_workload, parse_sim_config, resolve_cluster
from slurmx.sim.metrics import compute_metrics
from slurmx.sim.report import result_document, result_json
from slurmx.sim.runner import run_config, run_streamed
from slurmx.sim.stream import stream_workload
from slurmx.sim.traces import load_helios, load_swf
from slurmx.sim.traces.helios import stream_helios
from slurmx.sim.traces.swf import stream_swf
from tests.sim.test_multinode import WIDE_SWF

FIXTURES = Path(__file__).parent / "fixtures"
KTH = Path(__file__).resolve().parents[3] / "shared" / "traces" / "pwa_swf" / "KTH-SP2-1996-2.1-cln.swf.gz"

# WIDE_SWF plus a job wider than the machine (12 nodes of 4) and one that never ran: skipped and counted.
WIDER_SWF = WIDE_SWF + "6 50 0 30 48 -1 -1 48 60 -1 1 1 1 -1 -1 1 -1 -1\n7 60 0 0 4 -1 -1 4 60 -1 5 1 1 -1 -1 1 -1 -1\n"


def test_the_stream_gives_the_loaders_jobs_assumptions_and_skips() -> None:
    whole = load_swf(FIXTURES / "curie_small.swf", limit=4)
    stream = stream_swf(FIXTURES / "curie_small.swf", limit=4)
    assert stream is not None
    assert tuple(stream) == whole.jobs
    assert stream.assumptions == whole.assumptions and stream.skipped == dict(whole.skipped)
    assert dict(stream.info) == dict(whole.info)


def test_a_log_out_of_submit_order_is_not_streamed(tmp_path: Path) -> None:
    path = tmp_path / "unsorted.swf"
    lines = WIDE_SWF.splitlines()
    path.write_text("\n".join([*lines[:-2], lines[-1], lines[-2]]) + "\n", encoding="utf-8")
    assert stream_swf(path) is None
    config = parse_sim_config({"cluster": {"from_trace": {"swf_header": {}}}, "policy": {"name": "fifo"},
                               "workload": {"trace": str(path)}})
    assert stream_workload(config) is None  # `sim run` loads it whole and sorts it


def _documents(config_doc: dict[str, object]) -> tuple[str, str]:
    config = parse_sim_config(config_doc)
    streamed = stream_workload(config)
    assert streamed is not None
    result = run_streamed(config, streamed)
    by_stream = result_json(result_document(config, compute_metrics(result, 10), streamed.workload()))
    workload = load_workload(config.workload, config.seed)
    sized = resolve_cluster(config, workload.jobs, workload.info, trace=True)
    whole = run_config(config, sized.jobs, sized=sized)
    skipped = {**workload.skipped, **({"larger than any node": sized.skipped} if sized.skipped else {})}
    from slurmx.sim.config import Workload

    listed = Workload(sized.jobs, workload.source, (*workload.assumptions, *sized.assumptions), skipped, workload.info)
    return by_stream, result_json(result_document(config, compute_metrics(whole, 10), listed))


@pytest.mark.parametrize("backfill", ["none", "easy"])
def test_a_streamed_run_writes_the_whole_runs_document_skips_included(tmp_path: Path, backfill: str) -> None:
    path = tmp_path / "wider.swf"
    path.write_text(WIDER_SWF, encoding="utf-8")
    streamed, whole = _documents({"cluster": {"from_trace": {"swf_header": {"mem_per_cpu": "32G"}}},
                                  "policy": {"name": "fifo", "params": {"backfill": backfill}},
                                  "workload": {"trace": str(path)}})
    assert streamed == whole
    assert '"larger than any node": 1' in streamed and '"cancelled_before_start": 1' in streamed


@pytest.mark.skipif(not KTH.exists(), reason="the shared KTH-SP2 log is not on this machine")
def test_kth_sp2_streamed_is_the_whole_run() -> None:
    streamed, whole = _documents({"cluster": {"from_trace": {"swf_header": {"mem_per_cpu": "4G"}}},
                                  "policy": {"name": "fifo", "params": {"backfill": False}},
                                  "workload": {"trace": str(KTH), "format": "swf"}})
    assert streamed == whole


def test_the_stream_takes_the_loaders_options_with_its_errors() -> None:
    from slurmx.sim.traces import TraceError

    with pytest.raises(TraceError, match=r"unknown option 'limt' for stream_swf; did you mean limit\?"):
        stream_swf(FIXTURES / "curie_small.swf", limt=3)
    with pytest.raises(TraceError, match=r"option limit: expected a whole number >= 0 or null, got 'x'"):
        stream_swf(FIXTURES / "curie_small.swf", limit="x")


HELIOS = (FIXTURES / "helios_cluster_log.csv").read_text(encoding="utf-8")


@pytest.mark.parametrize("options", [{}, {"limit": 2, "mem_per_cpu_mb": 4000, "job_class": "te"}])
def test_a_helios_stream_gives_the_loaders_jobs_assumptions_and_skips(options: dict[str, object]) -> None:
    whole = load_helios(FIXTURES / "helios_cluster_log.csv", **options)
    stream = stream_helios(FIXTURES / "helios_cluster_log.csv", **options)
    assert stream is not None
    assert tuple(stream) == whole.jobs and stream.read == len(whole.jobs)
    assert stream.assumptions == whole.assumptions and stream.skipped == dict(whole.skipped)


def test_a_helios_log_out_of_submit_order_or_with_no_usable_job(tmp_path: Path) -> None:
    header, *rows = HELIOS.splitlines()
    unsorted = tmp_path / "unsorted.csv"
    unsorted.write_text("\n".join([header, rows[1], rows[0], *rows[2:]]) + "\n", encoding="utf-8")
    assert stream_helios(unsorted) is None
    config = parse_sim_config({"cluster": {"partitions": [{"name": "gpu", "kind": "gpu", "nodes": 2, "cpus": 64,
                                                           "mem": "512G", "gres": {"gpu": 16}}]},
                               "policy": {"name": "fifo"}, "workload": {"trace": str(unsorted), "format": "helios"}})
    assert stream_workload(config) is None  # `sim run` loads it whole and sorts it
    never_ran = tmp_path / "never_ran.csv"
    never_ran.write_text("\n".join([header, rows[2]]) + "\n", encoding="utf-8")
    stream = stream_helios(never_ran)
    assert stream is not None and tuple(stream) == ()
    assert stream.assumptions == load_helios(never_ran).assumptions and stream.skipped == {"zero_duration": 1}


def test_a_streamed_helios_run_writes_the_whole_runs_document(tmp_path: Path) -> None:
    streamed, whole = _documents({
        "cluster": {"partitions": [{"name": "cpu", "kind": "cpu", "nodes": 1, "cpus": 64, "mem": "512G"},
                                   {"name": "gpu", "kind": "gpu", "nodes": 2, "cpus": 64, "mem": "512G",
                                    "gres": {"gpu": 16}}]},
        "policy": {"name": "fifo", "params": {"backfill": "easy"}},
        "workload": {"trace": str(FIXTURES / "helios_cluster_log.csv"), "format": "helios"}})
    assert streamed == whole and '"zero_duration": 1' in streamed


def test_the_helios_stream_takes_the_loaders_options_with_its_errors() -> None:
    from slurmx.sim.traces import TraceError

    with pytest.raises(TraceError, match=r"unknown option 'mem_per_cpu' for stream_helios; did you mean "):
        stream_helios(FIXTURES / "helios_cluster_log.csv", mem_per_cpu=3)


def test_sim_run_of_a_trace_imports_no_workload_generator_scipy_or_slurm_adapter(tmp_path: Path) -> None:
    """The sweep command's modules (every generator, scipy, the adapter) cost `sim run` 45 MB of its peak."""
    import subprocess
    import sys

    config = tmp_path / "run.yaml"
    config.write_text("cluster: {partitions: [{name: cpu, kind: cpu, nodes: 1, cpus: 64, mem: 512G}, {name: gpu, "
                      "kind: gpu, nodes: 2, cpus: 64, mem: 512G, gres: {gpu: 16}}]}\npolicy: {name: fifo}\n"
                      f"workload: {{trace: {FIXTURES / 'helios_cluster_log.csv'}, format: helios}}\n",
                      encoding="utf-8")
    code = ("import sys; from slurmx.cli.sim import sim_group; "
            f"sim_group.main(['run', {str(config)!r}, '--json', {str(tmp_path / 'out.json')!r}], "
            "standalone_mode=False); "
            "print('imported:', *sorted(m for m in sys.modules if m in ('scipy', 'slurmx.sim.workloads', "
            "'slurmx.slurm.adapter', 'slurmx.sim.sweep', 'slurmx.sim.engine')), file=sys.stderr)")
    run = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert (tmp_path / "out.json").exists()
    assert run.stderr.strip().splitlines()[-1] == "imported: slurmx.sim.engine"  # it ran, and nothing else


@pytest.mark.parametrize("tail", ["6200999,uZ,vc1,0,4,1,COMPLETED,not a time,,,30,0\n", "6200999,uZ,vc1,0,4\n"])
def test_a_helios_stream_reads_no_further_than_the_loader(tmp_path: Path, tail: str) -> None:
    """A bad row past `limit` (a garbage time, a truncated last line) is never read by the loader: the stream's
    first pass stops there too, and a bad row within it is left for the loader to name."""
    from slurmx.sim.traces import TraceError

    path = tmp_path / "cluster_log.csv"
    path.write_text(HELIOS + tail, encoding="utf-8")
    stream = stream_helios(path, limit=2)
    assert stream is not None and tuple(stream) == load_helios(path, limit=2).jobs
    with pytest.raises(TraceError) as whole:
        load_helios(path)
    with pytest.raises(TraceError) as streamed:
        stream = stream_helios(path)
        assert stream is not None
        tuple(stream)
    assert str(streamed.value) == str(whole.value)


HAND_WRITTEN = {"partitions": [{"name": "cpu", "kind": "cpu", "nodes": 8, "cpus": 4, "mem": "32G"}]}


@pytest.mark.parametrize("cluster", [HAND_WRITTEN, {"from_trace": {"swf_header": {"mem_per_cpu": "8G"}}}],
                         ids=["hand-written", "swf-header"])
def test_a_job_larger_than_the_machine_is_left_out_and_counted_whatever_built_the_cluster(
        tmp_path: Path, cluster: dict[str, object]) -> None:
    """The same 8 nodes of 4 processors and 32 GB written by hand or read from the header: the 48-processor job and
    the one asking 95 GB are left out and counted by both routes, streamed or loaded whole, and the others run."""
    path = tmp_path / "wider.swf"
    path.write_text(WIDER_SWF, encoding="utf-8")
    streamed, whole = _documents({"cluster": cluster, "policy": {"name": "fifo"}, "workload": {"trace": str(path)}})
    assert streamed == whole
    assert '"larger than any node": 2' in streamed and '"jobs": 4' in streamed


def test_oversized_abort_refuses_the_run_in_one_line_naming_the_first_job(tmp_path: Path) -> None:
    from slurmx.core.validation import ConfigError
    from slurmx.sim.cluster import SimulationError

    path = tmp_path / "wider.swf"
    path.write_text(WIDER_SWF, encoding="utf-8")
    config = parse_sim_config({"cluster": {**HAND_WRITTEN, "oversized": "abort"}, "policy": {"name": "fifo"},
                               "workload": {"trace": str(path)}})
    workload = load_workload(config.workload, config.seed)
    with pytest.raises(ConfigError) as info:
        resolve_cluster(config, workload.jobs, workload.info, trace=True)
    assert info.value.errors == ["cluster.oversized: abort: job swf-5 variant cpu: requests cpus=2 mem=97656M, more "
                                 "than any node of partition cpu has (cpus=4 mem=32G) (2 such jobs); leave oversized "
                                 "out (the default) to count them and run the rest"]
    streamed = stream_workload(config)
    assert streamed is not None
    with pytest.raises(SimulationError, match=r"cluster\.oversized: abort: job swf-5 variant cpu: requests cpus=2"):
        run_streamed(config, streamed)
