"""`Executor.map_array` / `map` / `batch()` as one Slurm job array per kind, and the array task's job side."""

from __future__ import annotations

import base64
import io
import subprocess
import sys
import zipfile
from pathlib import Path

import cloudpickle
import pytest

from slurmx.core.arrays import split_key
from slurmx.core.validation import ConfigError
from slurmx.executor import Executor, Job
from slurmx.executor.payload import array_files, job_script, pickle_call, read_outcome, task_folder
from tests.unit.test_executor import add, env_for, fail
from tests.unit.test_submitter import ok, site, slurm


def square(x: int) -> int:
    return x * x


def _executor(tmp_path: Path, answers: int, **params: object) -> tuple[Executor, object]:
    adapter, transport = slurm({("sbatch",): [ok(f"{500 + i}\n") for i in range(answers)]})
    ex = Executor(tmp_path / "jobs", site=site(), adapter=adapter)
    ex.update_parameters(mode="race", variants=["cpu", "gpu"], python="python3", time="5m", **params)
    return ex, transport


def _calls_in(transport: object) -> list[tuple[object, ...]]:
    """The calls in the array's calls zip, as the folder write carried it."""
    writes = {argv[-1].rsplit("/", 1)[1]: text for argv, text in transport.folder_calls[1:]}  # type: ignore[attr-defined]
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(writes["calls.zip.b64"]))) as archive:
        names = sorted(archive.namelist(), key=lambda n: int(n.split(".")[0]))
        return [cloudpickle.loads(archive.read(n))[1:] for n in names]


def test_map_over_many_items_is_one_sbatch_per_kind_and_one_folder_write(tmp_path: Path) -> None:
    ex, transport = _executor(tmp_path, 2, slurm_array_parallelism=10)
    jobs = ex.map(square, range(250))
    calls = transport.calls  # type: ignore[attr-defined]
    sbatches = [stdin or "" for argv, stdin in calls if argv[0] == "sbatch"]
    assert len(sbatches) == 2  # K kinds, whatever the item count
    assert [argv for argv, _ in calls] == [("sbatch", "--parsable", "--array=0-249%10")] * 2
    assert all('--folder "$f" --calls "$d/calls.zip" --index "$SLURM_ARRAY_TASK_ID"' in s for s in sbatches)
    _, *writes = transport.folder_calls  # type: ignore[attr-defined]
    assert len(writes) == 2  # the calls zip and the runtime: not one file per item
    assert _calls_in(transport) == [((i,), {}) for i in range(250)]
    group = jobs[0].group_id.rsplit("[", 1)[0]
    assert [j.group_id for j in jobs] == [f"{group}[{i}]" for i in range(250)]
    assert jobs[7].folder == f"/shared/spool/{group}/task-7"
    assert [split_key(job_id) for job_id in jobs[7].job_ids] == [(500, 7), (501, 7)]


def test_more_items_than_an_array_holds_are_several_arrays(tmp_path: Path) -> None:
    ex, transport = _executor(tmp_path, 4)
    jobs = ex.map_array(add, range(1500), range(1500))
    assert sum(argv[0] == "sbatch" for argv, _ in transport.calls) == 4  # type: ignore[attr-defined]
    assert len({j.group_id.rsplit("[", 1)[0] for j in jobs}) == 2 and len(jobs) == 1500
    assert jobs[1499].group_id.endswith("[499]")


def test_a_batch_is_submitted_when_its_block_ends_as_one_array(tmp_path: Path) -> None:
    ex, transport = _executor(tmp_path, 2)
    with ex.batch():
        jobs = [ex.submit(add, i, b=1) for i in range(3)]
        jobs.append(ex.submit(fail, "no"))
        assert not transport.calls  # type: ignore[attr-defined]
        with pytest.raises(RuntimeError, match=r"when its `with executor.batch\(\):` block ends"):
            jobs[0].result()
    assert sum(argv[0] == "sbatch" for argv, _ in transport.calls) == 2  # type: ignore[attr-defined]
    assert _calls_in(transport) == [((0,), {"b": 1}), ((1,), {"b": 1}), ((2,), {"b": 1}), (("no",), {})]
    assert jobs[3].group_id.endswith("[3]") and isinstance(jobs[3].job_ids, list)


def test_a_batch_whose_block_raises_submits_nothing(tmp_path: Path) -> None:
    ex, transport = _executor(tmp_path, 2)
    with pytest.raises(KeyError), ex.batch():
        ex.submit(add, 1, 2)
        raise KeyError("stop")
    assert not transport.calls  # type: ignore[attr-defined]
    assert ex.submit is not None and ex._batch is None  # the executor submits normally again


def test_a_managed_spec_with_profiling_work_is_one_group_per_item(tmp_path: Path) -> None:
    adapter, transport = slurm({("sbatch",): [ok(f"{600 + i}\n") for i in range(12)]})
    ex = Executor(tmp_path / "jobs", site=site(), adapter=adapter)
    ex.update_parameters(mode="managed", variants=["cpu", "gpu"], python="python3", time="5m", work=100)
    jobs = ex.map(square, [1, 2])
    assert all("[" not in j.group_id for j in jobs) and len({j.group_id for j in jobs}) == 2
    assert not any(a.startswith("--array") for argv, _ in transport.calls for a in argv)


def test_array_parallelism_is_checked(tmp_path: Path) -> None:
    ex, _ = _executor(tmp_path, 0)
    with pytest.raises(ConfigError, match="array_parallelism must be an integer >= 0"):
        ex.update_parameters(array_parallelism=-1)


