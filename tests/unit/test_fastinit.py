"""`fast_init`: the faster `__init__` builds what the dataclass-generated one builds, or refuses as it does."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmx.core.fastinit import fast_init
from slurmx.core.model import Group, JobClass, Variant, VariantState
from slurmx.core.placement import ANYWHERE, Placement
from slurmx.core.resources import Resources


def _slots(obj: object) -> dict[str, Any]:
    """Every slot of `obj`, the init=False ones too (a missing one reads as the class itself: never equal)."""
    return {f.name: getattr(obj, f.name, type(obj)) for f in dataclasses.fields(obj)}  # type: ignore[arg-type]


def _same(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    generated = cls.__init__.generated_init  # type: ignore[misc]
    try:
        expected: object = object.__new__(cls)
        generated(expected, *args, **kwargs)
    except TypeError as exc:
        with pytest.raises(TypeError):
            cls(*args, **kwargs)
        assert str(exc)  # both refuse
        return
    got = cls(*args, **kwargs)
    assert got == expected
    assert _slots(got) == _slots(expected)


_VARIANT = st.tuples(st.text(max_size=5), st.sampled_from(["cpu", "gpu"]), st.none() | st.integers(1, 10**9),
                     st.sampled_from(list(VariantState)), st.builds(Resources, st.integers(0, 64),
                                                                    st.integers(0, 10**6)),
                     st.text(max_size=5), st.lists(st.text(max_size=3), max_size=3), st.none() | st.floats(0, 1e6),
                     st.none() | st.integers(0, 10**6), st.none() | st.floats(0, 2e9), st.none() | st.floats(0, 2e9),
                     st.just(()), st.integers(1, 4),
                     st.sampled_from([ANYWHERE, Placement("", ("c1",), (), True)]))


@given(_VARIANT, st.integers(0, 14), st.booleans())
def test_a_variant_is_built_as_the_dataclass_builds_it(values: tuple[Any, ...], given_count: int,
                                                       by_name: bool) -> None:
    """Any prefix of the fields, positional or by name (the rest defaulted, or missing: then both refuse); the
    `__post_init__` still runs (a list of nodes becomes a tuple)."""
    names = [f.name for f in dataclasses.fields(Variant)]
    chosen = values[:given_count]
    if by_name:
        _same(Variant, (), dict(zip(names, chosen, strict=False)))
    else:
        _same(Variant, chosen, {})


@given(st.text(max_size=5), st.lists(_VARIANT, max_size=3), st.none() | st.floats(0, 1e6), st.integers(0, 600),
       st.lists(st.text(max_size=3), max_size=2))
def test_a_group_is_built_as_the_dataclass_builds_it(name: str, variants: list[tuple[Any, ...]], work: float | None,
                                                     grace: int, nodes: list[str]) -> None:
    built = [Variant(*values) for values in variants]
    _same(Group, ("g", name, "alice", JobClass.BE, built, work, grace), {"preempted_nodes": nodes})
    _same(Group, ("g", name, "alice", JobClass.TE, built), {})
    _same(Group, ("g",), {"name": name})  # fields missing: both refuse
    _same(Group, ("g", name, "alice", JobClass.TE, built), {"_state": None})  # not a parameter: both refuse


def test_default_factories_and_fields_out_of_init_are_set_as_dataclasses_sets_them() -> None:
    @fast_init
    @dataclass(frozen=True, slots=True)
    class Sample:
        a: int
        b: list[int] = field(default_factory=list)
        c: str = "x"
        d: tuple[int, ...] = field(default=(), init=False)

    first, second = Sample(1), Sample(1)
    assert first.b == [] and first.b is not second.b  # a new list each time
    assert _slots(first) == {"a": 1, "b": [], "c": "x", "d": ()}
    assert Sample(2, [3], c="y") == Sample(2, b=[3], c="y")
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.a = 2  # type: ignore[misc]


def test_only_a_frozen_slotted_dataclass_is_served() -> None:
    @dataclass(slots=True)
    class Mutable:
        a: int

    @dataclass(frozen=True)
    class Unslotted:
        a: int

    @dataclass(frozen=True, slots=True, kw_only=True)
    class KeywordOnly:
        a: int

    for cls in (Mutable, Unslotted, KeywordOnly, int):
        with pytest.raises(TypeError, match="fast_init"):
            fast_init(cls)
