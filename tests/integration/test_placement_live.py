"""Placement under slurmxd, live: the policies place a group only where its variants may run.

The test cluster's nodes have features (docker-slurm/cluster): x86 everywhere, bigmem only on c2, nvlink only on
the gpu nodes. FitGpp and AlloX place neither node lists, features nor several nodes (`places_constraints`,
`max_nodes`): the cycle hands such groups to EASY backfill, which places each only where its placement admits,
and slurmxd steers the job there, inside what its user asked for. Without that, both policies pick c1, the first
free CPU node, for every one of these groups.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmx.daemon.store import Store
from slurmx.slurm import CliSlurm
from tests.integration.conftest import Cluster, make_group_folder, wait_until
from tests.integration.test_daemon_helpers import (
    KIND_FLAGS,
    LEASE_S,
    Submitted,
    daemon_site,
    run_until_finished,
    shared_folder,
)

pytestmark = pytest.mark.integration
# FitGpp on every version (Slurm's node fields, the steering); AlloX's placement is the same Slurm calls, so it runs on
# the newest version only (long_behaviour).
POLICIES = ["fitgpp", pytest.param("allox", marks=pytest.mark.long_behaviour)]


def _submit(slurm: CliSlurm, group: Submitted, kind: str, flags: list[str], payload: str = "sleep 2",
            output: str = "/dev/null") -> None:
    """One leased variant tagged as `slurmx submit` tags it, with the user's placement `flags`."""
    gid = group.group_id
    group.jobs[kind] = slurm.submit(f"#!/bin/bash\n{payload}\n", [
        f"--begin=now+{LEASE_S}", f"--comment=slurmx:1:g={gid},v={kind},c=be,e=5,l={LEASE_S}", "--qos=be",
        f"--job-name={gid}@{kind}", "--cpus-per-task=1", "--mem=500M", f"--output={output}", "--requeue",
        *KIND_FLAGS[kind], *flags])


def _group(slurm: CliSlurm, gid: str, cleanup: list[int], variants: dict[str, list[str]]) -> Submitted:
    make_group_folder(slurm, gid)
    group = Submitted(gid)
    for kind, flags in variants.items():
        _submit(slurm, group, kind, flags)
        cleanup.append(group.jobs[kind])
    return group


def _notes(tmp_path: Path, gid: str) -> list[str]:
    return [e.detail for e in Store(tmp_path / "state" / "slurmxd.sqlite").history(gid)]


@pytest.mark.parametrize("policy", POLICIES)
def test_a_node_list_of_the_user_is_where_the_group_runs_under_slurmxd(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int],
        policy: str) -> None:
    gid = f"{tag}-{policy}"
    group = _group(slurm, gid, cleanup, {"cpu": ["--nodelist=c2"]})
    found, daemon = run_until_finished(daemon_site(cluster, tmp_path, policy), admin, [group], 120,
                                       tmp_path / "slurmxd.log")
    ran = found[group.jobs["cpu"]]
    assert ran.state.value == "completed" and ran.nodes == "c2", ran
    notes = _notes(tmp_path, gid)
    assert any(f"released job {ran.job_id} steered to c2" in n for n in notes), notes  # placed there, not left
    assert "Traceback" not in daemon.text()


@pytest.mark.parametrize("policy", POLICIES)
def test_an_excluded_node_is_never_where_the_group_runs(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int],
        policy: str) -> None:
    gid = f"{tag}-{policy}"
    group = _group(slurm, gid, cleanup, {"cpu": ["--exclude=c1"]})
    found, daemon = run_until_finished(daemon_site(cluster, tmp_path, policy), admin, [group], 120,
                                       tmp_path / "slurmxd.log")
    ran = found[group.jobs["cpu"]]
    assert ran.state.value == "completed" and ran.nodes == "c2", ran
    assert any(f"released job {ran.job_id} steered to c2" in n for n in _notes(tmp_path, gid))
    assert "Traceback" not in daemon.text()


@pytest.mark.parametrize("policy", POLICIES)
def test_a_constraint_only_the_gpu_nodes_meet_now_runs_the_group_on_the_gpu_kind(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int],
        policy: str) -> None:
    """The cpu variant asks for bigmem (only c2, held whole by another job), the gpu one for nvlink: c1 is free,
    yet the group runs on a gpu node (managed mode), and the cpu variant is cancelled."""
    blocker = slurm.submit("#!/bin/bash\nsleep 300\n", ["--partition=cpu", "--nodelist=c2", "--exclusive",
                                                          "--output=/dev/null", f"--job-name={tag}-block"])
    cleanup.append(blocker)
    wait_until(lambda: all(j.state.value == "running" for j in admin.jobs([blocker])), 60, "the blocker to run")
    gid = f"{tag}-{policy}"
    group = _group(slurm, gid, cleanup, {"cpu": ["--constraint=bigmem"], "gpu": ["--constraint=nvlink"]})
    found, daemon = run_until_finished(daemon_site(cluster, tmp_path, policy), admin, [group], 120,
                                       tmp_path / "slurmxd.log")
    cpu, gpu = found[group.jobs["cpu"]], found[group.jobs["gpu"]]
    assert gpu.state.value == "completed" and gpu.nodes in ("g1", "g2"), gpu
    assert cpu.state.value == "cancelled" and not cpu.nodes, cpu
    assert "Traceback" not in daemon.text()


@pytest.mark.parametrize("policy", POLICIES)
def test_a_two_node_variant_runs_on_two_nodes_beside_single_node_groups(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int],
        policy: str) -> None:
    """`-N 2` submitted as `slurmx submit` tags a variant (the daemon's side: the submit side is issue 32's
    multi-node part): the policy leaves it to EASY, which starts it on two nodes at once; `srun hostname` prints
    both, and two single-node groups run too."""
    out = shared_folder(cluster, f"{tag}-{policy}")
    gid = f"{tag}-{policy}-mpi"
    make_group_folder(slurm, gid)
    wide = Submitted(gid)
    _submit(slurm, wide, "cpu", ["--nodes=2", "--ntasks-per-node=1"], payload="srun hostname; srun printenv "
            "SLURMD_NODENAME", output=f"{out}/wide.out")
    cleanup.append(wide.jobs["cpu"])
    singles = [_group(slurm, f"{tag}-{policy}-{i}", cleanup, {"cpu": [], "gpu": []}) for i in range(2)]
    found, daemon = run_until_finished(daemon_site(cluster, tmp_path, policy), admin, [wide, *singles], 120,
                                       tmp_path / "slurmxd.log")
    ran = found[wide.jobs["cpu"]]
    assert ran.state.value == "completed" and ran.nodes == "c[1-2]", ran
    lines = (out / "wide.out").read_text().split()
    assert len(lines) == 4 and sorted(lines[2:]) == ["c1", "c2"], lines  # two hosts (all named localhost here)
    assert any(f"released job {ran.job_id} steered to c1,c2" in n for n in _notes(tmp_path, gid))
    for group in singles:
        assert sum(found[j].state.value == "completed" for j in group.jobs.values()) == 1
    assert "Traceback" not in daemon.text()
