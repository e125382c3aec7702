"""The executor trusts only its caller: `Job.result()`, `exception()`, `stdout()` and `stderr()` read (and unpickle)
only from a group folder and files owned by the calling user (euid) and writable by no one else.

Real files, real uids: the tests run as root, make the files as alice (2001) or bob (2002) with chown, and read in a
forked child that has really become alice (setresuid), so the euid the code sees is hers. Bob's pickle, if ever
loaded, makes a marker folder as whoever loaded it: every refusal also checks that it never ran.
"""

from __future__ import annotations

import itertools
import os
import pickle
import shutil
import stat
import subprocess
import tempfile
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmx.core.config import SiteConfig
from slurmx.executor.job import Job
from slurmx.executor.payload import OUTCOME, NotYours, OutcomeError, read_outcome, read_own_output
from slurmx.slurm.adapter import CliSlurm
from slurmx.slurm.transport import CommandResult

ALICE, BOB = 2001, 2002
GID = "grp-1a2b3c"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="files of other uids need root to chown, and setuid")


class Runs:
    """Unpickled, makes the folder `path`: proof that a pickle was loaded, and as whom (the folder's owner)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return os.mkdir, (self.path,)


def as_user(uid: int, call: Callable[[], Any]) -> tuple[str, Any]:
    """Run `call` in a child process whose real, effective and saved uid and gid are `uid`: ("ok", value) or
    ("error", "ExceptionType: message")."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become the user for good, run, report, leave without pytest's clean-up
        code = 0
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            try:
                answer: tuple[str, Any] = ("ok", call())
            except Exception as exc:
                answer = ("error", f"{type(exc).__name__}: {exc}")
            with os.fdopen(write_end, "wb") as out:
                out.write(pickle.dumps(answer))
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as got:
        data = got.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and data, "the child failed"
    answer = pickle.loads(data)
    assert isinstance(answer, tuple)
    return answer


@dataclass
class Spool:
    root: Path  # root-owned, 1777, as the site keeps it
    marks: Path  # where a loaded pickle leaves its marker (anyone may write)

    def folder(self, owner: int, mode: int = 0o700, name: str = GID) -> Path:
        path = self.root / name
        path.mkdir()
        path.chmod(mode)
        os.chown(path, owner, owner)
        return path

    def file(self, path: Path, data: bytes, owner: int, mode: int = 0o600) -> Path:
        path.write_bytes(data)
        path.chmod(mode)
        os.chown(path, owner, owner)
        return path

    def planted(self, name: str = "ran") -> bytes:
        """An outcome whose value, when unpickled, makes the marker `name`."""
        data: bytes = cloudpickle.dumps({"ok": True, "value": Runs(str(self.marks / name)), "variant": "cpu",
                                         "job_id": "11"})
        return data

    def ran(self) -> list[str]:
        return sorted(p.name for p in self.marks.iterdir())


@pytest.fixture
def spool() -> Iterator[Spool]:
    """Under /tmp, not pytest's tmp_path: alice must be able to walk to it (pytest's base folder is root's 0700)."""
    base = Path(tempfile.mkdtemp(prefix="slurmx-trust-", dir="/tmp"))
    try:
        base.chmod(0o755)
        root, marks = base / "spool", base / "marks"
        root.mkdir()
        root.chmod(0o1777)
        marks.mkdir()
        marks.chmod(0o777)
        yield Spool(root, marks)
    finally:
        shutil.rmtree(base)


def site(root: Path) -> SiteConfig:
    return SiteConfig.model_validate({"cluster": {"name": "t"},
                                      "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "1G"}},
                                      "submit": {"spool_dir": str(root)}})


class NoSlurm:
    """An adapter without a transport (the caller is this process) for a Job whose every answer must come from its
    folder: asking Slurm is a test failure."""

    def __getattr__(self, name: str) -> Any:
        if name == "transport":
            raise AttributeError(name)
        raise AssertionError(f"Slurm was asked ({name}); the answer is in the group folder")


@dataclass(frozen=True)
class RunAs:
    """A transport whose commands run as another local user, as `docker exec -u alice` or SSH as alice do."""

    uid: int

    def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
        done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=timeout, check=False,
                              user=self.uid, group=self.uid, extra_groups=[])
        return CommandResult(tuple(argv), done.returncode, done.stdout, done.stderr)

    def describe(self) -> str:
        return f"run as uid {self.uid}"


def job(spool: Spool) -> Job:
    return Job(GID, site(spool.root), NoSlurm(), (("cpu", 11),))


# ---------------------------------------------------------------------------------------------- examples


