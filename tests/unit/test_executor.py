"""The executor without Slurm: pickling, the job side run as a subprocess, outcome files, state, re-attach."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from slurmx.core.model import VariantState
from slurmx.core.validation import ConfigError
from slurmx.executor import Job, JobError, RemoteTraceback, Resume
from slurmx.executor.job import job_state, raise_outcome, ran_variant
from slurmx.executor.jobside import as_call, slurm_self
from slurmx.executor.params import ExecutorParams, job_name
from slurmx.executor.payload import OutcomeError, folder_files, job_script, pickle_call, read_outcome
from slurmx.submit.groups import GroupStatus, VariantStatus

REPO = Path(__file__).resolve().parents[2]
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the job side cannot import this test module


def add(a: int, b: int) -> int:
    print(f"adding {a} and {b}")
    return a + b


def fail(text: str) -> None:
    raise ValueError(text)


class Counter:
    """Counts to `total`, one step per 0.05 s; checkpoints its step."""

    def __init__(self, total: int, start: int = 0) -> None:
        self.total, self.step = total, start

    def __call__(self, marks: str) -> int:
        while self.step < self.total:
            Path(marks, f"step-{self.step}").touch()
            self.step += 1
            time.sleep(0.05)
        return self.step

    def checkpoint(self, marks: str) -> Resume:
        return Resume(Counter(self.total, self.step), (marks,), {})


def prepare(folder: Path, fn: Any, *args: Any, **kwargs: Any) -> Path:
    """The group folder as `submit_group(files=)` leaves it, plus the payload script."""
    folder.mkdir(mode=0o700, exist_ok=True)
    for name, text in folder_files(pickle_call(fn, args, kwargs)).items():
        (folder / name).write_text(text)
    script = folder / "payload"
    script.write_text(job_script(sys.executable, max_requeues=2))
    return script


def env_for(folder: Path, job_id: str = "", restarts: int = 0) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "PYTHONPATH"))}
    env.update(SLURMX_SPOOL_DIR=str(folder), SLURMX_VARIANT="cpu", PYTHONPATH=str(REPO),
               SLURM_RESTART_COUNT=str(restarts), SLURMX_GRACE_SIGNAL="USR2")
    if job_id:
        env["SLURM_JOB_ID"] = job_id
    return env


def run_job(folder: Path, script: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(script)], env=env_for(folder, **kw), capture_output=True, text=True,
                          timeout=60, check=False)


def test_a_call_runs_and_its_value_and_output_come_back(tmp_path: Path) -> None:
    folder = tmp_path / "g"
    proc = run_job(folder, prepare(folder, add, 2, b=3), job_id="41")
    assert proc.returncode == 0, proc.stderr
    outcome = read_outcome(folder, 1 << 20)
    assert outcome is not None and raise_outcome(outcome) == 5
    assert (outcome["variant"], outcome["job_id"]) == ("cpu", "41")
    assert (folder / "fn-41.out").read_text() == "adding 2 and 3\n"
    assert oct((folder / "outcome.pkl").stat().st_mode & 0o777) == "0o600"


def test_an_exception_is_re_raised_with_the_remote_traceback(tmp_path: Path) -> None:
    folder = tmp_path / "g"
    proc = run_job(folder, prepare(folder, fail, "bad input"), job_id="42")
    assert proc.returncode == 1
    outcome = read_outcome(folder, 1 << 20)
    assert outcome is not None
    with pytest.raises(ValueError, match="bad input") as info:
        raise_outcome(outcome)
    cause = info.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert "in fail" in str(cause) and "ValueError: bad input" in str(cause)


def test_an_exception_that_does_not_pickle_becomes_a_job_error() -> None:
    outcome = {"ok": False, "exception": None, "type": "Weird", "message": "no", "traceback": "Traceback..."}
    with pytest.raises(JobError, match="Weird: no"):
        raise_outcome(outcome)


def test_checkpoint_at_the_grace_signal_then_resume_after_requeue(tmp_path: Path) -> None:
    folder, marks = tmp_path / "g", tmp_path / "marks"
    marks.mkdir()
    script = prepare(folder, Counter(60), str(marks))
    proc = subprocess.Popen(["bash", str(script)], env=env_for(folder), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 30
    while not list(folder.glob("handler-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGUSR2)
    assert proc.wait(30) == 99  # no SLURM_JOB_ID: nothing to requeue, leave with the requeue code
    assert (folder / "resume.pkl").is_file() and read_outcome(folder, 1 << 20) is None
    done_before = len(list(marks.iterdir()))
    assert 0 < done_before < 60
    proc2 = run_job(folder, script, restarts=1)
    assert proc2.returncode == 0, proc2.stderr
    outcome = read_outcome(folder, 1 << 20)
    assert outcome is not None and raise_outcome(outcome) == 60
    assert len(list(marks.iterdir())) == 60  # every step once: the resumed call started where the first stopped


def test_past_max_requeues_the_grace_signal_does_not_stop_the_call(tmp_path: Path) -> None:
    folder, marks = tmp_path / "g", tmp_path / "marks"
    marks.mkdir()
    script = prepare(folder, Counter(30), str(marks))
    env = env_for(folder, restarts=2)  # max_requeues=2 in prepare()
    proc = subprocess.Popen(["bash", str(script)], env=env, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    while not list(folder.glob("handler-*")):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGUSR2)
    assert proc.wait(30) == 0
    outcome = read_outcome(folder, 1 << 20)
    assert outcome is not None and raise_outcome(outcome) == 30
    assert not (folder / "resume.pkl").exists()


def test_what_checkpoint_returns_is_the_call_to_resume() -> None:
    fn, args, kwargs = add, (1,), {"b": 2}
    assert as_call(None, fn, args, kwargs) == (add, (1,), {"b": 2})
    assert as_call(fail, fn, args, kwargs) == (fail, (1,), {"b": 2})
    assert as_call(Resume(fail, ("x",)), fn, args, kwargs) == (fail, ("x",), {})
    with pytest.raises(TypeError, match="checkpoint\\(\\) returned int"):
        as_call(3, fn, args, kwargs)


def test_the_outcome_is_read_without_links_and_under_a_cap(tmp_path: Path) -> None:
    folder = tmp_path / "g"
    folder.mkdir(mode=0o700)
    assert read_outcome(folder, 100) is None
    assert read_outcome(tmp_path / "missing", 100) is None
    secret = tmp_path / "secret.pkl"
    secret.write_bytes(cloudpickle.dumps({"ok": True, "value": 1}))
    (folder / "outcome.pkl").symlink_to(secret)
    with pytest.raises(OutcomeError, match="symlink"):
        read_outcome(folder, 1 << 20)
    (folder / "outcome.pkl").unlink()
    (folder / "outcome.pkl").write_bytes(cloudpickle.dumps({"ok": True, "value": "x" * 500}))
    with pytest.raises(OutcomeError, match="cap"):
        read_outcome(folder, 100)
    (folder / "outcome.pkl").write_bytes(b"not a pickle")
    with pytest.raises(OutcomeError, match="not a readable outcome"):
        read_outcome(folder, 100)
    folder.chmod(0o777)
    (folder / "outcome.pkl").write_bytes(cloudpickle.dumps({"ok": True, "value": 1}))
    with pytest.raises(OutcomeError, match="writable by others"):
        read_outcome(folder, 1 << 20)


def _status(*variants: tuple[str, int, VariantState]) -> GroupStatus:
    return GroupStatus("g-1", "add", "alice", "be",
                       tuple(VariantStatus(k, i, s, "", "", "") for k, i, s in variants))


def test_state_and_variant_follow_the_outcome_then_slurm() -> None:
    running = _status(("cpu", 1, VariantState.CANCELLED), ("gpu", 2, VariantState.RUNNING))
    assert job_state(running, None) == "RUNNING" and ran_variant(running, None) == ("gpu", 2)
    pending = _status(("cpu", 1, VariantState.PENDING), ("gpu", 2, VariantState.PENDING))
    assert job_state(pending, None) == "PENDING" and ran_variant(pending, None) is None
    assert job_state(None, {"ok": True, "variant": "cpu", "job_id": "7"}) == "COMPLETED"
    assert job_state(running, {"ok": False}) == "FAILED"
    assert ran_variant(running, {"ok": True, "variant": "cpu", "job_id": "7"}) == ("cpu", 7)
    ended = _status(("cpu", 1, VariantState.CANCELLED), ("gpu", 2, VariantState.COMPLETED))
    assert job_state(ended, None) == "FAILED"  # the script ended but the call wrote nothing
    assert ran_variant(ended, None) == ("gpu", 2)
    assert job_state(_status(("cpu", 1, VariantState.CANCELLED)), None) == "CANCELLED"
    assert job_state(None, None) == "UNKNOWN"


def test_parameters_take_the_spec_vocabulary_and_reject_unknown_keys() -> None:
    params = ExecutorParams().updated({"variants": ["cpu", "gpu"], "time": "10m", "grace": 30,
                                       "overrides": {"gpu": {"cpus": 2}}, "estimates": {"cpu": "1h"},
                                       "class": "be", "max_requeues": 5, "python": "python3"})
    spec = params.job_spec("add", "#!/bin/bash\ntrue")
    assert spec.time_s == 600 and spec.grace_s == 30 and spec.overrides["gpu"].cpus == 2
    assert spec.estimates == {"cpu": 3600} and params.max_requeues == 5
    with pytest.raises(ConfigError, match=r"unknown key 'timeout'.*valid keys: variants"):
        params.updated({"timeout": 3})
    with pytest.raises(ConfigError, match="time"):
        params.updated({"time": "soon"})
    with pytest.raises(ConfigError, match="max_requeues"):
        params.updated({"max_requeues": -1})
    assert job_name(add) == "add" and job_name(lambda: 0) == "lambda" and job_name(Counter(1)) == "Counter"


def test_the_pickled_call_and_runtime_are_text_for_the_folder() -> None:
    files = folder_files(pickle_call(add, (2, 3), {}))
    assert set(files) == {"call.pkl.b64", "executor.zip.b64"}
    fn, args, kwargs = cloudpickle.loads(base64.b64decode(files["call.pkl.b64"]))
    assert fn(*args, **kwargs) == 5
    with pytest.raises(TypeError, match="cannot pickle the call to 'add'"):
        pickle_call(add, (threading.Lock(),), {})


class _FakeAdapter:
    def __init__(self, status: GroupStatus) -> None:
        self.status = status

    def jobs(self, user: str | None = None, **_: Any) -> list[Any]:
        return []

    def accounting(self, since: str = "") -> list[Any]:
        return []


def test_a_job_reattaches_from_the_executor_record(tmp_path: Path) -> None:
    from slurmx.core.config import SiteConfig

    site = SiteConfig.model_validate({"cluster": {"name": "t"},
                                      "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "1G"}},
                                      "submit": {"spool_dir": str(tmp_path / "spool")}})
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "add-abc123.json").write_text('{"group": "add-abc123", "variants": [["cpu", 11]]}')
    folder = tmp_path / "spool" / "add-abc123"
    folder.mkdir(parents=True, mode=0o700)
    (folder / "outcome.pkl").write_bytes(cloudpickle.dumps({"ok": True, "value": 5, "variant": "cpu",
                                                            "job_id": "11"}))
    (folder / "fn-11.out").write_text("adding 2 and 3\n")
    adapter = _FakeAdapter(_status())
    job = Job.attach("add-abc123", site, adapter=adapter, folder=tmp_path / "jobs")  # type: ignore[arg-type]
    assert job.job_ids == [11] and job.done() and job.state == "COMPLETED" and job.variant == "cpu"
    assert job.result(timeout=1) == 5 and job.exception() is None and job.stdout() == "adding 2 and 3\n"
    import asyncio

    assert asyncio.run(_awaited(job)) == 5
    with pytest.raises(LookupError, match="no group"):
        Job.attach("other-1", site, adapter=adapter)  # type: ignore[arg-type]


async def _awaited(job: Job) -> Any:
    return await job


def test_the_payload_names_the_function_so_history_tells_functions_apart() -> None:
    from slurmx.executor.payload import call_label

    assert call_label(add) == f"{__name__}.add" and call_label(Counter(1)) == f"{__name__}.Counter"
    assert job_script("python3", 1, call_label(add)) != job_script("python3", 1, call_label(fail))
    assert 'exec ${launch[@]+"${launch[@]}"} python3 -m _slurmx_call --max-requeues 1' in job_script("python3", 1)


def test_under_a_daemon_preemption_the_call_checkpoints_past_the_cap_and_leaves_for_its_requeue(
        tmp_path: Path) -> None:
    """slurmxd (or `slurmx preempt`) writes its intent first and requeues at the deadline: the job checkpoints
    even past max_requeues (a preemption is not the job's doing) and leaves at once, requeueing nothing itself."""
    folder, marks = tmp_path / "g", tmp_path / "marks"
    marks.mkdir()
    script = prepare(folder, Counter(400), str(marks))
    (folder / "preempt-77").write_text("preempt grace=30 deadline=9999999999 reason=test\n")
    proc = subprocess.Popen(["bash", str(script)], env=env_for(folder, job_id="77", restarts=5),
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    while not (folder / "handler-77").exists():
        time.sleep(0.05)
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGUSR2)
    assert proc.wait(30) == 99 and time.monotonic() - started < 10
    assert (folder / "resume.pkl").is_file()
    assert "scontrol" not in (folder / "fn-77.err").read_text()


def own_handler(marks: str) -> None:
    from slurmx import hooks

    hooks.on_preempt(lambda deadline: Path(marks, "saved").touch())
    while True:
        time.sleep(0.05)


def test_a_function_with_its_own_on_preempt_handler_leaves_for_requeue(tmp_path: Path) -> None:
    folder, marks = tmp_path / "g", tmp_path / "marks"
    marks.mkdir()
    script = prepare(folder, own_handler, str(marks))
    proc = subprocess.Popen(["bash", str(script)], env=env_for(folder), stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    while not list(folder.glob("handler-*")):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGUSR2)
    assert proc.wait(30) == 99
    assert (marks / "saved").exists() and read_outcome(folder, 1 << 20) is None


def leave(code: int) -> None:
    sys.exit(code)


def test_a_function_that_exits_fails_without_ending_the_caller(tmp_path: Path) -> None:
    folder = tmp_path / "g"
    assert run_job(folder, prepare(folder, leave, 3)).returncode == 1
    outcome = read_outcome(folder, 1 << 20)
    assert outcome is not None
    with pytest.raises(JobError, match="SystemExit: 3"):
        raise_outcome(outcome)


def test_submit_writes_the_call_into_the_group_folder_before_the_first_sbatch(tmp_path: Path) -> None:
    import json

    from slurmx.executor import Executor
    from tests.unit.test_submitter import ok, site, slurm

    adapter, transport = slurm({("sbatch",): [ok("101\n"), ok("102\n")]})
    ex = Executor(tmp_path / "jobs", site=site(), adapter=adapter)
    ex.update_parameters(mode="race", variants=["cpu", "gpu"], python="python3", time="5m")
    job = ex.submit(add, 2, b=3)
    assert job.job_ids == [101, 102] and job.folder == f"/shared/spool/{job.group_id}"
    mkdir, *writes = transport.folder_calls
    assert mkdir[0] == ("mkdir", "-m", "700", "--", job.folder)
    written = {argv[-1].rsplit("/", 1)[1]: text for argv, text in writes}
    assert set(written) == {"call.pkl.b64", "executor.zip.b64"}
    assert cloudpickle.loads(base64.b64decode(written["call.pkl.b64"] or ""))[1:] == ((2,), {"b": 3})
    scripts = [stdin or "" for _, stdin in transport.calls]
    assert all('exec ${launch[@]+"${launch[@]}"} python3 -m _slurmx_call --max-requeues 3' in s
               and "#SBATCH --time=00:05:00" in s for s in scripts)
    assert all(f"#SBATCH --job-name=add@{k}" in s for k, s in zip(("cpu", "gpu"), scripts, strict=True))
    record = json.loads((tmp_path / "jobs" / f"{job.group_id}.json").read_text())
    assert record["variants"] == [["cpu", 101], ["gpu", 102]] and record["mode"] == "race"


def test_a_profiling_sample_of_the_call_writes_no_outcome(tmp_path: Path) -> None:
    folder = tmp_path / "g"
    script = prepare(folder, add, 2, 3)
    env = {**env_for(folder, job_id="51"), "SLURMX_PROFILE_STEPS": "2"}
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and read_outcome(folder, 1 << 20) is None


class BadCheckpoint(Counter):
    def checkpoint(self, marks: str) -> Resume:
        raise RuntimeError("disk full")


def test_a_failing_checkpoint_still_leaves_for_requeue_with_the_last_saved_call(tmp_path: Path) -> None:
    folder, marks = tmp_path / "g", tmp_path / "marks"
    marks.mkdir()
    proc = subprocess.Popen(["bash", str(prepare(folder, BadCheckpoint(400), str(marks)))], env=env_for(folder),
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    while not list(folder.glob("handler-*")):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGUSR2)
    assert proc.wait(30) == 99 and not (folder / "resume.pkl").exists()
    err = next(folder.glob("fn-*.err")).read_text()
    assert "RuntimeError: disk full" in err and "requeueing with the last saved call" in err


def test_only_a_call_carrying_code_by_value_is_tied_to_this_python_minor_version() -> None:
    """Code by value is bytecode of one minor version; references and data load on any Python 3 (pickle protocol
    5), so the node checks the version only when the call carries bytecode."""
    import collections
    import math

    from slurmx.executor.payload import carries_bytecode

    assert not carries_bytecode(pickle_call(math.factorial, (5,), {}))
    assert not carries_bytecode(pickle_call(collections.Counter, ("abc",), {"x": [1.5, "text"]}))
    assert carries_bytecode(pickle_call(lambda: 1, (), {}))
    assert carries_bytecode(pickle_call(add, (2, 3), {}))  # this module is registered by value above
    here = f"--pickled-by {sys.version_info[0]}.{sys.version_info[1]}"
    assert here in job_script("python3", 1, bytecode=True) and "--pickled-by" not in job_script("python3", 1,
                                                                                                 bytecode=False)


def _outcome_job(tmp_path: Path, outcome: dict[str, Any] | None) -> Job:
    """A Job of a group whose folder holds `outcome` (none: the job has not written one yet)."""
    from slurmx.core.config import SiteConfig

    site = SiteConfig.model_validate({"cluster": {"name": "t"},
                                      "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "1G"}},
                                      "submit": {"spool_dir": str(tmp_path / "spool")}})
    folder = tmp_path / "spool" / "g-1"
    folder.mkdir(parents=True, mode=0o700)
    if outcome is not None:
        (folder / "outcome.pkl").write_bytes(cloudpickle.dumps(outcome))
    return Job("g-1", site, _FakeAdapter(_status()), (("cpu", 11),), poll=0.01)  # type: ignore[arg-type]


def wait_too_long() -> None:
    raise TimeoutError("the remote wait gave up")


def test_exception_returns_a_remote_timeout_error_and_raises_only_its_own_wait_timeout(tmp_path: Path) -> None:
    folder = tmp_path / "g"
    assert run_job(folder, prepare(folder, wait_too_long), job_id="43").returncode == 1
    outcome = read_outcome(folder, 1 << 20)
    job = _outcome_job(tmp_path, outcome)
    exc = job.exception(timeout=1)
    assert isinstance(exc, TimeoutError) and str(exc) == "the remote wait gave up"
    assert isinstance(exc.__cause__, RemoteTraceback) and "in wait_too_long" in str(exc.__cause__)
    with pytest.raises(TimeoutError, match="remote wait gave up"):
        job.result(timeout=1)
    pending = _outcome_job(tmp_path / "p", None)
    pending.status = lambda: _status(("cpu", 11, VariantState.PENDING))  # type: ignore[method-assign]
    with pytest.raises(TimeoutError, match="still pending after 0 s"):
        pending.exception(timeout=0.05)
    ended = _outcome_job(tmp_path / "e", None)
    assert isinstance(ended.exception(timeout=1), JobError)  # Slurm knows none of its jobs: no result, said so
    assert _outcome_job(tmp_path / "ok", {"ok": True, "value": 1}).exception() is None


class DelayedSubmission:
    """The shape of submitit's `DelayedSubmission` (submitit is not installed here, nor needed on the nodes)."""

    def __init__(self, function: Any, *args: Any, **kwargs: Any) -> None:
        self.function, self.args, self.kwargs = function, args, kwargs
        self._result: Any = None
        self._done = False

    def result(self) -> Any:
        if not self._done:
            self._result, self._done = self.function(*self.args, **self.kwargs), True
        return self._result


class Checkpointable:
    """submitit.helpers.Checkpointable, as submitit writes it: resubmit self, with the same arguments."""

    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission:
        return DelayedSubmission(self, *args, **kwargs)


class SubmititTrainer(Checkpointable):
    """A trainer written for submitit: its state is `self.step`, counted once per step in `marks`."""

    def __init__(self, total: int) -> None:
        self.total, self.step = total, 0

    def __call__(self, marks: str, *, scale: int = 1) -> int:
        while self.step < self.total:
            Path(marks, f"step-{self.step}").touch()
            self.step += 1
            time.sleep(0.05)
        return self.step * scale


def test_submitits_checkpoint_protocol_resumes_as_submitit_would(tmp_path: Path) -> None:
    """checkpoint() returns a DelayedSubmission (the trainer in its current state, the same arguments): after
    the requeue the job calls `function(*args, **kwargs)` and every step runs exactly once."""
    folder, marks = tmp_path / "g", tmp_path / "marks"
    marks.mkdir()
    script = prepare(folder, SubmititTrainer(60), str(marks), scale=2)
    proc = subprocess.Popen(["bash", str(script)], env=env_for(folder), stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    while not list(folder.glob("handler-*")):
        time.sleep(0.05)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGUSR2)
    assert proc.wait(30) == 99, proc.stderr.read() if proc.stderr else ""
    resumed = cloudpickle.loads((folder / "resume.pkl").read_bytes())
    assert isinstance(resumed[0], SubmititTrainer) and resumed[1:] == ((str(marks),), {"scale": 2})
    assert 0 < resumed[0].step < 60
    assert run_job(folder, script, restarts=1).returncode == 0
    outcome = read_outcome(folder, 1 << 20)
    assert outcome is not None and raise_outcome(outcome) == 120
    assert sorted(int(p.name[5:]) for p in marks.iterdir()) == list(range(60))


class SubmititHook:
    """submitit looks for `__submitit_checkpoint__` before `checkpoint`."""

    def __call__(self) -> None:
        return None

    def __submitit_checkpoint__(self) -> DelayedSubmission:
        return DelayedSubmission(add, 1, b=2)

    def checkpoint(self) -> None:
        raise AssertionError("submitit calls __submitit_checkpoint__ first")


def test_the_submitit_shape_is_read_without_changing_slurmxs_own_protocol() -> None:
    from slurmx.executor.jobside import checkpoint_method

    fn, args, kwargs = add, (1,), {"b": 2}
    assert as_call(DelayedSubmission(fail, "x", k=1), fn, args, kwargs) == (fail, ("x",), {"k": 1})
    assert as_call(None, fn, args, kwargs) == (add, (1,), {"b": 2})  # slurmx: None repeats the call
    assert as_call(Resume(fail, ("y",)), fn, args, kwargs) == (fail, ("y",), {})
    hook = SubmititHook()
    assert as_call(checkpoint_method(hook)(), hook, (), {}) == (add, (1,), {"b": 2})
    assert checkpoint_method(Counter(1)) is not None and checkpoint_method(add) is None
    broken = DelayedSubmission(add)
    broken.args = "not a tuple"  # type: ignore[assignment]
    with pytest.raises(TypeError, match="DelayedSubmission: expected None, a callable"):
        as_call(broken, fn, args, kwargs)


@pytest.mark.parametrize(("job_id", "key", "named"), [
    ("41", "41=41_17", "41_17"),  # the array task that kept the array's job id: A_i, never the whole array
    ("57", "57=41_3", "41_3"),
    ("57", "57=57", "57"),  # a plain job
    ("58", "57=41_3", "58"),  # a job submitted from inside an array task inherits the key of another job id
    ("58", "58=41_3_1", "58"),
    ("", "=41_3", ""),  # outside Slurm: nothing to name
    ("58", "", "58"),
])
def test_the_job_side_names_its_own_job_to_slurm_alone(monkeypatch: pytest.MonkeyPatch, job_id: str, key: str,
                                                       named: str) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", job_id)
    monkeypatch.setenv("SLURMX_JOB_KEY", key)
    assert slurm_self() == named
