"""The checkpoint folder's ancestors are checked, not only its last component (issue 31, item 7).

A rendered batch script, run by real bash on a real tree: every folder from the group folder (or /) down to the
checkpoint folder must be no symlink, and no one but root or the job's user may write it, a root-owned sticky
folder (like /tmp or the spool root) excepted. Otherwise the job refuses before any work, with one line naming
the folder and the fix: another user who can rename an ancestor could swap the checkpoint for his own, and the job
would resume from it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmx.core.config import SiteConfig, parse_site_config
from slurmx.submit.render import render_variant
from slurmx.submit.spec import parse_spec

GID = "train-0a1b2c"
BOB = 2002
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="folders owned by another uid need root to chown")


def site(spool: Path) -> SiteConfig:
    return parse_site_config({"cluster": {"name": "t"},
                              "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"}},
                              "submit": {"spool_dir": str(spool)}})


def run_job(spool: Path, marks: Path, checkpoint: str) -> subprocess.CompletedProcess[str]:
    payload = f'echo "$SLURMX_CHECKPOINT_DIR" > {marks}/payload'
    script = render_variant(parse_spec({"name": "train", "command": payload, "checkpoint_dir": checkpoint}),
                            site(spool), "cpu", GID, "pick").script
    env = {"PATH": os.environ["PATH"], "HOME": str(spool), "SLURM_JOB_ID": "77"}
    return subprocess.run([shutil.which("bash") or "bash", "-c", script], capture_output=True, text=True,
                          timeout=60, check=False, env=env, cwd=spool)


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A root-owned sticky spool root with the user's group folder in it, a mark folder, and a scratch root."""
    spool, marks, scratch = tmp_path / "spool", tmp_path / "marks", tmp_path / "scratch"
    spool.mkdir()
    spool.chmod(0o1777)
    (spool / GID).mkdir(mode=0o700)
    marks.mkdir()
    scratch.mkdir(mode=0o755)
    return spool, marks, scratch


def refusal(line: str) -> str:
    return (f"slurmx: job 77 refuses to run: {line}; nothing ran. Fix or remove it, then run the job again "
            "(scontrol requeue 77, or slurmx submit)")


def test_a_private_tree_runs_and_the_path_is_given_without_dots(tree: tuple[Path, Path, Path]) -> None:
    spool, marks, scratch = tree
    result = run_job(spool, marks, f"{scratch}/./a/../a/b/ckpt")
    assert result.returncode == 0, result.stderr
    assert (marks / "payload").read_text() == f"{scratch}/a/b/ckpt\n"
    for folder in (scratch / "a", scratch / "a" / "b"):  # made by the job, checked after mkdir
        assert folder.is_dir() and not folder.stat().st_mode & 0o022


def test_inside_the_group_folder_the_default_checkpoint_runs(tree: tuple[Path, Path, Path]) -> None:
    spool, marks, _ = tree
    result = run_job(spool, marks, f"{spool}/{GID}/deep/er/checkpoint")
    assert result.returncode == 0, result.stderr


def test_a_root_owned_sticky_ancestor_is_fine(tree: tuple[Path, Path, Path]) -> None:
    spool, marks, scratch = tree
    (scratch / "shared").mkdir()
    (scratch / "shared").chmod(0o1777)  # like /tmp
    result = run_job(spool, marks, f"{scratch}/shared/mine/ckpt")
    assert result.returncode == 0, result.stderr


def test_an_intermediate_symlink_is_refused_naming_it(tree: tuple[Path, Path, Path]) -> None:
    spool, marks, scratch = tree
    (scratch / "real").mkdir()
    (scratch / "real" / "ckpt").mkdir(mode=0o700)
    (scratch / "link").symlink_to(scratch / "real")
    result = run_job(spool, marks, f"{scratch}/link/ckpt")
    assert result.returncode == 1
    assert result.stderr.strip() == refusal(
        f"{scratch}/link, on the way to the checkpoint folder {scratch}/link/ckpt, is a symlink: give "
        "checkpoint_dir without links (readlink -f)")
    assert list(marks.iterdir()) == []


def test_a_symlink_inside_the_group_folder_is_refused(tree: tuple[Path, Path, Path]) -> None:
    spool, marks, scratch = tree
    (scratch / "ckpt").mkdir(mode=0o700)
    (spool / GID / "sub").symlink_to(scratch)
    result = run_job(spool, marks, f"{spool}/{GID}/sub/ckpt")
    assert result.returncode == 1
    assert f"{spool}/{GID}/sub, on the way to the checkpoint folder" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and list(marks.iterdir()) == []


