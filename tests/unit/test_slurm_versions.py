"""Slurm versions: every release from 22.05 is read by the nearest known shape at or below it, a release between
or beyond the tested ones runs with one warning line, and one older than 22.05 is refused in one line."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from slurmx.slurm.errors import SlurmError
from slurmx.slurm.versions import SHAPES, TESTED, UnsupportedSlurm, shape_for, version_key
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
