"""`slurmx` starts without numpy, scipy or the simulator: they cost most of a second and only sim commands use them.

Each check runs in a fresh interpreter (this one has long imported everything), so an eager import added back
anywhere on the path fails here, whichever module it hides in. How fast the start is lives in bench/cli_start.py.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from slurmx.cli import app

REPO = Path(__file__).resolve().parents[2]
HEAVY = 'sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "scipy") or m.startswith("slurmx.sim"))'


def _loaded_heavy(code: str) -> list[str]:
    """The numpy, scipy and slurmx.sim modules a fresh interpreter holds after running `code`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([sys.executable, "-c", f"import sys\n{code}\nprint({HEAVY})"], cwd=REPO, env=env,
                         check=True, capture_output=True, text=True, timeout=60).stdout
    found: list[str] = ast.literal_eval(out.splitlines()[-1])
    return found


@pytest.mark.parametrize("module", ["slurmx.cli", "slurmx.cli.app", "slurmx.submit.submitter", "slurmx.submit.entry",
                                    "slurmx.submit.groups", "slurmx.daemon.main"])
def test_importing_the_entry_points_loads_no_numpy_scipy_or_simulator(module: str) -> None:
    assert _loaded_heavy(f"import {module}") == []


def test_help_and_a_dry_run_submit_load_none_either() -> None:
    """The commands themselves, not only their modules: `--help` lists sim without importing it."""
    run = "from slurmx.cli.app import cli\ncli({argv!r}, standalone_mode=False)"
    assert _loaded_heavy(run.format(argv=["--help"])) == []
    submit = ["--site", "site-config/test-cluster.yaml", "submit", "--dry-run", "examples/hello.yaml"]
    assert _loaded_heavy(run.format(argv=submit)) == []


def test_the_check_sees_an_eager_import() -> None:
    assert "numpy" in _loaded_heavy("import numpy")
    assert "slurmx.sim.engine" in _loaded_heavy("from slurmx.cli.app import cli\ncli.get_command(None, 'sim')")


def test_the_lazy_summaries_are_the_commands_own() -> None:
    """`slurmx --help` lists lazy commands from summaries kept in slurmx.cli.commands: the same lines as when loaded."""
    lazy_help = CliRunner().invoke(app.cli, ["--help"]).output
    ctx = click.Context(app.cli)
    for name, entry in app.cli.lazy.items():
        command = entry.load()
        assert command.name == name
        assert entry.stand_in(name).get_short_help_str(1000) == command.get_short_help_str(1000), name
        assert app.cli.get_command(ctx, name) is command
    assert CliRunner().invoke(app.cli, ["--help"]).output == lazy_help
    assert all(name in lazy_help for name in app.cli.lazy)


def test_a_lazy_command_runs() -> None:
    result = CliRunner().invoke(app.cli, ["reproduce", "--list"])
    assert result.exit_code == 0, result.output
