"""What Slurm reports about jobs and finished jobs, in one shape whatever the Slurm version."""

from __future__ import annotations

from dataclasses import dataclass, field

from slurmx.core import tag
from slurmx.core.model import VariantState
from slurmx.core.resources import Resources

__all__ = ["AccountingRecord", "SlurmJob"]


@dataclass(slots=True)
class SlurmJob:
    """One job as squeue shows it. Times are epoch seconds (None when Slurm has not set them).

    Read-only by convention (change one with `dataclasses.replace`): not `frozen`, because a frozen dataclass
    sets each of these fields through `object.__setattr__`, and building 20,000 of them that way was two
    thirds of the time it takes to parse a 20,000-job `squeue --json`.
    """

    job_id: int
    name: str
    user: str
    user_id: int
    state: VariantState
    state_text: str
    reason: str
    partition: str
    qos: str
    comment: str
    nodes: str
    request: Resources
    allocated: Resources
    priority: int
    nice: int
    held: bool
    restart_count: int
    time_limit_s: int | None
    submit_time: int | None
    start_time: int | None
    end_time: int | None
    required_nodes: str = ""  # ReqNodeList as squeue shows it now (`-w`, or where slurmxd steered it)
    # How the job's batch script exited, as a shell reports it: its exit code, or 128 + N when signal N ended it;
    # None when Slurm does not say. Meaningful once the job ended: a pending job shows 0, a requeued one its
    # previous run's code.
    exit_code: int | None = None
    # When Slurm may start it (`--begin`, a lease, the restart delay after a requeue); None when Slurm does not say.
    begin_time: int | None = None
    # What it waits on (`--dependency`), as squeue shows it: "" when nothing or when Slurm found it satisfied.
    dependency: str = ""
    excluded_nodes: str = ""  # ExcNodeList (`-x`)
    features: str = ""  # the job's `--constraint`, as squeue shows it
    node_count: int = 1  # nodes asked for (`-N`) while pending; held once running
    exclusive: bool = False  # `--exclusive`: whole nodes (Slurm 26.05's squeue does not say: always False there)
    # Job arrays (`core/arrays.py`): the array's job id (0: not an array task) and the task's index. An index task
    # is keyed by `arrays.task_key(array_job_id, array_task_id)` in `job_id`, before and after Slurm splits it off
    # the array's pending record; `arrays.job_text(job_id)` is how Slurm's commands name it (`A_i`).
    array_job_id: int = 0
    array_task_id: int | None = None
    array_throttle: int = 0  # the array's `%N` (0: none); Slurm counts it per array
    # Still in its array's pending record (`array_tasks.expand_pending`): a lease renews the record whole, naming
    # every index it holds, or Slurm splits each named index off (`daemon/lease.py`).
    array_pending: bool = False
    # The comment's tag once read (`group_tag`): None until then, "" for none, else its TagRead or what is wrong
    # with it. The lease layer, trust and the view each ask, every cycle. No constructor takes it:
    # `dataclasses.replace` and a copy read the comment afresh.
    _tag: tag.TagRead | str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def waits_on_dependency(self) -> bool:
        """Slurm has not found its dependency satisfied (it clears a satisfied one; a term that is still shown
        says `(fulfilled)`, `(unfulfilled)` or `(failed)`; `?` means any of, `,` all of)."""
        text = self.dependency
        if not text:
            return False
        if "?" in text:
            return not any(term.endswith("(fulfilled)") for term in text.split("?"))
        return not all(term.endswith("(fulfilled)") for term in text.split(","))

    @property
    def slurmx_tags(self) -> dict[str, str]:
        """Fields of the job's group tag ({} for jobs slurmx did not submit, or whose tag it cannot read)."""
        return tag.readable_fields(self.comment)

    def group_tag(self) -> tag.TagRead | None:
        """`core.tag.read(self.comment)`, read once per record (None: not a slurmx tag); raises `tag.TagError` for
        a tag that breaks the grammar, with the same message each time."""
        got = self._read_tag()
        if got.__class__ is str:
            if got:
                raise tag.TagError(got)
            return None
        return got  # type: ignore[return-value]

    def readable_group_tag(self) -> tag.TagRead | None:
        """`group_tag()`, with None for a tag this slurmx cannot read (as `tag.readable_fields`)."""
        got = self._read_tag()
        return None if got.__class__ is str else got  # type: ignore[return-value]

    def _read_tag(self) -> tag.TagRead | str:
        got = self._tag
        if got is None:
            try:
                got = tag.read(self.comment) or ""
            except tag.TagError as exc:
                got = str(exc)  # the message, not the exception: raised anew, it carries no old traceback
            self._tag = got
        return got


@dataclass(frozen=True, slots=True)
class AccountingRecord:
    """One job from sacct: what it asked for, what it got, how long it ran, how it ended."""

    job_id: int
    name: str
    user: str
    state: VariantState
    state_text: str
    partition: str
    qos: str
    nodes: str
    comment: str
    request: Resources
    allocated: Resources
    submit_time: int | None
    start_time: int | None
    end_time: int | None
    elapsed_s: int
    exit_code: int | None
    max_rss_mb: int | None
    restart_count: int
    array_job_id: int = 0  # a job array's task: its array (core/arrays.py), `job_id` then its task key
    array_task_id: int | None = None
