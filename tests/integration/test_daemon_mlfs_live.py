"""slurmxd with the `mlfs` policy (MLF-H at Slurm-job granularity) on the real cluster.

Six one-variant groups of 2 cpus on c1 and c2 (4 cpus each): four fit at once. The estimates are submitted out
of order (24, 8, 40, 4, 12, 6 s) and the policy runs with the printed Eqs. 2-6 (`normalize: none`), where the
1/r_k term of seconds-long estimates outweighs the waiting term by far; the order therefore does not depend on the
seconds between the probe and the daemon's first cycle, and no pending group outranks a running one (no
preemption, so every group runs exactly once).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmx.core.actions import Start
from slurmx.core.model import VariantState
from slurmx.daemon.store import Store
from slurmx.policies.mlfs import MlfsSlurm, rank_groups
from slurmx.slurm import CliSlurm
from tests.integration.conftest import Cluster
from tests.integration.test_daemon_helpers import (
    Submitted,
    daemon_site,
    in_process_daemon,
    run_until_finished,
    shared_folder,
    submit_group,
)

ESTIMATES = (24, 8, 40, 4, 12, 6)  # by submit order; MLF-H's order is by estimate: 3, 5, 1, 4, 0, 2


@pytest.mark.long_behaviour
def test_mlfs_live_runs_every_group_once_in_the_policys_order_on_its_hosts(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    site = daemon_site(cluster, tmp_path, "mlfs", kinds=("cpu",), params={"normalize": "none"})
    marks = shared_folder(cluster, f"{tag}-marks")
    groups: list[Submitted] = []
    for i, estimate in enumerate(ESTIMATES):
        gid = f"{tag}-{i}"
        payload = f"echo ran >> {marks}/{gid}.ran; sleep {estimate / 2:g}"
        groups.append(submit_group(slurm, tag, {"cpu": (estimate, payload)}, cpus=2, group_id=gid))
    cleanup.extend(j for g in groups for j in g.jobs.values())
    probe = in_process_daemon(site, admin, tmp_path / "probe.sqlite")
    view = probe.observe(probe.clock()).view
    assert isinstance(probe.policy, MlfsSlurm)
    ours = [g for g in view.pending_groups() if g.group_id.startswith(tag)]
    ranking = [r.group.group_id for r in rank_groups(ours, view, view.now, probe.policy.args)]
    assert ranking == [f"{tag}-{i}" for i in (3, 5, 1, 4, 0, 2)]
    first = [(a.group_id, a.nodes) for a in probe.policy.schedule(view, view.now).of_type(Start)
             if a.group_id.startswith(tag)]
    assert len(first) == 4, f"two nodes of 4 cpus take four 2-cpu groups: {first}"
    found, daemon = run_until_finished(site, admin, groups, 80, tmp_path / "slurmxd.log")
    store = Store(tmp_path / "state" / "slurmxd.sqlite")
    starts = [e for e in store.history(limit=10_000) if e.event == "decide" and e.group_id.startswith(tag)]
    assert all(e.detail.startswith("start cpu") for e in starts), [e.detail for e in starts]  # no preemption
    assert [e.group_id for e in starts] == ranking, "the daemon started groups in another order than MLF-H's"
    first_cycle = [(e.group_id, (e.detail.split(" on ")[1].split(":")[0],)) for e in starts
                   if e.cycle == starts[0].cycle]
    assert first_cycle == first, "the daemon's first starts or hosts differ from the policy's on the same snapshot"
    for group in groups:
        job = found[group.jobs["cpu"]]
        assert job.state is VariantState.COMPLETED and job.restart_count == 0, (group.group_id, job.state)
        assert (marks / f"{group.group_id}.ran").read_text() == "ran\n", "a payload ran more than once"
    planned = dict(first)
    for gid, nodes in planned.items():
        job = found[next(g for g in groups if g.group_id == gid).jobs["cpu"]]
        assert (job.nodes,) == nodes, f"{gid} ran on {job.nodes}, MLF-H picked {nodes}"
    assert "Traceback" not in daemon.text()
