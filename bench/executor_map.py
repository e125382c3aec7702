#!/usr/bin/env python3
"""Benchmark: `Executor.map` over 1,000 items on the test cluster (issue 32: at most K sbatch calls, under 10 s).

`ours`: `Executor(folder, site=...).map(fn, range(N))` in race mode over the cluster's two kinds (cpu, gpu), the
whole user-visible call: pickling every call, the group folder and its files written through the site's transport
(`docker exec` as the cluster's user), the rendering, and one `sbatch --array` per kind. `baseline`: what a careful
user writes by hand for the same effect without slurmx: the same calls pickled into one file written through the
same transport, then one plain `sbatch --array=0-N` per kind of a minimal script that unpickles its call (no group,
no guard, no exactly-once across the kinds). Both hold their jobs with `--begin=now+1hour` and are cancelled
after the measurement, so the cluster runs nothing.

Each case runs in a fresh Python process; reported: wall time (time.perf_counter), CPU time of the process and of
its children (the transport's `docker exec` clients; getrusage), peak RSS, sbatch calls; median of 3 runs.
Targets: sbatch calls <= K (2) and wall time < 10 s for ours; CPU judged against the baseline.

Usage: python3 bench/executor_map.py [--slurm 24.11] [--items 1000]   (needs `docker-slurm/cluster up --slurm V`;
prints one JSON object on stdout)
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import platform
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUNS = 3
KINDS = ("cpu", "gpu")
WALL_TARGET_S = 10.0


def square(x: int) -> int:
    return x * x


def _ours(site: Path, items: int, folder: Path) -> tuple[int, list[int]]:
    from slurmx.core.arrays import split_key
    from slurmx.executor import Executor

    ex = Executor(folder, site=site)
    ex.update_parameters(mode="race", variants=list(KINDS), python="python3", time="5m",
                         begin="now+1hour", name="bench-map")
    jobs = ex.map(square, range(items))
    counts = ex.adapter.command_counts()
    return counts.get("sbatch", 0), sorted({split_key(j)[0] for job in jobs for j in job.job_ids})


def _baseline(site: Path, items: int) -> tuple[int, list[int]]:
    import cloudpickle

    from slurmx.core.config import load_site_config
    from slurmx.slurm import adapter_from_config

    config = load_site_config(site)
    transport = adapter_from_config(config.transport).transport  # type: ignore[attr-defined]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for index in range(items):
            archive.writestr(f"{index}.pkl", cloudpickle.dumps((square, (index,), {})))
    folder = f"{config.submit.spool_dir.rstrip('/')}/bench-plain-{secrets.token_hex(3)}"
    made = transport.run(["sh", "-c", 'umask 077 && mkdir "$1" && base64 -d > "$1/calls.zip"', "sh", folder],
                         stdin=base64.b64encode(buffer.getvalue()).decode("ascii"), timeout=120)
    assert made.returncode == 0, made.stderr
    script = ("#!/bin/bash\n#SBATCH --time=00:05:00\n#SBATCH --begin=now+1hour\n"
              f"exec python3 -c 'import sys, zipfile, pickle; f, a, k = pickle.loads(zipfile.ZipFile(sys.argv[1])"
              f".read(sys.argv[2] + \".pkl\")); f(*a, **k)' {folder}/calls.zip \"$SLURM_ARRAY_TASK_ID\"\n")
    ids = []
    for kind in KINDS:
        partition = config.resources[kind].partition
        done = transport.run(["sbatch", "--parsable", f"--array=0-{items - 1}", f"--partition={partition}",
                              f"--job-name=bench-plain@{kind}"], stdin=script, timeout=120)
        assert done.returncode == 0, done.stderr
        ids.append(int(done.stdout.strip().split(";")[0]))
    return len(KINDS), ids


def child(case: str, site: Path, items: int) -> dict[str, Any]:
    """One measured run, in this (fresh) process."""
    with tempfile.TemporaryDirectory() as tmp:
        wall = time.perf_counter()
        cpu = time.process_time()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        sbatch, arrays = _ours(site, items, Path(tmp)) if case == "ours" else _baseline(site, items)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                  "children_cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "sbatch": sbatch,
                  "arrays": arrays}
    _cancel(site, arrays)
    return result


def _cancel(site: Path, arrays: list[int]) -> None:
    from slurmx.core.config import load_site_config
    from slurmx.slurm import adapter_from_config

    adapter = adapter_from_config(load_site_config(site).transport)
    adapter.cancel(arrays)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slurm", default="24.11")
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--child", choices=("ours", "baseline"), help=argparse.SUPPRESS)
    opts = parser.parse_args()
    site = Path(f"/var/tmp/slurmx-cluster/{opts.slurm}/site.yaml")
    if not site.is_file():
        print(f"bench/executor_map.py: no test cluster for Slurm {opts.slurm} ({site} missing): "
              f"docker-slurm/cluster up --slurm {opts.slurm}", file=sys.stderr)
        return 2
    if opts.child:
        print(json.dumps(child(opts.child, site, opts.items)))
        return 0
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "baseline": []}
    for _ in range(RUNS):
        for case in runs:  # taking turns, so the machine's load falls on both alike
            out = subprocess.run([sys.executable, __file__, "--slurm", opts.slurm, "--items", str(opts.items),
                                  "--child", case], capture_output=True, text=True, check=True, cwd=ROOT,
                                 env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"})
            runs[case].append(json.loads(out.stdout))
    summary = {case: {key: statistics.median(r[key] for r in results)
                      for key in ("wall_s", "cpu_s", "children_cpu_s", "peak_rss_mb", "sbatch")}
               for case, results in runs.items()}
    ours = summary["ours"]
    print(json.dumps({
        "benchmark": "executor_map", "slurm": opts.slurm, "items": opts.items, "kinds": len(KINDS), "runs": RUNS,
        "machine": {"python": platform.python_version(), "cpus": len(__import__("os").sched_getaffinity(0))},
        **summary,
        "cpu_ratio": round((ours["cpu_s"] + ours["children_cpu_s"])
                           / (summary["baseline"]["cpu_s"] + summary["baseline"]["children_cpu_s"]), 2),
        "targets": {"sbatch_at_most_kinds": ours["sbatch"] <= len(KINDS),
                    "wall_under_10_s": ours["wall_s"] < WALL_TARGET_S},
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