def test_an_array_task_runs_its_own_call_in_its_own_folder(tmp_path: Path) -> None:
    """The job script of a function array, run as Slurm runs task 2 (SLURM_ARRAY_TASK_ID=2)."""
    folder = tmp_path / "g"
    folder.mkdir(mode=0o700)
    for name, text in array_files([pickle_call(add, (i, 10), {}) for i in range(4)]).items():
        (folder / name).write_text(text)
    script = folder / "payload"
    script.write_text(job_script(sys.executable, max_requeues=2, array=True))
    for index in (2, 3):
        env = {**env_for(folder, job_id=f"90{index}"), "SLURM_ARRAY_TASK_ID": str(index)}
        done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 0, done.stderr
        outcome = read_outcome(task_folder(folder, index), 1 << 20)
        assert outcome is not None and outcome["value"] == index + 10
        assert (task_folder(folder, index) / f"fn-90{index}.out").read_text() == f"adding {index} and 10\n"
    assert not (folder / "outcome.pkl").exists() and not task_folder(folder, 0).exists()


def test_an_index_without_a_call_fails_with_a_reason_not_a_hang(tmp_path: Path) -> None:
    folder = tmp_path / "g"
    folder.mkdir(mode=0o700)
    for name, text in array_files([pickle_call(add, (1, 1), {})]).items():
        (folder / name).write_text(text)
    script = folder / "payload"
    script.write_text(job_script(sys.executable, max_requeues=2, array=True))
    env = {**env_for(folder, job_id="77"), "SLURM_ARRAY_TASK_ID": "5"}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    outcome = read_outcome(task_folder(folder, 5), 1 << 20)
    assert outcome is not None and not outcome["ok"] and outcome["type"] == "KeyError"


def test_an_index_job_reads_its_task_folder(tmp_path: Path) -> None:
    from slurmx.core.config import SiteConfig

    the_site = SiteConfig.model_validate({"cluster": {"name": "t"},
                                          "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "1G"}},
                                          "submit": {"spool_dir": str(tmp_path / "spool")}})
    task = tmp_path / "spool" / "sq-abc123" / "task-4"
    task.mkdir(parents=True, mode=0o700)
    (task / "outcome.pkl").write_bytes(cloudpickle.dumps({"ok": True, "value": 16, "variant": "cpu",
                                                          "job_id": "9"}))
    job = Job("sq-abc123[4]", the_site, adapter=None)  # type: ignore[arg-type]
    assert job.result(timeout=1) == 16 and job.paths.result_pickle == task / "outcome.pkl"


def test_local_kinds_take_map_and_batch_the_same_way(tmp_path: Path) -> None:
    ex = Executor(tmp_path / "jobs", kind="debug")
    with ex.batch():
        batched = [ex.submit(square, i) for i in range(3)]
    assert [j.result() for j in batched] == [0, 1, 4]
    assert [j.result() for j in ex.map_array(square, [5, 6])] == [25, 36]


def test_submit_array_takes_calls_whole_as_tuples_or_submitit_s_delayed_shape(tmp_path: Path) -> None:
    class Delayed:  # the shape of submitit's DelayedSubmission, without submitit
        def __init__(self, function: object, *args: object, **kwargs: object) -> None:
            self.function, self.args, self.kwargs = function, args, kwargs

    ex, transport = _executor(tmp_path, 2)
    jobs = ex.submit_array([(add, (1, 2), {}), Delayed(add, 3, b=4)])
    assert len(jobs) == 2 and _calls_in(transport) == [((1, 2), {}), ((3,), {"b": 4})]
    with pytest.raises(TypeError, match=r"submit_array: call 1 \(int\): expected"):
        ex.submit_array([(add, (1,), {}), 5])


def test_the_jobs_of_a_map_ask_squeue_once_a_round_not_once_each(tmp_path: Path) -> None:
    """`as_completed` over the jobs of one array: every job's state comes from one squeue listing per round."""
    import os
    from dataclasses import replace as copy

    from slurmx.core.arrays import task_key
    from slurmx.core.config import SiteConfig
    from slurmx.executor import as_completed
    from tests.unit.test_profile_daemon import variant_job
    from tests.unit.test_submitter import _LocalFolders

    spool = tmp_path / "spool"
    (spool / "sq-0a1b2c").mkdir(parents=True, mode=0o700)
    the_site = SiteConfig.model_validate({"cluster": {"name": "t"},
                                          "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "1G"}},
                                          "submit": {"spool_dir": str(spool)}})
    tasks = [copy(variant_job(task_key(900, i), "sq-0a1b2c", "cpu", ""), user_id=os.getuid(), array_job_id=900,
                  array_task_id=i) for i in range(20)]

    class Counting(_LocalFolders):
        calls = 0

        def jobs(self, user: str | None = None, **_: object) -> list[object]:
            Counting.calls += 1
            return list(tasks)

        def accounting(self, since: str = "") -> list[object]:
            raise AssertionError("every job is in squeue's listing")

    adapter = Counting()
    jobs = [Job(f"sq-0a1b2c[{i}]", the_site, adapter, poll=60.0) for i in range(20)]  # type: ignore[arg-type]
    assert [job.state for job in jobs] == ["PENDING"] * 20 and Counting.calls == 1
    with pytest.raises(TimeoutError, match="20 of 20 job"):
        next(iter(as_completed(jobs, timeout=0.2, poll_frequency=0.1)))
    assert Counting.calls == 1  # the same listing, younger than poll / 2