def test_bobs_folder_under_alices_group_id_is_refused_and_his_pickle_never_runs(spool: Spool) -> None:
    folder = spool.folder(BOB, 0o755)
    spool.file(folder / OUTCOME, spool.planted(), BOB, 0o644)
    for call in (lambda: job(spool).result(timeout=1), lambda: job(spool).exception(timeout=1),
                 lambda: job(spool).done()):
        assert as_user(ALICE, call) == ("error", f"NotYours: {folder} is owned by uid {BOB}, not you ({ALICE}): "
                                                 "not reading its result")
    assert spool.ran() == []


def test_bobs_output_is_refused_not_shown_as_alices(spool: Spool) -> None:
    folder = spool.folder(BOB, 0o755)
    spool.file(folder / "fn-11.out", b"bob says: run this\n", BOB, 0o644)
    answer = as_user(ALICE, lambda: read_own_output(folder / "fn-11.out", 1 << 20))
    assert answer == ("error", f"NotYours: {folder} is owned by uid {BOB}, not you ({ALICE}): not reading its output")


def test_bobs_file_in_alices_folder_is_refused(spool: Spool) -> None:
    folder = spool.folder(ALICE)
    spool.file(folder / OUTCOME, spool.planted(), BOB, 0o644)
    spool.file(folder / "fn-11.err", b"bob's lines\n", BOB, 0o644)
    assert as_user(ALICE, lambda: job(spool).result(timeout=1)) == (
        "error", f"NotYours: {folder / OUTCOME} is owned by uid {BOB}, not you ({ALICE}): not reading its result")
    assert as_user(ALICE, lambda: read_own_output(folder / "fn-11.err", 1 << 20)) == (
        "error", f"NotYours: {folder / 'fn-11.err'} is owned by uid {BOB}, not you ({ALICE}): not reading its output")
    assert spool.ran() == []


def test_a_group_writable_outcome_in_alices_folder_is_refused(spool: Spool) -> None:
    folder = spool.folder(ALICE)
    spool.file(folder / OUTCOME, spool.planted(), ALICE, 0o660)
    assert as_user(ALICE, lambda: job(spool).result(timeout=1)) == (
        "error", f"NotYours: {folder / OUTCOME} is writable by others (mode 660): not reading its result")
    assert spool.ran() == []


def test_alices_own_outcome_and_output_are_read(spool: Spool) -> None:
    folder = spool.folder(ALICE)
    spool.file(folder / OUTCOME, cloudpickle.dumps({"ok": True, "value": 5, "variant": "cpu", "job_id": "11"}),
               ALICE)
    spool.file(folder / "fn-11.out", b"adding 2 and 3\n", ALICE)
    assert as_user(ALICE, lambda: job(spool).result(timeout=1)) == ("ok", 5)
    assert as_user(ALICE, lambda: (job(spool).stdout(), job(spool).stderr())) == ("ok", ("adding 2 and 3\n", None))


def test_a_caller_reaching_slurm_as_alice_reads_alices_folders_and_refuses_bobs(spool: Spool) -> None:
    """This process (root here) submits through a transport that runs as alice: her folders are the caller's,
    whoever this process is; bob's are not, root's own are not either."""
    alice = spool.folder(ALICE)
    spool.file(alice / OUTCOME, cloudpickle.dumps({"ok": True, "value": 5, "job_id": ""}), ALICE)
    via_alice = CliSlurm(RunAs(ALICE))
    assert Job(GID, site(spool.root), via_alice).result(timeout=1) == 5
    bobs = spool.folder(BOB, 0o755, name="grp-bob")
    spool.file(bobs / OUTCOME, spool.planted(), BOB, 0o644)
    roots = spool.folder(0, 0o700, name="grp-root")
    spool.file(roots / OUTCOME, spool.planted(), 0, 0o600)
    for folder, owner in ((bobs, BOB), (roots, 0)):
        with pytest.raises(NotYours) as info:
            Job(folder.name, site(spool.root), via_alice).result(timeout=1)
        assert str(info.value) == f"{folder} is owned by uid {owner}, not you ({ALICE}): not reading its result"
    assert spool.ran() == []


def test_a_transport_that_cannot_say_who_it_runs_as_reads_nothing(spool: Spool) -> None:
    spool.file(spool.folder(ALICE) / OUTCOME, spool.planted(), ALICE)

    class Mute(RunAs):
        def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
            return CommandResult(tuple(argv), 1, "", "no such user")

    with pytest.raises(NotYours, match=r"^cannot tell which user run as uid 2001 runs as \(`id -u`: no such user\)"):
        Job(GID, site(spool.root), CliSlurm(Mute(ALICE))).result(timeout=1)
    assert spool.ran() == []


