"""slurmxd's command line: --version, -h and --log-level, as an operator expects of a daemon."""

from __future__ import annotations

import logging
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from slurmx import cli
from tests.unit.test_daemon import SITE


def test_version_and_short_help() -> None:
    assert CliRunner().invoke(cli._daemon, ["--version"]).output == f"slurmxd, version {version('slurmx')}\n"
    result = CliRunner().invoke(cli._daemon, ["-h"])
    assert result.exit_code == 0 and "--log-level [debug|info|warning|error]" in result.output


@pytest.mark.parametrize(("given", "level"), [([], None), (["--log-level", "DEBUG"], logging.DEBUG),
                                              (["--log-level", "error"], logging.ERROR)])
def test_log_level_reaches_the_daemon(given: list[str], level: int | None, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr("slurmx.core.config.load_site_config", lambda path: SITE)  # imported when run
    monkeypatch.setattr("slurmx.daemon.site_check.load_checked_site", lambda path: SITE)
    monkeypatch.setattr("slurmx.daemon.main.run_daemon", lambda site, **kw: seen.update(kw))
    result = CliRunner().invoke(cli._daemon, ["--site", str(tmp_path / "site.yaml"), "--once", *given])
    assert result.exit_code == 0, result.output
    assert seen == {"once": True, "dry_run": False, "log_level": level}


def test_an_unknown_log_level_is_one_line_naming_the_choices() -> None:
    result = CliRunner().invoke(cli._daemon, ["--log-level", "loud"])
    assert result.exit_code == 2 and "'loud' is not one of 'debug', 'info', 'warning', 'error'" in result.output
