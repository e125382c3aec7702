"""A job array's pending record read as one `SlurmJob` per index (see `core/arrays.py` for what squeue shows).

squeue keeps the indices still in a pending array in ONE record whose `array_task_string` lists them with the
throttle (`0,2,4-9:2%3`). slurmxd schedules each index as a group, so the record becomes one job per index, keyed
by `core.arrays.task_key`. Cheap on purpose: 100,000 pending indices are one record, and each copy is one
constructor call on the template's field values with the key and index put in.
"""

from __future__ import annotations

import dataclasses
import re

from slurmx.core.arrays import MAX_TASK_ID, task_key
from slurmx.slurm.records import SlurmJob

__all__ = ["MAX_INDICES", "expand_pending", "parse_task_mask", "parse_task_string"]

MAX_INDICES = MAX_TASK_ID + 1  # no array holds more (Slurm's MaxArraySize is at most 4,000,001)
_RANGE = re.compile(r"([0-9]{1,7})(?:-([0-9]{1,7})(?::([0-9]{1,7}))?)?")
_FIELDS = tuple(f.name for f in dataclasses.fields(SlurmJob) if f.init)
_JOB_ID, _TASK_ID, _PENDING = (_FIELDS.index(name) for name in ("job_id", "array_task_id", "array_pending"))


def parse_task_string(text: str) -> tuple[list[int], int]:
    """`0,2,4-9:2%3` -> ([0, 2, 4, 6, 8], 3): the indices and the throttle (0: none). ValueError for anything
    else, and for a string libslurm cut (`...`, at `SLURM_BITSTR_LEN` bytes): half a list would read as indices
    gone."""
    body, percent, throttle_text = text.partition("%")
    if "..." in body:
        raise ValueError(f"array task string cut by libslurm ({text[:40]!r}...): read squeue with "
                         "SLURM_BITSTR_LEN=0")
    throttle = 0
    if percent:
        if not throttle_text.isascii() or not throttle_text.isdigit() or len(throttle_text) > 9:
            raise ValueError(f"array throttle {throttle_text[:20]!r} is not a whole number")
        throttle = int(throttle_text)
    indices: list[int] = []
    for part in body.split(","):
        match = _RANGE.fullmatch(part)
        if match is None:
            raise ValueError(f"array task string part {part[:20]!r}: expected an index or a range")
        first = int(match[1])
        last = first if match[2] is None else int(match[2])
        step = 1 if match[3] is None else int(match[3])
        if last < first or step < 1 or last > MAX_TASK_ID:
            raise ValueError(f"array task range {part[:20]!r} is not one Slurm writes")
        if len(indices) + (last - first) // step + 1 > MAX_INDICES:
            raise ValueError(f"array task string lists more than {MAX_INDICES} indices")
        if step == 1 and first == last:
            indices.append(first)
        else:
            indices.extend(range(first, last + 1, step))
    return indices, throttle


def parse_task_mask(text: str) -> list[int]:
    """sacct's task list of an array's pending record, a hex bitmap as slurmdbd keeps it (`0x3F5`: 0, 2, 4-9).
    ValueError for anything else."""
    digits = text[2:] if text[:2] in ("0x", "0X") else ""
    if not digits or len(digits) > MAX_INDICES // 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
        raise ValueError(f"array task mask {text[:20]!r}: expected a hex bitmap such as 0x3F5")
    bits = bin(int(digits, 16))[:1:-1]  # lowest index first
    return [i for i, bit in enumerate(bits) if bit == "1"]


def expand_pending(template: SlurmJob, indices: list[int]) -> list[SlurmJob]:
    """One job per index of an array's pending record `template` (its `array_job_id` set): each keyed by
    `task_key` and carrying its index, marked `array_pending`, every other field the record's."""
    values = [getattr(template, name) for name in _FIELDS]
    values[_PENDING] = True
    array_job_id = template.array_job_id
    key = task_key(array_job_id, 0)  # validates the array id once; the index goes in the low bits
    if indices and not 0 <= min(indices) <= max(indices) <= MAX_TASK_ID:  # parse_task_string keeps them so
        raise ValueError(f"array indices outside 0-{MAX_TASK_ID}")
    out: list[SlurmJob] = []
    append = out.append
    template.readable_group_tag()  # the comment read once for every index (`SlurmJob.group_tag`)
    tags = template._tag
    for index in indices:
        values[_JOB_ID] = key | index
        values[_TASK_ID] = index
        job = SlurmJob(*values)
        job._tag = tags
        append(job)
    return out
