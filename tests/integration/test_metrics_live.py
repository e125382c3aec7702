"""slurmxd's /metrics on the real cluster: a daemon that started groups exports every family docs/daemon.md lists
(and nothing else), the counts follow what it did, no `_created` series, and Prometheus's linter is content."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from slurmx.slurm import CliSlurm
from tests.integration.conftest import Cluster, wait_until
from tests.integration.test_daemon_helpers import DaemonProcess, daemon_site, submit_group, wait_finished, wait_log
from tests.unit.test_alert_rules import _promtool
from tests.unit.test_metrics_docs import documented

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return str(answer.read().decode())


def _value(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return None


def _scrape_when(port: int, at_least: float, name: str, **labels: str) -> str:
    """The first scrape in which `name{labels}` reached `at_least` (30 s at most)."""
    def probe() -> str | None:
        text = _scrape(port)
        return text if (_value(text, name, **labels) or 0) >= at_least else None

    return wait_until(probe, 30, f"{name} >= {at_least}", every=1.0)


def test_a_working_daemon_exports_every_documented_family_and_counts_what_it_did(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    site_path = daemon_site(cluster, tmp_path, "fifo")
    port = _free_port()
    data = yaml.safe_load(site_path.read_text())
    data["daemon"]["metrics_port"] = port
    site_path.write_text(yaml.safe_dump(data))
    groups = [submit_group(slurm, f"{tag}-m{i}", {"cpu": (5, "sleep 1"), "gpu": (5, "sleep 1")}) for i in range(2)]
    cleanup.extend(j for g in groups for j in g.jobs.values())
    daemon = DaemonProcess(site_path, tmp_path / "slurmxd.log")
    daemon.start()
    try:
        wait_log(daemon, "slurmxd started")
        wait_finished(admin, groups, 180)
        text = _scrape_when(port, 2, "slurmxd_actions_total", type="start", outcome="ok")
    finally:
        daemon.stop()
    families = {f.name + ("_total" if f.type == "counter" else ""): f.type
                for f in text_string_to_metric_families(text)}
    assert families == {name: kind for name, (kind, _) in documented().items()}
    names = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    assert not any(name.endswith("_created") for name in names)
    cycles = _value(text, "slurmxd_cycle_seconds_count")
    assert cycles is not None and cycles >= 1 and _value(text, "slurmxd_decision_seconds_count") == cycles
    assert _value(text, "slurmxd_slurm_up") == 1.0
    assert _value(text, "slurmxd_interval_seconds") == 1.0 and _value(text, "slurmxd_lease_seconds") == 600.0
    assert (_value(text, "slurmxd_slurm_commands_total", command="squeue") or 0) >= cycles
    assert _value(text, "slurmxd_cycle_failures_total", where="cycle") == 0.0
    assert _value(text, "slurmxd_leases_expired_total") == 0.0  # renewed in time: none ran out
    for state in ("pending", "running", "rejected", "quarantined"):
        assert _value(text, "slurmxd_groups", state=state) is not None


def test_promtool_lints_a_live_scrape_clean(cluster: Cluster, tmp_path: Path) -> None:
    import subprocess

    promtool = _promtool()
    site_path = daemon_site(cluster, tmp_path, "fifo")
    port = _free_port()
    data = yaml.safe_load(site_path.read_text())
    data["daemon"]["metrics_port"] = port
    site_path.write_text(yaml.safe_dump(data))
    daemon = DaemonProcess(site_path, tmp_path / "slurmxd.log")
    daemon.start()
    try:
        wait_log(daemon, "slurmxd started")
        text = _scrape_when(port, 1, "slurmxd_cycle_seconds_count")
    finally:
        daemon.stop()
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr
