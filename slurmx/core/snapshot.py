"""A read-only mapping lent by an owner that keeps its state incrementally, built lazily and frozen on demand.

Why: the simulator hands its policy a fresh `ClusterView` at every decision. Copying thousands of nodes and
groups into each snapshot, and rebuilding every node and group that changed, cost more than the rest of a
large run although a FIFO policy reads a handful of them. A `LentSnapshot` instead reads the owner's live
dict, builds a stale entry only when it is read, and is frozen (every stale entry built, the dict copied)
if it is still referenced when the owner is about to change its state. Readers see an immutable mapping
either way; `ClusterView` takes it as is instead of copying it.

The owner's side of the contract: while a snapshot is lent and not frozen, neither the live dict, the stale
set nor anything `build` reads changes; call `freeze()` first (see `freeze_if_alive`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["LentSnapshot", "constant", "freeze_if_alive"]


class LentSnapshot(Mapping[K, V]):
    """`data[key]` as of the moment the snapshot was lent; keys in `stale` are built on first read."""

    __slots__ = ("__weakref__", "_build", "_data", "_stale")

    def __init__(self, data: dict[K, V], stale: set[K], build: Callable[[K], V]) -> None:
        self._data = data
        self._stale = stale
        self._build: Callable[[K], V] | None = build

    def _fresh(self, key: K) -> V:
        assert self._build is not None  # a frozen snapshot has no stale keys
        value = self._data[key] = self._build(key)
        self._stale.discard(key)
        return value

    def __getitem__(self, key: K) -> V:
        if key in self._stale:
            return self._fresh(key)
        return self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def values_of(self, keys: list[K]) -> tuple[V, ...]:
        """`tuple(self[k] for k in keys)`, the stale ones among them built first: a lookup per key in C, where
        reading them one by one is a call each (a policy reading every queued group at every decision)."""
        stale = self._stale
        if stale:
            for key in stale.intersection(keys):
                self._fresh(key)  # as reading it does
        return tuple(map(self._data.__getitem__, keys))

    def _complete(self) -> dict[K, V]:
        for key in list(self._stale):
            if key in self._data:
                self._fresh(key)
        return self._data

    def keys(self) -> KeysView[K]:
        return self._data.keys()

    def values(self) -> ValuesView[V]:
        return self._complete().values()

    def items(self) -> ItemsView[K, V]:
        return self._complete().items()

    def freeze(self) -> None:
        """Detach from the owner: build what is stale and keep a private copy, so later changes never show."""
        if self._build is not None:
            self._data = self._complete().copy()
            self._stale = set()
            self._build = None

    def __repr__(self) -> str:
        return f"LentSnapshot({len(self)} entries{', frozen' if self._build is None else ''})"


def freeze_if_alive(refs: list[weakref.ReferenceType[LentSnapshot[K, V]]]) -> bool:
    """Freeze every snapshot still referenced (a caller kept it past the decision); says whether any was."""
    kept = False
    for ref in refs:
        snapshot = ref()
        if snapshot is not None:
            snapshot.freeze()
            kept = True
    refs.clear()
    return kept


def constant(data: Mapping[K, V]) -> LentSnapshot[K, V]:
    """A snapshot of a mapping its owner never changes (a site's partitions): lent to every view uncopied."""
    copy = dict(data)
    snapshot = LentSnapshot(copy, set(), copy.__getitem__)
    snapshot.freeze()
    return snapshot
