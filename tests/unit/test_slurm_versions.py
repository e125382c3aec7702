"""Slurm versions: every release from 22.05 is read by the nearest known shape at or below it, a release between
or beyond the tested ones runs with one warning line, and one older than 22.05 is refused in one line."""

from __future__ import annotations

import importlib.machinery
import logging
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from slurmx.slurm.errors import SlurmError
from slurmx.slurm.versions import (
    DEFAULT,
    RELEASES,
    SHAPES,
    TESTED,
    UnsupportedSlurm,
    read_releases,
    shape_for,
    version_key,
)
from tests.unit.test_daemon import SITE, FakeSlurm, job
from tests.unit.test_slurm_adapter import adapter, argvs, ok, read

SINFO = ("sinfo", "--json")
SCONTROL = ("scontrol", "show", "nodes", "--json")


@pytest.mark.parametrize(("version", "shape", "nodes"), [
    ("22.05", "22.05", SINFO),
    ("23.02", "23.02", SCONTROL),
    ("23.11", "23.02", SCONTROL),
    ("24.11", "24.11", SCONTROL),
    ("25.05", "24.11", SCONTROL),
    ("26.05", "26.05", SCONTROL),
])
def test_a_known_or_in_between_release_is_read_by_the_nearest_shape_at_or_below(
        version: str, shape: str, nodes: tuple[str, ...]) -> None:
    found, warning = shape_for(version)
    assert (found.since, found.nodes_argv) == (shape, nodes)
    if version in TESTED:
        assert warning == ""
    else:  # read, not refused, but never recorded: one warning line
        assert warning.startswith(f"Slurm {version} lies between the releases slurmx is tested on (22.05, 24.11, "
                                  f"26.05); reading it as {shape}: ")
        assert "\n" not in warning


def test_a_release_newer_than_any_known_runs_as_the_newest_with_one_warning_line() -> None:
    found, warning = shape_for("27.05")
    assert found is SHAPES[-1]
    assert warning.startswith("Slurm 27.05 is newer than any release slurmx knows (newest 26.05, tested 22.05, "
                              "24.11, 26.05); reading it as 26.05")
    assert "\n" not in warning


@pytest.mark.parametrize("version", ["21.08", "20.11", "17.02"])
def test_a_release_older_than_22_05_is_refused_in_one_line(version: str) -> None:
    with pytest.raises(UnsupportedSlurm) as info:
        shape_for(version)
    assert isinstance(info.value, SlurmError)
    assert str(info.value) == (f"Slurm {version} is older than 22.05, the oldest release slurmx reads; upgrade "
                               "Slurm to 22.05 or newer")


def test_versions_compare_as_numbers() -> None:
    assert version_key("100.02") > version_key("26.05") > version_key("9.10")
    with pytest.raises(ValueError, match=r"not a Slurm major\.minor version"):
        version_key("24.11.5")


def test_every_tested_version_has_its_own_shape() -> None:
    assert all(shape_for(v)[0].since == v for v in TESTED)


@pytest.mark.parametrize(("text", "nodes"), [
    ("slurm 23.02.7\n", SCONTROL), ("slurm 23.11.10\n", SCONTROL), ("slurm 25.05.1\n", SCONTROL),
    ("slurm 27.05.0\n", SCONTROL), ("slurm-wlm 22.05.8\n", SINFO),
])
def test_the_adapter_reads_nodes_with_its_versions_command(text: str, nodes: tuple[str, ...]) -> None:
    fixture = "22.05" if nodes == SINFO else "24.11"
    slurm, transport, _ = adapter({("scontrol", "--version"): ok(text), nodes: ok(read(fixture, "nodes.json"))})
    assert [n.name for n in slurm.nodes()] == ["a1", "c1", "c2", "g1", "g2"]
    assert argvs(transport) == [("scontrol", "--version"), nodes]


def test_the_adapter_refuses_slurm_21_08_before_reading_anything() -> None:
    slurm, transport, _ = adapter({("scontrol", "--version"): ok("slurm 21.08.8\n")})
    with pytest.raises(UnsupportedSlurm, match=r"^Slurm 21.08 is older than 22.05"):
        slurm.nodes()
    assert argvs(transport) == [("scontrol", "--version")]


class VersionedSlurm(FakeSlurm):
    def __init__(self, version: str) -> None:
        super().__init__([job(1, "a")])
        self.release_text = version

    def version(self) -> str:
        return self.release_text


