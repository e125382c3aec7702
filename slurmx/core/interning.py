"""One string object per distinct value of a field a queue holds few values of, bounded.

A decoder makes a new string for every job: at 100,000 groups the copies of users, states, partitions, kinds and
estimates are tens of MB. A pool hands back the first object seen for each value. It is bounded because every
value may come from a user (a comment's fields) or a site (partition names): past the bound, values simply stay
unshared, so a hostile queue costs at most the bound.
"""

from __future__ import annotations

__all__ = ["StringPool"]


class StringPool:
    """`pool(text)`: the pool's object equal to `text`, kept while fewer than `limit` values are held."""

    __slots__ = ("_limit", "_values")

    def __init__(self, limit: int = 4096) -> None:
        self._values: dict[str, str] = {}
        self._limit = limit

    def __call__(self, text: str) -> str:
        got = self._values.get(text)
        if got is not None:
            return got
        if len(self._values) < self._limit:
            self._values[text] = text
        return text

    def __len__(self) -> int:
        return len(self._values)

    def clear(self) -> None:
        """Forget every value (a benchmark timing a cold first read)."""
        self._values.clear()