@needs_root
def test_a_sticky_folder_is_no_excuse_unless_it_is_roots(tree: tuple[Path, Path, Path]) -> None:
    spool, marks, scratch = tree
    team = scratch / "team"
    team.mkdir()
    team.chmod(0o1777)
    os.chown(team, BOB, BOB)  # bob may remove or rename anything in it
    (team / "ckpt").mkdir(mode=0o700)
    result = run_job(spool, marks, f"{team}/ckpt")
    assert result.returncode == 1
    assert result.stderr.strip() == refusal(
        f"{team}, on the way to the checkpoint folder {team}/ckpt, is owned by uid {BOB}, neither root nor you "
        "(uid 0): choose a checkpoint_dir under folders of your own")
    assert list(marks.iterdir()) == []


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757], ids=lambda m: f"{m:o}")
def test_a_group_or_world_writable_ancestor_of_ours_is_refused(tree: tuple[Path, Path, Path], mode: int) -> None:
    spool, marks, scratch = tree
    team = scratch / "team"
    team.mkdir()
    team.chmod(mode)
    result = run_job(spool, marks, f"{team}/ckpt")
    assert result.returncode == 1
    assert result.stderr.strip() == refusal(
        f"{team}, on the way to the checkpoint folder {team}/ckpt, is writable by other users (mode {mode:o}): "
        f"chmod go-w {team}, or choose a checkpoint_dir under folders only you can write")
    assert not (team / "ckpt").exists()  # refused before anything was made under it
    assert list(marks.iterdir()) == []


@needs_root
def test_an_ancestor_of_another_user_is_refused(tree: tuple[Path, Path, Path]) -> None:
    spool, marks, scratch = tree
    home = scratch / "bob"
    home.mkdir(mode=0o755)
    os.chown(home, BOB, BOB)
    result = run_job(spool, marks, f"{home}/ckpt")
    assert result.returncode == 1
    assert f"{home}, on the way to the checkpoint folder {home}/ckpt, is owned by uid {BOB}" in result.stderr
    assert list(marks.iterdir()) == []


KINDS = st.sampled_from(["private", "group-writable", "world-writable", "sticky-root", "symlink"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chain=st.lists(KINDS, min_size=1, max_size=4))
def test_any_chain_of_ancestors_runs_exactly_when_every_one_is_safe(tmp_path: Path, chain: list[str]) -> None:
    """A chain of folders of random kinds above the checkpoint folder: the job runs if and only if none is a link
    or writable by others (root's sticky folders excepted), and a refusal names the first bad one."""
    base = Path(os.path.realpath(tmp_path)) / f"case-{os.urandom(4).hex()}"
    spool, marks, scratch = base / "spool", base / "marks", base / "scratch"
    for folder in (spool, marks, scratch):
        folder.mkdir(parents=True)
    spool.chmod(0o1777)
    (spool / GID).mkdir(mode=0o700)
    path, first_bad = scratch, None
    for i, kind in enumerate(chain):
        nxt = path / f"d{i}"
        if kind == "symlink":
            real = scratch / f"real{i}"
            real.mkdir()
            nxt.symlink_to(real)
        else:
            nxt.mkdir()
            nxt.chmod({"private": 0o755, "group-writable": 0o775, "world-writable": 0o777,
                       "sticky-root": 0o1777}[kind])
        if first_bad is None and kind in ("symlink", "group-writable", "world-writable"):
            first_bad = nxt
        if kind == "sticky-root" and os.getuid() != 0:
            first_bad = first_bad or nxt  # not root's: the sticky bit is no excuse
        path = nxt
    result = run_job(spool, marks, f"{path}/ckpt")
    if first_bad is None:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 1
        assert result.stderr.startswith(f"slurmx: job 77 refuses to run: {first_bad}, on the way to the checkpoint")
        assert len(result.stderr.strip().splitlines()) == 1


def test_names_with_newlines_and_spaces_are_split_on_slashes_only(tree: tuple[Path, Path, Path]) -> None:
    spool, marks, scratch = tree
    odd = scratch / "we\nird dir" / "*"
    result = run_job(spool, marks, f"{odd}/ckpt")
    assert result.returncode == 0, result.stderr
    assert (odd / "ckpt").is_dir()
    (scratch / "we\nird dir").chmod(0o777)
    result = run_job(spool, marks, f"{odd}/ckpt")
    assert result.returncode == 1
    assert f"{scratch}/we\nird dir, on the way to the checkpoint folder {odd}/ckpt, is writable" in result.stderr