def test_an_outcome_not_written_yet_is_none_and_a_missing_folder_too(spool: Spool) -> None:
    folder = spool.folder(ALICE)
    assert as_user(ALICE, lambda: (read_outcome(folder, 1 << 20), read_outcome(spool.root / "gone", 1 << 20))) \
        == ("ok", (None, None))


def test_a_result_over_the_cap_says_how_to_raise_it(spool: Spool) -> None:
    folder = spool.folder(ALICE)
    spool.file(folder / OUTCOME, cloudpickle.dumps({"ok": True, "value": "x" * 5000}), ALICE)
    kind, text = as_user(ALICE, lambda: read_outcome(folder, 1000))
    assert kind == "error" and text.startswith(f"OutcomeError: {folder / OUTCOME}: ") and "1000-byte cap" in text
    assert "max_result_bytes" in text and "\n" not in text


def test_a_long_output_comes_back_as_its_last_bytes(spool: Spool) -> None:
    folder = spool.folder(ALICE)
    spool.file(folder / "fn-11.out", b"a" * 100 + b"the end\n", ALICE)
    assert as_user(ALICE, lambda: read_own_output(folder / "fn-11.out", 8)) == ("ok", "the end\n")


def test_a_record_bob_planted_in_a_shared_executor_folder_is_not_used(spool: Spool) -> None:
    """`Job.attach(folder=)`: a record that is not alice's alone is set aside (Slurm is asked instead)."""
    jobs = spool.folder(BOB, 0o1777, name="jobs")
    spool.file(jobs / f"{GID}.json", b'{"variants": [["cpu", 999]], "max_result_bytes": 1}', BOB, 0o644)

    class Asked(NoSlurm):
        def jobs(self, *_: Any, **__: Any) -> list[Any]:
            raise LookupError("asked Slurm")

    def attach() -> Any:
        import warnings

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                Job.attach(GID, site(spool.root), adapter=Asked(), folder=jobs)
            except LookupError as exc:
                return str(exc), [str(w.message) for w in seen]
        return "attached from the record", []

    assert as_user(ALICE, attach) == ("ok", ("asked Slurm", [
        f"{jobs} is owned by uid {BOB}, not you ({ALICE}): not using this record, asking Slurm"]))


# ---------------------------------------------------------------------------------------------- the class


KINDS = ("regular", "symlink", "fifo", "folder")
EXAMPLES = itertools.count()  # one folder per example: hypothesis may try the same values twice


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(folder_owner=st.sampled_from([ALICE, BOB, 0]), folder_others=st.integers(0, 0o77),
       file_owner=st.sampled_from([ALICE, BOB, 0]), file_others=st.integers(0, 0o77), kind=st.sampled_from(KINDS),
       sticky=st.booleans())
def test_an_outcome_is_unpickled_only_when_folder_and_file_are_the_callers_alone(
        spool: Spool, folder_owner: int, folder_others: int, file_owner: int, file_others: int, kind: str,
        sticky: bool) -> None:
    name = f"g{next(EXAMPLES)}"
    folder = spool.folder(folder_owner, 0o700 | folder_others | (stat.S_ISVTX if sticky else 0), name=name)
    path = folder / OUTCOME
    marker = f"ran-{name}"
    if kind == "regular":
        spool.file(path, spool.planted(marker), file_owner, 0o600 | file_others)
    else:  # what a link, a FIFO or a folder points at or holds is alice's own, well-formed outcome
        elsewhere = spool.file(spool.root / f"own-{name}", spool.planted(marker), ALICE)
        if kind == "symlink":
            path.symlink_to(elsewhere)
            os.chown(path, file_owner, file_owner, follow_symlinks=False)
        else:
            os.mkfifo(path) if kind == "fifo" else path.mkdir()
            path.chmod(0o600 | file_others)
            os.chown(path, file_owner, file_owner)
    trusted = (folder_owner == ALICE and not folder_others & 0o22 and kind == "regular" and file_owner == ALICE
               and not file_others & 0o22)
    kind_read, answer = as_user(ALICE, lambda: read_outcome(folder, 1 << 20))
    if trusted:
        assert kind_read == "ok" and answer["ok"] is True and spool.ran() == [marker]
    else:
        assert kind_read == "error" and answer.startswith("NotYours: ") and "\n" not in answer, answer
        assert answer.endswith(": not reading its result") and (str(folder) in answer)
        assert spool.ran() == []
    shutil.rmtree(spool.marks / marker, ignore_errors=True)


def test_outcome_error_is_the_refusals_base_so_existing_handlers_catch_it() -> None:
    assert issubclass(NotYours, OutcomeError)
