"""Output paths are checked before the work: a bad `--json` or `--plot` is one line naming the flag, the path and
the fix, and nothing is computed (today's failure mode was a finished run whose result could not be written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import slurmx.cli.reproduce as reproduce_cli
import slurmx.cli.sim as sim_cli
import slurmx.sim.sweep_slurm as sweep_slurm
from slurmx.cli.app import cli
from slurmx.cli.output import checked_output_dir, checked_output_file

SIM = ("seed: 1\n"
       "cluster: {partitions: [{name: gpu, nodes: 2, cpus: 8, mem: 64G, gres: 'gpu:4'}]}\n"
       "policy: {name: fifo}\n"
       "workload: {generator: fitgpp, params: {n_jobs: 10, nodes: 2}}\n")


def _no_work(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the work started before the output path was checked")


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("load_workload", "parallel_map"):
        monkeypatch.setattr(sim_cli, name, _no_work)
    monkeypatch.setattr(sweep_slurm, "run_on_slurm", _no_work)  # `sim sweep` imports it when it runs
    monkeypatch.setattr(reproduce_cli, "run", _no_work)
    path = tmp_path / "run.yaml"
    path.write_text(SIM)
    return path


def _bad_paths(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """flag value -> (kind of option, the message after '<flag> <value>: ')."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    return {
        str(tmp_path): ("file", f"is a folder; name a file, e.g. {tmp_path / 'result.json'}"),
        "/missing/dir/x.json": ("file", "/missing/dir does not exist; create the folder or pass another path"),
        str(a_file / "x.json"): ("file", f"{a_file} is not a folder; create the folder or pass another path"),
        "/proc/x": ("dir", "cannot write in /proc (No such file or directory); pass a path in a folder you can "
                           "write to"),
        str(a_file / "plots"): ("dir", f"{a_file} is a file, not a folder; pass a folder path"),
    }


def _commands(config: Path) -> list[tuple[list[str], str, str]]:
    """(argv before the flag, flag, kind of path it takes)."""
    return [(["sim", "run", str(config)], "--json", "file"), (["sim", "run", str(config)], "--plot", "dir"),
            (["sim", "sweep", str(config), "--param", "seed=1,2"], "--json", "file"),
            (["reproduce", "fitgpp", "--quick"], "--json", "file"),
            (["reproduce", "fitgpp", "--quick"], "--plot", "dir")]


def test_every_output_option_refuses_a_bad_path_in_one_line_before_any_work(config: Path, tmp_path: Path) -> None:
    checked = 0
    for argv, flag, kind in _commands(config):
        for value, (path_kind, message) in _bad_paths(tmp_path).items():
            if path_kind != kind:
                continue
            result = CliRunner().invoke(cli, [*argv, flag, value])
            assert result.exit_code == 1, (argv, flag, value, result.output)
            assert result.output == f"Error: {flag} {value}: {message}\n", (argv, flag)
            checked += 1
    assert checked == 3 * 3 + 2 * 2


def test_the_default_result_path_of_sim_run_is_checked_too(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(config.parent)
    config.with_suffix(".result.json").mkdir()
    result = CliRunner().invoke(cli, ["sim", "run", str(config)])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: default --json {config.with_suffix('.result.json')}: is a folder")


def test_good_paths_pass_and_leave_nothing_behind(tmp_path: Path) -> None:
    assert checked_output_file(tmp_path / "r.json", "--json") == tmp_path / "r.json"
    assert checked_output_dir(tmp_path / "new" / "plots", "--plot") == tmp_path / "new" / "plots"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(click.ClickException):
        checked_output_file("/sys/x.json", "--json")


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """An install without the `plot` extra, as `checked_plot_dir` sees it."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))


_NO_MPL = "plots need matplotlib, which is not installed: pip install 'slurmx-hpc[plot]' (or leave out --plot)"


def test_reproduce_plot_without_matplotlib_says_so_before_any_work(config: Path, tmp_path: Path,
                                                                   no_matplotlib: None) -> None:
    result = CliRunner().invoke(cli, ["reproduce", "fitgpp", "--quick", "--plot", str(tmp_path / "plots")])
    assert result.exit_code == 1 and result.output == f"Error: --plot {tmp_path / 'plots'}: {_NO_MPL}\n"
    assert not (tmp_path / "plots").exists()


def test_sim_run_plot_without_matplotlib_says_so_before_any_work(config: Path, tmp_path: Path,
                                                                 no_matplotlib: None) -> None:
    result = CliRunner().invoke(cli, ["sim", "run", str(config), "--plot", str(tmp_path / "plots")])
    assert result.exit_code == 1 and result.output == f"Error: --plot {tmp_path / 'plots'}: {_NO_MPL}\n"
