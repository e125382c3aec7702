"""The previous release, really run: 0.1.0's wheel (tests/fixtures/releases) in a venv of its own, against stores
this slurmx writes (downgrade: refused in one line, the store untouched) and writing stores this slurmx opens
(upgrade: migrated, nothing lost).

0.1.0's slurmxd is started through its own command line with its Slurm start-up checks turned off (`run_daemon(...,
check=False)`: there is no Slurm here, and those checks only read from Slurm); everything from its lock to its store
runs as shipped. tests/integration/test_upgrade_live.py runs it whole, on a real cluster.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from slurmx import __version__
from slurmx.daemon.store import MIGRATIONS, Store

REPO = Path(__file__).resolve().parents[2]
RELEASES = REPO / "tests" / "fixtures" / "releases"
PREVIOUS = "0.1.0"
# 0.1.0's `slurmxd` with its Slurm start-up checks off (the one seam; see the module docstring).
NO_SLURM_CHECKS = ("import slurmx.daemon.main as m; run = m.run_daemon; "
                   "m.run_daemon = lambda site, **kw: run(site, check=False, **kw); "
                   "from slurmx.cli import daemon_main; daemon_main()")


def release_venv(folder: Path, version: str = PREVIOUS) -> Path:
    """A venv in `folder` with the released wheel installed as a site installs it, and its dependencies taken from
    the running interpreter's (a path entry, so this checkout's own editable slurmx stays out of it). Returns the
    venv's python; its `bin/slurmxd` is the release's."""
    wheel = RELEASES / f"slurmx_hpc-{version}-py3-none-any.whl"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", "--disable-pip-version-check", str(wheel)], check=True, timeout=300)
    site_packages = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    ours = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    (Path(site_packages) / "deps-of-the-test-runner.pth").write_text("".join(f"{p}\n" for p in ours))
    return python


def release_env() -> dict[str, str]:
    """The environment to run a release in: nothing pointing at this checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return release_venv(tmp_path_factory.mktemp("release") / f"v{PREVIOUS}")


def _old(python: Path, code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env=release_env(), check=False)


def _site(folder: Path) -> Path:
    path = folder / "site.yaml"
    path.write_text(yaml.safe_dump({
        "cluster": {"name": "t"}, "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"}},
        "preemption": {"grace": 10}, "daemon": {"state_dir": str(folder / "state"), "start_timeout": 30},
        "submit": {"spool_dir": str(folder / "spool")}}))
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_venv_runs_the_released_code_not_this_checkout(previous: Path, tmp_path: Path) -> None:
    found = _old(previous, "import importlib.metadata as m, slurmx; from slurmx.daemon.store import MIGRATIONS; "
                 "print(m.version('slurmx-hpc'), slurmx.__file__, len(MIGRATIONS), hasattr(slurmx, '__version__'))",
                 cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    version, where, schema, recorded = found.stdout.split()
    assert (version, schema, recorded) == (PREVIOUS, "6", "False")
    assert Path(where).is_relative_to(previous.parent.parent) and not Path(where).is_relative_to(REPO)
    assert len(MIGRATIONS) > int(schema), "this slurmx must be a schema ahead of the release it refuses to"


def test_the_previous_slurmxd_refuses_a_store_this_one_wrote_in_one_line_and_leaves_it_untouched(
        previous: Path, tmp_path: Path) -> None:
    site = _site(tmp_path)
    store = Store(tmp_path / "state" / "slurmxd.sqlite")
    store.put_intent("preempt:7", "preempt", "g1", "signalled", {"deadline": 130.0}, now=100.0)
    store.audit([(100.0, 3, "g1", "preempt", "grace 30 s")])
    store.close()
    before = _digest(store.path)
    ran = _old(previous, NO_SLURM_CHECKS, "--site", str(site), "--once", cwd=tmp_path)
    assert ran.returncode == 1 and ran.stdout == ""
    assert ran.stderr == (f"slurmxd: {store.path}: schema version {len(MIGRATIONS)} is newer than this slurmx (6); "
                          "upgrade slurmx\n")
    assert _digest(store.path) == before
    # All it left is its pid in the lock file, taken before it opened the store (0.1.0's order).
    assert sorted(p.name for p in store.path.parent.iterdir()) == ["slurmxd.lock", "slurmxd.sqlite"]
    reopened = Store(store.path)
    assert [(i.key, i.step) for i in reopened.intents()] == [("preempt:7", "signalled")]


def test_the_previous_release_opens_its_own_schema(previous: Path, tmp_path: Path) -> None:
    """The control: what it refuses above is the schema number, not the file."""
    made = _old(previous, "import sys; from slurmx.daemon.store import Store; s = Store(sys.argv[1]); "
                "s.put_intent('start:g', 'start', 'g', 'releasing', {'job': 5}, now=1.0); print(s.version)",
                str(tmp_path / "old.sqlite"), cwd=tmp_path)
    assert (made.returncode, made.stdout) == (0, "6\n"), made.stderr


def test_a_store_the_previous_release_wrote_is_migrated_with_its_intents_and_facts(previous: Path,
                                                                                   tmp_path: Path) -> None:
    path = tmp_path / "state" / "slurmxd.sqlite"
    code = ("import sys; from slurmx.daemon.store import Store, GroupFact; s = Store(sys.argv[1]); "
            "s.put_intent('preempt:7', 'preempt', 'g1', 'signalled', {'deadline': 130.0}, now=100.0); "
            "s.remember_groups([GroupFact('g1', 1000, 7, frozenset({7, 8}), 80.0)], 90.0); "
            "s.count_preemption('g1', 100.0); s.audit([(100.0, 3, 'g1', 'preempt', 'grace 30 s')]); s.close()")
    made = _old(previous, code, str(path), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    store = Store(path)
    assert store.version == len(MIGRATIONS) and store.get_meta("migrated_by") == __version__
    assert [(i.key, i.step, dict(i.data), i.created) for i in store.intents()] == \
        [("preempt:7", "signalled", {"deadline": 130.0}, 100.0)]
    [fact] = store.group_facts()["g1"]
    assert (fact.job_ids, fact.submit_time, fact.preemptions, fact.last_requeue) == (frozenset({7, 8}), 80.0, 1, 100.0)
    assert [(e.event, e.detail) for e in store.history("g1")] == [("preempt", "grace 30 s")]
