#!/usr/bin/env python3
"""A training-style loop that survives preemption: checkpoint on the grace signal, resume after the requeue.

    python3 train_loop.py [STEPS]        # STEPS: argv, else $SLURMX_WORK (the spec's `work:`), else 600

Each step adds `step * step` to a running sum and sleeps TRAIN_STEP_S (default 0.1 s, so 600 steps take a
minute). The state (step, sum) is written to `checkpoint_dir()` atomically when the grace signal arrives, and
read back when `is_resumed()`. Every run appends lines to `checkpoint_dir()/train_loop.log`, which survives
requeues whatever the output file's open mode, and which proves the work was done exactly once:

    START restart=0 from=0 sum=0
    CHECKPOINT restart=0 at=231 sum=4082155 left=29.6s
    START restart=1 from=231 sum=4082155
    DONE steps=600 sum=71820100 expected=71820100 restarts=1 runs=0-231,231-600

`runs` lists the steps each run did: they tile 0..STEPS with no gap and no overlap, and the sum is the exact
closed form, so no step was lost or done twice. Standard library and `slurmx.hooks` only: the job template puts
`slurmx.hooks` on PYTHONPATH on the node.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from slurmx import hooks

STATE_FILE = "train_loop.json"
LOG_FILE = "train_loop.log"


def expected_sum(steps: int) -> int:
    """sum(i * i for i in range(steps)), in closed form: what the loop must end with."""
    return (steps - 1) * steps * (2 * steps - 1) // 6


def total_steps(argv: list[str]) -> int:
    raw = argv[1] if len(argv) > 1 else os.environ.get("SLURMX_WORK", "600")
    steps = int(float(raw))
    if steps <= 0:
        raise SystemExit(f"train_loop: STEPS must be positive, got {raw!r}")
    return steps


def write_atomic(path: Path, text: str) -> None:
    """Temp file + fsync + rename: a reader (or the next run) sees the old state or the new one, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def log(folder: Path, line: str) -> None:
    print(line, flush=True)
    with open(folder / LOG_FILE, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


class Trainer:
    """The loop's whole state is one tuple (step, sum, first step of this run, runs of earlier runs), replaced in
    a single assignment per step: the signal handler runs between two bytecodes, so it always sees a consistent
    state. None until the checkpoint is loaded, so a signal during start-up cannot overwrite it with zeros."""

    def __init__(self, steps: int, folder: Path) -> None:
        self.steps = steps
        self.folder = folder
        self.state: tuple[int, int, int, tuple[str, ...]] | None = None

    def load(self) -> None:
        path = self.folder / STATE_FILE
        if hooks.is_resumed() and path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            step = int(data["step"])
            self.state = (step, int(data["sum"]), step, tuple(data["runs"]))
        else:
            self.state = (0, 0, 0, ())

    def save(self, deadline: float) -> None:
        """The preempt callback: checkpoint, then slurmx.hooks exits with the requeue code."""
        if self.state is None:
            return  # not started: the last checkpoint on disk is still the right one
        step, total, first, runs = self.state
        done = [*runs, f"{first}-{step}"]
        write_atomic(self.folder / STATE_FILE, json.dumps({"step": step, "sum": total, "runs": done}))
        log(self.folder, f"CHECKPOINT restart={hooks.restart_count()} at={step} sum={total} "
                         f"left={deadline - time.time():.1f}s")

    def run(self, step_s: float) -> None:
        assert self.state is not None, "load() first"
        step, total, first, runs = self.state
        log(self.folder, f"START restart={hooks.restart_count()} from={step} sum={total}")
        while step < self.steps:
            time.sleep(step_s)  # the "work" of one step
            self.state = (step + 1, total + step * step, first, runs)
            step, total, first, runs = self.state
            hooks.progress(step, self.steps)
        log(self.folder, f"DONE steps={step} sum={total} expected={expected_sum(self.steps)} "
                         f"restarts={hooks.restart_count()} runs={','.join([*runs, f'{first}-{step}'])}")


def main(argv: list[str]) -> int:
    trainer = Trainer(total_steps(argv), hooks.checkpoint_dir())
    hooks.on_preempt(trainer.save)  # first thing: a signal during start-up still finds a handler
    trainer.load()
    trainer.run(float(os.environ.get("TRAIN_STEP_S", "0.1")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
