"""Resource vectors: arithmetic, comparison and GRES parsing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmx.core.resources import Resources, parse_gres
from slurmx.core.units import UnitError


def test_add_and_sub() -> None:
    a = Resources(4, 8000, {"gpu": 1})
    b = Resources(2, 1000, {"gpu": 1, "accel": 1})
    assert a + b == Resources(6, 9000, {"gpu": 2, "accel": 1})
    assert (a + b) - b == a
    assert a - a == Resources()


def test_zero_gres_dropped_and_order_irrelevant() -> None:
    assert Resources(1, 2, {"gpu": 0}) == Resources(1, 2)
    x, y = Resources(1, 2, {"b": 1, "a": 2}), Resources(1, 2, {"a": 2, "b": 1})
    assert x == y and hash(x) == hash(y)


def test_gres_read_only() -> None:
    r = Resources(1, 1, {"gpu": 1})
    with pytest.raises(TypeError):
        r.gres["gpu"] = 5  # type: ignore[index]


def test_fits_in() -> None:
    node = Resources(4, 8000, {"gpu": 2})
    assert Resources(4, 8000, {"gpu": 2}).fits_in(node)
    assert Resources(1, 500).fits_in(node)
    assert not Resources(5, 500).fits_in(node)
    assert not Resources(1, 8001).fits_in(node)
    assert not Resources(1, 500, {"gpu": 3}).fits_in(node)
    assert not Resources(1, 500, {"accel": 1}).fits_in(node)


def test_scaled_and_nonnegative() -> None:
    r = Resources(1, 500, {"gpu": 1})
    assert r.scaled(3) == Resources(3, 1500, {"gpu": 3})
    assert r.is_nonnegative()
    assert not (Resources() - r).is_nonnegative()


def test_parse() -> None:
    assert Resources.parse(4, "16G", "gpu:1") == Resources(4, 16384, {"gpu": 1})
    assert Resources.parse(1, 500) == Resources(1, 500)
    assert Resources.parse(2, "1G", {"accel": 1}).gres_count("accel") == 1


def test_dims_and_spec() -> None:
    r = Resources(2, 1024, {"gpu": 2, "accel": 1})
    assert r.dims() == {"cpus": 2, "mem_mb": 1024, "gres/accel": 1, "gres/gpu": 2}
    assert r.gres_spec() == "accel:1,gpu:2"
    assert str(r) == "cpus=2 mem=1G accel:1,gpu:2"


@pytest.mark.parametrize(
    ("text", "counts"),
    [
        ("gpu:2", {"gpu": 2}),
        ("gpu:2,accel:1", {"gpu": 2, "accel": 1}),
        ("gpu:tesla:2", {"gpu": 2}),
        ("gres/gpu:1", {"gpu": 1}),
        ("gpu:2(IDX:0-1)", {"gpu": 2}),
        ("gpu:a100:2(IDX:0,1),fpga:1", {"gpu": 2, "fpga": 1}),
        ("gpu:a100:1,gpu:v100:1", {"gpu": 2}),
        ("(null)", {}),
        ("", {}),
        (None, {}),
    ],
)
def test_parse_gres(text: str | None, counts: dict[str, int]) -> None:
    assert parse_gres(text) == counts


@pytest.mark.parametrize("bad", ["gpu2", "gpu:", ":2", "gpu:x"])
def test_parse_gres_rejects(bad: str) -> None:
    with pytest.raises(UnitError, match="NAME:COUNT"):
        parse_gres(bad)


_AMOUNTS = st.builds(Resources, st.integers(-2, 6), st.integers(-2, 6),
                     st.dictionaries(st.sampled_from(["gpu", "fpga", "mps"]), st.integers(-2, 6), max_size=3))


@given(_AMOUNTS, _AMOUNTS, _AMOUNTS)
def test_fits_with_is_fits_in_of_the_sum(held: Resources, request: Resources, capacity: Resources) -> None:
    assert held.fits_with(request, capacity) == (held + request).fits_in(capacity)
