"""A user's node list under slurmxd, live: `-w c2` lands on c2 whichever node the policy would pick.

The policies do not read node lists yet (issue 32, "placement in the model"), so FitGpp and AlloX both pick c1, the
first free CPU node. slurmxd's steering narrows the user's list and never replaces it: it releases the job
unsteered and says so, and Slurm runs it on c2 as the user asked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmx.daemon.store import Store
from slurmx.slurm import CliSlurm
from tests.integration.conftest import Cluster, make_group_folder
from tests.integration.test_daemon_helpers import LEASE_S, Submitted, daemon_site, run_until_finished

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("policy", ["fitgpp", "allox"])
def test_a_node_list_of_the_user_is_where_the_group_runs_under_slurmxd(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int],
        policy: str) -> None:
    site = daemon_site(cluster, tmp_path, policy)
    gid = f"{tag}-{policy}"
    make_group_folder(slurm, gid)
    group = Submitted(gid)
    group.jobs["cpu"] = slurm.submit("#!/bin/bash\nsleep 2\n", [
        f"--begin=now+{LEASE_S}", f"--comment=slurmx:1:g={gid},v=cpu,c=be,e=5,l={LEASE_S}", "--qos=be",
        f"--job-name={gid}@cpu", "--cpus-per-task=1", "--mem=500M", "--output=/dev/null", "--requeue",
        "--partition=cpu", "--nodelist=c2"])
    cleanup.append(group.jobs["cpu"])
    found, daemon = run_until_finished(site, admin, [group], 120, tmp_path / "slurmxd.log")
    ran = found[group.jobs["cpu"]]
    assert ran.state.value == "completed" and ran.nodes == "c2", ran
    notes = [e.detail for e in Store(tmp_path / "state" / "slurmxd.sqlite").history(gid)]
    assert any("outside what its user asked for (-w c2)" in n for n in notes) or \
        any("steered to c2" in n for n in notes), notes
    assert "Traceback" not in daemon.text()
