"""`Executor`: submit Python functions as slurmx groups, one variant per resource kind, one run per call.

Each call becomes one group through the same path as `slurmx submit` (render, then submit every variant or none),
so modes, policies and exactly-once come with it; the call and the runtime travel in the group folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from slurmx.core.arrays import index_group, task_key
from slurmx.core.config import SiteConfig, load_site_config
from slurmx.executor.batch import BatchedJob, Call
from slurmx.executor.debug import DebugJob
from slurmx.executor.job import Job
from slurmx.executor.jobside import as_call
from slurmx.executor.local import submit_local
from slurmx.executor.params import ExecutorParams, job_name
from slurmx.executor.payload import array_files, call_label, carries_bytecode, folder_files, job_script, pickle_call
from slurmx.slurm import SlurmAdapter, adapter_from_config
from slurmx.submit.array import MAX_TASKS
from slurmx.submit.submitter import SubmittedGroup, as_slurm_arrays, submit_group, submit_groups

__all__ = ["Executor"]


_KINDS = ("slurm", "local", "debug")


class Executor:
    """`Executor(folder, site=...)`; `update_parameters(...)`; `submit(fn, *args, **kwargs) -> Job`.

    `folder` is where each submitted job is recorded by group id, so that `Job.attach(group_id, site,
    folder=folder)` finds its job ids without asking Slurm (optional on Slurm). `kind="local"` runs each call as a
    process on this machine and `kind="debug"` in this one (local.py, debug.py): no Slurm, no site, the same job
    API and checkpoint protocol. `cluster=` is submitit's name for `kind` ("slurm", "local", "debug").
    """

    def __init__(self, folder: str | Path | SiteConfig | None = None, site: SiteConfig | str | Path | None = None,
                 *, kind: str | None = None, cluster: str | None = None, adapter: SlurmAdapter | None = None) -> None:
        if isinstance(folder, SiteConfig) and site is None:  # the site first, as before the folder came first
            folder, site = None, folder
        if folder is not None and not isinstance(folder, SiteConfig) and Path(folder).is_file():
            raise ValueError(f"Executor: {folder} is a file: the first argument is the jobs folder (as submitit's); "
                             "pass the site config as site=...")
        if kind is not None and cluster is not None and kind != cluster:
            raise ValueError(f"Executor: kind={kind!r} and cluster={cluster!r} (submitit's name for it): give one")
        self.kind = kind or cluster or "slurm"
        if self.kind not in _KINDS:
            raise ValueError(f"Executor: kind={self.kind!r}: expected one of {', '.join(_KINDS)}")
        self.folder = Path(folder) if isinstance(folder, str | Path) else None
        self.params = ExecutorParams()
        self._batch: list[BatchedJob] | None = None
        self.site: SiteConfig | None = None
        if self.kind != "slurm":
            if self.folder is None:
                raise ValueError(f"Executor(kind={self.kind!r}) needs a folder for its jobs: Executor(folder, "
                                 f"kind={self.kind!r})")
            return
        if site is None:
            site = os.environ.get("SLURMX_SITE", "/etc/slurmx/site.yaml")
        self.site = site if isinstance(site, SiteConfig) else load_site_config(site)
        self.adapter = adapter or adapter_from_config(self.site.transport)

    def update_parameters(self, **values: Any) -> None:
        """Spec keys (variants, overrides, class, grace, estimates, time, mem, cpus, gpus, env, ...), the
        executor's own (name, mode, pick, python, max_requeues, max_result_bytes, poll, setup) and submitit's
        names (timeout_min, mem_gb, slurm_partition, ...: aliases.py); checked now."""
        partitions = ({kind: resource.partition for kind, resource in self.site.resources.items()}
                      if self.site is not None else None)
        self.params = self.params.updated(values, partitions)

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Submit `fn(*args, **kwargs)` as one group (a local process, a debug call); `result()` is its value.
        Inside `with executor.batch():` the call waits for the end of the block (`batch`)."""
        if self._batch is not None:
            pending = BatchedJob((fn, args, dict(kwargs)))
            self._batch.append(pending)
            return pending
        return self._submit_one(fn, args, kwargs)

    def _submit_one(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        params = self.params
        if self.kind == "local" and self.folder is not None:
            return submit_local(self.folder, params, fn, args, kwargs)
        if self.kind == "debug" and self.folder is not None:
            params.job_spec(job_name(fn), "true")  # what the other kinds check at submit time
            return DebugJob(f"{params.name or job_name(fn)}-{secrets.token_hex(4)}", self.folder, fn, args, kwargs)
        assert self.site is not None
        call = pickle_call(fn, args, kwargs)
        script = job_script(params.python, params.max_requeues, call_label(fn), carries_bytecode(call), params.setup)
        spec = params.job_spec(job_name(fn), script)
        files = folder_files(call)
        submitted = submit_group(spec, self.site, self.adapter, mode=params.mode, pick=params.pick,
                                 source="Executor.submit", files=files)
        self._record(submitted)
        return Job(submitted.group_id, self.site, self.adapter, submitted.variants,
                   params.max_result_bytes, params.poll)

    def map_array(self, fn: Callable[..., Any], *iterables: Iterable[Any]) -> list[Any]:
        """`fn` over the items (paired as `map(fn, *iterables)` pairs them), one job each, in order.

        On Slurm the calls are one Slurm job array per resource kind (K `sbatch` calls for K kinds, per 1,000
        items): task i of every kind's array is one group, `g[i]`, which runs once, on whichever kind starts it
        first; `array_parallelism` caps how many run at once across the kinds. A managed spec with profiling
        samples (`work:`) cannot be an array: each call is then a group of its own, as `submit` makes."""
        calls: list[Call] = [(fn, tuple(items), {}) for items in zip(*iterables, strict=False)]
        return self._submit_calls(calls)

    def submit_array(self, calls: Iterable[Any]) -> list[Any]:
        """Calls given whole, as `map_array` submits them: each a `(fn, args, kwargs)` tuple (`slurmx.executor.
        Resume`) or an object with `function`, `args` and `kwargs` (submitit's `DelayedSubmission`)."""
        made: list[Call] = []
        for position, call in enumerate(calls):
            try:
                made.append(as_call(call, None, (), {}))
            except TypeError:
                raise TypeError(f"submit_array: call {position} ({type(call).__name__}): expected (fn, args, "
                                "kwargs) or an object with function, args and kwargs") from None
            if not callable(made[-1][0]):
                raise TypeError(f"submit_array: call {position}: expected (fn, args, kwargs), got no function")
        return self._submit_calls(made)

    map = map_array  # submitit's executors have map_array; slurmx had map first: both mean the same

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """`with executor.batch(): jobs = [executor.submit(f, x) for x in xs]`: the calls made inside are
        submitted together when the block ends, as `map_array` submits them (each job's id is known from then
        on; asking one for its result inside the block is an error). Nothing is submitted when the block
        raises."""
        if self._batch is not None:
            raise RuntimeError("Executor.batch(): already inside a batch of this executor")
        self._batch = []
        try:
            yield
            pending, self._batch = self._batch, None
            if pending:
                submitted = self._submit_calls([job.call for job in pending])
                for job, real in zip(pending, submitted, strict=True):
                    job.land(real)
        finally:
            self._batch = None

    def _submit_calls(self, calls: list[Call]) -> list[Any]:
        if not calls:
            return []
        if self.kind != "slurm" or self.site is None:
            return [self._submit_one(fn, args, kwargs) for fn, args, kwargs in calls]
        params = self.params
        fn = calls[0][0]
        spec = params.job_spec(job_name(fn), "true").model_copy(
            update={"array": (0,), "array_throttle": params.array_parallelism})
        if not as_slurm_arrays(spec, self.site, params.mode, params.pick):
            return [self._submit_one(fn, args, kwargs) for fn, args, kwargs in calls]
        jobs: list[Any] = []
        for start in range(0, len(calls), MAX_TASKS):
            jobs += self._submit_array(calls[start:start + MAX_TASKS])
        return jobs

    def _submit_array(self, calls: list[Call]) -> list[Job]:
        """One Slurm array per kind for up to MAX_TASKS calls (task i runs call i)."""
        assert self.site is not None
        params = self.params
        pickled = [pickle_call(fn, args, kwargs) for fn, args, kwargs in calls]
        labels = sorted({call_label(fn) for fn, _, _ in calls})
        script = job_script(params.python, params.max_requeues, labels[0] if len(labels) == 1 else "array",
                            any(map(carries_bytecode, pickled)), params.setup, array=True)
        spec = params.job_spec(job_name(calls[0][0]), script).model_copy(
            update={"array": tuple(range(len(calls))), "array_throttle": params.array_parallelism})
        (submitted,) = submit_groups(spec, self.site, self.adapter, mode=params.mode, pick=params.pick,
                                     source="Executor.map_array", files=array_files(pickled))
        self._record(submitted)
        return [Job(index_group(submitted.group_id, index), self.site, self.adapter,
                    tuple((kind, task_key(job_id, index)) for kind, job_id in submitted.variants),
                    params.max_result_bytes, params.poll)
                for index in range(len(calls))]

    def _record(self, submitted: SubmittedGroup) -> None:
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        record = {"group": submitted.group_id, "name": submitted.name, "mode": submitted.mode,
                  "variants": [list(pair) for pair in submitted.variants],
                  "max_result_bytes": self.params.max_result_bytes}
        # Owner-only, never through a link: `Job.attach` reads back only a record that is the caller's alone.
        tmp = self.folder / f".{submitted.group_id}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        os.replace(tmp, self.folder / f"{submitted.group_id}.json")
