"""Sweeps: grid expansion, the short parameter forms, validation before anything runs, and results that do
not depend on how many processes run them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from slurmx.cli.app import cli
from slurmx.core.validation import ConfigError
from slurmx.sim.parallel import parallel_map
from slurmx.sim.sweep import expand_grid, load_base, parse_param, run_point

BASE: dict[str, Any] = {
    "seed": 3,
    "cluster": {"partitions": [{"name": "gpu", "kind": "gpu", "nodes": 2, "cpus": 32, "mem": "256G",
                                "gres": "gpu:8"}]},
    "policy": {"name": "fifo"},
    "workload": {"generator": "fitgpp", "params": {"n_jobs": 120, "nodes": 2}},
    "mode": "tick",
}


def test_a_param_reads_yaml_scalars() -> None:
    assert parse_param("load=1.5,2") == ("load", [1.5, 2])
    assert parse_param("policy=fifo, fitgpp") == ("policy", ["fifo", "fitgpp"])
    assert parse_param("call_when_idle=true") == ("call_when_idle", [True])


@pytest.mark.parametrize("text", ["load", "=1", "load=", "load= "])
def test_a_malformed_param_is_one_line_showing_the_form(text: str) -> None:
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_param(text)


def test_the_grid_is_the_product_first_axis_slowest_with_the_short_forms_expanded() -> None:
    points = expand_grid(BASE, [("policy", ["fifo", "fitgpp"]), ("n_jobs", [100, 200]), ("seed", [1])])
    assert [dict(p.label) for p in points] == [
        {"policy": "fifo", "n_jobs": 100, "seed": 1}, {"policy": "fifo", "n_jobs": 200, "seed": 1},
        {"policy": "fitgpp", "n_jobs": 100, "seed": 1}, {"policy": "fitgpp", "n_jobs": 200, "seed": 1}]
    last = points[-1].document
    assert last["policy"] == {"name": "fitgpp"} and last["seed"] == 1
    assert last["workload"]["params"] == {"n_jobs": 200, "nodes": 2}
    assert BASE["workload"]["params"] == {"n_jobs": 120, "nodes": 2}  # the base is not touched


def test_dotted_keys_reach_nested_policy_params() -> None:
    (point,) = expand_grid(BASE, [("policy.params.backfill", [True])])
    assert point.document["policy"] == {"name": "fifo", "params": {"backfill": True}}


def test_a_bad_point_fails_before_anything_runs_naming_the_point() -> None:
    with pytest.raises(ConfigError, match=r"point 1 \(mode=evnt\): mode: expected"):
        expand_grid(BASE, [("mode", ["tick", "evnt"])])
    with pytest.raises(ConfigError, match="given twice"):
        expand_grid(BASE, [("policy", ["fifo"]), ("policy.name", ["fifo"])])


def test_a_relative_trace_path_is_taken_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(
        "cluster: {partitions: [{name: cpu, nodes: 1, cpus: 4, mem: 4G}]}\nworkload: {trace: data/t.swf}\n")
    assert load_base(tmp_path / "run.yaml")["workload"]["trace"] == str((tmp_path / "data" / "t.swf").resolve())
    (tmp_path / "sized.yaml").write_text(
        "cluster: {from_trace: {nodes_file: data/nodes.csv}}\nworkload: {trace: /abs/t.swf}\n")
    document = load_base(tmp_path / "sized.yaml")
    assert document["cluster"]["from_trace"]["nodes_file"] == str(tmp_path / "data" / "nodes.csv")
    assert document["workload"]["trace"] == "/abs/t.swf"


def test_results_are_in_grid_order_and_identical_on_one_or_two_processes() -> None:
    documents = [p.document for p in expand_grid(BASE, [("policy", ["fifo", "fitgpp"]), ("seed", [1, 2])])]
    one = parallel_map(run_point, documents, workers=1, progress=False)
    two = parallel_map(run_point, documents, workers=2, progress=False)
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)
    assert [m["jobs"]["completed"] for m in one] == [120] * 4
    assert one[0] != one[2]  # fifo and fitgpp differ: the points really are different runs


def test_sim_sweep_prints_a_table_and_writes_every_point(tmp_path: Path) -> None:
    import yaml

    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(BASE))
    out = tmp_path / "sweep.json"
    result = CliRunner().invoke(cli, ["sim", "sweep", str(config), "--param", "seed=1,2", "--workers", "1",
                                      "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 points on local pool of 1" in result.output and "JCT mean s" in result.output
    document = json.loads(out.read_text())
    assert [d["label"] for d in document] == [{"seed": 1}, {"seed": 2}]
    assert document[0]["metrics"] == run_point({**BASE, "seed": 1})
