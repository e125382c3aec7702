"""`--array` as an array of groups: one group per task index, each with all the spec's variants.

A Slurm job array would put each variant's tasks in an array of their own, and task 3 of the cpu array would
know nothing of task 3 of the gpu one: the group would be split. So `slurmx submit --array=1-3` submits three
groups, named `NAME_1`, `NAME_2`, `NAME_3`, and sets in each what Slurm sets in an array task
(`SLURM_ARRAY_TASK_ID`, `_MIN`, `_MAX`, `_COUNT`, `_STEP`), so a script written for `sbatch --array` reads its index
as before. A throttle (`%N`) is refused: a group's variants do not count as one task to Slurm.
"""

from __future__ import annotations

import itertools
import re

__all__ = ["MAX_TASKS", "array_environment", "parse_array"]

MAX_TASKS = 1000  # Slurm's default MaxArraySize (1001) allows indices 0-1000; a group each is a lot of sbatch calls
_RANGE = re.compile(r"([0-9]{1,7})(?:-([0-9]{1,7})(?::([0-9]{1,7}))?)?")


def parse_array(text: str) -> tuple[int, ...]:
    """sbatch's `--array` value (`1-3`, `0-15:4`, `1,3,5`) -> the task indices in order, each once; ValueError
    with the fix for anything else."""
    value = text.strip()
    if "%" in value:
        raise ValueError("a throttle (%N) is not supported: each index is a group of its own, which "
                         "Slurm does not count as one array task; leave %N out (slurmxd and Slurm queue the "
                         "groups by policy)")
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


def _step(indices: tuple[int, ...]) -> int:
    """Slurm's SLURM_ARRAY_TASK_STEP: the common step of an evenly spaced array, else 1."""
    gaps = {b - a for a, b in itertools.pairwise(indices)}
    return gaps.pop() if len(gaps) == 1 else 1


def array_environment(indices: tuple[int, ...], index: int) -> dict[str, str]:
    """What Slurm sets in array task `index` of `indices`."""
    return {"SLURM_ARRAY_TASK_ID": str(index), "SLURM_ARRAY_TASK_MIN": str(min(indices)),
            "SLURM_ARRAY_TASK_MAX": str(max(indices)), "SLURM_ARRAY_TASK_COUNT": str(len(indices)),
            "SLURM_ARRAY_TASK_STEP": str(_step(indices))}
