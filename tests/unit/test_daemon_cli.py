"""slurmxd's command line: --version, -h and --log-level, as an operator expects of a daemon."""

from __future__ import annotations

import logging
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from slurmx.cli import app
from tests.unit.test_daemon import SITE


def test_version_and_short_help() -> None:
    assert CliRunner().invoke(app._daemon, ["--version"]).output == f"slurmxd, version {version('slurmx-hpc')}\n"
    result = CliRunner().invoke(app._daemon, ["-h"])
    assert result.exit_code == 0 and "--log-level [debug|info|warning|error]" in result.output


@pytest.mark.parametrize(("given", "level"), [([], None), (["--log-level", "DEBUG"], logging.DEBUG),
                                              (["--log-level", "error"], logging.ERROR)])
def test_log_level_reaches_the_daemon(given: list[str], level: int | None, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr("slurmx.core.config.load_site_config", lambda path: SITE)  # imported when run
    monkeypatch.setattr("slurmx.daemon.site_check.load_checked_site", lambda path: SITE)
    monkeypatch.setattr("slurmx.daemon.main.run_daemon", lambda site, **kw: seen.update(kw))
    result = CliRunner().invoke(app._daemon, ["--site", str(tmp_path / "site.yaml"), "--once", *given])
    assert result.exit_code == 0, result.output
    assert seen == {"once": True, "dry_run": False, "log_level": level}


def test_an_unknown_log_level_is_one_line_naming_the_choices() -> None:
    result = CliRunner().invoke(app._daemon, ["--log-level", "loud"])
    assert result.exit_code == 2 and "'loud' is not one of 'debug', 'info', 'warning', 'error'" in result.output


class _Unreachable:
    def jobs(self) -> list[Any]:
        from slurmx.slurm.errors import SlurmUnavailable

        raise SlurmUnavailable(["squeue", "--json"], 1, "Unable to contact slurm controller (connect failure)")


def _drain(state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    """`slurmxd drain` as run from the shell, Slurm unreachable: its one line on stderr (exit status 1)."""
    monkeypatch.setattr("slurmx.core.config.load_site_config", lambda path: SITE)
    monkeypatch.setattr("slurmx.daemon.main.adapter_from_config", lambda transport: _Unreachable())
    monkeypatch.setattr("sys.argv", ["slurmxd", "--site", str(tmp_path / "s.yaml"), "--state-dir", str(state), "drain"])
    with pytest.raises(SystemExit) as exited:
        app.daemon_main()
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.strip()


def test_drain_with_slurm_unreachable_says_the_marker_was_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from slurmx.daemon.drain import DRAIN_MARKER, is_drained

    state = tmp_path / "state"
    line = _drain(state, tmp_path, monkeypatch, capsys)
    assert is_drained(state) and line.startswith(f"slurmxd: drain marker written ({state / DRAIN_MARKER})")
    assert "Unable to contact slurm controller" in line and "no waiting managed variant was let go" in line


def test_drain_that_cannot_write_its_marker_says_nothing_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("not a directory\n")
    state = tmp_path / "a-file" / "state"
    line = _drain(state, tmp_path, monkeypatch, capsys)
    assert line.startswith(f"slurmxd: {state}/drained: drain marker not written") and "nothing changed" in line
