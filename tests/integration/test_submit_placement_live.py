"""`slurmx submit` with placement and several nodes, live in race mode (issue 32, the submit side).

The test cluster's nodes have features (docker-slurm/cluster): x86 on c1, c2, g1, g2; bigmem only on c2; nvlink only
on the gpu nodes; a1 (accel) none. A group-wide option applies to the kinds whose nodes can satisfy it: the others
are left out with a note (sbatch would refuse them, and with them the whole group).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from slurmx.slurm import CliSlurm

from .conftest import Cluster
from .test_submit_live import _marks, _ran, cli

pytestmark = pytest.mark.integration


def _script(cluster: Cluster, tag: str, directives: str, body: str) -> Path:
    path = cluster.shared / f"{tag}.sh"
    path.write_text(f"#!/bin/bash\n{directives}\n{body}\n")
    return path


def _features(slurm: CliSlurm) -> dict[str, set[str]]:
    return {node.name: set(node.features) for node in slurm.nodes()}


def test_a_constraint_only_the_gpu_nodes_have_runs_the_group_on_the_gpu_kind(
        site_path: Path, cluster: Cluster, slurm: CliSlurm, tag: str) -> None:
    assert {n for n, f in _features(slurm).items() if "nvlink" in f} == {"g1", "g2"}  # the cluster's, as tested
    marks = _marks(cluster, tag)
    script = _script(cluster, tag, "#SBATCH --constraint=nvlink --time=5",
                     f'echo "$SLURMX_VARIANT $SLURMD_NODENAME" > {marks}/ran')
    proc = cli(site_path, "submit", "--parsable", "--mode", "race", str(script))
    gid = proc.stdout.strip()
    assert "slurmx: note: variant cpu left out: no node of its partition cpu has --constraint=nvlink" in proc.stderr
    assert "slurmx: note: variant accel left out: no node of its partition accel has --constraint=nvlink" \
        in proc.stderr
    kind, job_id = _ran(slurm, gid)
    assert kind == "gpu"
    ran_kind, node = (marks / "ran").read_text().split()
    assert ran_kind == "gpu" and node in ("g1", "g2")
    assert _nodes(slurm, job_id) == node


def _nodes(slurm: CliSlurm, job_id: int) -> str:
    """Where a finished job ran, as accounting has it (`c[1-2]`)."""
    return next(r.nodes for r in slurm.accounting([job_id], since="now-1hour") if r.job_id == job_id)


def test_a_constraint_no_kind_has_is_refused_in_one_line_and_submits_nothing(
        site_path: Path, cluster: Cluster, slurm: CliSlurm, tag: str) -> None:
    script = _script(cluster, tag, "#SBATCH -C avx512", "true")
    proc = cli(site_path, "submit", "--mode", "race", str(script), check=False)
    assert proc.returncode != 0
    error = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(error) == 1 and "no variant can run where this job asks" in error[0], proc.stderr
    assert "ask for features one kind's nodes have (cpu: bigmem,x86; gpu: nvlink,x86" in error[0]
    assert not [j for j in slurm.jobs(user="alice") if j.name.startswith(f"{tag}@")]


def test_a_node_list_of_one_partition_runs_there(site_path: Path, cluster: Cluster, slurm: CliSlurm,
                                                 tag: str) -> None:
    script = _script(cluster, tag, "#SBATCH -w c2 --time=5", "true")
    proc = cli(site_path, "submit", "--parsable", "--mode", "race", str(script))
    assert "variant gpu left out: c2 is not in its partition gpu" in proc.stderr
    kind, job_id = _ran(slurm, proc.stdout.strip())
    assert kind == "cpu"
    assert _nodes(slurm, job_id) == "c2"


def test_a_two_node_variant_runs_srun_on_two_hosts(site_path: Path, cluster: Cluster, slurm: CliSlurm,
                                                  tag: str) -> None:
    """`-N 2`: the accel kind (one node) is left out; the variant that wins the race runs `srun hostname` once per
    node, as under sbatch. Every node of the test cluster is a slurmd in one container, so the host names are the
    same: each task also prints its Slurm node name, which differ."""
    marks = _marks(cluster, tag)
    script = _script(cluster, tag, "#SBATCH -N 2 --ntasks-per-node=1 --time=5",
                     f"srun hostname > {marks}/hosts\nsrun printenv SLURMD_NODENAME > {marks}/nodes")
    proc = cli(site_path, "submit", "--parsable", "--mode", "race", str(script))
    assert "variant accel left out: its partition accel has 1 node(s), and 2 are asked for" in proc.stderr
    kind, job_id = _ran(slurm, proc.stdout.strip())
    hosts = (marks / "hosts").read_text().split()
    nodes = sorted((marks / "nodes").read_text().split())
    assert len(hosts) == 2, hosts  # one task per node
    assert nodes == (["c1", "c2"] if kind == "cpu" else ["g1", "g2"]), (kind, nodes)
    want = "c[1-2]" if kind == "cpu" else "g[1-2]"
    deadline = time.monotonic() + 30  # slurmdbd may still hold the record of the job's start (22.05: the batch node)
    while _nodes(slurm, job_id) != want and time.monotonic() < deadline:
        time.sleep(1)
    assert _nodes(slurm, job_id) == want
