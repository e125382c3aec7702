"""The shipped Grafana dashboard (site-config/slurmxd-dashboard.json): every series a panel reads is one slurmxd
exports (or Prometheus's own `up`), and every query is PromQL that promtool accepts."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.unit.test_alert_rules import _promtool
from tests.unit.test_metrics_docs import registered

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "site-config" / "slurmxd-dashboard.json"
_SERIES = re.compile(r"\b((?:slurmxd|process|python)_[a-z_]+|up)\s*\{")


def targets() -> list[tuple[str, str]]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in data["panels"] for target in panel["targets"]]


def test_every_series_a_panel_reads_is_exported() -> None:
    live = registered()
    for title, expr in targets():
        for name in _SERIES.findall(expr):
            family = re.sub(r"_(sum|count|bucket)$", "", name)
            assert name == "up" or name in live or live.get(family, ("",))[0] == "histogram", \
                f"{DASHBOARD.name}: panel {title!r} reads {name}, which slurmxd does not export"


def test_every_panel_query_is_promql_promtool_accepts(tmp_path: Path) -> None:
    """The queries as recording rules (the dashboard's variables filled in), checked by promtool."""
    rules = [{"record": f"dashboard:panel_{i}",
              "expr": expr.replace("$job", "slurmxd").replace("$instance", ".*")}
             for i, (_, expr) in enumerate(targets())]
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run([_promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(rules) >= 10
