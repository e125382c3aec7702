"""`Executor(folder, kind="local")`: each call runs as a process on this machine, with the cluster's semantics.

The call is pickled and run by the same job side as on the cluster (`_slurmx_call`, from the same runtime zip),
so its outcome, output files and checkpoint protocol are the cluster's; a detached supervisor (localside.py) plays
Slurm and slurmxd around it: time limit and grace signal, requeue after a checkpoint, preemption on request
(`job.preempt()`), cancel. Nothing needs Slurm. Each job has an owner-only folder `<folder>/<job id>/`.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slurmx.core.userfiles import UntrustedFile, read_own_file
from slurmx.executor import jobside, localside
from slurmx.executor.job import OUTPUT_CAP, JobAPI, JobPaths, checked_rank
from slurmx.executor.params import ExecutorParams, job_name
from slurmx.executor.payload import LOCAL_MODULE, NotYours, pickle_call, read_outcome, read_own_output, runtime_zip

__all__ = ["LocalJob", "submit_local"]

DEFAULT_GRACE_S = 120  # the grace signal before a time limit when the parameters give no `grace`
_FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")


def submit_local(folder: Path, params: ExecutorParams, fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> LocalJob:
    """Write the call, the runtime and the run's settings into a new job folder, and start its supervisor."""
    call = pickle_call(fn, args, kwargs)
    spec = params.job_spec(job_name(fn), "true")  # time, grace and env as the cluster would read them
    folder = folder.absolute()  # the job is found from anywhere, whatever this process's directory becomes
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    job_id = f"{params.name or job_name(fn)}-{secrets.token_hex(4)}"
    job_folder = folder / job_id
    job_folder.mkdir(mode=0o700)
    jobside.write_private(job_folder, jobside.CALL, call)
    jobside.write_private(job_folder, "executor.zip", runtime_zip(local=True))
    config = {"python": params.python, "max_requeues": params.max_requeues, "time_s": spec.time_s,
              "grace_s": spec.grace_s if spec.grace_s is not None else DEFAULT_GRACE_S, "env": dict(spec.env),
              "path": [p for p in sys.path if p], "cwd": os.getcwd(),  # the call imports what this process can
              **_tasks(spec.nodes, spec.ntasks, spec.ntasks_per_node)}
    jobside.write_private(job_folder, localside.CONFIG, json.dumps(config).encode())
    log = os.open(job_folder / "supervisor.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        proc = subprocess.Popen([sys.executable, "-m", LOCAL_MODULE, str(job_folder)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True,
                                env={**os.environ, "PYTHONPATH": str(job_folder / "executor.zip")})
    finally:
        os.close(log)
    return LocalJob(job_id, job_folder, params.max_result_bytes, poll=0.1, _supervisor=proc)


def _tasks(nodes: int | None, ntasks: int | None, per_node: int | None) -> dict[str, int]:
    """How many tasks and "nodes" a multi-task call runs with, as Slurm counts them (`-N`, `-n`,
    `--ntasks-per-node`); every node is this machine."""
    count = nodes or 1
    return {"nodes": count, "tasks": ntasks or count * (per_node or 1)}


