"""Synergy's CPU search, run where the job runs: `python3 -m slurmx.hooks.search [options] -- PAYLOAD [ARGS]`.

A sensitivity sample (the `sensitivity` template) is one allocation with the most CPUs the search may use. Inside
it this module runs the payload once per search point, each time for `SLURMX_SAMPLE_STEPS` steps on the first k
of the job's CPUs (affinity, `SLURM_CPUS_PER_TASK=k`, `OMP_NUM_THREADS=k`), reads the step time the hooks'
`progress()` recorded, and prints `w=<cpus>:<steps/s>;...,k=<knee>` for the sample to append to its comment,
where slurmxd reads it. One job instead of one per point: the search is adaptive, so its points are not known
when the user submits, and a single allocation keeps them on one node.

The search (the released profiler's, with an optional knee bisection) is also what the daemon and the simulator
use (`slurmx.profile.sensitivity` imports it from here). Standard library only, Python >= 3.9.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .sample import sample_step_seconds

__all__ = ["Measure", "SearchParams", "cpu_search", "format_points", "knee", "main", "parse_points", "refine_knee"]

Measure = Callable[[int], float]
"""Throughput (steps or samples per second) of the job at this many CPUs, memory at maximum."""


@dataclass(frozen=True)
class SearchParams:
    """max_cpus: where the search starts (the server's CPUs); step: the steep-region step (the job's GPU count);
    threshold: the 10% flat/steep boundary; warm_up: re-run the first point once (the released profiler does);
    saturation: the knee is the fewest CPUs within this fraction of the best throughput; refine_knee: bisect."""

    max_cpus: int
    step: int = 1
    threshold: float = 0.10
    warm_up: bool = True
    saturation: float = 0.05
    refine_knee: bool = True

    def __post_init__(self) -> None:
        if self.max_cpus < 1 or self.step < 1:
            raise ValueError(f"sensitivity search: max_cpus and step must be >= 1, got {self.max_cpus}, {self.step}")
        if not 0 < self.threshold < 1 or not 0 <= self.saturation < 1:
            raise ValueError("sensitivity search: threshold must be in (0, 1) and saturation in [0, 1)")


def cpu_search(measure: Measure, params: SearchParams) -> tuple[dict[int, float], list[int]]:
    """The released profiler's CPU search: throughputs by CPU count, and the order points were run (warm-up too).

    Epoch time is 1/throughput, so "changed by less than threshold" compares 1/W of consecutive points.
    """
    points: dict[int, float] = {}
    order: list[int] = []
    cpu, prev = params.max_cpus, None
    while cpu >= 1:
        tput = measure(cpu)
        if not tput > 0:
            raise ValueError(f"sensitivity search: throughput at {cpu} CPUs must be > 0, got {tput}")
        order.append(cpu)
        points[cpu] = tput
        cur = 1.0 / tput
        prev = cur if prev is None else prev
        next_cpu = cpu // 2 if abs(prev - cur) / prev < params.threshold else cpu - params.step
        prev = cur
        if params.warm_up and len(order) == 1:
            next_cpu = params.max_cpus
        cpu = next_cpu
    return points, order


def knee(points: Mapping[int, float], saturation: float) -> int:
    """The fewest CPUs among `points` whose throughput is within `saturation` of the best."""
    best = max(points.values())
    return min(c for c, w in points.items() if w >= (1.0 - saturation) * best)


def refine_knee(measure: Measure, points: dict[int, float], order: list[int], saturation: float) -> int:
    """Bisect between the knee and the next profiled point below it until they are adjacent CPU counts.

    Adds the points it measures to `points` and `order`; returns the knee.
    """
    while True:
        hi = knee(points, saturation)
        below = [c for c in points if c < hi]
        if not below:
            return hi
        lo = max(below)
        if hi - lo <= 1:
            return hi
        mid = (lo + hi) // 2
        points[mid] = measure(mid)
        order.append(mid)


def format_points(points: Mapping[int, float], knee_cpus: int) -> str:
    """`w=4:57.3;2:38;1:19.4,k=3`: the comment fields of a finished search (rates to 4 significant digits)."""
    rates = ";".join(f"{c}:{w:.4g}" for c, w in sorted(points.items(), reverse=True))
    return f"w={rates},k={knee_cpus}"


def parse_points(text: str, max_points: int = 64) -> dict[int, float] | None:
    """The `w=` value back into {cpus: rate}; None unless every point is a positive CPU count and a finite,
    positive rate (it is the user's job that wrote it)."""
    points: dict[int, float] = {}
    parts = text.split(";")
    if not text or len(parts) > max_points:
        return None
    for part in parts:
        cpus, sep, rate = part.partition(":")
        try:
            c, w = int(cpus), float(rate)
        except (ValueError, OverflowError):
            return None
        if not sep or c < 1 or c > 4096 or not 0 < w < float("inf") or c in points:
            return None
        points[c] = w
    return points


def _measure(command: Sequence[str], spool: Path, job: str, steps: int, cpus: Sequence[int]) -> Callable[[int], float]:
    """Run the payload for `steps` steps on the first k CPUs; its steps per second from the recorded step times."""
    profile = spool / f"profile-{job}.json"

    def measure(k: int) -> float:
        subset = set(cpus[:k])
        env = {**os.environ, "SLURMX_PROFILE_STEPS": str(steps), "SLURM_CPUS_PER_TASK": str(k),
               "OMP_NUM_THREADS": str(k)}
        if profile.exists():
            profile.unlink()
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, subset)  # inherited by the payload; put back for the next point
        try:
            subprocess.run(list(command), env=env, check=False)
        finally:
            os.sched_setaffinity(0, before)
        try:
            with open(profile, encoding="utf-8") as f:
                step = sample_step_seconds(json.load(f))
        except (OSError, ValueError):
            step = None
        if not step:
            raise RuntimeError(f"the payload recorded no step times at {k} CPUs (does it call progress()?)")
        return 1.0 / step

    return measure


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m slurmx.hooks.search", description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-cpus", type=int, default=0, help="where the search starts (default: the job's CPUs)")
    parser.add_argument("--step", type=int, default=1, help="the steep region's step (the job's GPU count)")
    parser.add_argument("--steps", type=int, default=int(os.environ.get("SLURMX_SAMPLE_STEPS") or 50))
    parser.add_argument("command", nargs="+")
    args = parser.parse_args(argv)
    cpus = sorted(os.sched_getaffinity(0))
    # The allocation Slurm gave the job; a node that declares more CPUs than its host has (an oversubscribed
    # test node) pins the first k it really has, and the payload still sees k in SLURM_CPUS_PER_TASK.
    allocated = int(os.environ.get("SLURM_CPUS_PER_TASK") or len(cpus))
    params = SearchParams(max_cpus=max(1, args.max_cpus or allocated), step=max(1, args.step))
    spool = Path(os.environ.get("SLURMX_SPOOL_DIR") or ".")
    measure = _measure(args.command, spool, os.environ.get("SLURM_JOB_ID") or "local", args.steps, cpus)
    try:
        points, order = cpu_search(measure, params)
        found = refine_knee(measure, points, order, params.saturation) if params.refine_knee else \
            knee(points, params.saturation)
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"slurmx search: {exc}", file=sys.stderr)
        return 1
    print(f"slurmx search: order {order}", file=sys.stderr)
    sys.stdout.write(format_points(points, found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
