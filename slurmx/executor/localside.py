"""The local executor's supervisor: what Slurm and slurmxd do for a cluster job, done for one local process.

Runs detached as `python -m _slurmx_local <job folder>` (from the same runtime zip as the job side, standard library
only). It starts the job side (`_slurmx_call`) exactly as a job script would, and then plays both Slurm and slurmxd:
- the time limit: the grace signal `grace` seconds before `time`, the kill at `time` (state TIMEOUT); a call that
  checkpoints leaves with the requeue code and is restarted with `SLURM_RESTART_COUNT` one higher, as Slurm does
  after the job's own `scontrol requeue`;
- a preemption (the caller's `job.preempt()` writes a `preempt` request): the intent file first, then the grace
  signal to a call that announced its handler, the kill at the deadline, and the restart, as slurmxd does;
- a cancel (`cancel` request): the call's process group is killed, state CANCELLED.
The supervisor's view is `state.json` in the folder, replaced whole at each change.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

STATE = "state.json"
CONFIG = "local.json"
REQUEUE_EXIT_CODE = 99
TICK = 0.05


def write_state(folder: Path, **state: Any) -> None:
    tmp = folder / f".{STATE}.{os.getpid()}"
    tmp.write_text(json.dumps(state), encoding="utf-8")
    os.replace(tmp, folder / STATE)


def _take(folder: Path, name: str) -> str | None:
    """A request file's text, removed as it is read; None when there is none."""
    path = folder / name
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    path.unlink(missing_ok=True)
    return text


class _Run:
    """One run of the call: its process, and the deadlines that apply to it."""

    def __init__(self, folder: Path, config: dict[str, Any], restarts: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}  # never act on a real job
        env.update(config.get("env", {}))
        env.update(SLURMX_SPOOL_DIR=str(folder), SLURMX_VARIANT="local", SLURM_RESTART_COUNT=str(restarts),
                   SLURMX_GRACE_SIGNAL="USR2", SLURMX_GRACE_S=str(config["grace_s"]),
                   SLURMX_REQUEUE_EXIT_CODE=str(REQUEUE_EXIT_CODE),
                   PYTHONPATH=os.pathsep.join([str(folder / "executor.zip"), *config.get("path", [])]))
        argv = [config["python"], "-m", "_slurmx_call", "--folder", str(folder),
                "--max-requeues", str(config["max_requeues"])]
        self.proc = subprocess.Popen(argv, env=env, cwd=config.get("cwd") or None, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.started = time.monotonic()
        time_s = config.get("time_s")
        self.kill_at = self.started + time_s if time_s else None
        self.signal_at = self.kill_at - config["grace_s"] if self.kill_at is not None else None
        self.preempted = False
        self.intent = folder / f"preempt-local-{self.proc.pid}"
        self.handler = folder / f"handler-local-{self.proc.pid}"

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signum)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def reap(self) -> None:
        """What the call left running (data loader workers, servers it spawned) ends with it, as Slurm ends a job's
        processes when its script exits: a restarted call must not overlap the last one's children."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def preempt(self, grace: float) -> None:
        """slurmxd's protocol: the intent, then the grace signal to a call that handles it, the kill at the end."""
        self.preempted = True
        deadline = time.time() + grace
        self.intent.write_text(f"preempt grace={grace:g} deadline={deadline:.3f} reason=local\n", encoding="utf-8")
        if self.handler.is_file():
            self.signal(signal.SIGUSR2)
            self.kill_at = time.monotonic() + grace
        else:
            self.kill()  # nothing would checkpoint: the requeue restarts the call from the top


def supervise(folder: Path) -> int:
    config = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    restarts, runs = 0, []
    signal.signal(signal.SIGTERM, lambda *_: (folder / "cancel").touch())  # ended as if cancelled, never orphaned
    while True:
        run = _Run(folder, config, restarts)
        runs.append(run.proc.pid)
        write_state(folder, state="RUNNING", pid=run.proc.pid, supervisor=os.getpid(), restarts=restarts, runs=runs)
        try:
            ended = _watch(folder, run)
        except BaseException:
            run.kill()  # never leave the call running without its supervisor
            raise
        run.reap()
        if ended == "CANCELLED":
            write_state(folder, state="CANCELLED", supervisor=os.getpid(), restarts=restarts, runs=runs)
            return 0
        finished = (folder / "outcome.pkl").is_file()  # a call that finished during its grace is left alone
        if not finished and (run.preempted or run.proc.returncode == REQUEUE_EXIT_CODE) and ended != "TIMEOUT":
            run.intent.unlink(missing_ok=True)
            restarts += 1
            continue
        state = ended or ("COMPLETED" if run.proc.returncode == 0 else "FAILED")
        write_state(folder, state=state, supervisor=os.getpid(), restarts=restarts, runs=runs,
                    code=run.proc.returncode)
        return 0


def _watch(folder: Path, run: _Run) -> str | None:
    """Wait for the run to end; CANCELLED or TIMEOUT when this supervisor ended it, else None."""
    while run.proc.poll() is None:
        now = time.monotonic()
        if _take(folder, "cancel") is not None:
            run.kill()
            return "CANCELLED"
        request = _take(folder, "preempt")
        if request is not None and not run.preempted:
            try:
                grace = max(0.0, float(request.strip() or 0))
            except ValueError:
                grace = 0.0
            run.preempt(grace)
        if run.signal_at is not None and now >= run.signal_at and not run.preempted:
            run.signal_at = None
            if run.handler.is_file():  # Slurm's --signal before the limit, which the job script forwards only to
                run.signal(signal.SIGUSR2)  # a call that handles it; nobody requeues it but the call itself
        if run.kill_at is not None and now >= run.kill_at:
            run.kill()
            return None if run.preempted else "TIMEOUT"
        time.sleep(TICK)
    return None


if __name__ == "__main__":
    sys.exit(supervise(Path(sys.argv[1])))
