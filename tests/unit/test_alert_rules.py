"""The shipped alert rules: every metric they read is one slurmxd exports, every alert has a firing case in the
promtool tests, and `promtool test rules` passes (promtool comes with Debian's `prometheus` package)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from slurmx.daemon.metrics import Metrics
from tests.unit.test_metrics_docs import registered

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "site-config" / "slurmxd-alerts.yaml"
RULE_TESTS = ROOT / "tests" / "fixtures" / "alerts" / "slurmxd-alerts.test.yaml"
_SERIES = re.compile(r"\b(slurmxd_[a-z_]+)")


def rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_every_metric_an_alert_reads_is_exported() -> None:
    live = registered()
    for rule in rules():
        for name in _SERIES.findall(rule["expr"]):
            family = re.sub(r"_(sum|count|bucket)$", "", name)
            assert name in live or live.get(family, ("",))[0] == "histogram", \
                f"{RULES.name}: {rule['alert']} reads {name}, which slurmxd does not export"


def test_the_alerts_the_docs_promise_exist_and_each_has_a_firing_case() -> None:
    names = {rule["alert"] for rule in rules()}
    assert {"SlurmxdDown", "SlurmxdCyclesFailing", "SlurmxdCycleSlow", "SlurmxdLeasesExpiring",
            "SlurmxdLeasesExpired", "SlurmxdGroupsSetAside"} <= names
    firing = {case["alertname"] for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
              for case in test["alert_rule_test"] if case.get("exp_alerts")}
    assert names == firing, f"alerts without a firing case in {RULE_TESTS.name}: {sorted(names - firing)}"
    docs = (ROOT / "docs" / "daemon.md").read_text()
    assert all(f"`{name}`" in docs for name in names), "docs/daemon.md names every shipped alert"


def _promtool_expected() -> bool:
    """The Makefile's `system-deps` installs promtool: then a machine without it is set up wrong, not exempt."""
    return "promtool:prometheus" in (ROOT / "Makefile").read_text()


def _promtool() -> str:
    """promtool's path; a failure where the Makefile installs it, a reported skip elsewhere."""
    promtool = shutil.which("promtool")
    if promtool is None:
        if _promtool_expected():
            pytest.fail("promtool not found, though `make system-deps` installs it: run it (apt-get install "
                        "prometheus)")
        pytest.skip("promtool not installed (Debian: apt-get install prometheus); the alert rules are untested here")
    return promtool


def test_promtool_test_rules_passes() -> None:
    promtool = _promtool()
    done = subprocess.run([promtool, "test", "rules", str(RULE_TESTS)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    check = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60,
                           check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def test_promtool_finds_nothing_to_lint_in_a_scrape() -> None:
    """Prometheus's own linter over the exposition: names, units, counters' `_total`, HELP texts."""
    metrics = Metrics()
    metrics.cycle(0.3)
    metrics.groups("pending", 2)
    done = subprocess.run([_promtool(), "check", "metrics"], input=metrics.render(), capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), done.stdout + done.stderr
