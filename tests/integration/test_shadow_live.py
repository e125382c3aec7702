"""Shadow mode on the real cluster: 20 race-mode groups that plain Slurm runs by itself, a `slurmxd --shadow`
watching, and `slurmx shadow-report` naming every group with its would-be decision beside what Slurm did."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from slurmx.core.config import load_site_config
from slurmx.slurm import CliSlurm
from slurmx.submit.spec import parse_spec
from slurmx.submit.submitter import submit_group
from tests.integration.conftest import Cluster, wait_until
from tests.integration.test_daemon_helpers import REPO, SLURMXD, Submitted, daemon_site, settle_pause, wait_finished

pytestmark = pytest.mark.integration

SLURMX = [sys.executable, "-c", "from slurmx.cli import main; main()"]
GROUPS = 20


def _variants(i: int) -> list[str]:
    """Mostly both kinds; every fifth group offers cpu only, every seventh gpu only."""
    return ["cpu"] if i % 5 == 4 else ["gpu"] if i % 7 == 6 else ["cpu", "gpu"]


@pytest.mark.long_behaviour
def test_shadow_report_names_every_race_group_and_its_would_be_decision(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    site_path = daemon_site(cluster, tmp_path, "allox", interval=1)
    site = load_site_config(site_path)
    log = tmp_path / "shadow.log"
    with log.open("ab") as out:
        shadow = subprocess.Popen([*SLURMXD, "--site", str(site_path), "--shadow"], stdout=out, stderr=out,
                                  cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    groups: list[Submitted] = []
    try:
        wait_until(lambda: "acting on nothing" in log.read_text(errors="replace"), 60, "the shadow daemon to start")
        settle_pause(2)  # a cycle or two on an empty queue: every group below arrives while it runs
        for i in range(GROUPS):
            kinds = _variants(i)
            spec = parse_spec({"name": f"{tag}-{i:02d}", "command": f"sleep {2 + i % 3}", "variants": kinds,
                               "estimates": {k: ("8s" if k == "cpu" else "4s") for k in kinds}})
            group = submit_group(spec, site, slurm, mode="race")
            groups.append(Submitted(group.group_id, dict(group.variants)))
            cleanup.extend(group.job_ids())
        wait_finished(admin, groups, 150)  # plain Slurm runs them: the shadow daemon holds and releases nothing
        settle_pause(3)
    finally:
        shadow.send_signal(signal.SIGTERM)
        shadow.wait(timeout=30)
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-3000:]
    state = tmp_path / "state"
    assert (state / "shadow.sqlite").exists()
    assert not (state / "slurmxd.sqlite").exists(), "the shadow daemon wrote the enforcing daemon's store"
    report_json = tmp_path / "report.json"
    proc = subprocess.run([*SLURMX, "--site", str(site_path), "shadow-report", "--json", str(report_json)],
                          capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    print(proc.stdout)  # the admin's table, for the record (pytest -s)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(report_json.read_text())
    rows = {g["group_id"]: g for g in report["groups"]}
    for submitted in groups:
        assert submitted.group_id in proc.stdout, f"{submitted.group_id} missing from the table"
        row = rows[submitted.group_id]
        assert row["would"].startswith("start "), row
        assert row["would_kind"] in submitted.jobs, row
        assert row["would_start"] is not None and row["would_start"] >= row["submit_time"], row
        assert row["actual_kind"] in submitted.jobs, row  # the variant Slurm ran, read back from squeue/sacct
        assert row["actual_state"] == "finished", row
        assert row["jct_change_s"] is not None, row
    summary = report["summary"]
    assert summary["would_started"] >= GROUPS and summary["ran"] >= GROUPS
    assert summary["mean_wait_would_s"] is not None and summary["mean_jct_change_s"] is not None
