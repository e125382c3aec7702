"""The one cycle on the real cluster: a job's own grace period reaches slurmxd, and a victim that runs to its grace
deadline is the only victim signalled for its beneficiary (the view is never older than the last action)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmx.core.actions import Preempt
from slurmx.core.config import load_site_config
from slurmx.core.model import VariantState
from slurmx.daemon.store import Store
from slurmx.slurm import CliSlurm
from slurmx.submit.spec import parse_spec
from slurmx.submit.submitter import submit_group as submit_spec
from tests.integration.conftest import Cluster, wait_until
from tests.integration.test_daemon_helpers import (
    DaemonProcess,
    Submitted,
    daemon_site,
    in_process_daemon,
    jobs_of,
    settle_pause,
    submit_group,
    wait_log,
)

pytestmark = pytest.mark.integration

FILL = (3, 1, 2, 2)  # CPUs of four BE jobs that fill c1 (3+1) and c2 (2+2)


def _run_all(daemon: DaemonProcess, admin: CliSlurm, be: list[Submitted]) -> None:
    """slurmxd until every BE job runs, then stopped, so the TE job arrives to a full partition."""
    daemon.start()
    wait_until(lambda: len(jobs_of(admin, be)) == len(be)
               and all(j.state is VariantState.RUNNING for j in jobs_of(admin, be).values()), 120,
               "every BE job to run")
    daemon.stop()


@pytest.mark.long_behaviour
def test_a_specs_own_grace_is_the_grace_fitgpp_scores_and_slurmxd_grants(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    site_path = daemon_site(cluster, tmp_path, "fitgpp", kinds=("cpu",), grace=10)
    site = load_site_config(site_path)
    be: list[Submitted] = []
    for i, cpus in enumerate(FILL):
        spec = parse_spec({"name": f"{tag}-be{i}", "command": "sleep 300", "grace": "10m", "cpus": cpus,
                           "variants": ["cpu"]})
        group = submit_spec(spec, site, slurm, mode="managed")
        be.append(Submitted(group.group_id, dict(group.variants)))
    cleanup.extend(j for g in be for j in g.jobs.values())
    daemon = DaemonProcess(site_path, tmp_path / "slurmxd.log")
    try:
        _run_all(daemon, admin, be)
        te = submit_group(slurm, tag, {"cpu": (5, "sleep 3")}, job_class="te", cpus=1, group_id=f"{tag}-te")
        cleanup.extend(te.jobs.values())
        probe = in_process_daemon(site_path, admin, tmp_path / "probe.sqlite")
        view = probe.observe(probe.clock()).view
        assert {view.groups[g.group_id].grace_s for g in be} == {600}, "the view lost the spec's grace"
        [preempt] = probe.policy.schedule(view, view.now).of_type(Preempt)
        assert preempt.grace_s == 600
        daemon.start()
        wait_log(daemon, "signalled job", 60)
        store = Store(tmp_path / "state" / "slurmxd.sqlite")
        [intent] = store.intents("preempt")
        assert intent.group_id == preempt.group_id
        assert intent.data["grace_s"] == 600
        assert 599 <= intent.data["deadline"] - intent.data["t0"] <= 601, intent.data
    finally:
        daemon.stop()
        admin.cancel(cleanup)


_STUBBORN = "trap 'echo signalled >> {log}' USR2\nfor i in $(seq 300); do sleep 1; done\n"


@pytest.mark.long_behaviour
def test_a_victim_that_uses_its_whole_grace_is_the_only_victim_of_its_beneficiary(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    grace = 10
    site_path = daemon_site(cluster, tmp_path, "fitgpp", kinds=("cpu",), grace=grace)
    be = [submit_group(slurm, tag, {"cpu": (600, _STUBBORN.format(log="/dev/null"))}, cpus=cpus,
                       group_id=f"{tag}-be{i}") for i, cpus in enumerate(FILL)]
    cleanup.extend(j for g in be for j in g.jobs.values())
    daemon = DaemonProcess(site_path, tmp_path / "slurmxd.log")
    try:
        _run_all(daemon, admin, be)
        te = submit_group(slurm, tag, {"cpu": (5, "sleep 5")}, job_class="te", cpus=1, group_id=f"{tag}-te")
        cleanup.extend(te.jobs.values())
        daemon.start()
        wait_log(daemon, "signalled job", 60)
        te_job = te.jobs["cpu"]
        wait_until(lambda: jobs_of(admin, [te])[te_job].start_time, grace + 60, "the TE job to start")
        settle_pause(2 * grace)  # cycles after the requeue: none may signal anyone else
    finally:
        daemon.stop()
        admin.cancel(cleanup)
    store = Store(tmp_path / "state" / "slurmxd.sqlite")
    preempted = [e.group_id for g in be for e in store.history(g.group_id) if e.event == "preempt"
                 and e.detail.startswith("signalled")]
    assert len(preempted) == 1, f"more than one victim signalled for one TE job: {preempted}"
    assert "Traceback" not in daemon.text()
