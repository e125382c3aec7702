"""slurmx.hooks, the Python side of the job hooks: real signals sent to real child processes.

Each child is a small Python program run with PYTHONPATH at the repository and a clean slurmx/Slurm environment;
the test sends it the grace signal with os.kill, as the daemon does (through Slurm) to a batch shell.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slurmx import hooks
from slurmx.hooks import _env

REPO = Path(__file__).resolve().parents[2]
HOOKS_DIR = REPO / "slurmx" / "hooks"


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without any SLURM_*/SLURMX_* variable, the repository first on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMX_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


class Child:
    """A child process whose stdout can be awaited line by line without blocking forever."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.out = b""

    def expect(self, text: str, timeout: float = 10.0) -> None:
        """Wait until a whole line starting with `text` appeared on stdout."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + timeout
        line = re.compile(b"(^|\n)" + re.escape(text.encode()) + b"[^\n]*\n")
        while not line.search(self.out):
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {text!r} on stdout within {timeout} s; got {self.out!r}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    raise AssertionError(f"stdout closed before {text!r}; got {self.out!r}, stderr {err}")
                self.out += chunk

    def signal(self, sig: int = signal.SIGUSR2) -> float:
        """Send `sig`; returns the epoch time it was sent."""
        sent = time.time()
        os.kill(self.proc.pid, sig)
        return sent

    def finish(self, timeout: float = 10.0) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, (self.out + out).decode(), err.decode()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Any]:
    """spawn(code, **env): run `code` (dedented) in a child Python with a clean environment, cwd tmp_path."""
    children: list[Child] = []

    def run(code: str, *, python: str = sys.executable, **env: str) -> Child:
        child = Child([python, "-c", textwrap.dedent(code)], clean_env(**env), tmp_path)
        children.append(child)
        return child

    yield run
    for child in children:
        child.kill()


CALLBACK_CHILD = """
    import json, os, sys, time
    from slurmx import hooks

    def save(deadline):
        print("callback", json.dumps({"deadline": deadline, "at": time.time(),
                                      "env": os.environ["SLURMX_GRACE_DEADLINE"],
                                      "preempted": hooks.preempted(), "grace_deadline": hooks.grace_deadline()}),
              flush=True)
        time.sleep(0.5)  # the test signals again meanwhile: the callback must not run twice
        print("saved", flush=True)

    hooks.on_preempt(save)
    sys.stdout.write("ready\\n"); sys.stdout.flush()  # one write: a handler may run inside print()
    for _ in range(3000):
        time.sleep(0.01)
    print("loop ended without a signal", flush=True)
