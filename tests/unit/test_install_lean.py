"""The lean client install (`pip install slurmx-hpc`, no extras) runs what a login node needs; the rest says which
extra to install in one line.

A subprocess sees only the standard library, slurmx and what its base dependencies pull in: every other installed
distribution's modules (numpy, scipy, prometheus_client, matplotlib, the test tools ...) are made unimportable by
a meta-path blocker, which is what a fresh venv with the wheel alone would hold.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SITE = ROOT / "site-config" / "test-cluster.yaml"

_BLOCKER = """\
import os, sys
_BLOCKED = frozenset(os.environ["SLURMX_TEST_BLOCKED"].split(","))
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Block())
"""


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _base_closure() -> set[str]:
    """slurmx-hpc and every distribution its base dependencies need, transitively, without extras."""
    seen: set[str] = set()
    todo = [PYPROJECT["project"]["name"]]
    while todo:
        name = _canonical(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def _blocked_modules() -> set[str]:
    """Top-level modules of installed distributions outside the lean closure (slurmx itself stays)."""
    allowed = _base_closure()
    blocked = {module for module, dists in metadata.packages_distributions().items()
               if not any(_canonical(d) in allowed for d in dists)}
    return blocked - {"slurmx", "_distutils_hack", "pip", "setuptools", "pkg_resources"}


@pytest.fixture(scope="module")
def lean_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("lean")
    (folder / "sitecustomize.py").write_text(_BLOCKER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURMX_")}
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(ROOT)])
    env["SLURMX_TEST_BLOCKED"] = ",".join(sorted(_blocked_modules()))
    return env


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)


def _slurmx(env: dict[str, str], *args: str, prog: str = "main") -> subprocess.CompletedProcess[str]:
    return _run(env, "-c", f"import sys; from slurmx.cli import {prog}; sys.argv[0] = 'x'; {prog}()", *args)


def test_the_base_dependencies_leave_out_the_daemon_and_simulator_libraries() -> None:
    project = PYPROJECT["project"]
    assert project["name"] == "slurmx-hpc"
    base = {_canonical(Requirement(r).name) for r in project["dependencies"]}
    assert not base & {"numpy", "scipy", "prometheus-client", "matplotlib"}
    extras = project["optional-dependencies"]
    for extra, needs in {"sim": {"numpy", "scipy"}, "daemon": {"numpy", "scipy", "prometheus-client"}}.items():
        assert needs <= {_canonical(Requirement(r).name) for r in extras[extra]}, extra


def test_the_blocker_hides_what_a_lean_install_lacks(lean_env: dict[str, str]) -> None:
    assert {"numpy", "scipy", "prometheus_client", "matplotlib"} <= set(lean_env["SLURMX_TEST_BLOCKED"].split(","))
    probe = _run(lean_env, "-c", "import numpy")
    assert probe.returncode == 1 and "No module named 'numpy'" in probe.stderr


def test_help_submit_and_the_executor_need_no_extra(lean_env: dict[str, str]) -> None:
    helped = _slurmx(lean_env, "--help")
    assert helped.returncode == 0 and "submit" in helped.stdout, helped.stderr
    submitted = _slurmx(lean_env, "--site", str(SITE), "submit", "--dry-run", "examples/hello.yaml")
    assert submitted.returncode == 0, submitted.stderr
    assert "sbatch --job-name=hello@cpu" in submitted.stdout
    checked = _slurmx(lean_env, "config", "check", str(SITE))
    assert checked.returncode == 0 and ": ok" in checked.stdout, checked.stderr
    imported = _run(lean_env, "-c", "import slurmx.executor, slurmx.hooks; from slurmx import Executor; print('ok')")
    assert imported.returncode == 0 and imported.stdout == "ok\n", imported.stderr


@pytest.mark.parametrize("args", [["sim", "--help"], ["reproduce", "allox"], ["whatif", "--help"]])
def test_a_simulator_command_names_the_extra_in_one_line(lean_env: dict[str, str], args: list[str]) -> None:
    done = _slurmx(lean_env, *args)
    assert done.returncode == 1
    assert done.stderr == ("slurmx: this needs numpy, which this install of slurmx-hpc leaves out: "
                           "pip install 'slurmx-hpc[sim]' (or 'slurmx-hpc[all]')\n")


def test_slurmxd_names_the_daemon_extra_before_reaching_slurm(lean_env: dict[str, str]) -> None:
    done = _slurmx(lean_env, "--site", str(SITE), "--once", prog="daemon_main")
    assert done.returncode == 1
    assert re.fullmatch(r"slurmxd: this needs (numpy|scipy|prometheus_client), which this install of slurmx-hpc "
                        r"leaves out: pip install 'slurmx-hpc\[daemon\]' \(or 'slurmx-hpc\[all\]'\)\n", done.stderr)
    assert "docker" not in done.stderr


def test_explain_reads_the_daemon_store_without_the_daemon_extra(lean_env: dict[str, str], tmp_path: Path) -> None:
    """`slurmx status` and `explain` open slurmxd's store where it is readable: that must not import the daemon loop
    (its metrics need prometheus_client). No store here, so explain says where it looked, in one line."""
    site = tmp_path / "site.yaml"
    data = yaml.safe_load(SITE.read_text())
    data["daemon"]["state_dir"] = str(tmp_path / "state")
    site.write_text(yaml.safe_dump(data))
    done = _slurmx(lean_env, "--site", str(site), "explain", "g1")
    assert done.returncode == 1
    assert "prometheus_client" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert f"no slurmxd state store readable at {tmp_path / 'state' / 'slurmxd.sqlite'}" in done.stderr