def _run_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, version: str) -> None:
    from slurmx.daemon import main

    monkeypatch.setattr(main, "adapter_from_config", lambda transport: VersionedSlurm(version))
    site = SITE.model_copy(update={"daemon": SITE.daemon.model_copy(update={"state_dir": tmp_path})})
    main.run_daemon(site, once=True, dry_run=True)


def test_slurmxd_refuses_slurm_21_08_at_start_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(UnsupportedSlurm, match=r"^Slurm 21.08 is older than 22.05"):
        _run_once(monkeypatch, tmp_path, "21.08")


@pytest.mark.parametrize(("version", "warned"), [("27.05", "is newer than any release slurmx knows"),
                                                 ("25.05", "lies between the releases slurmx is tested on"),
                                                 ("23.11", "lies between the releases slurmx is tested on"),
                                                 ("24.11", None)])
def test_slurmxd_runs_on_an_untested_slurm_with_one_warning(version: str, warned: str | None,
                                                            monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    try:
        _run_once(monkeypatch, tmp_path, version)
    finally:
        logging.getLogger("slurmxd").handlers.clear()  # the handler writes to this test's captured stderr
    out, err = capsys.readouterr()
    if warned is None:
        assert err == ""
    else:
        assert len(err.splitlines()) == 1 and f"slurm: Slurm {version} {warned}" in err
    assert out.startswith("cycle 1:")  # and it ran its cycle


# --- The one table of tested releases (versions.txt), read by the package, the cluster script and the Makefile -------
REPO = Path(__file__).resolve().parents[2]


def _cluster_script() -> types.ModuleType:
    """docker-slurm/cluster as a module (standard library only: it reads the table without slurmx)."""
    loader = importlib.machinery.SourceFileLoader("slurmx_cluster_script", str(REPO / "docker-slurm" / "cluster"))
    module = types.ModuleType(loader.name)
    module.__file__ = loader.path
    sys.modules[loader.name] = module  # dataclasses look their module up while the class is built
    try:
        loader.exec_module(module)
    finally:
        del sys.modules[loader.name]
    return module


def test_the_table_names_each_role_once_and_every_release_has_its_recordings() -> None:
    assert TESTED and all((REPO / "tests" / "fixtures" / "slurm" / v / "squeue.json").is_file() for v in TESTED)
    assert [r.version for r in RELEASES if "default" in r.roles] == [DEFAULT]
    assert len([r for r in RELEASES if "long" in r.roles]) == 1
    assert {r for r in RELEASES if "long" in r.roles or "default" in r.roles} <= {r for r in RELEASES
                                                                                   if "test" in r.roles}
    assert TESTED[-1] == SHAPES[-1].since  # the newest known shape is one recorded
    assert len({r.port_base for r in RELEASES} | {r.native_port_base for r in RELEASES if r.native_port_base}) == \
        len(RELEASES) + len([r for r in RELEASES if r.native_port_base])  # clusters side by side: no shared ports


def test_the_cluster_script_reads_the_same_table() -> None:
    cluster = _cluster_script()
    assert [(v.slurm, v.suite, v.port_base) for v in cluster.VERSIONS.values()] == [
        (r.version, r.suite, r.port_base) for r in RELEASES]
    assert {v.slurm: v.port_base for v in cluster.NATIVE_VERSIONS.values()} == {
        r.version: r.native_port_base for r in RELEASES if r.native_port_base is not None}
    assert cluster.pick_version(None, native=False).slurm == DEFAULT


def _make_dry_run(target: str) -> str:
    """The VERSIONS a dry `make <target>` passes to tests/run-integration (nothing runs)."""
    out = subprocess.run(["make", "-n", "-C", str(REPO), target], capture_output=True, text=True, check=True).stdout
    [versions] = re.findall(r'VERSIONS="([^"]*)"', out)
    return versions


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_makefile_takes_its_versions_from_the_table() -> None:
    assert _make_dry_run("test-integration") == " ".join(r.version for r in RELEASES if "test" in r.roles)
    assert _make_dry_run("test-matrix") == " ".join(TESTED)


@pytest.mark.parametrize(("line", "problem"), [
    ("24.11 trixie 16900 -\n", "expected 'release suite ports native roles'"),
    ("24.11 trixie 16900 - test\n22.05 bookworm 16800 - test\n", "oldest first"),
    ("24.1x trixie 16900 - test\n", "not a Slurm major.minor version"),
])
def test_a_bad_table_line_is_named(line: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        read_releases("# header\n" + line)
