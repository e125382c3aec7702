"""Clusters for traces: the trace's own machines, or nodes sized to an offered load (numbers by hand), and
FIFO over the whole Alibaba v2023 and Philly traces on such clusters (where the data is present)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmx.cli.app import cli
from slurmx.core.resources import Resources
from slurmx.core.validation import ConfigError
from slurmx.sim.config import parse_sim_config, resolve_cluster
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.sizing import partitions_from_machines, sized_for_load

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
ALIBABA_DIR = TRACES / "alibaba_gpu_v2023"
PHILLY = TRACES / "philly_derived_pollux_sia" / "philly.csv"
NODE = Resources(32, 256_000, {"gpu": 8})


def gpu_job(i: int, gpus: int, submit: float, duration: float = 1000.0) -> SimJob:
    request = Resources(2 * gpus, 1000 * gpus, {"gpu": gpus})
    return SimJob(f"j{i}", "u", submit, {"gpu": SimVariant("gpu", request, duration)})


def test_nodes_are_sized_to_the_offered_load_of_the_busiest_dimension() -> None:
    # 11 jobs of 8 GPUs x 1000 s submitted over 1000 s: 88,000 GPU-s / 1000 s = 88 GPUs busy on average,
    # i.e. 11 nodes of 8 GPUs at load 1.0 and 22 at load 0.5 (CPUs: 16 x 11 x 1000 / 1000 / 32 = 5.5 nodes).
    jobs = [gpu_job(i, 8, 100.0 * i) for i in range(11)]
    assert sized_for_load(jobs, {"gpu": NODE}, 1.0).partitions[0].nodes[0].count == 11
    sized = sized_for_load(jobs, {"gpu": NODE}, 0.5)
    assert sized.partitions[0].nodes[0].count == 22 and sized.skipped == 0 and len(sized.jobs) == 11
    assert "22 gpu nodes" in sized.assumptions[0]


def test_jobs_larger_than_any_node_are_left_out_and_counted_and_the_span_sets_the_count() -> None:
    jobs = [gpu_job(0, 8, 0.0), gpu_job(1, 16, 10.0), gpu_job(2, 1, 20.0)]
    sized = sized_for_load(jobs, {"gpu": NODE}, 1.0)
    assert [j.job_id for j in sized.jobs] == ["j0", "j2"] and sized.skipped == 1
    # 9 GPUs x 1000 s over a 20 s span = 450 GPUs busy -> ceil(450 / 8) = 57 nodes at load 1.
    assert sized.partitions[0].nodes[0].count == 57
    assert "1 jobs whose per-node request is larger than any node" in sized.assumptions[-1]


def test_the_machines_of_a_trace_become_gpu_and_cpu_partitions_grouped_by_shape() -> None:
    machines = [("a", Resources(96, 786_432, {"gpu": 8}), "V100"), ("b", Resources(96, 786_432, {"gpu": 8}), "V100"),
                ("c", Resources(64, 262_144, {"gpu": 2}), "T4"), ("d", Resources(96, 400_000, {"gpu": 0}), "")]
    sized = partitions_from_machines(machines, [gpu_job(0, 8, 0.0), gpu_job(1, 16, 0.0)])
    by_kind = {p.kind: p for p in sized.partitions}
    assert sorted((g.count, g.capacity) for g in by_kind["gpu"].nodes) == [
        (1, Resources(64, 262_144, {"gpu": 2})), (2, Resources(96, 786_432, {"gpu": 8}))]
    assert [(g.count, g.capacity) for g in by_kind["cpu"].nodes] == [(1, Resources(96, 400_000))]
    assert sized.skipped == 1 and "4 machines" in sized.assumptions[0]


@pytest.mark.parametrize(("cluster", "message"), [
    ({}, "give exactly one of partitions or from_trace"),
    ({"from_trace": {"load": 0.5}}, "give exactly one of nodes_file"),
    ({"from_trace": {"node": {"gpu": {"cpus": 4}}}}, "mem"),
])
def test_a_cluster_needs_exactly_one_source(cluster: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_sim_config({"cluster": cluster}, "run.yaml")


def test_a_config_sized_from_the_trace_resolves_with_its_jobs() -> None:
    config = parse_sim_config({"cluster": {"from_trace": {"node": {"gpu": {"cpus": 32, "mem": "250G",
                                                                           "gres": "gpu:8"}}, "load": 1.0}}})
    sized = resolve_cluster(config, [gpu_job(i, 8, 100.0 * i) for i in range(11)])
    assert sized.partitions[0].nodes[0].count == 11


@pytest.mark.skipif(not ALIBABA_DIR.exists(), reason="the Alibaba v2023 trace is in ../shared/traces only")
def test_fifo_over_the_whole_alibaba_trace_on_its_own_machines(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(
        f"cluster: {{from_trace: {{nodes_file: {ALIBABA_DIR / 'openb_node_list_all_node.csv'}}}}}\n"
        f"workload: {{trace: {ALIBABA_DIR / 'openb_pod_list_default.csv'}, format: alibaba}}\n"
        "policy: {name: fifo}\n")
    result = CliRunner().invoke(cli, ["sim", "run", str(config), "--json", str(tmp_path / "out.json")])
    assert result.exit_code == 0, result.output
    assert "7,255 completed" in result.output
    text = (tmp_path / "out.json").read_text()
    assert "1,523 machines" in text and '"completed": 7255' in text


@pytest.mark.skipif(not PHILLY.exists(), reason="the Philly-derived CSV is in ../shared/traces only")
def test_fifo_over_the_whole_philly_csv_on_nodes_sized_from_it(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(
        "cluster: {from_trace: {node: {gpu: {cpus: 32, mem: 512G, gres: 'gpu:8'}}, load: 0.9}}\n"
        f"workload: {{trace: {PHILLY}, format: philly-csv}}\npolicy: {{name: fifo}}\n")
    result = CliRunner().invoke(cli, ["sim", "run", str(config), "--json", str(tmp_path / "out.json")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "out.json").read_text()
    # 82,247 jobs; the 289 gangs of 12-128 GPUs cannot run on one 8-GPU node and are counted, not run.
    assert '"completed": 81958' in text and '"larger than any node": 289' in text
