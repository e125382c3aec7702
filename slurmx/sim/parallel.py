"""Run many independent simulations on a local process pool, in input order, with a progress bar.

Off a terminal (a batch job, a pipe, CI) the bar would print nothing: a plain line goes to stderr instead at every
5% (every item below 20), so a log shows how far a long sweep got.

Results come back in the order of `items` whatever order the workers finish in, so a sweep's table and
JSON do not depend on the number of workers (a test checks 1 worker against several).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

__all__ = ["parallel_map"]

T = TypeVar("T")
R = TypeVar("R")


def parallel_map(fn: Callable[[T], R], items: Sequence[T], workers: int = 1, label: str = "runs",
                 progress: bool = True) -> list[R]:
    """`[fn(x) for x in items]`, on `workers` processes when > 1 (`fn` and the items must pickle)."""
    console = Console(stderr=True)
    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                   transient=True, disable=not progress or not console.is_terminal)
    lines = progress and not console.is_terminal
    step, started, done = max(1, len(items) // 20), time.monotonic(), 0
    results: list[R | None] = [None] * len(items)

    def advance() -> None:
        nonlocal done
        done += 1
        bar.advance(task)
        if lines and (done % step == 0 or done == len(items)):
            print(f"{label}: {done}/{len(items)} ({done / len(items):.0%}) after {time.monotonic() - started:.1f} s",
                  file=sys.stderr, flush=True)

    with bar:
        task = bar.add_task(label, total=len(items))
        if workers <= 1 or len(items) <= 1:
            for i, item in enumerate(items):
                results[i] = fn(item)
                advance()
        else:
            with ProcessPoolExecutor(max_workers=min(workers, len(items))) as pool:
                futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    advance()
    return results  # type: ignore[return-value]  # every slot is filled above
