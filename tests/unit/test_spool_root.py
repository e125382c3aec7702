"""The spool root every user makes group folders in must be root's, sticky and not a link: `slurmx submit` (on the
host that makes the folder, through the transport), `slurmx doctor` and slurmxd at start-up refuse any other with
one line naming the path and the fix.

Real folders: a root-owned 1777 one passes; a symlink, a 0777 folder without the sticky bit, a folder owned by uid
2002, a file and a missing path are each refused. The transport runs the real `stat`; only Slurm's own answers
(sbatch, scontrol, sacct) are recorded output.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from slurmx.cli import app
from slurmx.cli.context import Context
from slurmx.core.config import SiteConfig
from slurmx.core.userfiles import local_spool_root_problem, spool_root_problem
from slurmx.daemon.errors import DaemonError
from slurmx.slurm.adapter import CliSlurm, RetryPolicy, spool_root_problem_via
from slurmx.slurm.transport import CommandResult, LocalTransport, ReplayTransport
from slurmx.submit.submitter import SubmitError, submit_group
from tests.unit.test_slurm_adapter import ok, read
from tests.unit.test_submitter import site, spec

BOB = 2002
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a root-owned folder and one of uid 2002 need root")
BAD = ("symlink", "not-sticky", "bobs", "file", "missing")


def make_root(base: Path, how: str) -> tuple[Path, str]:
    """A spool root made `how`, and the one line expected for it ('' when it is fine)."""
    path = base / f"spool-{how}"
    shown = shlex.quote(str(path))
    fix = f"chown root:root {shown} && chmod 1777 {shown}"
    if how == "ok":
        path.mkdir()
        path.chmod(0o1777)
        return path, ""
    if how == "symlink":
        real = base / "real-spool"
        real.mkdir()
        real.chmod(0o1777)
        path.symlink_to(real)
        return path, (f"spool root {path} is a symlink: set submit.spool_dir to the folder itself, then "
                      "chown root:root <that folder> && chmod 1777 <that folder>")
    if how == "not-sticky":
        path.mkdir()
        path.chmod(0o777)
        return path, f"spool root {path} is not sticky (mode 777): {fix}"
    if how == "bobs":
        path.mkdir()
        path.chmod(0o1777)
        os.chown(path, BOB, BOB)
        return path, f"spool root {path} is owned by uid {BOB}, not root: {fix}"
    if how == "file":
        path.write_text("")
        return path, f"spool root {path} is not a folder: remove it, then mkdir {shown} && {fix}"
    return path, f"spool root {path} does not exist: mkdir -p {shown} && {fix}"


def with_spool(root: Path) -> SiteConfig:
    base = site()
    return base.model_copy(update={"submit": base.submit.model_copy(update={"spool_dir": str(root)})})


# ---------------------------------------------------------------------------------------------- the rule


@given(uid=st.integers(0, 70000), mode=st.integers(0, 0o177777))
def test_a_spool_root_is_safe_only_as_a_sticky_folder_of_roots(uid: int, mode: int) -> None:
    problem = spool_root_problem("/s", uid, mode)
    safe = stat.S_ISDIR(mode) and uid == 0 and bool(mode & stat.S_ISVTX)
    assert (problem == "") == safe
    assert "\n" not in problem and (safe or (problem.startswith("spool root /s ") and "chmod 1777" in problem))


@needs_root
@pytest.mark.parametrize("how", ["ok", *BAD])
def test_each_spool_root_is_judged_alike_here_and_through_the_transport(tmp_path: Path, how: str) -> None:
    root, expected = make_root(tmp_path, how)
    assert local_spool_root_problem(str(root)) == expected
    assert spool_root_problem_via(LocalTransport(), str(root)) == expected  # the real `stat` on the submit host


# ---------------------------------------------------------------------------------------------- slurmx submit


class SubmitHost(ReplayTransport):
    """The host that makes group folders: `stat`, `mkdir` and the file writes run for real; Slurm is recorded."""

    def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
        if argv[0] in ("stat", "mkdir", "sh"):
            self.calls.append((tuple(argv), stdin))
            return LocalTransport().run(argv, stdin, timeout)
        return super().run(argv, stdin, timeout)


def submitting(answers: int = 3) -> tuple[CliSlurm, SubmitHost]:
    transport = SubmitHost({("sbatch",): [ok(f"{100 + i}\n") for i in range(answers)]})
    return CliSlurm(transport, RetryPolicy(retries=0)), transport


@needs_root
@pytest.mark.parametrize("how", BAD)
def test_submit_refuses_an_unsafe_spool_root_in_one_line_and_submits_nothing(tmp_path: Path, how: str) -> None:
    root, expected = make_root(tmp_path, how)
    adapter, transport = submitting()
    with pytest.raises(SubmitError) as info:
        submit_group(spec(), with_spool(root), adapter, mode="race", source="job.yaml")
    assert str(info.value) == f"{expected}; nothing was submitted"
    assert [argv[0] for argv, _ in transport.calls] == ["stat"]  # no folder made, no sbatch
    assert not (root.is_dir() and any(Path(root).iterdir()))


@needs_root
def test_submit_makes_the_folder_under_a_safe_spool_root_and_looks_once(tmp_path: Path) -> None:
    root, _ = make_root(tmp_path, "ok")
    adapter, transport = submitting(6)
    first = submit_group(spec(), with_spool(root), adapter, mode="race", source="job.yaml")
    second = submit_group(spec(), with_spool(root), adapter, mode="race", source="job.yaml")
    for group in (first, second):
        assert stat.S_IMODE(os.stat(group.spool_dir).st_mode) == 0o700
    assert [argv[0] for argv, _ in transport.calls].count("stat") == 1  # once per adapter, not per group


# ---------------------------------------------------------------------------------------------- slurmx doctor


def recorded_cluster(version: str = "24.11") -> ReplayTransport:
    return SubmitHost({("scontrol", "--version"): ok(read(version, "version.txt")),
                       ("scontrol", "show", "partition"): ok(read(version, "partitions.txt")),
                       ("scontrol", "show", "nodes"): ok(read(version, "nodes.json")),
                       ("sacct",): ok(read(version, "sacct.json")),
                       ("squeue",): ok(read(version, "squeue.json")),
                       ("scontrol", "show", "config"): ok("JobSubmitPlugins = lua\n")})


@needs_root
@pytest.mark.parametrize("how", ["ok", *BAD])
def test_doctor_checks_the_spool_root_where_submit_makes_folders(tmp_path: Path, how: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    root, expected = make_root(tmp_path, how)
    adapter = CliSlurm(recorded_cluster(), RetryPolicy(retries=0))
    monkeypatch.setattr(Context, "adapter", lambda self: adapter)
    monkeypatch.setattr(Context, "site", lambda self: with_spool(root))
    result = CliRunner().invoke(app.cli, ["doctor"])
    shown = " ".join(result.output.split())  # rich wraps a long line at the console's width
    if how == "ok":
        assert f"✓ spool root {root}: root's, sticky, not a link ✓" in shown
        assert result.exit_code == 0, result.output
        assert shown.count("fields slurmx reads are there") == 3  # the conformance probe: squeue, nodes, sacct
    else:
        assert f"✗ {expected} ✓" in shown  # the whole line, then the next check's
        assert result.exit_code != 0 and "1 problem(s)" in result.output


# ---------------------------------------------------------------------------------------------- slurmxd


@needs_root
@pytest.mark.parametrize("how", ["ok", *BAD])
def test_slurmxd_refuses_to_start_on_an_unsafe_spool_root(tmp_path: Path, how: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmx.daemon import main
    from tests.unit.test_slurm_versions import VersionedSlurm

    root, expected = make_root(tmp_path, how)
    monkeypatch.setattr(main, "adapter_from_config", lambda transport: VersionedSlurm("24.11"))
    base = with_spool(root)
    site = base.model_copy(update={"daemon": base.daemon.model_copy(update={"state_dir": tmp_path / "state"})})
    if how == "ok":
        main.run_daemon(site, once=True, dry_run=False)  # starts and runs its one cycle
        return
    with pytest.raises(DaemonError) as info:
        main.run_daemon(site, once=True, dry_run=False)
    assert str(info.value) == expected
    assert not (tmp_path / "state").exists()  # refused before the lock and the store
