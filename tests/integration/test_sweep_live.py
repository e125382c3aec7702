"""A sweep of 8 configurations as one Slurm job array on the docker-slurm cluster returns exactly the local
run's numbers (the issue's acceptance), and a failing point is reported by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmx.core.config import load_site_config
from slurmx.core.model import VariantState
from slurmx.sim.parallel import parallel_map
from slurmx.sim.sweep import expand_grid, run_point
from slurmx.sim.sweep_slurm import SweepError, run_on_slurm
from slurmx.slurm.adapter import CliSlurm
from slurmx.slurm.records import AccountingRecord
from tests.integration.conftest import Cluster, wait_until

ACTIVE = (VariantState.PENDING, VariantState.RUNNING, VariantState.REQUEUED)
BASE = {
    "seed": 5,
    "cluster": {"partitions": [{"name": "gpu", "kind": "gpu", "nodes": 2, "cpus": 32, "mem": "256G",
                                "gres": "gpu:8"}]},
    "policy": {"name": "fifo"},
    "workload": {"generator": "fitgpp", "params": {"n_jobs": 150, "nodes": 2}},
    "mode": "tick",
}


def test_eight_points_on_a_job_array_give_the_local_numbers(cluster: Cluster, slurm: CliSlurm) -> None:
    site = load_site_config(cluster.dir / "site.yaml")
    points = expand_grid(BASE, [("policy", ["fifo", "fitgpp"]), ("seed", [1, 2, 3, 4])])
    assert len(points) == 8
    sweep, remote = run_on_slurm(slurm, site, points, timeout_s=600)
    local = parallel_map(run_point, [p.document for p in points], workers=2, progress=False)
    assert json.dumps(remote, sort_keys=True) == json.dumps(local, sort_keys=True)
    assert sorted(int(p.stem) for p in (sweep.directory / "results").glob("*.json")) == list(range(8))
    assert len({json.dumps(r, sort_keys=True) for r in remote}) == 8  # eight different runs, not one repeated
    name = f"slurmx-sweep-{sweep.directory.name}"

    def finished_tasks() -> list[AccountingRecord] | None:
        # A task's result file is written before the task leaves Slurm, and slurmdbd records it later still
        tasks = [r for r in slurm.accounting(since="now-1hour") if r.name == name]
        return tasks if len(tasks) >= 8 and not any(r.state in ACTIVE for r in tasks) else None

    tasks = wait_until(finished_tasks, 90, "8 array tasks in sacct")
    assert len(tasks) == 8 and all(r.state is VariantState.COMPLETED for r in tasks), tasks  # ran as 8 array tasks


def test_a_point_that_fails_on_the_node_is_named(cluster: Cluster, slurm: CliSlurm, tmp_path: Path) -> None:
    site = load_site_config(cluster.dir / "site.yaml")
    points = expand_grid(BASE, [("workload.generator", ["fitgpp", "tests.missing.module:gen"])])
    with pytest.raises(SweepError, match=r"point\(s\) 1 failed; point 1: ConfigError: .*cannot import"):
        run_on_slurm(slurm, site, points, timeout_s=300)
