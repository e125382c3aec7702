"""Run a sweep's points as one Slurm job array, and collect their results.

The sweep directory lives on the site's shared spool (seen at the same path by every node): `points.json`,
a copy of the slurmx package (`code/`, so the nodes run exactly the submitter's code), any trace file the
points read (`traces/`), then `results/INDEX.json` or `results/INDEX.error` and `logs/INDEX.out` written by
the tasks. Results are read back as the same JSON documents a local run returns, so a sweep gives the same
numbers on the cluster as on a laptop (an integration test checks it on the docker-slurm cluster).
"""

from __future__ import annotations

import copy
import json
import math
import secrets
import shlex
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmx.core.config import SiteConfig
from slurmx.core.model import VariantState
from slurmx.sim.sweep import SweepPoint
from slurmx.slurm.adapter import SlurmAdapter

__all__ = ["SlurmSweep", "SweepError", "collect", "prepare", "run_on_slurm", "submit"]


class SweepError(RuntimeError):
    """A point failed on the cluster, or the array ended without its result; the message names the point."""


@dataclass(frozen=True)
class SlurmSweep:
    directory: Path
    job_id: int
    count: int


def prepare(points: Sequence[SweepPoint], spool_dir: str) -> Path:
    """Write the sweep directory on shared storage; returns it."""
    directory = Path(spool_dir) / "sweeps" / f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    for sub in ("results", "logs"):
        (directory / sub).mkdir(parents=True)
        (directory / sub).chmod(0o1777)  # the tasks run as the submitting user, maybe not us
    package = Path(__file__).resolve().parents[1]  # the slurmx package this module is part of
    shutil.copytree(package, directory / "code" / "slurmx", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    documents = []
    for point in points:
        document = copy.deepcopy(dict(point.document))
        workload = document.get("workload")
        trace = workload.get("trace") if isinstance(workload, dict) else None
        if isinstance(workload, dict) and isinstance(trace, str) and not trace.startswith(spool_dir + "/"):
            shipped = directory / "traces" / f"{point.index}-{Path(trace).name}"
            shipped.parent.mkdir(exist_ok=True)
            shutil.copyfile(trace, shipped)
            workload["trace"] = str(shipped)
        documents.append({"index": point.index, "label": dict(point.label), "document": document})
    (directory / "points.json").write_text(json.dumps(documents, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    for path in directory.rglob("*"):
        path.chmod(path.stat().st_mode | 0o444 | (0o111 if path.is_dir() else 0))
    directory.chmod(0o755)
    return directory


def submit(adapter: SlurmAdapter, site: SiteConfig, directory: Path, count: int) -> SlurmSweep:
    """One `sbatch --array` for every point; the task runs `python -m slurmx.sim.sweep_task DIR INDEX`."""
    cfg = site.sweep
    throttle = f"%{cfg.max_parallel}" if cfg.max_parallel else ""
    options = [
        f"--job-name={_job_name(directory)}",
        f"--array=0-{count - 1}{throttle}",
        f"--output={directory}/logs/%a.out",
        f"--cpus-per-task={cfg.cpus}",
        f"--mem={cfg.mem_mb}M",
        f"--time={max(1, math.ceil(cfg.time_s / 60))}",
        *([f"--partition={cfg.partition}"] if cfg.partition else []),
    ]
    pythonpath = ":".join([str(directory / "code"), *cfg.pythonpath])
    # Every value is shell-quoted into the script rather than passed with `sbatch --export=ALL,VAR=...`: an
    # --export other than ALL makes slurmd build a login environment for the user, which a slurmd without the
    # privilege to clone (the docker test cluster) dies of ("fatal: clone: Operation not permitted").
    script = ("#!/bin/bash\n"
              "# slurmx sim sweep: one point of the grid per array task\n"
              f"export PYTHONPATH={shlex.quote(pythonpath)}\n"
              f'exec {shlex.quote(cfg.python)} -m slurmx.sim.sweep_task {shlex.quote(str(directory))} '
              '"$SLURM_ARRAY_TASK_ID"\n')
    return SlurmSweep(directory, adapter.submit(script, options), count)


def _job_name(directory: Path) -> str:
    """Unique per sweep: squeue lists each array task under its own id, so the name is how we find them."""
    return f"slurmx-sweep-{directory.name}"


def _array_active(adapter: SlurmAdapter, sweep: SlurmSweep) -> bool:
    """Whether any task of the array is still pending or running."""
    active = (VariantState.PENDING, VariantState.RUNNING, VariantState.HELD, VariantState.REQUEUED,
              VariantState.SUSPENDED)
    name = _job_name(sweep.directory)
    return any(job.name == name and job.state in active for job in adapter.jobs())


def collect(adapter: SlurmAdapter, sweep: SlurmSweep, on_progress: Callable[[int], None] | None = None,
            poll_s: float = 1.0, settle_s: float = 10.0, timeout_s: float | None = None) -> list[dict[str, Any]]:
    """Wait for every point's result; a failed point or an array that ended without results is a SweepError."""
    results = sweep.directory / "results"
    started = time.monotonic()
    idle_since: float | None = None
    last = -1
    while True:
        done = {int(p.stem) for p in results.glob("*.json")}
        errors = sorted(int(p.stem) for p in results.glob("*.error"))
        if errors:
            first = (results / f"{errors[0]}.error").read_text(encoding="utf-8").strip()
            raise SweepError(f"sweep job {sweep.job_id}: point(s) {', '.join(map(str, errors))} failed; point "
                             f"{errors[0]}: {first} (log: {sweep.directory / 'logs' / f'{errors[0]}.out'})")
        if len(done) != last and on_progress is not None:
            on_progress(len(done))
        last = len(done)
        if len(done) == sweep.count:
            break
        now = time.monotonic()
        if timeout_s is not None and now - started > timeout_s:
            raise SweepError(f"sweep job {sweep.job_id}: {sweep.count - len(done)} point(s) not done after "
                             f"{timeout_s:.0f} s; results so far in {results}")
        if _array_active(adapter, sweep):
            idle_since = None
        elif idle_since is None:
            idle_since = now
        elif now - idle_since > settle_s:  # nothing queued or running, and results are still missing
            missing = sorted(set(range(sweep.count)) - done)
            raise SweepError(f"sweep job {sweep.job_id}: array ended without results for point(s) "
                             f"{', '.join(map(str, missing[:10]))}; see {sweep.directory / 'logs'}")
        time.sleep(poll_s)
    return [json.loads((results / f"{i}.json").read_text(encoding="utf-8")) for i in range(sweep.count)]


def run_on_slurm(adapter: SlurmAdapter, site: SiteConfig, points: Sequence[SweepPoint],
                 on_progress: Callable[[int], None] | None = None, timeout_s: float | None = None) \
        -> tuple[SlurmSweep, list[dict[str, Any]]]:
    directory = prepare(points, site.submit.spool_dir)
    sweep = submit(adapter, site, directory, len(points))
    return sweep, collect(adapter, sweep, on_progress, timeout_s=timeout_s)
