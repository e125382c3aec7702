#!/usr/bin/env python3
"""A benchmark payload with a known speed per resource kind: what the profiler's estimates are checked against.

    python3 rate_payload.py STEPS [--rate KIND=STEPS_PER_S ...] [--startup S] [--knee CPUS]

Runs STEPS steps at the rate given for its variant (`$SLURMX_VARIANT`, e.g. `--rate cpu=20 --rate gpu=100`),
after a fixed start-up of S seconds, calling `slurmx.hooks.progress(step, STEPS)` every step. Its true run time is
therefore exactly `S + STEPS / rate` (plus the interpreter's own start), which the profiler's estimate is compared
with. In a profiling sample (`SLURMX_PROFILE_STEPS=N`, the profile template) `progress()` ends the run after N
steps, as it would any real job.

`--knee K` makes the rate CPU-sensitive as Synergy's profiler expects: the step rate scales with the job's CPUs
(`$SLURM_CPUS_PER_TASK`, else `$SLURMX_CPUS`) up to K and stays flat beyond, i.e. rate · min(cpus, K) / K.

Standard library and `slurmx.hooks` only (the job template puts `slurmx.hooks` on PYTHONPATH on the node).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from slurmx import hooks


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rate_payload.py", description=__doc__.split("\n\n")[0])
    p.add_argument("steps", type=int)
    p.add_argument("--rate", action="append", default=[], metavar="KIND=STEPS_PER_S")
    p.add_argument("--startup", type=float, default=0.0)
    p.add_argument("--knee", type=int, default=0)
    args = p.parse_args(argv)
    if args.steps <= 0:
        p.error(f"STEPS must be positive, got {args.steps}")
    rates: dict[str, float] = {}
    for item in args.rate:
        kind, sep, value = item.partition("=")
        try:
            rates[kind] = float(value) if sep else float("nan")
        except ValueError:
            rates[kind] = float("nan")
        if not sep or not rates[kind] > 0:
            p.error(f"--rate {item!r}: write KIND=STEPS_PER_S with a positive rate, e.g. --rate gpu=100")
    args.rates = rates
    return args


def step_rate(rates: dict[str, float], kind: str, knee: int, cpus: int) -> float:
    """Steps per second of this variant: its rate, scaled by min(cpus, knee) / knee when a knee is set."""
    if kind not in rates:
        raise SystemExit(f"rate_payload: no --rate for variant {kind!r}; add --rate {kind}=STEPS_PER_S")
    rate = rates[kind]
    return rate * min(cpus, knee) / knee if knee > 0 else rate


def main(argv: list[str]) -> int:
    args = parse(argv)
    kind = os.environ.get("SLURMX_VARIANT", "") or (next(iter(args.rates)) if args.rates else "")
    cpus = int(os.environ.get("SLURM_CPUS_PER_TASK") or os.environ.get("SLURMX_CPUS") or "1")
    period = 1.0 / step_rate(args.rates, kind, args.knee, cpus)
    time.sleep(args.startup)
    start = time.monotonic()
    for step in range(1, args.steps + 1):
        # Sleep to the step's deadline, not for a period each: the rate stays exact whatever progress() costs.
        delay = start + step * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        hooks.progress(step, args.steps)
    print(f"rate_payload: {args.steps} steps on {kind} in {time.monotonic() - start:.3f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
