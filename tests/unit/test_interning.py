"""The bounded string pool: one object per value while under its bound, the text itself past it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from slurmx.core.interning import StringPool


def test_equal_texts_come_back_as_one_object() -> None:
    pool = StringPool()
    first = pool("".join(["al", "ice"]))
    assert pool("".join(["ali", "ce"])) is first


@given(st.lists(st.text(max_size=8), max_size=60), st.integers(0, 10))
def test_a_pool_never_holds_more_than_its_bound_and_always_returns_an_equal_text(texts: list[str], limit: int) -> None:
    pool = StringPool(limit)
    for text in texts:
        assert pool(text) == text
    assert len(pool) == min(limit, len(set(texts)))
