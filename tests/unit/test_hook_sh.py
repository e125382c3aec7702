"""slurmx/hooks/hook.sh, the bash side of the job hooks: bash scripts that source it get real signals.

Each script runs under `set -euo pipefail` (as job scripts often do) in a session of its own, so that cleanup can
kill whatever it left behind.
"""

from __future__ import annotations

import contextlib
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

REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / "slurmx" / "hooks" / "hook.sh"
BASH = shutil.which("bash")

pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMX_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


class Script:
    """A bash script sourcing hook.sh, run in its own session; its stdout can be awaited line by line."""

    def __init__(self, path: Path, env: dict[str, str]) -> None:
        assert BASH is not None
        self.proc = subprocess.Popen([BASH, str(path)], env=env, cwd=path.parent, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        self.out = b""

    def expect(self, text: str, timeout: float = 10.0) -> None:
        """Wait until a whole line starting with `text` appeared on stdout."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        line = re.compile(b"(^|\n)" + re.escape(text.encode()) + b"[^\n]*\n")
        end = time.monotonic() + timeout
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
        sent = time.time()
        os.kill(self.proc.pid, sig)  # the batch shell only, as `scancel --batch --signal` does
        return sent

    def finish(self, timeout: float = 10.0) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, (self.out + out).decode(), err.decode()

    def cleanup(self) -> None:
        """Kill what the script left in its session (a payload, the trap's sleep) and close the pipes."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def bash(tmp_path: Path) -> Iterator[Any]:
    """bash(body, **env): a script `set -euo pipefail; source hook.sh; <body>` started in tmp_path."""
    scripts: list[Script] = []

    def run(body: str, **env: str) -> Script:
        path = tmp_path / f"job{len(scripts)}.sh"
        path.write_text(f"set -euo pipefail\nsource {HOOK}\n{textwrap.dedent(body)}")
        script = Script(path, clean_env(**env))
        scripts.append(script)
        return script

    yield run
    for script in scripts:
        script.cleanup()


def gone(pid: int, timeout: float = 5.0) -> bool:
    """True once `pid` no longer runs (absent, or a zombie waiting for init)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


CHECKPOINT_JOB = """
    slurmx_on_preempt bash -c 'echo "$SLURMX_GRACE_DEADLINE $(date +%s.%N)" > checkpoint.txt; echo checkpointed'
    echo ready
    slurmx_run bash -c 'echo $$ > payload.pid; exec sleep 30'
    echo "payload ended: $?"
"""


def test_checkpoint_runs_promptly_while_the_payload_sleeps(bash: Any, tmp_path: Path) -> None:
    script = bash(CHECKPOINT_JOB, SLURMX_GRACE_S="45")
    script.expect("ready")
    end = time.monotonic() + 10
    while not (tmp_path / "payload.pid").exists():  # signal once the payload really runs
        assert time.monotonic() < end
        time.sleep(0.02)
    sent = script.signal()
    rc, out, err = script.finish(timeout=10)
    finished = time.time()
    assert rc == 99, err
    assert finished - sent < 5, "the trap must not wait for the 30 s payload"
    deadline, ran_at = map(float, (tmp_path / "checkpoint.txt").read_text().split())
    assert ran_at - sent < 2
    assert deadline == pytest.approx(sent + 45, abs=2)
    assert out.count("checkpointed") == 1 and "payload ended" not in out
    assert gone(int((tmp_path / "payload.pid").read_text())), "the payload must not outlive the job"


def test_the_intent_file_deadline_and_a_custom_requeue_code(bash: Any, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "preempt-123").write_text("preempt grace=300 deadline=1900000000.5 reason=urgent group\n")
    script = bash(CHECKPOINT_JOB, SLURMX_SPOOL_DIR=str(spool), SLURM_JOB_ID="123", SLURMX_REQUEUE_EXIT_CODE="42",
                  SLURMX_GRACE_SIGNAL="SIGUSR1")
    script.expect("ready")
    time.sleep(0.2)
    script.signal(signal.SIGUSR1)
    rc, _, err = script.finish()
    assert rc == 42, err
    assert (tmp_path / "checkpoint.txt").read_text().split()[0] == "1900000000.5"


def test_repeated_signals_run_the_checkpoint_once(bash: Any, tmp_path: Path) -> None:
    script = bash("""
        slurmx_on_preempt bash -c 'echo checkpoint >> runs.txt; sleep 0.5'
        echo ready
        slurmx_run sleep 30
    """)
    script.expect("ready")
    time.sleep(0.2)
    for _ in range(3):
        script.signal()
        time.sleep(0.1)
    rc, _, err = script.finish()
    assert rc == 99, err
    assert (tmp_path / "runs.txt").read_text() == "checkpoint\n"


def test_wait_mode_sleeps_until_killed(bash: Any, tmp_path: Path) -> None:
    script = bash(CHECKPOINT_JOB, SLURMX_ON_PREEMPT="wait")
    script.expect("ready")
    time.sleep(0.2)
    script.signal()
    end = time.monotonic() + 5
    while not (tmp_path / "checkpoint.txt").exists():
        assert time.monotonic() < end, "no checkpoint"
        time.sleep(0.02)
    time.sleep(1.5)
    assert script.proc.poll() is None, "wait mode must keep the job until Slurm requeues it"
    script.signal(signal.SIGTERM)  # what Slurm's requeue does (to every process of the job)
    assert script.proc.wait(timeout=5) == -signal.SIGTERM
    os.killpg(script.proc.pid, signal.SIGKILL)  # the payload and the trap's sleep still hold stdout open
    _, out, _ = script.finish()
    assert out.count("checkpointed") == 1


def test_forwarded_signal_reaches_a_python_payload(bash: Any, tmp_path: Path) -> None:
    # The payload writes its line in one write: the shell handler writes to the same pipe at the same moment, and
    # print() of two arguments reached it as separate writes with the shell's line between them (a flaky run).
    script = bash("""
        slurmx_on_preempt echo "shell checkpoint"
        echo ready
        slurmx_run python3 -c '
        import sys, time
        from slurmx import hooks
        out = sys.stdout
        hooks.on_preempt(lambda deadline: (out.write(f"python checkpoint {round(deadline - time.time())}\\n"),
                                           out.flush()))
        sys.stdout.write("payload ready\\n"); sys.stdout.flush()
        time.sleep(30)
        '
    """, SLURMX_FORWARD_SIGNAL="1", SLURMX_GRACE_S="50")
    script.expect("payload ready")
    script.signal()
    rc, out, err = script.finish()
    assert rc == 99, err
    assert "shell checkpoint" in out
    assert re.search(r"^python checkpoint (49|50)$", out, re.MULTILINE), out


def test_without_a_registered_command_the_payload_handles_it_alone(bash: Any) -> None:
    script = bash("""
        echo ready
        rc=0
        slurmx_run python3 -c '
        import sys, time
        from slurmx import hooks
        hooks.on_preempt(lambda deadline: print("python checkpoint", flush=True))
        sys.stdout.write("payload ready\\n"); sys.stdout.flush()
        time.sleep(30)
        ' || rc=$?
        echo "payload exit $rc"
        exit "$rc"
    """, SLURMX_FORWARD_SIGNAL="1")
    script.expect("payload ready")
    script.signal()
    rc, out, err = script.finish()
    assert rc == 99, err
    assert "python checkpoint" in out and "payload exit 99" in out


def test_without_forwarding_the_payload_keeps_working(bash: Any) -> None:
    script = bash("""
        echo ready
        slurmx_run bash -c 'sleep 1; echo payload done; exit 3' || echo "payload exit $?"
    """)
    script.expect("ready")
    time.sleep(0.3)
    script.signal()  # nothing registered, not forwarded: the shell survives and the payload finishes
    rc, out, err = script.finish()
    assert rc == 0, err
    assert "payload done" in out and "payload exit 3" in out


def test_slurmx_run_returns_the_payload_exit_code_and_keeps_stdin(bash: Any) -> None:
    script = bash("""
        slurmx_run true
        slurmx_run tr a-z A-Z <<< "from stdin"
        rc=0; slurmx_run bash -c 'exit 7' || rc=$?
        echo "rc $rc"
        rc=0; slurmx_run no-such-command-here 2>/dev/null || rc=$?
        echo "rc $rc"
        rc=0; SLURMX_FORWARD_SIGNAL=1 slurmx_run bash -c 'exit 5' || rc=$?
        echo "rc $rc"
    """)
    rc, out, err = script.finish()
    assert rc == 0, err
    assert out.splitlines() == ["FROM STDIN", "rc 7", "rc 127", "rc 5"]


def test_bad_signal_name_is_an_error(bash: Any) -> None:
    script = bash("""
        rc=0; slurmx_on_preempt echo x || rc=$?
        echo "rc $rc"
    """, SLURMX_GRACE_SIGNAL="NOPE")
    rc, out, err = script.finish()
    assert rc == 0 and out.strip() == "rc 2"
    assert "SLURMX_GRACE_SIGNAL" in err


def read_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_slurmx_progress_writes_valid_json(bash: Any, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    script = bash("""
        slurmx_progress 10 100
        cp "$SLURMX_SPOOL_DIR/progress-55.json" first.json
        sleep 0.2
        slurmx_progress 30 100
        echo "usage $(slurmx_progress x 2>/dev/null; echo $?)"
    """, SLURMX_SPOOL_DIR=str(spool), SLURM_JOB_ID="55", SLURM_RESTART_COUNT="1",
                  SLURMX_GROUP='sweep "q"', SLURMX_VARIANT="a\\b\tc")
    rc, out, err = script.finish()
    assert rc == 0, err
    assert out.strip() == "usage 2"
    first = read_json(tmp_path / "first.json")
    assert first == {
        "job_id": "55", "group": 'sweep "q"', "variant": "a\\b\tc", "step": 10, "total": 100,
        "time": first["time"], "rate": None, "restart_count": 1, "start_time": first["time"], "start_step": 10,
    }
    assert first["time"] == pytest.approx(time.time(), abs=5)
    data = read_json(spool / "progress-55.json")
    assert data["step"] == 30 and data["start_step"] == 10 and data["start_time"] == first["time"]
    assert data["time"] - first["time"] >= 0.2
    assert data["rate"] == pytest.approx(20 / (data["time"] - first["time"]), rel=0.01)
    assert [p.name for p in spool.iterdir()] == ["progress-55.json"]  # the temp file was renamed


def test_slurmx_progress_without_epochrealtime_and_shared_with_the_python_cli(bash: Any, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    script = bash(f"""
        unset EPOCHREALTIME  # bash 4 has none: date +%s%6N is used then
        {sys.executable} -m slurmx.hooks progress 5
        sleep 0.1
        slurmx_progress 15
    """, SLURMX_SPOOL_DIR=str(spool), SLURM_JOB_ID="56")
    rc, _, err = script.finish()
    assert rc == 0, err
    data = read_json(spool / "progress-56.json")
    assert (data["step"], data["total"], data["start_step"], data["group"]) == (15, None, 5, None)
    assert data["rate"] > 0 and data["time"] > data["start_time"]


def test_slurmx_progress_without_a_spool_dir_is_a_no_op(bash: Any, tmp_path: Path) -> None:
    script = bash("""
        slurmx_progress 1 2
        echo "rc $?"
    """)
    rc, out, err = script.finish()
    assert (rc, out.strip(), err) == (0, "rc 0", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job0.sh"]


def test_checkpoint_dir_and_restart_count(bash: Any, tmp_path: Path) -> None:
    script = bash("""
        slurmx_checkpoint_dir
        SLURMX_CHECKPOINT_DIR=state/run1 slurmx_checkpoint_dir
        slurmx_restart_count
        SLURM_RESTART_COUNT=4 slurmx_restart_count
    """)
    rc, out, err = script.finish()
    assert rc == 0, err
    assert out.splitlines() == [str(tmp_path / "slurmx-checkpoint"), str(tmp_path / "state" / "run1"), "0", "4"]
    assert (tmp_path / "slurmx-checkpoint").is_dir() and (tmp_path / "state" / "run1").is_dir()


# --- SLURMX_FORWARD_SIGNAL=auto (what the job templates set) -------------------------------------------------

AUTO_PYTHON_PAYLOAD = """
    echo ready
    slurmx_run python3 -c '
    import sys, time, slurmx.hooks as h
    h.on_preempt(lambda deadline: print("payload checkpointed", flush=True))
    print("handler installed", flush=True)
    time.sleep(30)'
    echo "payload ended: $?"
"""


def test_auto_forwards_to_a_payload_that_installed_a_handler(bash: Any, tmp_path: Path) -> None:
    script = bash(AUTO_PYTHON_PAYLOAD, SLURMX_FORWARD_SIGNAL="auto", SLURMX_SPOOL_DIR=str(tmp_path),
                  SLURM_JOB_ID="41", SLURMX_REQUEUE_EXIT_CODE="99")
    script.expect("handler installed")
    assert (tmp_path / "handler-41").read_text().strip().isdigit()
    script.signal()
    script.expect("payload checkpointed", timeout=5)
    code, _out, _ = script.finish()
    assert code == 99  # the payload left with the requeue code, and the shell (set -e) passed it on


def test_auto_leaves_a_payload_without_handler_alone(bash: Any, tmp_path: Path) -> None:
    """The payload knows nothing of the signal: it is not killed by it and finishes its work."""
    script = bash("""
        echo ready
        slurmx_run bash -c 'sleep 2; echo "work done"'
        echo "payload ended: $?"
    """, SLURMX_FORWARD_SIGNAL="auto", SLURMX_SPOOL_DIR=str(tmp_path), SLURM_JOB_ID="42")
    script.expect("ready")
    time.sleep(0.5)
    script.signal()
    code, out, _ = script.finish()
    assert "work done" in out and "payload ended: 0" in out and code == 0


def test_auto_ignores_a_marker_left_by_the_run_before_a_requeue(bash: Any, tmp_path: Path) -> None:
    (tmp_path / "handler-43").write_text("1\n")  # pid 1: certainly not this run's payload
    script = bash("""
        echo ready
        slurmx_run bash -c 'sleep 2; echo "work done"'
        echo "payload ended: $?"
    """, SLURMX_FORWARD_SIGNAL="auto", SLURMX_SPOOL_DIR=str(tmp_path), SLURM_JOB_ID="43")
    script.expect("ready")
    time.sleep(0.5)
    script.signal()
    code, out, _ = script.finish()
    assert "work done" in out and code == 0
    assert not (tmp_path / "handler-43").exists()


def test_a_sample_reports_to_slurmxd_by_appending_to_its_comment(bash: Any, tmp_path: Path) -> None:
    """What both sample templates call: the job's comment read with squeue, the fields appended with scontrol;
    nothing to report is no call, and a refused update is a line on stderr, never a failed job."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/bash\necho 'slurmx-sample:g=g-1,v=cpu,s=0,n=5'\n")
    (bin_dir / "scontrol").write_text(f'#!/bin/bash\necho "$*" >> {tmp_path}/calls\nexit "${{FAIL:-0}}"\n')
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"
    rc, _, err = bash("_slurmx_report_to_slurmxd 't=2.5,ps=0.1'\n_slurmx_report_to_slurmxd ''\n",
                      PATH=path, SLURM_JOB_ID="42").finish()
    assert rc == 0 and err == ""
    assert (tmp_path / "calls").read_text() == \
        "update JobId=42 Comment=slurmx-sample:g=g-1,v=cpu,s=0,n=5,t=2.5,ps=0.1\n"
    rc, _, err = bash("_slurmx_report_to_slurmxd 'w=2:40'\necho still here\n", PATH=path, SLURM_JOB_ID="42",
                      FAIL="1").finish()
    assert rc == 0 and err == "slurmx: not reported to slurmxd (scontrol update failed): w=2:40\n"
    # the array task that kept the array's job id (41) names itself A_i: `JobId=41` would rewrite every task's comment
    (tmp_path / "calls").unlink()
    rc, _, err = bash("_slurmx_report_to_slurmxd 't=1'\n", PATH=path, SLURM_JOB_ID="41",
                      SLURMX_JOB_KEY="41=41_17").finish()
    assert rc == 0 and (tmp_path / "calls").read_text() == \
        "update JobId=41_17 Comment=slurmx-sample:g=g-1,v=cpu,s=0,n=5,t=1\n"


@pytest.mark.parametrize(("env", "name"), [
    ({"SLURM_JOB_ID": "41"}, "41"),
    ({"SLURM_JOB_ID": "41", "SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "3"}, "40_3"),  # no script said
    # a plain slurmx job submitted from inside an array task: its script says it is job 41, not task 40_3
    ({"SLURM_JOB_ID": "41", "SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "3", "SLURMX_JOB_KEY": "41=41"}, "41"),
    ({"SLURM_JOB_ID": "77", "SLURM_ARRAY_JOB_ID": "70", "SLURM_ARRAY_TASK_ID": "5", "SLURMX_JOB_KEY": "77=70_5"},
     "70_5"),
    # inherited from the job that submitted this one: another job id, so not believed
    ({"SLURM_JOB_ID": "90", "SLURMX_JOB_KEY": "77=70_5"}, "90"),
    ({"SLURM_JOB_ID": "90", "SLURMX_JOB_KEY": "90=../x"}, "90"),
])
def test_the_bash_and_python_hooks_name_a_job_s_files_alike(env: dict[str, str], name: str) -> None:
    assert BASH is not None
    shell = subprocess.run([BASH, "-c", f'. "{HOOK}"; _slurmx_job'], env=clean_env(**env), capture_output=True,
                           text=True, timeout=30, check=True)
    python = subprocess.run([sys.executable, "-c", "from slurmx.hooks import _env; print(_env.job_id())"],
                            env=clean_env(**env), capture_output=True, text=True, timeout=30, check=True)
    assert (shell.stdout, python.stdout.strip()) == (name, name)
