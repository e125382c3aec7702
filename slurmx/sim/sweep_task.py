"""One task of a sweep job array: `python -m slurmx.sim.sweep_task SWEEP_DIR INDEX`.

Runs on a compute node from the copy of slurmx the sweep shipped. Writes `results/INDEX.json` (the point's
metrics) atomically, or `results/INDEX.error` (one line) so the submitter reports a failed point by name
instead of waiting for a file that never comes.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m slurmx.sim.sweep_task SWEEP_DIR INDEX", file=sys.stderr)
        return 2
    directory, index = Path(argv[0]), int(argv[1])
    results = directory / "results"
    try:
        from slurmx.sim.sweep import run_point

        points = json.loads((directory / "points.json").read_text(encoding="utf-8"))
        metrics = run_point(points[index]["document"])
    except Exception as exc:  # report any failure as a file: the submitter is waiting for one
        traceback.print_exc()
        _write(results / f"{index}.error", f"{type(exc).__name__}: {exc}".replace("\n", " ") + "\n")
        return 1
    _write(results / f"{index}.json", json.dumps(metrics, sort_keys=True, allow_nan=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
