"""Multi-task calls: each task's outcome and output, `results()`, `task(i)`, and `JobEnvironment`."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmx.core.config import SiteConfig
from slurmx.executor import Job
from slurmx.executor.params import ExecutorParams
from slurmx.hooks import JobEnvironment
from slurmx.hooks.environment import expand_hostlist
from tests.unit.test_executor import env_for, prepare


def rank_and_world() -> tuple[int, int, str]:
    from slurmx.hooks import JobEnvironment

    env = JobEnvironment()
    print(f"task {env.global_rank} of {env.num_tasks}")
    return env.global_rank, env.num_tasks, env.master_addr


def _site(tmp_path: Path) -> SiteConfig:
    return SiteConfig.model_validate({"cluster": {"name": "t"},
                                      "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "1G"}},
                                      "submit": {"spool_dir": str(tmp_path / "spool")}})


def _run_task(folder: Path, rank: int, tasks: int) -> None:
    """One task of the call, as srun starts it (SLURM_PROCID and the rest set per task)."""
    env = {**env_for(folder, job_id="4242"), "SLURM_PROCID": str(rank), "SLURM_NTASKS": "1",
           "SLURM_LOCALID": str(rank % 2), "SLURM_NODEID": str(rank // 2), "SLURM_JOB_NUM_NODES": "1",
           "SLURM_JOB_NODELIST": "c[1-2]"}
    # The batch script's SLURM_NTASKS decides srun; each task then sees the job's task count.
    code = ("import os, runpy, sys; os.environ['SLURM_NTASKS'] = sys.argv[1]; "
            "sys.argv = ['_slurmx_call', '--max-requeues', '2']; runpy.run_module('_slurmx_call', run_name='__main__')")
    for packed, name in (("call.pkl.b64", "call.pkl"), ("executor.zip.b64", "executor.zip")):  # as the script does
        (folder / name).write_bytes(base64.b64decode((folder / packed).read_text()))
    done = subprocess.run([sys.executable, "-c", code, str(tasks)],
                          env={**env, "PYTHONPATH": f"{folder / 'executor.zip'}:{env['PYTHONPATH']}"},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_each_task_writes_its_own_outcome_and_output_and_results_reads_them_in_order(tmp_path: Path) -> None:
    folder = tmp_path / "spool" / "rw-abc123"
    folder.parent.mkdir()
    prepare(folder, rank_and_world)
    for rank in (1, 0, 2):
        _run_task(folder, rank, 3)
    job = Job("rw-abc123", _site(tmp_path), adapter=None)  # type: ignore[arg-type]
    assert job.results(timeout=5) == [(0, 3, "c1"), (1, 3, "c1"), (2, 3, "c1")]
    assert job.result(timeout=5) == (0, 3, "c1")  # the call's own result is task 0's
    assert job.task(2).result(timeout=5) == (2, 3, "c1") and job.task(2).stdout() == "task 2 of 3\n"
    assert job.stdout() == "task 0 of 3\n" and job.task(1).paths.result_pickle == folder / "outcome-1.pkl"
    with pytest.raises(ValueError, match="a task rank is an integer >= 0"):
        job.task(-1)


def test_a_one_task_call_has_one_result_and_task_zero_alone(tmp_path: Path) -> None:
    from slurmx.executor import Executor

    ex = Executor(tmp_path / "jobs", kind="debug")
    job = ex.submit(pow, 2, 5)
    assert job.results() == [32] and job.task(0) is job
    with pytest.raises(ValueError, match="runs one task"):
        job.task(1)


def test_the_job_script_launches_with_srun_only_for_more_than_one_task_or_node(tmp_path: Path) -> None:
    """One task: the call runs in the batch script itself (no srun needed on the node)."""
    folder = tmp_path / "g"
    script = prepare(folder, rank_and_world)
    env = {**env_for(folder, job_id="5"), "SLURM_NTASKS": "1", "SLURM_JOB_NUM_NODES": "1",
           "PATH": "/usr/bin:/bin"}  # no srun on this PATH
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    text = script.read_text()
    assert 'if [ "${SLURM_NTASKS:-1}" -gt 1 ] || [ "${SLURM_JOB_NUM_NODES:-1}" -gt 1 ]; then launch=(srun); fi' \
        in text


def test_submitits_task_names_are_the_spec_s_node_and_task_counts() -> None:
    spec = ExecutorParams().updated({"nodes": 2, "tasks_per_node": 4}).job_spec("f", "true")
    assert (spec.nodes, spec.ntasks_per_node) == (2, 4)
    spec = ExecutorParams().updated({"slurm_ntasks_per_node": 2}).job_spec("f", "true")
    assert spec.ntasks_per_node == 2


def test_job_environment_reads_slurm_s_task_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"SLURM_JOB_ID": "1234", "SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8",
                        "SLURM_NODEID": "2", "SLURM_JOB_NUM_NODES": "4", "SLURM_JOB_NODELIST": "n[01-03],gpu7"}.items():
        monkeypatch.setenv(name, value)
    env = JobEnvironment()
    assert (env.job_id, env.global_rank, env.local_rank, env.num_tasks, env.node, env.num_nodes) == \
        ("1234", 5, 1, 8, 2, 4)
    assert env.hostnames == ["n01", "n02", "n03", "gpu7"] and env.master_addr == "n01"
    exported = env.export_torch_distributed()
    assert exported == {"MASTER_ADDR": "n01", "MASTER_PORT": str(20000 + 1234), "RANK": "5", "WORLD_SIZE": "8",
                        "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    assert os.environ["WORLD_SIZE"] == "8"


@given(st.lists(st.tuples(st.sampled_from(["c", "gpu", "n-"]), st.integers(0, 40), st.integers(0, 5),
                          st.integers(1, 3)), min_size=1, max_size=4))
def test_property_a_host_list_expands_as_slurm_writes_it(parts: list[tuple[str, int, int, int]]) -> None:
    text, expected = [], []
    for prefix, first, extra, width in parts:
        last = first + extra
        text.append(f"{prefix}[{first:0{width}d}-{last:0{width}d}]")
        expected += [f"{prefix}{n:0{width}d}" for n in range(first, last + 1)]
    assert expand_hostlist(",".join(text)) == expected


class Steps:
    """`total` steps of 0.05 s, each marked by task and run; checkpoints its step (task 0's is the one kept)."""

    def __init__(self, total: int, marks: str, step: int = 0) -> None:
        self.total, self.marks, self.step = total, marks, step

    def __call__(self) -> tuple[int, int]:
        import time

        from slurmx.hooks import JobEnvironment

        rank = JobEnvironment().global_rank
        while self.step < self.total:
            Path(self.marks, f"r{rank}-s{self.step}-{os.getpid()}").touch()
            self.step += 1
            time.sleep(0.05)
        return rank, self.step

    def checkpoint(self) -> Steps:
        return Steps(self.total, self.marks, self.step)


def test_a_local_multi_task_call_runs_every_task_and_resumes_them_from_task_0_s_checkpoint(tmp_path: Path) -> None:
    from slurmx.executor import Executor
    from tests.unit.test_executor_local import wait_for

    marks = tmp_path / "marks"
    marks.mkdir()
    ex = Executor(tmp_path / "jobs", kind="local")
    ex.update_parameters(nodes=2, tasks_per_node=2)
    job = ex.submit(rank_and_world)
    assert job.results(timeout=60) == [(rank, 4, "localhost") for rank in range(4)]
    assert job.task(3).stdout() == "task 3 of 4\n" and job.task(3).paths.result_pickle.name == "outcome-3.pkl"
    steps = Executor(tmp_path / "jobs", kind="local")
    steps.update_parameters(ntasks=2)
    preempted = steps.submit(Steps(40, str(marks)))
    wait_for(lambda: len(list(marks.glob("r0-*"))) >= 10)
    preempted.preempt(grace=10)
    assert preempted.results(timeout=60) == [(0, 40), (1, 40)]
    assert preempted.restarts == 1
    runs: dict[tuple[int, int], list[int]] = {}  # (rank, pid) -> steps
    for mark in marks.iterdir():
        rank, step, pid = mark.name.split("-")
        runs.setdefault((int(rank[1:]), int(pid)), []).append(int(step[1:]))
    zero = sorted((min(v), k) for k, v in runs.items() if k[0] == 0)  # task 0's runs, first step first
    assert sorted(s for (rank, _), v in runs.items() if rank == 0 for s in v) == list(range(40))  # each step once
    resumed = zero[1][0]  # where task 0's checkpoint left the call
    assert [min(v) for (rank, _), v in runs.items() if rank == 1 and min(v) > 0] == [resumed]  # task 1 resumed there
