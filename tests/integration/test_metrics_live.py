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


def _prometheus_query(port: int, path: str) -> dict[str, object]:
    import json

    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
        data = json.loads(answer.read().decode())
    assert data.get("status") == "success", data
    return dict(data["data"])


@pytest.mark.long_behaviour  # the exposition is Slurm-independent: the newest version is enough
def test_a_real_prometheus_scrapes_the_daemon_and_evaluates_the_shipped_alert_rules(cluster: Cluster,
                                                                                    tmp_path: Path) -> None:
    """Debian's Prometheus server, configured as docs/daemon.md says: it scrapes slurmxd (`up` is 1, the cycle
    histogram has counts), loads site-config/slurmxd-alerts.yaml with every rule healthy, no alert fires for a daemon
    that works, and every query of site-config/slurmxd-dashboard.json returns series."""
    import shutil
    import subprocess

    server = shutil.which("prometheus")
    assert server is not None, "prometheus is missing: `make test` installs Debian's prometheus package"
    site_path = daemon_site(cluster, tmp_path, "fifo")
    port, web = _free_port(), _free_port()
    data = yaml.safe_load(site_path.read_text())
    data["daemon"]["metrics_port"] = port
    site_path.write_text(yaml.safe_dump(data))
    rules = Path(__file__).resolve().parents[2] / "site-config" / "slurmxd-alerts.yaml"
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [{"job_name": "slurmxd", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}]}))
    daemon = DaemonProcess(site_path, tmp_path / "slurmxd.log")
    daemon.start()
    log = (tmp_path / "prometheus.log").open("w")
    prom = subprocess.Popen([server, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{web}"], stdout=log, stderr=log)
    try:
        wait_log(daemon, "slurmxd started")

        def scraped() -> bool:
            try:
                up = _prometheus_query(web, "/api/v1/query?query=up%7Bjob%3D%22slurmxd%22%7D")["result"]
                cycles = _prometheus_query(web, "/api/v1/query?query=slurmxd_cycle_seconds_count")["result"]
            except OSError:
                return False
            return bool(up) and up[0]["value"][1] == "1" and bool(cycles)  # type: ignore[index]

        wait_until(scraped, 60, "Prometheus to scrape slurmxd", every=1.0)
        groups = _prometheus_query(web, "/api/v1/rules")["groups"]
        rules_seen = [r for g in groups for r in g["rules"]]  # type: ignore[attr-defined]
        assert rules_seen and all(r["health"] == "ok" for r in rules_seen), rules_seen
        firing = _prometheus_query(web, "/api/v1/alerts")["alerts"]
        assert not [a for a in firing if a["state"] == "firing"], firing  # type: ignore[index]
        from urllib.parse import quote

        from tests.unit.test_dashboard import targets

        def series(expr: str) -> bool:
            query = expr.replace("$job", "slurmxd").replace("$instance", ".*")
            return bool(_prometheus_query(web, f"/api/v1/query?query={quote(query)}")["result"])

        for title, expr in targets():  # the shipped dashboard: every query returns series (rates need two scrapes)
            wait_until(lambda e=expr: series(e), 30, f"dashboard panel {title!r} to show series", every=1.0)
    finally:
        prom.terminate()
        prom.wait(timeout=30)
        log.close()
        daemon.stop()
