"""Files a user can plant where the daemon reads (a group folder, the spool): read without following links, without
blocking, size-capped and owner-checked (`slurmx.core.userfiles`); and the profiling stage of slurmxd, fed such
plants, finishes its cycle for every group (the planted one keeps its declared estimates)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from slurmx.core.actions import Start
from slurmx.core.userfiles import MAX_READ_BYTES, UntrustedFile, read_user_file, read_user_text
from slurmx.daemon.store import Store
from slurmx.profile.readings import read_spool_json, sample_wall_seconds
from tests.unit.test_profile_daemon import ProfilingSlurm, daemon, group_with_samples

OTHER_UID = 4242
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a file owned by another uid needs root to chown")


def reads_within(seconds: float, call: object) -> object:
    """Run `call` in a thread; fail if it is still blocked after `seconds` (a plain open() of a FIFO never returns)."""
    result: list[object] = []

    def target() -> None:
        try:
            result.append(call())  # type: ignore[operator]
        except Exception as exc:
            result.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the read blocked"
    return result[0]


@pytest.mark.parametrize("plant", ["fifo", "dev-zero-link", "sparse-10G", "folder", "link-to-own-file"])
def test_a_planted_file_is_refused_at_once_and_never_read_whole(tmp_path: Path, plant: str) -> None:
    path = tmp_path / "progress-7.json"
    if plant == "fifo":
        os.mkfifo(path)
    elif plant == "dev-zero-link":
        path.symlink_to("/dev/zero")
    elif plant == "sparse-10G":
        with path.open("wb") as f:
            f.truncate(10 << 30)
    elif plant == "folder":
        path.mkdir()
    else:
        (tmp_path / "real.json").write_text("{}")
        path.symlink_to(tmp_path / "real.json")
    outcome = reads_within(5, lambda: read_user_file(path))
    assert isinstance(outcome, UntrustedFile)
    expected = {"fifo": "not a regular file", "dev-zero-link": "a symlink", "sparse-10G": "over the",
                "folder": "not a regular file", "link-to-own-file": "a symlink"}[plant]
    assert str(outcome).startswith(f"{path}: ") and expected in str(outcome)
    assert reads_within(5, lambda: read_spool_json(path)) is None


def test_an_ordinary_file_is_read_and_the_cap_is_exact(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(b"x" * MAX_READ_BYTES)
    assert len(read_user_file(path)) == MAX_READ_BYTES
    path.write_bytes(b"x" * (MAX_READ_BYTES + 1))
    with pytest.raises(UntrustedFile, match="over the 1048576-byte cap"):
        read_user_file(path)
    path.write_bytes(b'{"step": 3, "name": "\xff"}')
    assert read_user_text(path) == '{"step": 3, "name": "\ufffd"}'


@needs_root
def test_owner_and_folder_owner_are_checked(tmp_path: Path) -> None:
    folder = tmp_path / "g"
    folder.mkdir(mode=0o700)
    (folder / "p.json").write_text('{"step": 1}')
    me = os.geteuid()
    assert read_spool_json(folder / "p.json", me) == {"step": 1}
    os.chown(folder / "p.json", OTHER_UID, OTHER_UID)
    with pytest.raises(UntrustedFile, match=f"owned by uid {OTHER_UID}, not {me}"):
        read_user_file(folder / "p.json", owner=me)
    os.chown(folder / "p.json", me, me)
    folder.chmod(0o777)
    with pytest.raises(UntrustedFile, match="writable by others"):
        read_user_file(folder / "p.json", owner=me, folder_owner=me)


def test_deeply_nested_or_broken_json_is_no_reading(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text("[" * 200_000)
    assert read_spool_json(path) is None
    path.write_text('{"time": 1e999, "step": 5}')
    (tmp_path / "profile-7.json").write_text('{"steps": 5, "times": [0, 1], "at_steps": [1, 5]}')
    (tmp_path / "profile-start-7").write_text("-1e999")
    os.replace(path, tmp_path / "progress-7.json")
    assert sample_wall_seconds(tmp_path, 7) is None


@pytest.mark.parametrize("plant", ["fifo", "dev-zero-link", "sparse-10G"])
def test_the_profiling_stage_finishes_its_cycle_with_a_planted_sample_file(tmp_path: Path, plant: str) -> None:
    fake = ProfilingSlurm(group_with_samples(tmp_path))  # train-abc123: cpu 11 and gpu 12, samples 501-504
    store = Store(":memory:")
    clock = [1000.0]
    d = daemon(tmp_path, fake, store, clock)
    d.cycle()
    fake.finish_sample(501, tmp_path, "train-abc123", report=False)  # no timing in its comment: the spool is read
    path = tmp_path / "train-abc123" / "profile-501.json"
    path.unlink()
    if plant == "fifo":
        os.mkfifo(path)
    elif plant == "dev-zero-link":
        path.symlink_to("/dev/zero")
    else:
        with path.open("wb") as f:
            f.truncate(10 << 30)
    clock[0] += 5
    report = reads_within(30, d.cycle)
    assert not isinstance(report, BaseException), report
    row = store.samples()["train-abc123.cpu.0"]
    assert (row.state, row.seconds) == ("done", 10.0)  # Slurm's whole seconds: the planted file is no reading
    assert report.plan.of_type(Start) == ()  # type: ignore[attr-defined]
