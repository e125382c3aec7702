"""The Python API for programs: `slurmx.submit(spec) -> GroupHandle`, then status, cancel, wait."""

from __future__ import annotations

import os
import posixpath
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from slurmx.core.config import SiteConfig, load_site_config
from slurmx.core.model import GroupState, VariantState
from slurmx.core.validation import ConfigError
from slurmx.slurm import SlurmAdapter, adapter_from_config
from slurmx.submit.groups import GroupStatus, cancel_group, find_group, find_groups
from slurmx.submit.spec import JobSpec, load_spec, parse_spec
from slurmx.submit.submitter import SubmitError, SubmittedGroup, submit_group, submit_groups

__all__ = ["GroupHandle", "submit", "submit_array", "wait_for"]

T = TypeVar("T")


@dataclass
class GroupHandle:
    """A submitted group. Every method asks Slurm afresh: the handle holds ids, not state."""

    submitted: SubmittedGroup
    adapter: SlurmAdapter

    @property
    def group_id(self) -> str:
        return self.submitted.group_id

    def status(self) -> GroupStatus:
        found = find_group(self.adapter, self.group_id, since="now-1day",
                           spool_dir=posixpath.dirname(self.submitted.spool_dir.rstrip("/")))
        if found is None:
            raise LookupError(f"Slurm no longer knows group {self.group_id} (jobs {self.submitted.job_ids()})")
        return found

    def cancel(self) -> list[int]:
        return cancel_group(self.adapter, self.status())

    def wait(self, timeout: float | None = None, poll: float = 2.0) -> GroupStatus:
        """Block until the group has finished (completed, failed or cancelled); TimeoutError after `timeout` s."""
        def step() -> tuple[GroupStatus | None, str]:
            current = self.status()
            return (current if current.finished else None), f"group {self.group_id} still {current.state.value}"

        return _until(step, timeout, poll)

    def indices(self) -> list[GroupStatus]:
        """A group of Slurm arrays: each index group `g[i]` Slurm still knows (squeue, then accounting)."""
        return find_groups(self.adapter, self.group_id, since="now-1day",
                           spool_dir=posixpath.dirname(self.submitted.spool_dir.rstrip("/")))

    def wait_indices(self, timeout: float | None = None, poll: float = 2.0) -> list[GroupStatus]:
        """Block until every index of a group of Slurm arrays has finished; TimeoutError after `timeout` s."""
        expected = len(self.submitted.indices)

        def step() -> tuple[list[GroupStatus] | None, str]:
            done = [g for g in self.indices() if g.finished]
            return (done if len(done) >= expected else None), \
                f"array group {self.group_id}: {len(done)} of {expected} indices ended"

        return _until(step, timeout, poll)


def _until(step: Callable[[], tuple[T | None, str]], timeout: float | None, poll: float) -> T:
    """Call `step` every `poll` s until it returns a value; TimeoutError with its words after `timeout` s."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        value, still = step()
        if value is not None:
            return value
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"{still} after {timeout:.0f} s")
        time.sleep(poll)


def submit(spec: JobSpec | Mapping[str, Any] | str | Path, site: SiteConfig | str | Path | None = None, *,
           mode: str | None = None, pick: str | None = None, variants: tuple[str, ...] | None = None,
           adapter: SlurmAdapter | None = None) -> GroupHandle:
    """Submit a job spec (a JobSpec, a mapping, or the path of a YAML spec) as one group."""
    job, site_config, slurm = _prepare(spec, site, adapter)
    if job.array is not None:
        raise ConfigError(["array: submit() returns one group; slurmx.submit.api.submit_array submits one per index"])
    submitted = submit_group(job, site_config, slurm, mode=mode, pick=pick, only=variants)
    return GroupHandle(submitted, slurm)


def submit_array(spec: JobSpec | Mapping[str, Any] | str | Path, site: SiteConfig | str | Path | None = None, *,
                 mode: str | None = None, pick: str | None = None, variants: tuple[str, ...] | None = None,
                 adapter: SlurmAdapter | None = None) -> list[GroupHandle]:
    """Submit a spec with `array:` as one group per index (all or none; each handle follows its group by id, so
    not as Slurm arrays, whose index groups `slurmx submit` makes); a spec without it as one group."""
    job, site_config, slurm = _prepare(spec, site, adapter)
    return [GroupHandle(g, slurm) for g in submit_groups(job, site_config, slurm, mode=mode, pick=pick, only=variants,
                                                         slurm_arrays=False)]


def _prepare(spec: JobSpec | Mapping[str, Any] | str | Path, site: SiteConfig | str | Path | None,
             adapter: SlurmAdapter | None) -> tuple[JobSpec, SiteConfig, SlurmAdapter]:
    if site is None:
        site = os.environ.get("SLURMX_SITE", "/etc/slurmx/site.yaml")
    site_config = site if isinstance(site, SiteConfig) else load_site_config(site)
    if isinstance(spec, JobSpec):
        job = spec
    elif isinstance(spec, Mapping):
        job = parse_spec(spec)
    else:
        job = load_spec(spec)
    return job, site_config, adapter or adapter_from_config(site_config.transport)


def wait_for(handle: GroupHandle, poll: float = 5.0) -> str:
    """`slurmx submit --wait`: block until the group ends, whichever variant ran. Returns the line saying so when
    it completed; raises SubmitError (as sbatch --wait fails) when it failed or was cancelled."""
    if handle.submitted.indices:
        return _wait_for_indices(handle, poll)
    try:
        final = handle.wait(poll=poll)
    except LookupError as exc:
        raise SubmitError(str(exc)) from None
    ran = next((f" (variant {v.kind})" for v in final.variants if v.state is not VariantState.CANCELLED), "")
    if final.state is not GroupState.COMPLETED:
        raise SubmitError(f"group {handle.group_id} ended {final.state.value}{ran}")
    return f"Group {handle.group_id} completed{ran}"


def _wait_for_indices(handle: GroupHandle, poll: float) -> str:
    """`--wait` on a group of Slurm arrays: every index ended; SubmitError naming the first ones that did not
    complete."""
    ended = handle.wait_indices(poll=poll)
    bad = [g for g in ended if g.state is not GroupState.COMPLETED]
    if bad:
        shown = ", ".join(f"{g.group_id} {g.state.value}" for g in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise SubmitError(f"array group {handle.group_id}: {len(bad)} of {len(ended)} indices did not complete "
                          f"({shown}{more}); slurmx status {handle.group_id} lists each")
    return f"Array group {handle.group_id}: all {len(ended)} indices completed"
