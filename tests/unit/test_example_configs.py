"""Every example config in the repo is one a reader can start from: site configs pass `slurmx config check` (what
slurmxd runs at start-up), simulator configs load as `slurmx sim run` loads them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from slurmx.cli.app import cli
from slurmx.sim.config import load_sim_config

ROOT = Path(__file__).resolve().parents[2]
_SKIP = {".git", ".venv", "node_modules", "build", "dist"}


def _yaml_files() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.y*ml") if p.suffix in (".yaml", ".yml")
                  and not _SKIP & set(p.relative_to(ROOT).parts) and not p.name.startswith(".")
                  and p.relative_to(ROOT).parts[0] in ("site-config", "examples", "docs"))


def _kind(path: Path) -> str | None:
    """'site' (a site config: resources and a policy), 'sim' (a simulator run), else None."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return None
    if not isinstance(data, dict):
        return None
    if "resources" in data and "cluster" in data:
        return "site"
    if "workload" in data or "partitions" in (data.get("cluster") or {}):
        return "sim"
    return None


SITE_CONFIGS = [p for p in _yaml_files() if _kind(p) == "site"]
SIM_CONFIGS = [p for p in _yaml_files() if _kind(p) == "sim"]


def test_the_examples_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in SITE_CONFIGS}
    assert {"site-config/three-partitions.yaml", "site-config/test-cluster.yaml"} <= names
    assert len(SIM_CONFIGS) >= 5


@pytest.mark.parametrize("path", SITE_CONFIGS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_example_site_config_passes_config_check(path: Path) -> None:
    result = CliRunner().invoke(cli, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"{path}: ok (")


@pytest.mark.parametrize("path", SIM_CONFIGS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_example_sim_config_loads(path: Path) -> None:
    load_sim_config(path)
