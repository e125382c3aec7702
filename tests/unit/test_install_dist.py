"""`make dist`'s build, offline: the sdist of a copy of the tree, then the wheel from that sdist (what `build` does),
hold the package data, both commands and the lean dependencies under the name slurmx-hpc."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_sdist_builds_a_wheel_with_the_package_data_and_the_lean_dependencies(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "slurmx", tree / "slurmx", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    # --no-isolation: the build requirements come from the dev extra, so this runs without the package index
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path / "dist"),
                           str(tree)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    sdist = tmp_path / "dist" / f"slurmx_hpc-{VERSION}.tar.gz"
    wheel = tmp_path / "dist" / f"slurmx_hpc-{VERSION}-py3-none-any.whl"
    with tarfile.open(sdist) as tar:
        assert f"slurmx_hpc-{VERSION}/slurmx/hooks/hook.sh" in tar.getnames()
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        info = f"slurmx_hpc-{VERSION}.dist-info"
        metadata = whl.read(f"{info}/METADATA").decode()
        entry_points = whl.read(f"{info}/entry_points.txt").decode()
    packaged = {p.relative_to(ROOT).as_posix() for p in (ROOT / "slurmx" / "templates").glob("*.j2")}
    assert packaged and packaged <= names
    assert {"slurmx/hooks/hook.sh", "slurmx/py.typed", "slurmx/cli/__init__.py", "slurmx/cli/app.py",
            "slurmx/daemon/sdnotify.py"} <= names
    assert "slurmx = slurmx.cli:main" in entry_points and "slurmxd = slurmx.cli:daemon_main" in entry_points
    assert "\nName: slurmx-hpc\n" in metadata
    base = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert base and not any(dep in line for line in base for dep in ("numpy", "scipy", "prometheus", "matplotlib"))
    assert 'Requires-Dist: numpy>=1.26; extra == "daemon"' in metadata
