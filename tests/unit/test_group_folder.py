"""A rendered batch script, run by real bash, trusts only a group folder (and checkpoint folder) that is its
user's alone: another user's folder, a symlink or a world-writable folder makes it refuse with one line before any
work, so nothing planted there (a `sitecustomize.py`, a checkpoint, a hook) is loaded, and it can be run again."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from slurmx.core.config import SiteConfig, parse_site_config
from slurmx.submit.render import render_variant
from slurmx.submit.spec import parse_spec

GID = "train-0a1b2c"
OTHER_UID = 4242  # "bob": any uid that is not the one running the test
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a folder owned by another uid needs root to chown")


def site(spool: Path) -> SiteConfig:
    return parse_site_config({"cluster": {"name": "t"},
                              "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"}},
                              "submit": {"spool_dir": str(spool)}})


def run_job(spool: Path, marks: Path, **fields: object) -> subprocess.CompletedProcess[str]:
    """The cpu variant in pick mode, its payload importing Python (so a planted sitecustomize would run)."""
    payload = f"python3 -c 'print(1)'; echo ran > {marks}/payload"
    script = render_variant(parse_spec({"name": "train", "command": payload, **fields}), site(spool), "cpu", GID,
                            "pick").script
    env = {"PATH": os.environ["PATH"], "HOME": str(spool), "SLURM_JOB_ID": "77"}
    return subprocess.run([shutil.which("bash") or "bash", "-c", script], capture_output=True, text=True,
                          timeout=60, check=False, env=env, cwd=spool)


def plant(folder: Path, marks: Path) -> None:
    """What bob leaves in a group folder he made: code on PYTHONPATH, a hook, a checkpoint."""
    (folder / "pylib").mkdir(parents=True)
    (folder / "pylib" / "sitecustomize.py").write_text(f"open({str(marks / 'planted')!r}, 'w').write('bob')\n")
    (folder / "hook.sh").write_text(f"echo bob > {marks}/planted-hook\n")
    (folder / "checkpoint").mkdir()
    (folder / "checkpoint" / "state").write_text("bob's state\n")


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    spool, marks = tmp_path / "spool", tmp_path / "marks"
    spool.mkdir(mode=0o777)
    spool.chmod(0o1777)
    marks.mkdir()
    return spool, marks


def test_the_users_own_folder_runs_the_payload(dirs: tuple[Path, Path]) -> None:
    spool, marks = dirs
    (spool / GID).mkdir(mode=0o700)  # as `slurmx submit` leaves it
    result = run_job(spool, marks)
    assert result.returncode == 0, result.stderr
    assert (marks / "payload").read_text() == "ran\n"
    assert (spool / GID / "checkpoint").stat().st_mode & 0o077 == 0


@needs_root
def test_a_folder_another_user_made_is_refused_and_nothing_of_his_runs(dirs: tuple[Path, Path]) -> None:
    spool, marks = dirs
    folder = spool / GID
    folder.mkdir(mode=0o700)
    plant(folder, marks)
    for path in (folder, *folder.rglob("*")):
        os.chown(path, OTHER_UID, OTHER_UID)
    result = run_job(spool, marks)
    assert result.returncode == 1
    assert result.stderr.strip() == (f"slurmx: job 77 refuses to run: {folder} is owned by uid {OTHER_UID}, not by "
                                     f"you (uid {os.geteuid()}); nothing ran. Fix or remove it, then run the job "
                                     "again (scontrol requeue 77, or slurmx submit)")
    assert sorted(p.name for p in marks.iterdir()) == []  # neither the payload nor any of bob's files ran
    # Removed, the job runs again and makes a folder of its own.
    shutil.rmtree(folder)
    assert run_job(spool, marks).returncode == 0
    assert sorted(p.name for p in marks.iterdir()) == ["payload"]


@pytest.mark.parametrize("how", ["world-writable", "symlink", "file"])
def test_a_folder_others_can_change_is_refused(dirs: tuple[Path, Path], how: str) -> None:
    spool, marks = dirs
    folder = spool / GID
    if how == "world-writable":
        folder.mkdir()
        folder.chmod(0o777)
        plant(folder, marks)
        expected = f"{folder} is writable by other users (mode 777)"
    elif how == "symlink":
        target = spool / "elsewhere"
        target.mkdir(mode=0o700)
        plant(target, marks)
        folder.symlink_to(target)
        expected = f"{folder} is not a folder (a symlink, a file or missing)"
    else:
        folder.write_text("")
        expected = f"{folder} is not a folder (a symlink, a file or missing)"
    result = run_job(spool, marks)
    assert result.returncode == 1
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert list(marks.iterdir()) == []


@needs_root
def test_a_checkpoint_folder_of_another_user_is_refused(dirs: tuple[Path, Path]) -> None:
    spool, marks = dirs
    (spool / GID).mkdir(mode=0o700)
    shared = spool / "team-checkpoints"
    shared.mkdir(mode=0o700)
    os.chown(shared, OTHER_UID, OTHER_UID)
    result = run_job(spool, marks, checkpoint_dir=str(shared))
    assert result.returncode == 1
    assert f"{shared} is owned by uid {OTHER_UID}" in result.stderr
    assert list(marks.iterdir()) == []
