"""Helpers a submitit user reaches for: `as_completed` over any kind of job."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TypeVar

from slurmx.executor.job import JobAPI

__all__ = ["as_completed"]

J = TypeVar("J", bound=JobAPI)


def as_completed(jobs: Sequence[J], timeout: float | None = None, poll_frequency: float = 10.0) -> Iterator[J]:
    """The jobs as they end (with a result, an exception, or none), first ended first; TimeoutError when some
    have not after `timeout` seconds. submitit's signature."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pending = list(jobs)
    while pending:
        for job in list(pending):
            if job.done():
                pending.remove(job)
                yield job
        if not pending:
            return
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"{len(pending)} of {len(jobs)} job(s) not done after {timeout} s")
        time.sleep(poll_frequency if deadline is None else max(0.0, min(poll_frequency,
                                                                         deadline - time.monotonic())))
