"""Options given to a trace loader, checked against its signature before any reading, as a `TraceError`.

Options come from YAML (`workload.params` of a sim config) as often as from Python, so a misspelt name, a
string where a count belongs or an unknown choice must name the option and the fix instead of ending in a
`TypeError` (or, worse, being taken silently). The loaders' own annotations are the source of truth.
"""

from __future__ import annotations

import difflib
import enum
import functools
import inspect
import reprlib
import types
import typing
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from slurmx.sim.traces.errors import TraceError

__all__ = ["check_path", "checked_like", "checked_options"]

P = ParamSpec("P")
R = TypeVar("R")
_AT_LEAST = {"limit": 0}  # every other whole-number option is a size or count of at least 1


def checked_options(loader: Callable[P, R]) -> Callable[P, R]:
    """Wrap `loader(path, *, options)` so wrong options raise a one-line `TraceError`; types stay as declared."""
    return _checked(loader, loader)


def checked_like(template: Callable[..., Any]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """`checked_options` for a function taking `template`'s options as `**options` (another way to read the same
    trace): the same names, types and errors, declared once."""
    return lambda loader: _checked(loader, inspect.unwrap(template))


def _checked(loader: Callable[P, R], declared: Callable[..., Any]) -> Callable[P, R]:
    @functools.wraps(loader)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        if not args and "path" not in kwargs:
            raise TraceError("<no path>", f"{loader.__name__} needs the trace's path")
        path = check_path(args[0] if args else kwargs["path"])
        if len(args) > 1:
            raise TraceError(path, f"{loader.__name__} takes options by name (limit=1000), got {args[1]!r}")
        kinds = _option_kinds(declared)
        for name, value in list(kwargs.items()):
            if name != "path":
                kwargs[name] = _check(path, loader.__name__, kinds, name, value)
        return loader(*args, **kwargs)

    return checked


def check_path(path: object) -> str | Path:
    """`path` itself when it is a str or Path; anything else (a number or list from YAML) is a `TraceError`."""
    if not isinstance(path, str | Path):
        raise TraceError(repr(path)[:80], f"expected the trace's path as a string, got {type(path).__name__}")
    return path


@functools.cache
def _option_kinds(loader: Callable[..., Any]) -> dict[str, Any]:
    """The keyword-only parameters of `loader` and their resolved annotations."""
    hints = typing.get_type_hints(loader)
    params = inspect.signature(loader).parameters.values()
    return {p.name: hints[p.name] for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}


def _check(path: str | Path, loader: str, kinds: dict[str, Any], name: str, value: Any) -> Any:
    """`value` converted to what option `name` declares (a list to a tuple, "te" to JobClass.TE), or a TraceError."""
    if name not in kinds:
        close = difflib.get_close_matches(str(name), kinds, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise TraceError(path, f"unknown option {name!r} for {loader}; {hint}its options are {', '.join(kinds)}")
    converted, expected = _convert(kinds[name], value, _AT_LEAST.get(name, 1))
    if expected:
        raise TraceError(path, f"option {name}: expected {expected}, got {reprlib.repr(value)}")
    return converted


def _convert(kind: Any, value: Any, low: int | None) -> tuple[Any, str]:
    """(converted value, "") when `value` fits annotation `kind`, else (None, what was expected)."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None, ""
        (inner,) = [a for a in args if a is not type(None)]
        converted, expected = _convert(inner, value, low)
        return converted, expected and f"{expected} or null"
    if typing.get_origin(kind) is typing.Literal:
        return (value, "") if value in args and isinstance(value, str) else (None, f"one of {', '.join(args)}")
    if typing.get_origin(kind) is Collection:
        if isinstance(value, str | bytes) or not isinstance(value, list | tuple | set | frozenset):
            return None, f"a list of {'whole numbers' if args[0] is int else 'strings'}"
        items = [_convert(args[0], item, None) for item in value]  # partition numbers, QoS names: no bound
        if any(expected for _, expected in items):
            return None, f"a list of {'whole numbers' if args[0] is int else 'strings'}"
        return tuple(converted for converted, _ in items), ""
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        by_value = {str(m.value).lower(): m for m in kind}
        text = value.value if isinstance(value, kind) else value
        found = by_value.get(text.lower()) if isinstance(text, str) else None
        return (found, "") if found is not None else (None, f"one of {', '.join(by_value)}")
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool) and (low is None or value >= low)
        return (value, "") if ok else (None, "a whole number" + (f" >= {low}" if low is not None else ""))
    if kind is str:
        return (value, "") if isinstance(value, str) else (None, "a string")
    raise AssertionError(f"no check for option type {kind!r}")  # a loader grew an option of a new type
