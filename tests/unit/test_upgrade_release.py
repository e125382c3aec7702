"""The release this one upgrades from is kept as its wheel, and the version slurmx records is the one it ships."""

from __future__ import annotations

import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.version import Version

import slurmx

REPO = Path(__file__).resolve().parents[2]
RELEASES = REPO / "tests" / "fixtures" / "releases"


def test_the_recorded_version_is_the_distributions() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert slurmx.__version__ == declared


def test_the_previous_release_is_a_wheel_older_than_this_one() -> None:
    wheels = sorted(RELEASES.glob("slurmx_hpc-*-py3-none-any.whl"))
    assert wheels, f"no released wheel in {RELEASES}"
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            metadata = Parser().parsestr(archive.read(name).decode())
            assert "slurmx/daemon/store.py" in archive.namelist()
        assert metadata["Name"] == "slurmx-hpc"
        assert wheel.name == f"slurmx_hpc-{metadata['Version']}-py3-none-any.whl"
        assert Version(metadata["Version"]) < Version(slurmx.__version__)
