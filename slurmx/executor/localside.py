"""The local executor's supervisor: what Slurm and slurmxd do for a cluster job, done for one local process.

Runs detached as `python -m _slurmx_local <job folder>` (from the same runtime zip as the job side, standard library
only). It starts the job side (`_slurmx_call`) exactly as a job script would, and then plays both Slurm and slurmxd:
- the time limit: the grace signal `grace` seconds before `time`, the kill at `time` (state TIMEOUT); a call that
  checkpoints leaves with the requeue code and is restarted with `SLURM_RESTART_COUNT` one higher, as Slurm does
  after the job's own `scontrol requeue`;
- a preemption (the caller's `job.preempt()` writes a `preempt` request): the intent file first, then the grace
  signal to a call that announced its handler, the kill at the deadline, and the restart, as slurmxd does;
- a cancel (`cancel` request): the call's process group is killed, state CANCELLED;
- srun, for a multi-task call (`nodes=`, `tasks_per_node=`): one process per task, with the task variables set
  (every "node" is this machine), signalled, requeued and ended together.
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


def _task_env(rank: int, tasks: int, nodes: int, per_node: int) -> dict[str, str]:
    """What srun sets in task `rank` of a multi-task job (JobEnvironment reads it), every node this machine.
    No SLURM_JOB_ID: nothing here may act on a real job."""
    if tasks == 1 and nodes == 1:
        return {}
    return {"SLURM_PROCID": str(rank), "SLURM_NTASKS": str(tasks), "SLURM_LOCALID": str(rank % per_node),
            "SLURM_NODEID": str(rank // per_node), "SLURM_JOB_NUM_NODES": str(nodes),
            "SLURM_JOB_NODELIST": "localhost", "SLURMD_NODENAME": "localhost"}


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
        tasks, nodes = int(config.get("tasks", 1)), int(config.get("nodes", 1))
        per_node = -(-tasks // nodes)
        self.procs = [subprocess.Popen(argv, env={**env, **_task_env(rank, tasks, nodes, per_node)},
                                       cwd=config.get("cwd") or None, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
                      for rank in range(tasks)]
        self.proc = self.procs[0]  # task 0: the call's own result, its handler announcement
        self.started = time.monotonic()
        time_s = config.get("time_s")
        self.kill_at = self.started + time_s if time_s else None
        self.signal_at = self.kill_at - config["grace_s"] if self.kill_at is not None else None
        self.preempted = False
        self.intents = [folder / f"preempt-local-{proc.pid}" for proc in self.procs]
        self.handler = folder / f"handler-local-{self.proc.pid}"

    def running(self) -> bool:
        return any(proc.poll() is None for proc in self.procs)

    @property
    def returncode(self) -> int | None:
        """The run's exit code as srun's would be: the requeue code when a task left for requeue, else the
        highest."""
        codes = [proc.returncode for proc in self.procs]
        if any(code is None for code in codes):
            return None
        return REQUEUE_EXIT_CODE if REQUEUE_EXIT_CODE in codes else max(int(code or 0) for code in codes)

    def signal(self, signum: int) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signum)

    def kill(self) -> None:
        self.reap()
        for proc in self.procs:
            proc.wait()

    def reap(self) -> None:
        """What the call left running (data loader workers, servers it spawned) ends with it, as Slurm ends a job's
        processes when its script exits: a restarted call must not overlap the last one's children."""
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    def preempt(self, grace: float) -> None:
        """slurmxd's protocol: the intent, then the grace signal to a call that handles it, the kill at the end."""
        self.preempted = True
        deadline = time.time() + grace
        for intent in self.intents:  # each task reads its own (jobside: the job side names files by its pid here)
            intent.write_text(f"preempt grace={grace:g} deadline={deadline:.3f} reason=local\n", encoding="utf-8")
        if self.handler.is_file():
            self.signal(signal.SIGUSR2)
            self.kill_at = time.monotonic() + grace
        else:
            self.kill()  # nothing would checkpoint: the requeue restarts the call from the top


def supervise(folder: Path) -> int:
    config = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    restarts, runs, task_runs = 0, [], []  # runs: task 0's pid per run; task_runs: every task's
    signal.signal(signal.SIGTERM, lambda *_: (folder / "cancel").touch())  # ended as if cancelled, never orphaned
    while True:
        run = _Run(folder, config, restarts)
        runs.append(run.proc.pid)
        task_runs.append([proc.pid for proc in run.procs])
        write_state(folder, state="RUNNING", pid=run.proc.pid, supervisor=os.getpid(), restarts=restarts, runs=runs,
                    task_runs=task_runs)
        try:
            ended = _watch(folder, run)
        except BaseException:
            run.kill()  # never leave the call running without its supervisor
            raise
        run.reap()
        if ended == "CANCELLED":
            write_state(folder, state="CANCELLED", supervisor=os.getpid(), restarts=restarts, runs=runs,
                        task_runs=task_runs)
            return 0
        finished = (folder / "outcome.pkl").is_file()  # a call that finished during its grace is left alone
        if not finished and (run.preempted or run.returncode == REQUEUE_EXIT_CODE) and ended != "TIMEOUT":
            for intent in run.intents:
                intent.unlink(missing_ok=True)
            restarts += 1
            continue
        state = ended or ("COMPLETED" if run.returncode == 0 else "FAILED")
        write_state(folder, state=state, supervisor=os.getpid(), restarts=restarts, runs=runs,
                    task_runs=task_runs, code=run.returncode)
        return 0


def _watch(folder: Path, run: _Run) -> str | None:
    """Wait for the run to end; CANCELLED or TIMEOUT when this supervisor ended it, else None."""
    while run.running():
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
