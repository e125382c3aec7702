#!/usr/bin/env python3
"""Benchmark: how long `slurmx --help` and `slurmx submit --dry-run` take to start, beside `python -c pass`.

Users type `slurmx` as they type `sbatch`; before the sim, reproduce and fidelity commands were imported lazily,
every start paid for numpy, scipy and the simulator. The previous start is rebuilt in the same run by importing
those command modules (and what `slurmx.cli` imported at the top) before calling the same `main`. Each command
runs in a fresh process, exactly as the console script does (`from slurmx.cli import main; main()`); the
commands take turns, after one untimed warm-up each, so the machine's load falls on all of them alike. Wall time
is time.perf_counter around the process, CPU time its user + system time (getrusage of the reaped child); the
targets judge CPU time, and `ratio` is ours / the previous start's.

Usage: python3 bench/cli_start.py   (prints one JSON object on stdout)
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = 15
TARGET_S = 0.3
MAIN = "from slurmx.cli import main; main()"
# What `slurmx.cli` imported at every start before its commands became lazy.
EAGER = ("slurmx.core.config", "slurmx.slurm.versions", "slurmx.submit.submitter", "slurmx.daemon.errors",
         "slurmx.cli.preempt", "slurmx.cli.shadow_report", "slurmx.cli.fidelity", "slurmx.cli.reproduce",
         "slurmx.cli.sim")
PREVIOUS = f"import {', '.join(EAGER)}; {MAIN}"
SUBMIT = ["--site", "site-config/test-cluster.yaml", "submit", "--dry-run", "examples/hello.yaml"]
COMMANDS: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "slurmx --help": [sys.executable, "-c", MAIN, "--help"],
    "slurmx --help, previous eager imports": [sys.executable, "-c", PREVIOUS, "--help"],
    "slurmx submit --dry-run": [sys.executable, "-c", MAIN, *SUBMIT],
    "slurmx submit --dry-run, previous eager imports": [sys.executable, "-c", PREVIOUS, *SUBMIT],
}


def _once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of argv to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure() -> dict[str, dict[str, float]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    env.pop("SLURMX_SITE", None)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for argv in COMMANDS.values():
        _once(argv, env)  # warm-up: the first run reads the files from disk
    for _ in range(RUNS):
        for name, argv in COMMANDS.items():
            samples[name].append(_once(argv, env))
    return {name: {"wall_s": round(statistics.median(w for w, _ in runs), 3),
                   "cpu_s": round(statistics.median(c for _, c in runs), 3),
                   "wall_s_min": round(min(w for w, _ in runs), 3)} for name, runs in samples.items()}


def main() -> None:
    t = measure()
    help_, submit = t["slurmx --help"], t["slurmx submit --dry-run"]
    previous_help = t["slurmx --help, previous eager imports"]
    previous_submit = t["slurmx submit --dry-run, previous eager imports"]
    print(json.dumps({
        "name": "cli_start",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_average_1min": round(os.getloadavg()[0], 2)},
        "cases": [{
            "case": "slurmx --help",
            "ours": {"name": "lazy command imports", **help_},
            "baseline": {"name": "previous start: sim, reproduce, fidelity, preempt, shadow-report and the site "
                                 "config imported at start", **previous_help},
            "floor": {"name": "python -c pass", **t["python -c pass"]},
            "ratio": round(help_["cpu_s"] / previous_help["cpu_s"], 2),
            "cpu_seconds": help_["cpu_s"],
            "how": f"fresh process per run, commands interleaved, medians of {RUNS}",
            "target": f"CPU < {TARGET_S} s",
            "holds": help_["cpu_s"] < TARGET_S,
        }, {
            "case": "slurmx submit --dry-run examples/hello.yaml (site-config/test-cluster.yaml, no cluster)",
            "ours": {"name": "lazy command imports", **submit},
            "baseline": {"name": "previous start: eager imports as above", **previous_submit},
            "floor": {"name": "python -c pass", **t["python -c pass"]},
            "ratio": round(submit["cpu_s"] / previous_submit["cpu_s"], 2),
            "cpu_seconds": submit["cpu_s"],
            "how": f"fresh process per run, commands interleaved, medians of {RUNS}; renders three variants; no "
                   "numpy, scipy or simulator import (tests/unit/test_cli_start.py)",
            "target": "CPU below the previous eager start's",
            "holds": submit["cpu_s"] < previous_submit["cpu_s"],
        }],
    }))


if __name__ == "__main__":
    main()
