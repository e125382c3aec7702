"""Fewer cyclic garbage collections while a simulation runs.

A run allocates millions of short-lived objects (views, plans, actions, records) and keeps a large long-lived
state (the jobs in the system, every record). CPython's cyclic collector starts a young-generation pass every
700 net allocations and, every tenth of those, traverses the older survivors too; in a FitGpp replay of 65,536
jobs that was about a sixth of the CPU time. The engine's objects hold no reference cycles (reference counting
frees them), so the run raises the first threshold and puts it back when it ends, so that the process around it
(the daemon's tests, a notebook) keeps its own settings.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["RUN_THRESHOLD", "fewer_collections"]

RUN_THRESHOLD = 100_000  # net allocations between two young-generation passes during a run (CPython's: 700)

_lock = threading.Lock()
_inside = 0  # blocks open now, nested or in other threads: the first raises the threshold, the last restores it
_saved: tuple[int, ...] = ()


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the collector's first threshold to `RUN_THRESHOLD` (never lower it) for the block; runs nested or in
    threads share one raise, and the settings from before the first come back when the last one ends."""
    global _inside, _saved
    with _lock:
        if _inside == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(max(_saved[0], RUN_THRESHOLD), *_saved[1:])
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                gc.set_threshold(*_saved)
