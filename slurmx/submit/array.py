"""`--array`: one Slurm job array per kind where it can be, else one group per task index.

**As Slurm arrays** (issue 32, `core/arrays.py`): K kinds are K `sbatch --array` calls with one tag, and index i of
every kind's array is one group, `g[i]`, which slurmxd schedules like any group; `%N` goes to every kind's array and
slurmxd holds N across the kinds; Slurm sets `SLURM_ARRAY_*` in each task itself. That path takes managed, race and
pick mode, but not a managed spec with profiling samples (a sample is queued per group, not per index).

**As groups** otherwise: `slurmx submit --array=1-3` submits three groups, named `NAME_1`, `NAME_2`, `NAME_3`, and
sets in each what Slurm sets in an array task (`SLURM_ARRAY_TASK_ID`, `_MIN`, `_MAX`, `_COUNT`, `_STEP`), so a
script written for `sbatch --array` reads its index as before. A throttle (`%N`) is refused there: a group's
variants do not count as one task to Slurm.
"""

from __future__ import annotations

import itertools
import re

__all__ = ["MAX_TASKS", "array_environment", "array_text", "parse_array", "split_throttle"]

MAX_TASKS = 1000  # Slurm's default MaxArraySize (1001) allows indices 0-1000; a group each is a lot of sbatch calls
_RANGE = re.compile(r"([0-9]{1,7})(?:-([0-9]{1,7})(?::([0-9]{1,7}))?)?")


def parse_array(text: str) -> tuple[int, ...]:
    """sbatch's `--array` value (`1-3`, `0-15:4`, `1,3,5`) -> the task indices in order, each once; ValueError
    with the fix for anything else."""
    value, _ = split_throttle(text)
    indices: list[int] = []
    for part in value.split(","):
        match = _RANGE.fullmatch(part.strip())
        if match is None:
            raise ValueError(f"{part.strip()!r}: expected an index or a range like 1-3, 0-15:4 or 1,3,5")
        first = int(match[1])
        last = int(match[2]) if match[2] is not None else first
        step = int(match[3]) if match[3] is not None else 1
        if last < first or step < 1:
            raise ValueError(f"{part.strip()}: a range runs from a lower to a higher index with a step of at "
                             "least 1")
        if (last - first) // step + 1 + len(indices) > MAX_TASKS:
            raise ValueError(f"more than {MAX_TASKS} tasks; each is a group of its own; split the array")
        indices += range(first, last + 1, step)
    unique = tuple(dict.fromkeys(indices))
    if not unique:
        raise ValueError("an empty array; write e.g. 1-3")
    return unique


def split_throttle(text: str) -> tuple[str, int]:
    """`0-9%3` -> ("0-9", 3); no `%`: (text, 0). ValueError with the fix for a throttle that is not a count."""
    value, percent, throttle = text.strip().partition("%")
    if not percent:
        return value, 0
    if not throttle.isascii() or not throttle.isdigit() or len(throttle) > 7 or int(throttle) < 1:
        raise ValueError(f"%{throttle[:20]}: a throttle is a count of tasks at once, e.g. 0-9%3")
    return value, int(throttle)


def array_text(indices: tuple[int, ...], throttle: int = 0) -> str:
    """sbatch's `--array` value for `indices` (in any order): `0-4,7,9%3`."""
    ordered = sorted(set(indices))
    parts: list[str] = []
    start = prev = ordered[0]
    for index in [*ordered[1:], -2]:
        if index != prev + 1:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = index
        prev = index
    return ",".join(parts) + (f"%{throttle}" if throttle else "")


def _step(indices: tuple[int, ...]) -> int:
    """Slurm's SLURM_ARRAY_TASK_STEP: the common step of an evenly spaced array, else 1."""
    gaps = {b - a for a, b in itertools.pairwise(indices)}
    return gaps.pop() if len(gaps) == 1 else 1


def array_environment(indices: tuple[int, ...], index: int) -> dict[str, str]:
    """What Slurm sets in array task `index` of `indices`."""
    return {"SLURM_ARRAY_TASK_ID": str(index), "SLURM_ARRAY_TASK_MIN": str(min(indices)),
            "SLURM_ARRAY_TASK_MAX": str(max(indices)), "SLURM_ARRAY_TASK_COUNT": str(len(indices)),
            "SLURM_ARRAY_TASK_STEP": str(_step(indices))}