class LocalJob(JobAPI):
    """A call running as a local process: the same questions as a cluster `Job`, and `preempt()` for tests."""

    variant = "local"

    def __init__(self, job_id: str, folder: Path, max_result_bytes: int = 256 << 20, poll: float = 0.1,
                 _supervisor: subprocess.Popen[bytes] | None = None, rank: int = 0) -> None:
        self.job_id, self.folder, self.max_result_bytes, self.poll = job_id, Path(folder), max_result_bytes, poll
        self._supervisor, self.rank = _supervisor, rank

    def __repr__(self) -> str:
        return f"LocalJob({self.job_id!r}, folder={str(self.folder)!r})"

    @property
    def job_ids(self) -> list[str]:
        return [self.job_id]

    def outcome(self) -> dict[str, Any] | None:
        return read_outcome(self.folder, self.max_result_bytes, name=jobside.outcome_name(self.rank))

    def task(self, rank: int) -> LocalJob:
        """Task `rank` of a multi-task call, as a job of its own."""
        return LocalJob(self.job_id, self.folder, self.max_result_bytes, self.poll, self._supervisor,
                        checked_rank(rank))

    def _state(self) -> dict[str, Any]:
        try:
            raw = read_own_file(self.folder / localside.STATE, max_bytes=1 << 20)
        except UntrustedFile as exc:
            raise NotYours(f"{exc}: not reading the job's state") from None
        state = json.loads(raw) if raw is not None else {"state": "PENDING"}
        if state.get("state") not in _FINAL and not self._supervisor_alive(state):
            state = {**state, "state": "FAILED", "why": "its supervisor is gone"}
        return state if isinstance(state, dict) else {"state": "UNKNOWN"}

    def _supervisor_alive(self, state: dict[str, Any]) -> bool:
        if self._supervisor is not None:
            return self._supervisor.poll() is None
        pid = state.get("supervisor")
        if not isinstance(pid, int):
            return True  # not started yet
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    @property
    def state(self) -> str:
        outcome = self.outcome()
        if outcome is not None:
            return "COMPLETED" if outcome["ok"] else "FAILED"
        return str(self._state()["state"])

    @property
    def restarts(self) -> int:
        """How many times the call was requeued (after a checkpoint, a preemption, or its time limit)."""
        return int(self._state().get("restarts", 0))

    def done(self) -> bool:
        return self.outcome() is not None or self._state()["state"] in _FINAL

    def standing(self) -> tuple[bool, str]:
        state = self._state()
        if state["state"] not in _FINAL:
            return False, str(state["state"]).lower()
        why = f": {state['why']}" if state.get("why") else ""
        return True, f"it ended {str(state['state']).lower()}{why}"

    def label(self) -> str:
        return f"local job {self.job_id}"

    def _runs(self) -> list[int]:
        """This task's pid in each run (the job side names its output files by it)."""
        state = self._state()
        runs = state.get("task_runs") or [[pid] for pid in state.get("runs", [])]
        return [run[self.rank] for run in runs
                if isinstance(run, list) and len(run) > self.rank and isinstance(run[self.rank], int)]

    def _file(self, pid: int, suffix: str) -> Path:
        return self.folder / jobside.output_name(f"local-{pid}", self.rank, suffix)

    @property
    def paths(self) -> JobPaths:
        runs = self._runs()
        out, err = (self._file(runs[-1], "out"), self._file(runs[-1], "err")) if runs else (None, None)
        return JobPaths(self.folder, self.folder / jobside.outcome_name(self.rank), out, err)

    def stdout(self) -> str | None:
        """What the call printed, every run of it (the last 16 MiB of more); None before it started."""
        return self._output("out")

    def stderr(self) -> str | None:
        return self._output("err")

    def _output(self, suffix: str) -> str | None:
        texts = [read_own_output(self._file(pid, suffix), OUTPUT_CAP) for pid in self._runs()]
        found = [t for t in texts if t is not None]
        return "".join(found)[-OUTPUT_CAP:] if found else None

    def _request(self, name: str, text: str = "") -> None:
        tmp = self.folder / f".{name}.{secrets.token_hex(4)}"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, self.folder / name)

    def cancel(self) -> list[str]:
        """End the call (its whole process group); the job ids cancelled, none when it had already ended."""
        if self.done():
            return []
        self._request("cancel")
        deadline = time.monotonic() + 30
        while not self.done() and time.monotonic() < deadline:
            time.sleep(0.05)
        return [self.job_id]

    def preempt(self, grace: float = 30.0) -> None:
        """Preempt the running call as slurmxd would: intent, grace signal, requeue (then it resumes from what its
        `checkpoint()` returned; a call without one restarts from the top). No effect on a job that is not
        running. Preemptions do not count against `max_requeues`."""
        if self._state()["state"] == "RUNNING":
            self._request("preempt", f"{float(grace)}")
