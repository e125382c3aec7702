"""The local and debug executors: the cluster's job API and checkpoint protocol, without Slurm."""

from __future__ import annotations

import os
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from slurmx.executor import DebugJob, Executor, JobError, LocalJob, as_completed
from slurmx.executor.job import raise_outcome
from slurmx.executor.payload import read_outcome
from tests.unit.test_executor import Counter, SubmititTrainer, add, fail, prepare, run_job, wait_too_long


def starts(marks: str, seconds: float) -> int:
    """Counts its own starts in `marks` (one file each), then sleeps: a call without a checkpoint."""
    n = len(list(Path(marks).iterdir()))
    Path(marks, f"start-{n}").touch()
    time.sleep(seconds)
    return n + 1


def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def wait_for(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def steps(marks: Path) -> list[int]:
    return sorted(int(p.name[5:]) for p in marks.iterdir())


@pytest.fixture
def local(tmp_path: Path) -> Executor:
    return Executor(tmp_path / "jobs", kind="local")


def test_a_local_call_answers_as_a_cluster_job(local: Executor) -> None:
    job = local.submit(add, 2, b=3)
    assert isinstance(job, LocalJob) and job.result(timeout=60) == 5
    assert job.state == "COMPLETED" and job.done() and job.variant == "local" and job.job_ids == [job.job_id]
    assert job.stdout() == "adding 2 and 3\n" and job.paths.stdout is not None
    assert job.paths.stdout.read_text() == "adding 2 and 3\n" and job.paths.result_pickle.is_file()
    assert oct(job.folder.stat().st_mode & 0o777) == "0o700"
    bad = local.submit(wait_too_long)
    exc = bad.exception(timeout=60)
    assert isinstance(exc, TimeoutError) and "in wait_too_long" in str(exc.__cause__)
    assert bad.state == "FAILED"
    slow = local.submit(nap, 30)
    with pytest.raises(TimeoutError, match=r"still (pending|running) after 0 s"):
        slow.result(timeout=0.2)
    slow.cancel()


def test_the_local_outcome_is_the_job_sides_outcome_on_the_cluster(local: Executor, tmp_path: Path) -> None:
    """Parity of the executor itself: the same calls through the job script a variant runs, and locally."""
    for n, (fn, args) in enumerate([(add, (2, 3)), (fail, ("bad input",)), (wait_too_long, ())]):
        folder = tmp_path / f"g{n}"
        run_job(folder, prepare(folder, fn, *args), job_id=str(50 + n))
        cluster = read_outcome(folder, 1 << 20)
        job = local.submit(fn, *args)
        here = job.wait(timeout=60)
        assert cluster is not None and (here["ok"], here["type" if not here["ok"] else "value"]) == (
            cluster["ok"], cluster["type" if not cluster["ok"] else "value"])
        if not here["ok"]:
            assert here["message"] == cluster["message"] and type(job.exception()) is type(
                _raised(cluster))


def _raised(outcome: dict[str, Any]) -> BaseException:
    try:
        raise_outcome(outcome)
    except Exception as exc:
        return exc
    raise AssertionError("no exception")


def test_a_local_preemption_checkpoints_and_resumes_every_step_once(local: Executor, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    job = local.submit(Counter(80), str(marks))
    wait_for(lambda: len(list(marks.iterdir())) >= 10)
    job.preempt(grace=20)
    assert job.result(timeout=60) == 80 and job.restarts == 1
    assert steps(marks) == list(range(80))


def test_a_submitit_checkpointable_resumes_after_a_local_preemption(local: Executor, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    job = local.submit(SubmititTrainer(80), str(marks), scale=2)
    wait_for(lambda: len(list(marks.iterdir())) >= 10)
    job.preempt(grace=20)
    assert job.result(timeout=60) == 160 and job.restarts == 1 and steps(marks) == list(range(80))


def test_a_call_without_a_checkpoint_restarts_from_the_top_after_a_preemption(local: Executor,
                                                                               tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    job = local.submit(starts, str(marks), 1.0)
    wait_for(lambda: (marks / "start-0").exists())
    job.preempt()
    assert job.result(timeout=60) == 2 and job.restarts == 1


def test_the_time_limit_requeues_a_checkpointed_call_up_to_max_requeues(local: Executor, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    # 4 s of work, 2 s a run before the grace signal: 2 runs on an idle machine; the cap leaves room for a busy one
    local.update_parameters(time="3s", grace=1, max_requeues=10)
    job = local.submit(Counter(80), str(marks))
    assert job.result(timeout=60) == 80 and job.restarts >= 1 and steps(marks) == list(range(80))
    capped = tmp_path / "capped"
    capped.mkdir()
    local.update_parameters(max_requeues=1)
    job = local.submit(Counter(400), str(capped))  # past the cap it runs on, and its time limit ends it
    with pytest.raises(JobError, match="it ended timeout"):
        job.result(timeout=60)
    done = steps(capped)
    assert job.restarts == 1 and job.state == "TIMEOUT" and done == list(range(len(done))) and len(done) < 400


def test_cancel_ends_the_call_and_its_processes(local: Executor) -> None:
    job = local.submit(nap, 60)
    wait_for(lambda: job.state == "RUNNING")
    pid = job._state()["pid"]
    assert job.cancel() == [job.job_id] and job.state == "CANCELLED"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert isinstance(job.exception(), JobError) and job.cancel() == []


def test_as_completed_yields_jobs_as_they_end(local: Executor) -> None:
    jobs = [local.submit(nap, s) for s in (2.0, 0.1)]
    assert [j.result() for j in as_completed(jobs, timeout=60, poll_frequency=0.05)] == [0.1, 2.0]
    slow = local.submit(nap, 30)
    with pytest.raises(TimeoutError, match="1 of 1 job"):
        list(as_completed([slow], timeout=0.2, poll_frequency=0.05))
    slow.cancel()


def test_the_debug_kind_runs_in_this_process_with_the_exception_itself(tmp_path: Path) -> None:
    ex = Executor(tmp_path, kind="debug")
    job = ex.submit(add, 2, 3)
    assert isinstance(job, DebugJob) and job.state == "PENDING"
    assert job.result() == 5 and job.state == "COMPLETED"
    bad = ex.submit(wait_too_long)
    exc = bad.exception()
    assert isinstance(exc, TimeoutError)
    frames = [f.name for f in traceback.extract_tb(exc.__traceback__)]
    assert frames[-1] == "wait_too_long"  # its own frames, for pdb.post_mortem
    with pytest.raises(TimeoutError, match="remote wait gave up"):
        bad.result()


def test_a_debug_preemption_resumes_from_the_checkpoint(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    job = Executor(tmp_path, kind="debug").submit(Counter(60), str(marks))
    threading.Thread(target=lambda: (wait_for(lambda: len(list(marks.iterdir())) >= 10), job.preempt()),
                     daemon=True).start()
    assert job.result() == 60 and job.restarts == 1 and steps(marks) == list(range(60))


def test_the_executor_says_in_one_line_what_it_needs(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("cluster: {name: t}\n")
    with pytest.raises(ValueError, match=r"is a file: the first argument is the jobs folder.*site="):
        Executor(site)
    with pytest.raises(ValueError, match="kind='cloud': expected one of slurm, local, debug"):
        Executor(tmp_path, kind="cloud")
    with pytest.raises(ValueError, match="needs a folder for its jobs"):
        Executor(kind="local")
    assert Executor(tmp_path, cluster="debug").kind == "debug"  # submitit's name for it
    with pytest.raises(ValueError, match="kind='local' and cluster='debug'"):
        Executor(tmp_path, kind="local", cluster="debug")
    ex = Executor(tmp_path, kind="local")
    ex.update_parameters(slurm_partition="gpu", timeout_min=5)  # Slurm-only names are left unused here
    assert ex.params.job_spec("f", "true").variants is None


def mark_and_nap(marks: str, name: str, seconds: float) -> str:
    with Path(marks, "runs").open("a") as log:
        log.write(f"{name}\n")
    time.sleep(seconds)
    return name


def test_a_function_sequence_keeps_what_it_did_across_a_preemption(local: Executor, tmp_path: Path) -> None:
    """submitit's FunctionSequence: several calls in one job; after a requeue only those not done run again."""
    from slurmx.executor import FunctionSequence
    from slurmx.executor.payload import carries_bytecode, pickle_call

    marks = tmp_path / "marks"
    marks.mkdir()
    seq = FunctionSequence()
    for name in "abcdef":
        seq.add(mark_and_nap, str(marks), name, 0.4)
    assert len(seq) == 6 and carries_bytecode(pickle_call(seq, (), {}))  # it travels by value
    job = local.submit(seq)
    wait_for(lambda: (marks / "runs").is_file() and "c" in (marks / "runs").read_text())
    job.preempt(grace=20)
    assert job.result(timeout=60) == list("abcdef") and job.restarts == 1
    runs = (marks / "runs").read_text().split()
    assert runs[:3] == ["a", "b", "c"] and sorted(set(runs)) == list("abcdef")
    assert len(runs) <= 7  # at most the call that was cut runs twice
    assert Executor(tmp_path, kind="debug").submit(seq).result() == list("abcdef")


def test_a_debug_call_outside_the_main_thread_is_not_preempted(tmp_path: Path) -> None:
    """Python handles signals in the main thread only: there, preempt() must do nothing, not end this process."""
    marks = tmp_path / "marks"
    marks.mkdir()
    job = Executor(tmp_path, kind="debug").submit(Counter(30), str(marks))
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(job.result()))
    worker.start()
    wait_for(lambda: len(list(marks.iterdir())) >= 5)
    job.preempt()
    worker.join(30)
    assert results == [30] and job.restarts == 0


def test_the_submitit_port_example_runs_locally_and_resumes_its_trainer(tmp_path: Path) -> None:
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(repo / "examples" / "submitit_port.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["add: 12", "as completed: [0, 2, 4]", "trained: 20 steps; requeued 1 time(s)"]
    (trainer,) = (tmp_path / "log_test").glob("Trainer-*")
    printed = "".join(p.read_text() for p in sorted(trainer.glob("fn-local-*.out"), key=lambda p: p.stat().st_mtime))
    assert sorted(printed.split("\n")[:-1], key=lambda line: int(line.split()[1])) == [
        f"step {n}" for n in range(1, 21)]  # every step once, across the preemption


def leaves_a_child(pidfile: str) -> str:
    """Starts a process that would outlive the call (a data loader worker, a server) and returns at once."""
    import subprocess

    child = subprocess.Popen(["sleep", "300"])
    Path(pidfile).write_text(str(child.pid))
    return "done"


def test_what_a_call_leaves_running_ends_with_it_as_on_the_cluster(local: Executor, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    job = local.submit(leaves_a_child, str(pidfile))
    assert job.result() == "done"
    child = int(pidfile.read_text())
    wait_for(lambda: not _alive(child), timeout=10)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:  # a zombie nobody reaped yet has ended
        return stat.read().split(") ", 1)[1][0] != "Z"