"""


def callback_records(out: str) -> list[dict[str, Any]]:
    return [json.loads(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith("callback ")]


def test_signal_runs_the_callback_once_then_exits_with_the_requeue_code(spawn: Any) -> None:
    child = spawn(CALLBACK_CHILD, SLURMX_GRACE_S="30")
    child.expect("ready")
    sent = child.signal()
    child.expect("callback")
    child.signal()  # repeats while the callback runs are ignored
    child.signal()
    rc, out, err = child.finish()
    assert rc == 99, err
    records = callback_records(out)
    assert len(records) == 1
    assert "saved" in out and "loop ended" not in out
    record = records[0]
    assert record["deadline"] == pytest.approx(sent + 30, abs=2)
    assert float(record["env"]) == pytest.approx(record["deadline"], abs=0.001)
    assert record["preempted"] is True
    assert record["grace_deadline"] == record["deadline"]
    assert record["at"] - sent < 2


def test_requeue_code_and_signal_come_from_the_environment(spawn: Any) -> None:
    child = spawn(CALLBACK_CHILD, SLURMX_GRACE_SIGNAL="SIGUSR1", SLURMX_REQUEUE_EXIT_CODE="42")
    child.expect("ready")
    sent = child.signal(signal.SIGUSR1)
    rc, out, err = child.finish()
    assert rc == 42, err
    [record] = callback_records(out)
    assert record["deadline"] == pytest.approx(sent + _env.DEFAULT_GRACE_S, abs=2)


def test_the_intent_file_sets_the_deadline(spawn: Any, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    deadline = time.time() + 777.25
    (spool / "preempt-4242").write_text(f"preempt grace=120 deadline={deadline:.3f} reason=node drain soon\n")
    child = spawn(CALLBACK_CHILD, SLURMX_SPOOL_DIR=str(spool), SLURM_JOB_ID="4242")
    child.expect("ready")
    child.signal()
    rc, out, err = child.finish()
    assert rc == 99, err
    [record] = callback_records(out)
    assert record["deadline"] == pytest.approx(deadline, abs=0.001)


def test_wait_mode_stays_alive_until_slurm_kills_the_job(spawn: Any) -> None:
    child = spawn(CALLBACK_CHILD, SLURMX_ON_PREEMPT="wait")
    child.expect("ready")
    child.signal()
    child.expect("saved")
    child.signal()
    time.sleep(1.5)
    assert child.proc.poll() is None, "wait mode must keep the job alive until it is requeued"
    child.signal(signal.SIGTERM)  # what Slurm's requeue does
    rc, out, _ = child.finish()
    assert rc == -signal.SIGTERM
    assert len(callback_records(out)) == 1
    assert "loop ended" not in out


def test_a_failing_callback_still_leaves_for_requeue(spawn: Any) -> None:
    child = spawn("""
        import sys, time
        from slurmx import hooks

        def save(deadline):
            raise RuntimeError("disk full")

        hooks.on_preempt(save)
        sys.stdout.write("ready\\n"); sys.stdout.flush()  # one write: a handler may run inside print()
        time.sleep(30)
    """)
    child.expect("ready")
    child.signal()
    rc, _, err = child.finish()
    assert rc == 99
    assert "RuntimeError: disk full" in err


def test_polling_style_without_a_callback(spawn: Any) -> None:
    child = spawn("""
        import sys, time
        from slurmx import hooks

        hooks.on_preempt()
        sys.stdout.write("ready\\n"); sys.stdout.flush()  # one write: a handler may run inside print()
        steps = 0
        while not hooks.preempted():
            time.sleep(0.01)
            steps += 1
        print("preempted", hooks.grace_deadline() - time.time(), flush=True)
        hooks.requeue()
    """, SLURMX_GRACE_S="60")
    child.expect("ready")
    child.signal()
    rc, out, err = child.finish()
    assert rc == 99, err
    remaining = float(out.split("preempted ", 1)[1].split()[0])
    assert 55 < remaining <= 60


def test_preemptible_handles_the_signal_inside_the_block(spawn: Any) -> None:
    child = spawn("""
        import sys, time
        from slurmx import hooks

        with hooks.preemptible(lambda deadline: print("callback", flush=True)):
            sys.stdout.write("ready\\n"); sys.stdout.flush()  # one write: a handler may run inside print()
            time.sleep(30)
    """)
    child.expect("ready")
    child.signal()
    rc, out, err = child.finish()
    assert rc == 99, err
    assert out.count("callback") == 1


def test_preemptible_restores_the_previous_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURMX_GRACE_SIGNAL", raising=False)

    def mine(signum: int, frame: object) -> None:
        pass

    before = signal.signal(signal.SIGUSR2, mine)
    try:
        with hooks.preemptible(lambda deadline: None):
            assert signal.getsignal(signal.SIGUSR2) is not mine
        assert signal.getsignal(signal.SIGUSR2) is mine
    finally:
        signal.signal(signal.SIGUSR2, before)


@pytest.mark.parametrize(("name", "value"), [
    ("SLURMX_GRACE_SIGNAL", "NOPE"),
    ("SLURMX_ON_PREEMPT", "maybe"),
    ("SLURMX_REQUEUE_EXIT_CODE", "ninety-nine"),
    ("SLURMX_GRACE_S", "2m"),
])
def test_bad_settings_fail_when_the_handler_is_installed(monkeypatch: pytest.MonkeyPatch, name: str,
                                                         value: str) -> None:
    monkeypatch.setenv(name, value)
    before = signal.getsignal(signal.SIGUSR2)
    with pytest.raises(ValueError, match=name):
        hooks.on_preempt(lambda deadline: None)
    assert signal.getsignal(signal.SIGUSR2) is before


@pytest.mark.parametrize(("raw", "expected"), [
    ("USR2", signal.SIGUSR2), ("SIGUSR2", signal.SIGUSR2), ("usr1", signal.SIGUSR1), ("12", signal.Signals(12)),
    ("", signal.SIGUSR2),
])
def test_grace_signal_names(monkeypatch: pytest.MonkeyPatch, raw: str, expected: signal.Signals) -> None:
    monkeypatch.setenv("SLURMX_GRACE_SIGNAL", raw)
    assert _env.grace_signal() == expected


@pytest.mark.parametrize(("line", "expected"), [
    ("preempt grace=120 deadline=1700000000.5 reason=higher priority group", 1700000000.5),
    ("preempt deadline=1700000000 grace=5", 1700000000.0),
    ("preempt grace=30 reason=no deadline given", 1000.0 + 30),
    ("preempt grace=10 reason=drain, deadline=5 is only text", 1000.0 + 10),  # the reason is not searched
    ("preempt reason=no fields", None),
    ("garbage", None),
    ("", None),
])
def test_parse_intent(line: str, expected: float | None) -> None:
    assert _env.parse_intent(line, 1000.0) == expected


def test_checkpoint_dir_and_restart_count_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLURMX_CHECKPOINT_DIR", raising=False)
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    assert hooks.checkpoint_dir() == tmp_path / "slurmx-checkpoint"
    assert (tmp_path / "slurmx-checkpoint").is_dir()
    assert hooks.restart_count() == 0
    assert hooks.is_resumed() is False

    monkeypatch.setenv("SLURMX_CHECKPOINT_DIR", "state/run1")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "3")
    path = hooks.checkpoint_dir()
    assert path == tmp_path / "state" / "run1" and path.is_dir() and path.is_absolute()
    assert hooks.restart_count() == 3
    assert hooks.is_resumed() is True
    monkeypatch.setenv("SLURM_RESTART_COUNT", "not-a-number")
    assert hooks.restart_count() == 0


PROGRESS_CHILD = """
    import importlib, json, time
    from slurmx.hooks import progress
    p = importlib.import_module("slurmx.hooks.progress")  # the module; slurmx.hooks.progress is the function

    writes = []
    real = p.write_json_atomic
    def counting(path, data):
        writes.append(data["step"])
        real(path, data)
    p.write_json_atomic = counting

    step = 0
    end = time.monotonic() + 1.2
    while time.monotonic() < end:
        step += 1
        progress(step, 1000000)
    print(json.dumps({"writes": writes, "last": step}), flush=True)
