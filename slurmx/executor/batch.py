"""A call made inside `with executor.batch():`: a stand-in for its job until the block ends and submits it.

submitit hands back its job objects inside the block too, and fills them in when the block ends; code written
for it keeps the list and reads results after the block, which works here unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

__all__ = ["BatchedJob"]

Call = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class BatchedJob:
    """Answers every job question (`result()`, `done()`, `group_id`, ...) once `land()` gave it the job it became;
    before that, a RuntimeError saying the batch is not submitted yet."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self._job: Any = None

    def land(self, job: Any) -> None:
        self._job = job

    @property
    def submitted(self) -> bool:
        return self._job is not None

    def __getattr__(self, name: str) -> Any:
        job = self.__dict__.get("_job")
        if job is None:
            raise RuntimeError(f"job.{name}: this call is submitted when its `with executor.batch():` block ends; "
                               "ask for it after the block")
        return getattr(job, name)

    def __await__(self) -> Generator[Any, None, Any]:
        awaited: Generator[Any, None, Any] = self.__getattr__("__await__")()
        return awaited

    def __repr__(self) -> str:
        return repr(self._job) if self._job is not None else f"BatchedJob({self.call[0]!r}, not submitted yet)"
