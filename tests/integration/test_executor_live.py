"""`slurmx.Executor` on the real cluster: functions, results, exceptions, output, map, re-attach, time-limit requeue.

The nodes' python3 is not this venv's: the jobs run `python3`. The calls come from `executor_calls.py`, copied to
the shared storage and imported from there on both sides, so they are pickled by reference and run on the nodes'
Python whatever its minor version (22.05's bookworm 3.11, 24.11's trixie 3.13). A function of this module travels
by value, as bytecode of this Python's minor version: on nodes with another one it must fail with the one line
naming both versions and the fix.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from slurmx.core.arrays import split_key
from slurmx.core.model import VariantState
from slurmx.executor import Executor, Job, JobError, RemoteTraceback
from slurmx.slurm import CliSlurm

from .conftest import Cluster, wait_until

pytestmark = pytest.mark.integration
cloudpickle.register_pickle_by_value(sys.modules[__name__])
REPO = Path(__file__).resolve().parents[2]
CALLS_MODULE = "slurmx_it_calls"


def add_by_value(a: int, b: int) -> int:
    return a + b


@pytest.fixture(scope="module")
def calls(cluster: Cluster) -> Iterator[Any]:
    """`executor_calls.py` as module `slurmx_it_calls` from a folder on the shared storage, on sys.path here."""
    folder = cluster.shared / "it-executor-calls"
    folder.mkdir(mode=0o755, exist_ok=True)
    folder.chmod(0o755)
    target = folder / f"{CALLS_MODULE}.py"
    target.write_text((Path(__file__).parent / "executor_calls.py").read_text())
    target.chmod(0o644)
    sys.path.insert(0, str(folder))
    sys.modules.pop(CALLS_MODULE, None)
    try:
        yield importlib.import_module(CALLS_MODULE)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(CALLS_MODULE, None)


@pytest.fixture(scope="module")
def node_python(cluster: Cluster) -> str:
    """The nodes' python3 as major.minor."""
    return subprocess.run(["docker", "exec", cluster.container("login"), "python3", "-c",
                           "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                          capture_output=True, text=True, timeout=60, check=True).stdout.strip()


HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"


def test_a_call_on_nodes_with_another_python_fails_with_the_fix(site_path: Path, cluster: Cluster, tmp_path: Path,
                                                                 tag: str, node_python: str) -> None:
    job = executor(site_path, tmp_path, name=tag, variants=["cpu"]).submit(add_by_value, 2, 3)
    if node_python == HERE:
        assert job.result(timeout=300) == 5
        return
    with pytest.raises(RuntimeError, match=rf"the call was pickled by Python {HERE} but the node runs Python "
                                           rf"{node_python} .*update_parameters\(python=\.\.\.\)"):
        job.result(timeout=300)


def calls_env(module: Any) -> dict[str, str]:
    """The job's environment: the shared folder the calls' module is imported from."""
    return {"PYTHONPATH": str(Path(module.__file__).parent)}


def executor(site_path: Path, tmp_path: Path, calls: Any = None, **params: Any) -> Executor:
    ex = Executor(site=site_path, folder=tmp_path / "jobs")
    ex.update_parameters(**{"mode": "race", "python": "python3", "variants": ["cpu", "gpu"], "time": "5m",
                            "env": calls_env(calls) if calls is not None else {}, **params})
    return ex


def ran_once(job: Job, slurm: CliSlurm) -> str:
    """The kind that ran; asserts the others ended cancelled without running the call. A sibling that lost cancels
    itself and is COMPLETING for a few seconds (KillWait) after the winner's result is in: its end is waited for."""
    def ended() -> dict[int, VariantState] | None:
        states = {j.job_id: j.state for j in slurm.jobs(job_ids=job.job_ids)}
        return None if any(s.is_active for s in states.values()) else states

    states = wait_until(ended, 60, f"every variant of {job.group_id} to end")
    ran = [kind for kind, job_id in job.variants if states.get(job_id) is not VariantState.CANCELLED]
    assert len(ran) == 1, (job.group_id, states)
    assert len(list(Path(job.folder).glob("fn-*.out"))) == 1
    return ran[0]


def test_submit_returns_the_value_reraises_the_exception_and_reattaches(site_path: Path, cluster: Cluster,
                                                                        slurm: CliSlurm, tmp_path: Path,
                                                                        tag: str, calls: Any) -> None:
    ex = executor(site_path, tmp_path, calls, name=tag)
    job = ex.submit(calls.add, 2, 3)
    bad = ex.submit(calls.fail, "bad input")
    assert job.result(timeout=300) == 5
    assert job.state == "COMPLETED" and job.done()
    assert job.variant in ("cpu", "gpu") and job.variant == ran_once(job, slurm)
    assert job.stdout() == f"adding 2 and 3 on {job.variant}\n"
    with pytest.raises(ValueError, match="bad input") as info:
        bad.result(timeout=300)
    assert isinstance(info.value.__cause__, RemoteTraceback)
    remote = str(info.value.__cause__)  # the node's own traceback of the call
    assert ", in fail\n" in remote and remote.endswith("ValueError: bad input\n")
    assert isinstance(bad.exception(), ValueError) and bad.state == "FAILED"
    ran_once(bad, slurm)
    # Another process, knowing only the group id, gets the same result.
    code = ("import sys; from slurmx.executor import Job; "
            "job = Job.attach(sys.argv[1], sys.argv[2]); print(repr(job.result(timeout=60)), job.variant)")
    proc = subprocess.run([sys.executable, "-c", code, job.group_id, str(site_path)], capture_output=True,
                          text=True, timeout=120, check=False, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["5", job.variant]
    record = json.loads((tmp_path / "jobs" / f"{job.group_id}.json").read_text())
    assert [v for _, v in record["variants"]] == job.job_ids


def test_map_runs_each_item_exactly_once_in_order(site_path: Path, cluster: Cluster, slurm: CliSlurm,
                                                 tmp_path: Path, tag: str, calls: Any) -> None:
    marks = cluster.shared / f"{tag}-map"
    marks.mkdir(mode=0o777)
    marks.chmod(0o777)
    ex = executor(site_path, tmp_path, calls, name=tag)
    items = list(range(20))  # the acceptance: 20 items, 20 results in order, each run once
    jobs = ex.map(calls.square_once, items, [str(marks)] * len(items))
    assert [job.result(timeout=420) for job in jobs] == [x * x for x in items]
    runs = sorted(p.name.split("-")[0] for p in marks.iterdir())
    assert runs == sorted(str(x) for x in items)  # one run per item
    for job in jobs:
        ran_once(job, slurm)


def test_submitits_documented_examples_give_the_same_results_on_the_cluster_as_locally(
        site_path: Path, tmp_path: Path, tag: str, calls: Any) -> None:
    """Issue 33's acceptance: submitit's examples unchanged but for the executor, live; and the local executor's
    results equal the cluster's for the same calls."""
    from .submitit_docs import EXPECTED, run_examples

    cluster_out = run_examples(executor(site_path, tmp_path, calls, name=tag), calls)
    local_out = run_examples(Executor(tmp_path / "local", kind="local"), calls)
    assert cluster_out == EXPECTED and local_out == cluster_out


@pytest.mark.long_behaviour
def test_map_array_is_one_slurm_array_per_kind_throttled_and_each_item_runs_once(
        site_path: Path, cluster: Cluster, slurm: CliSlurm, tmp_path: Path, tag: str, calls: Any) -> None:
    marks = cluster.shared / f"{tag}-array"
    marks.mkdir(mode=0o777)
    marks.chmod(0o777)
    ex = executor(site_path, tmp_path, calls, name=tag, array_parallelism=2)
    items = list(range(8))
    with ex.batch():
        jobs = [ex.submit(calls.timed_square, x, str(marks)) for x in items]
    assert len({split_key(job_id)[0] for job in jobs for job_id in job.job_ids}) == 2  # one array per kind
    assert [job.result(timeout=420) for job in jobs] == [x * x for x in items]
    runs = [p.read_text().split() for p in marks.iterdir()]
    assert sorted(int(r[0]) for r in runs) == items  # one run per item
    for kind in ("cpu", "gpu"):  # race mode: each kind's array runs at most 2 tasks at once
        spans = [(float(r[2]), float(r[3])) for r in runs if r[1] == kind]
        assert max((sum(a <= s < b for a, b in spans) for s, _ in spans), default=0) <= 2, (kind, spans)
    for job in jobs:
        ran_once(job, slurm)
        assert Path(job.folder).name.startswith("task-")


@pytest.mark.long_behaviour
def test_a_two_node_call_runs_a_task_per_node_and_results_has_each(site_path: Path, cluster: Cluster,
                                                                    tmp_path: Path, tag: str, calls: Any) -> None:
    ex = executor(site_path, tmp_path, calls, name=tag, variants=["cpu"], nodes=2, tasks_per_node=1)
    job = ex.submit(calls.where_am_i)
    results = job.results(timeout=300)
    assert [r[0] for r in results] == [0, 1] and all(r[1] == 2 for r in results)
    assert len({r[2] for r in results}) == 2 and sorted(r[2] for r in results) == sorted(results[0][3])
    assert job.task(1).stdout() == f"rank 1 on {results[1][2]}\n"


@pytest.mark.long_behaviour
def test_a_checkpointed_call_survives_its_time_limit_up_to_max_requeues(site_path: Path, cluster: Cluster,
                                                                        slurm: CliSlurm, tmp_path: Path,
                                                                        tag: str, calls: Any) -> None:
    """Slurm signals the job `grace` before its 2-minute limit; the call checkpoints, the job requeues itself and
    resumes where it stopped. With max_requeues=0 the same call runs on and is killed at the limit."""
    ex = executor(site_path, tmp_path, calls, name=tag, time="2m", grace="30s", variants=["cpu"], max_requeues=3)
    job = ex.submit(calls.Trainer(100))
    capped = executor(site_path, tmp_path, calls, name=f"{tag}-cap", time="2m", grace="30s", variants=["cpu"],
                      max_requeues=0).submit(calls.Trainer(200))
    out = job.result(timeout=600)
    assert out["done"] == list(range(100))  # every step once, none lost across the requeue
    assert 1 <= out["restarts"] <= 3
    assert (job.outcome() or {}).get("restarts") == out["restarts"]
    with pytest.raises(JobError, match="timeout"):
        capped.result(timeout=300)
    assert not (Path(capped.folder) / "resume.pkl").exists()
    assert "the cap (max_requeues)" in (capped.stderr() or "")


@pytest.mark.long_behaviour
def test_a_managed_call_preempted_twice_by_fitgpp_and_cut_by_its_time_limit_loses_no_step(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, calls: Any) -> None:
    """Managed mode under slurmxd running FitGpp: a TE job filling node c2 and the call (BE) filling c1; each of two
    TE jobs that arrive later finds no room, so FitGpp preempts the call, the only BE job running. Then Slurm's
    own time limit cuts its third run. Each time it checkpoints and resumes; the result has every step once and
    three restarts (max_requeues is 3). FitGpp's cap P on preemptions per job is raised from its default 1 to 2."""
    from slurmx.daemon.store import Store
    from tests.integration.test_daemon_helpers import DaemonProcess, daemon_site, submit_group

    site_path = daemon_site(cluster, tmp_path, "fitgpp", kinds=("cpu",), grace=15, params={"max_preemptions": 2})
    ex = Executor(site=site_path, folder=tmp_path / "jobs")
    ex.update_parameters(name=tag, mode="managed", python="python3", variants=["cpu"], time="1m", grace="15s",
                         max_requeues=3, cpus=4, env=calls_env(calls))
    marks = cluster.shared / f"{tag}-marks"
    marks.mkdir(mode=0o777)
    marks.chmod(0o777)
    daemon = DaemonProcess(site_path, tmp_path / "slurmxd.log")
    filler = submit_group(admin, tag, {"cpu": (600, "sleep 600")}, job_class="te", cpus=4, group_id=f"{tag}-fill")
    daemon.start()
    arrivals = []
    try:
        wait_until(lambda: admin.jobs([filler.jobs["cpu"]])[0].state is VariantState.RUNNING, 90,
                   "the TE job filling one node to run")
        job = ex.submit(calls.MarkingTrainer(80, str(marks / "step")))
        for run, step in ((0, 10), (1, 20)):
            wait_until(lambda run=run, step=step: _past(marks / "step", run, step), 180,  # type: ignore[misc]
                       f"run {run} past step {step}")
            arrivals.append(submit_group(admin, tag, {"cpu": (5, "sleep 2")}, job_class="te", cpus=1,
                                         group_id=f"{tag}-te{run}"))
        out = job.result(timeout=600)
    finally:
        daemon.stop()
        admin.cancel([filler.jobs["cpu"], *(j for g in arrivals for j in g.jobs.values())])
    assert out["done"] == list(range(80))  # every step exactly once across four runs
    assert out["restarts"] == 3  # two preemptions by FitGpp and the time limit
    history = Store(tmp_path / "state" / "slurmxd.sqlite").history(job.group_id)
    assert len([e for e in history if e.event == "preempt"]) == 2, [(e.event, e.detail) for e in history]
    assert "Traceback" not in daemon.text()


def _past(marks: Path, restarts: int, step: int) -> bool:
    """Whether the call's run `restarts` is past `step` (its marks file)."""
    try:
        run, done = marks.read_text().split()
    except (OSError, ValueError):
        return False
    return int(run) == restarts and int(done) >= step


@pytest.mark.long_behaviour
def test_submitit_code_runs_unchanged_its_names_setup_and_checkpointable_preempted(
        site_path: Path, cluster: Cluster, admin: CliSlurm, tmp_path: Path, tag: str, calls: Any) -> None:
    """submitit's parameter names (the partition as the site's kinds on it, setup lines) and a class whose
    checkpoint() returns a DelayedSubmission, preempted by the protocol slurmxd runs: it resumes from its state."""
    from slurmx.core.config import load_site_config
    from slurmx.daemon.preemption import preempt_and_wait

    partition = load_site_config(site_path).resources["cpu"].partition
    ex = Executor(tmp_path / "jobs", site=site_path)
    ex.update_parameters(name=tag, mode="race", slurm_python="python3", timeout_min=5, cpus_per_task=1,
                         slurm_partition=partition, slurm_setup=["export SETUP_MARK=from-setup"],
                         env=calls_env(calls))
    folder = cluster.shared / f"{tag}-steps"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    marks = folder / "step"
    job = ex.submit(calls.SubmititTrainer(40), str(marks))
    wait_until(lambda: len(_steps(marks)) >= 5, 180, "run 0 past step 5")
    ran = job.variant
    job_id = dict(job.variants)[ran or ""]
    outcome = preempt_and_wait(admin, job_id, 30, spool_dir=job.folder, reason="integration test", poll=0.5)
    assert outcome.error is None, outcome.line()
    out = job.result(timeout=300)
    assert out["done"] == list(range(40)) and out["restarts"] == 1 and out["setup"] == "from-setup"
    steps = _steps(marks)
    assert sorted(step for _, step in steps) == list(range(40))  # every step once: resumed, not restarted
    assert {run for run, _ in steps} == {0, 1}


def _steps(marks: Path) -> list[tuple[int, int]]:
    """(run, step) of each step the call logged."""
    try:
        return [(int(run), int(step)) for run, step in (line.split() for line in marks.read_text().splitlines())]
    except (OSError, ValueError):
        return []
