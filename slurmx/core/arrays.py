"""Arrays as Slurm job arrays: who an index is, and how slurmxd names it to Slurm (issue 32, design note).

`slurmx submit --array=0-999%10` with K kinds submits one Slurm job array per kind (K `sbatch` calls, whatever the
item count). Index i of the cpu array and index i of the gpu array are the two variants of one group, *index
group* `g[i]`, which slurmxd schedules, starts, preempts and cancels like any group. Everything below was checked
on the live 24.11 test cluster and in Slurm's source for 22.05 and 26.05 (docs/daemon.md, "Arrays").

**Tag.** Every task of an array carries the array's `--comment` (Slurm copies it to each task), so the tag is the
array's: `slurmx:1:g=<g>,v=<kind>,...` in the one grammar of `core/tag.py` and `job_submit.lua`, no field added.
Which index a task is comes from Slurm's own `array_job_id` and `array_task_id`: slurmctld sets them and no user
can change them, so they are trusted as the UserId is, and the tag never needs to say "array" or the index.

**Group id.** `index_group(g, i)` is `g[i]`. The brackets are outside the alphabet of a tag's plain name, so no
tag can name an index group (bob cannot write `g=x[3]` to join or shadow index 3 of alice's `x`), and a plain group
`x_3` can never be mistaken for index 3 of `x`, whatever folders exist.

**Ownership.** An index group belongs to the owner of the *array's* folder, `<spool>/<g>` (`core/ownership.py`),
created once by `slurmx submit` as the submitting user before the first `sbatch`: `folder_group(g[i])` is `g`, and
the owner is looked up once per array, not per index. A task of another uid carrying `g` is foreign, set aside
as any forged variant is.

**Job key.** slurmxd keys jobs by an integer id (store, start marks, audit, the view's variants). An index task is
keyed by `task_key(A, i)` for array job id A, the same before and after Slurm splits it off its array's pending
record into a record of its own with a new job id, so one index is one key for its whole life. Real job ids are at
most 32 bits; a key has bit 54 set, A in bits 22-53 and i in bits 0-21 (Slurm's MaxArraySize is at most
4,000,001), so no key is a job id and every key is a 64-bit integer SQLite keeps. `job_text(key)` is Slurm's
`A_i`: what the adapter puts in every command (`scontrol release A_i`, `scontrol update jobid=A_i ...`,
`scancel A_i`, `squeue --jobs=A_i`, `sacct -j A_i`), each of which Slurm resolves whether or not the task was
split off; acting on an unsplit task splits it off (even when the site's plugin refuses the change).

**What squeue shows** (22.05, 24.11, 26.05 alike but for 22.05's plain numbers; `slurm/array_tasks.py` reads
it): the indices still in the pending array are ONE record, `job_id == array_job_id`, `array_task_id` unset,
`array_task_string` listing them with the throttle (`0,2,4-9%3`), `array_max_tasks` the throttle (0: none). A
task split off is its own record: a new job id, `array_task_id` set, an empty task string; the last task to leave
keeps job id A. A finished pending record (the array cancelled whole) stays under `--states=all` with its task
string: each listed index ended so. An unsplit index cancelled alone leaves no record at all (it drops out of the
string), so an index of a known array that squeue no longer lists is gone. libslurm cuts the task string at
`SLURM_BITSTR_LEN` bytes (64 unless set; `...` marks the cut): slurmxd reads squeue with `SLURM_BITSTR_LEN=0`
(no cut), and a cut string is refused, never half-read.

**Throttle.** Slurm counts `%N` per array, so K kind arrays of `%N` could run K x N indices. slurmxd holds N for
the array group: an index group starts only while fewer than N indices of `g` run or are released, whatever their
kind (`array_throttle`: the smallest `%N` of its kind arrays). Each kind array carries `%N` too, so Slurm never
holds back an index slurmxd started (at most N per kind run), and with slurmxd gone Slurm still keeps each kind
under N; the race guard then cancels the losing kinds per index.

**Acting per index.** Release, steer and update act on `A_i` of the chosen kind; the losing kinds' index i are
cancelled per index (`scancel B_i`); a lease is renewed on the array's pending record whole (`scontrol update
jobid=A_[every index it holds] StartTime=...`), never index by index, which would split every pending index into a
record of its own, nor as `jobid=A`, which also pushes back the split-off tasks slurmxd released (`daemon/lease.py`).
`slurmx
status` and `cancel` take `g` (every index) or `g[i]` (one index); an index's outcome is its group's.

**Files per index.** A task's `SLURM_JOB_ID` is the id Slurm gave it when it split, not its key, so the job side
names a task's files (`preempt-`, `handler-`, `progress-`) `A_i` from `SLURM_ARRAY_JOB_ID` and
`SLURM_ARRAY_TASK_ID` (`hooks/_env.py`, `hook.sh`), and slurmxd by `job_text(key)`, in the array's folder.
"""

from __future__ import annotations

import re

__all__ = ["MAX_TASK_ID", "folder_group", "index_group", "index_of", "is_task_key", "job_text", "split_key",
           "task_key"]

MAX_TASK_ID = (1 << 22) - 1  # Slurm's MaxArraySize is at most 4,000,001: indices 0-4,000,000
_KEY_FLAG = 1 << 54
_MAX_ARRAY_JOB_ID = (1 << 32) - 1  # job ids are 32-bit in every Slurm (the top bits carry a federation's cluster)
_INDEX_GROUP = re.compile(r"(.+)\[([0-9]{1,7})\]")


def task_key(array_job_id: int, task_id: int) -> int:
    """The key slurmxd uses for task `task_id` of array `array_job_id`; ValueError outside Slurm's ranges."""
    if not 1 <= array_job_id <= _MAX_ARRAY_JOB_ID or not 0 <= task_id <= MAX_TASK_ID:
        raise ValueError(f"array task {array_job_id}_{task_id} is outside Slurm's ranges")
    return _KEY_FLAG | array_job_id << 22 | task_id


def is_task_key(job_id: int) -> bool:
    return job_id >= _KEY_FLAG


def split_key(job_id: int) -> tuple[int, int]:
    """(array job id, task id) of a task key."""
    return (job_id ^ _KEY_FLAG) >> 22, job_id & MAX_TASK_ID


def job_text(job_id: int) -> str:
    """How Slurm's commands name a job: `A_i` for a task key, the number otherwise."""
    if job_id >= _KEY_FLAG:
        array_job_id, task_id = split_key(job_id)
        return f"{array_job_id}_{task_id}"
    return str(job_id)


def index_group(array_group: str, index: int) -> str:
    """The group id of index `index` of the array group `array_group` (the `g=` its tasks carry)."""
    return f"{array_group}[{index}]"


def index_of(group_id: str) -> tuple[str, int] | None:
    """(array group, index) of an index group's id; None for a plain group."""
    if not group_id.endswith("]"):
        return None
    match = _INDEX_GROUP.fullmatch(group_id)
    return None if match is None else (match[1], int(match[2]))


def folder_group(group_id: str) -> str:
    """The group whose spool folder holds `group_id`'s files and says who owns it: an index group's array."""
    found = index_of(group_id)
    return group_id if found is None else found[0]