"""


def test_progress_file_content_and_rate_limit(spawn: Any, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    child = spawn(PROGRESS_CHILD, SLURMX_SPOOL_DIR=str(spool), SLURM_JOB_ID="77", SLURMX_GROUP="sweep",
                  SLURMX_VARIANT="a100x4", SLURM_RESTART_COUNT="2", SLURMX_PROGRESS_INTERVAL="0.5")
    rc, out, err = child.finish()
    assert rc == 0, err
    result = json.loads(out)
    # Written on the first call, then at most once per 0.5 s during 1.2 s: 3 writes (a slow machine may skip one).
    assert 2 <= len(result["writes"]) <= 3, result["writes"]
    assert result["writes"][0] == 1
    data = hooks.read_progress(spool / "progress-77.json")
    assert data is not None
    assert set(data) >= {"job_id", "group", "variant", "step", "total", "time", "rate", "restart_count"}
    assert data["job_id"] == "77" and data["group"] == "sweep" and data["variant"] == "a100x4"
    assert data["step"] == result["writes"][-1] and data["total"] == 1000000
    assert data["restart_count"] == 2
    assert data["time"] == pytest.approx(time.time(), abs=5)
    assert data["rate"] > 0 and data["start_step"] == 1
    assert [p.name for p in spool.iterdir()] == ["progress-77.json"]  # no temp file left behind


def test_progress_without_a_spool_dir_writes_nothing(spawn: Any, tmp_path: Path) -> None:
    child = spawn("""
        import importlib, math
        p = importlib.import_module("slurmx.hooks.progress")
        for step in range(1000):
            p.progress(step)
        print(p._next_slow == math.inf, flush=True)
    """)
    rc, out, err = child.finish()
    assert rc == 0, err
    assert out.strip() == "True"  # the fast path returns for good
    assert list(tmp_path.iterdir()) == []


def test_progress_fast_path_is_under_a_microsecond(spawn: Any, tmp_path: Path) -> None:
    """The budget (bench/hooks_progress.py measures it properly): best of 3 x 1,000,000 calls, spool set."""
    child = spawn("""
        import time
        from slurmx.hooks import progress
        progress(0)
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for step in range(1_000_000):
                progress(step)
            best = min(best, time.perf_counter() - start)
        print(best / 1_000_000 * 1e9, flush=True)
    """, SLURMX_SPOOL_DIR=str(tmp_path), SLURM_JOB_ID="1")
    rc, out, err = child.finish(timeout=60)
    assert rc == 0, err
    assert float(out) < 1000


def test_progress_is_atomic_for_a_concurrent_reader(spawn: Any, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    writer = spawn("""
        from slurmx.hooks import progress
        step = 0
        while True:
            step += 1
            progress(step, 10**9)
    """, SLURMX_SPOOL_DIR=str(spool), SLURM_JOB_ID="5", SLURMX_PROGRESS_INTERVAL="0",
                   SLURMX_VARIANT="x" * 3000)  # a bigger file: more room for a torn read
    path = spool / "progress-5.json"
    end = time.monotonic() + 10
    while not path.exists():
        assert time.monotonic() < end and writer.proc.poll() is None, "the writer never wrote"
        time.sleep(0.01)
    steps = set()
    for _ in range(10_000):
        data = hooks.read_progress(path)  # raises on a torn file
        assert data is not None
        steps.add(data["step"])
    assert writer.proc.poll() is None, "the writer must still be writing while the reader reads"
    assert len(steps) > 10, "the reader should have seen many different writes"


def test_profile_mode_writes_step_times_and_ends_the_run(spawn: Any, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    child = spawn("""
        import time
        from slurmx.hooks import progress
        for step in range(1, 1000):
            time.sleep(0.01)
            progress(step, 999)
        print("not stopped", flush=True)
    """, SLURMX_SPOOL_DIR=str(spool), SLURM_JOB_ID="9", SLURMX_PROFILE_STEPS="20", SLURMX_VARIANT="v100")
    rc, out, err = child.finish()
    assert rc == 0, err
    assert "not stopped" not in out
    profile = hooks.read_progress(spool / "profile-9.json")
    assert profile is not None
    assert profile["steps"] == 20 and profile["variant"] == "v100"
    assert profile["at_steps"] == list(range(1, 21))
    times = profile["times"]
    assert len(times) == 20 and times[0] == 0
    assert times == sorted(set(times))  # strictly increasing
    assert 0.009 < profile["seconds_per_step"] < 0.1
    progress = hooks.read_progress(spool / "progress-9.json")
    assert progress is not None and progress["step"] == 20


def test_cli_writes_progress_without_rate_limit(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    env = clean_env(SLURMX_SPOOL_DIR=str(spool), SLURM_JOB_ID="31", SLURMX_GROUP="g")
    cli = [sys.executable, "-m", "slurmx.hooks", "progress"]
    first = subprocess.run([*cli, "10", "100"], env=env, capture_output=True, text=True, timeout=30)
    assert first.returncode == 0, first.stderr
    data = hooks.read_progress(spool / "progress-31.json")
    assert data is not None
    assert (data["step"], data["total"], data["group"], data["rate"]) == (10, 100, "g", None)
    time.sleep(0.05)
    second = subprocess.run([*cli, "20"], env=env, capture_output=True, text=True, timeout=30)
    assert second.returncode == 0, second.stderr
    data = hooks.read_progress(spool / "progress-31.json")
    assert data is not None
    assert (data["step"], data["total"], data["start_step"]) == (20, None, 10)
    assert data["rate"] > 0  # measured from the first call, carried over in the file

    for bad in (["progress"], ["progress", "x"], ["status", "1"]):
        result = subprocess.run([sys.executable, "-m", "slurmx.hooks", *bad], env=env, capture_output=True,
                                text=True, timeout=30)
        assert result.returncode == 2 and "usage" in result.stderr
    nowhere = subprocess.run([*cli, "1"], env=clean_env(), capture_output=True, text=True, timeout=30,
                             cwd=tmp_path)
    assert nowhere.returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spool"]


def hook_imports() -> Iterator[tuple[Path, str]]:
    for path in sorted(HOOKS_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield path, alias.name
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                assert node.module is not None
                yield path, node.module


def test_hooks_import_only_the_standard_library() -> None:
    found = list(hook_imports())
    assert found, "no imports found: wrong folder?"
    outside = [(path.name, name) for path, name in found
               if name.split(".")[0] not in sys.stdlib_module_names
               and not (name == "slurmx.hooks" or name.startswith("slurmx.hooks."))]
    assert outside == []


def test_a_copy_of_the_package_works_without_site_packages(tmp_path: Path) -> None:
    """How the submitter deploys it: slurmx/hooks next to an empty slurmx/__init__.py, python -S (no numpy)."""
    deploy = tmp_path / "deploy" / "slurmx"
    shutil.copytree(HOOKS_DIR, deploy / "hooks", ignore=shutil.ignore_patterns("__pycache__"))
    (deploy / "__init__.py").write_text("")
    code = "import sys; from slurmx import hooks; hooks.progress(1); print(sorted(hooks.__all__) == hooks.__all__)"
    env = clean_env(PYTHONPATH=str(deploy.parent), SLURMX_SPOOL_DIR=str(tmp_path), SLURM_JOB_ID="1")
    result = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True,
                            cwd=tmp_path, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
    assert (tmp_path / "progress-1.json").exists()
    assert (deploy / "hooks" / "hook.sh").exists()


def python39() -> str | None:
    candidates = [shutil.which("python3.9"), *glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9"))]
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 9)"],
                                        capture_output=True, timeout=30).returncode == 0:
            return candidate
    return None


def test_works_on_python_3_9(spawn: Any, tmp_path: Path) -> None:
    python = python39()
    if python is None:
        pytest.skip("no Python 3.9 interpreter found")
    child = spawn(CALLBACK_CHILD, python=python, SLURMX_SPOOL_DIR=str(tmp_path), SLURM_JOB_ID="39")
    child.expect("ready")
    child.signal()
    rc, out, err = child.finish()
    assert rc == 99, err
    assert len(callback_records(out)) == 1
    cli = subprocess.run([python, "-m", "slurmx.hooks", "progress", "3", "4"], capture_output=True, text=True,
                         env=clean_env(SLURMX_SPOOL_DIR=str(tmp_path), SLURM_JOB_ID="39"), timeout=30)
    assert cli.returncode == 0, cli.stderr
    data = hooks.read_progress(tmp_path / "progress-39.json")
    assert data is not None and data["step"] == 3
