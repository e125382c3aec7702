"""`FunctionSequence`: several small calls in one job, run in order, their results kept across requeues.

submitit's `helpers.FunctionSequence`, with slurmx's checkpoint protocol: `checkpoint()` returns the sequence
itself, so the results done so far travel with it and only the calls not yet done run after a requeue (the one
interrupted runs again). Standard library only, and pickled by value (payload.py registers this module), because
the nodes have the job side but not slurmx: like any code sent by value, it runs on the submitting Python's minor
version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["FunctionSequence"]


class FunctionSequence:
    """`seq = FunctionSequence(); seq.add(fn, *args, **kwargs); ...; executor.submit(seq).result()` is the list of
    the calls' results, in order."""

    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose
        self.calls: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = []
        self.results: dict[int, Any] = {}  # index -> result, each set in one step (a signal never splits it)

    def add(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.calls.append((fn, args, kwargs))

    def __len__(self) -> int:
        return len(self.calls)

    def __iter__(self) -> Iterator[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]]:
        return iter(self.calls)

    def __call__(self) -> list[Any]:
        if self.verbose:
            print(f"Starting from {len(self.results)}/{len(self.calls)}", flush=True)
        for index, (fn, args, kwargs) in enumerate(self.calls):
            if index not in self.results:
                self.results[index] = fn(*args, **kwargs)
        return [self.results[index] for index in range(len(self.calls))]

    def checkpoint(self) -> FunctionSequence:
        return self  # resume with the results so far
