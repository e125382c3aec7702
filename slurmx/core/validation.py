"""Strict YAML loading and one-line validation errors, shared by the site config and the job spec.

A typo in a site file or a job spec otherwise shows up hours later as a job in the wrong partition, so
unknown keys are errors and every error names the file and the dotted key path on one line.
"""

from __future__ import annotations

import difflib
import math
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from slurmx.core.units import ClockNumber, short_repr

__all__ = ["ConfigError", "load_yaml", "model_keys", "parse_yaml", "validate_model", "validation_messages"]

M = TypeVar("M", bound=BaseModel)


class ConfigError(Exception):
    """An invalid file. `str()` is the first problem on one line; `.errors` holds all of them."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = [_bounded(" ".join(e.splitlines())) for e in errors] or ["invalid configuration"]
        super().__init__(self.errors[0])

    def __str__(self) -> str:
        return self.errors[0]



# Caps on user YAML. A spec, site or run config is a page of keys; anything far larger is a mistake or an attack
# (481 bytes of nested aliases expand to hundreds of millions of values and hang validation).
MAX_YAML_BYTES = 256 * 1024  # real ones are under 8 KiB; the pure-Python scanner reads ~1 MiB/s
MAX_YAML_VALUES = 20_000  # after alias expansion; also keeps the pure-Python parser well under a second
MAX_YAML_DEPTH = 64
MAX_WHOLE_NUMBER = 2**63 - 1  # Slurm's own counters are 64-bit


def _bounded(message: str) -> str:
    """A message that quotes a huge value keeps its head (the place) and its tail (the fix)."""
    return message if len(message) <= _MAX_MESSAGE else f"{message[:240]} ... {message[-150:]}"


_MAX_MESSAGE = 400


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys and numbers no field could hold, instead of passing them on."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
        except TypeError:
            raise yaml.constructor.ConstructorError(None, None, "a list or mapping cannot be a key; write a name",
                                                    key_node.start_mark) from None
        if duplicate:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


def _construct_int(loader: _StrictLoader, node: yaml.ScalarNode) -> int:
    shown = node.value if len(node.value) <= 20 else node.value[:20] + "..."
    problem = f"number {shown} is too large; the largest is {MAX_WHOLE_NUMBER}"
    if len(node.value) > 40:  # also keeps int() off digit strings long enough to be slow or refused
        raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)
    value: int = loader.construct_yaml_int(node)
    if abs(value) > MAX_WHOLE_NUMBER:
        raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)
    if ":" in node.value:  # YAML 1.1 base 60: `1:30:00` is 5400; a time limit needs the text (units.ClockNumber)
        return ClockNumber(value, node.value.replace("_", ""))
    return value


def _construct_float(loader: _StrictLoader, node: yaml.ScalarNode) -> float:
    value: float = loader.construct_yaml_float(node)
    if not math.isfinite(value):
        raise yaml.constructor.ConstructorError(None, None, f"number {node.value[:20]!r} is not finite; write a "
                                                "finite number", node.start_mark)
    return value


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)


def load_yaml(path: str | Path, root: type[BaseModel], missing_hint: str) -> Any:
    """Read a YAML file strictly (duplicate keys rejected, size capped); every failure is a `ConfigError` naming
    the file."""
    source = str(path)
    try:
        with Path(path).open("rb") as handle:
            raw = handle.read(MAX_YAML_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError([f"{source}: file not found; {missing_hint}"]) from None
    except OSError as exc:
        raise ConfigError([f"{source}: cannot read: {exc.strerror or exc}"]) from None
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigError([f"{source}: larger than {MAX_YAML_BYTES // 1024} KiB; a config this large is a "
                           "mistake, keep data in files it names"])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError([f"{source}: line {line}: byte 0x{raw[exc.start]:02x} is not UTF-8; save the file as "
                           "UTF-8"]) from None
    data = parse_yaml(text, source)
    if data is None:
        raise ConfigError([f"{source}: file is empty; expected keys {', '.join(_written_keys(root))}"])
    if not isinstance(data, Mapping):
        raise ConfigError([f"{source}: expected a mapping of keys at top level, got {type(data).__name__}"])
    return data


def parse_yaml(text: str, source: str) -> Any:
    """YAML text -> data with every user-YAML cap applied (values after aliases, nesting, numbers, duplicate
    keys); every failure is a one-line `ConfigError` starting with `source`."""
    try:
        _check_shape(text, source)
        return yaml.load(text, Loader=_StrictLoader)  # _StrictLoader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError([f"{source}: {where}{exc.problem or exc.context or 'invalid YAML'}"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([f"{source}: invalid YAML: {exc}"]) from None


def _line(event: yaml.Event) -> str:
    return f"line {event.start_mark.line + 1}: " if event.start_mark is not None else ""


def _check_shape(text: str, source: str) -> None:
    """Count values as aliases would expand them, and nesting, from the event stream: cheap and not recursive,
    so a bomb is refused before anything is built."""
    stack: list[tuple[int, str | None]] = []
    sizes: dict[str, int] = {}
    total = 0
    for event in yaml.parse(text, Loader=_StrictLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            stack.append((total, event.anchor))
            total += 1
            if len(stack) > MAX_YAML_DEPTH:
                raise ConfigError([f"{source}: {_line(event)}nested more than {MAX_YAML_DEPTH} "
                                   "levels deep; flatten it"])
        elif isinstance(event, yaml.CollectionEndEvent):
            start, anchor = stack.pop()
            if anchor is not None:
                sizes[anchor] = total - start
        elif isinstance(event, yaml.ScalarEvent):
            total += 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            total += sizes.get(event.anchor or "", 1)
        else:
            continue
        if total > MAX_YAML_VALUES:
            raise ConfigError([f"{source}: {_line(event)}more than {MAX_YAML_VALUES:,} values "
                               "once aliases are expanded; write the values out or shorten the file"])


def validate_model(root: type[M], data: Any, source: str, at: tuple[int | str, ...] = ()) -> M:
    """Validate parsed data against `root`; errors become one-line `<source>: <key.path>: <problem>`.

    `at` is where `data` sits in its file (e.g. `("policy", "params")`), so a part validated on its own still
    names its full key path. Every problem is kept (`.errors`); a misspelt key is reported as the typo, with the
    key it resembles, rather than as that key missing.
    """
    if not isinstance(data, Mapping):
        where = f"{_dotted(at)}: " if at else ""
        raise ConfigError([f"{source}: {where}expected a mapping of keys"
                           f"{'' if at else ' at top level'}, got {type(data).__name__}"])
    try:
        return root.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(validation_messages(root, exc, source, at)) from None


def validation_messages(root: type[BaseModel], exc: ValidationError, source: str,
                        at: tuple[int | str, ...] = ()) -> list[str]:
    """One line per problem of `exc`; a key a typo stands for is not also reported missing."""
    errors = exc.errors()
    meant: set[tuple[int | str, ...]] = set()
    for err in errors:
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden" and loc and isinstance(loc[-1], str):
            close = _closest(root, loc)
            if close is not None:
                meant.add((*loc[:-1], close))
    return [_format_error(root, source, err, at) for err in errors
            if not (err["type"] == "missing" and tuple(err["loc"]) in meant)]


def _closest(root: type[BaseModel], loc: tuple[int | str, ...]) -> str | None:
    """The valid key an unknown key at `loc` most resembles (a likely typo), if any is close."""
    model = _model_at(root, loc[:-1])
    if model is None:
        return None
    found = difflib.get_close_matches(str(loc[-1]), _written_keys(model), n=1, cutoff=0.75)
    return found[0] if found else None


def _dotted(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _format_error(root: type[BaseModel], source: str, err: ErrorDetails, at: tuple[int | str, ...] = ()) -> str:
    loc = tuple(err["loc"])
    path = _dotted((*at, *loc))
    prefix = f"{source}: {path}: " if path else f"{source}: "
    return prefix + _message(root, err, loc)


def _message(root: type[BaseModel], err: ErrorDetails, loc: tuple[int | str, ...]) -> str:
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == "extra_forbidden":
        model = _model_at(root, loc[:-1])
        if model is None:
            return "unknown key"
        close = _closest(root, loc)
        meant = f"; did you mean {close}?" if close is not None else ";"
        return f"unknown key{meant} valid keys: {', '.join(_written_keys(model))}"
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    if kind == "missing":
        return "required key is missing"
    if kind == "literal_error":
        return f"expected {ctx.get('expected')}, got {short_repr(value)}"
    if kind in ("model_type", "dict_type"):
        return f"expected a mapping, got {short_repr(value)}"
    if kind in ("tuple_type", "list_type"):
        return f"expected a list, got {short_repr(value)}"
    if kind == "string_type":
        return f"expected a string, got {short_repr(value)}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected a whole number, got {short_repr(value)}"
    if kind in _BOUND_OPS:
        op = _BOUND_OPS[kind]
        bound = next(iter(ctx.values()), "?")
        return f"must be {op} {bound}, got {short_repr(value)}"
    if kind == "string_pattern_mismatch":
        return f"expected a name matching {ctx.get('pattern')}, got {short_repr(value)}"
    return str(err["msg"])


_BOUND_OPS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}


def model_keys(model: type[BaseModel]) -> list[str]:
    """The YAML spelling of a model's keys, in declaration order."""
    return [
        info.validation_alias if isinstance(info.validation_alias, str) else name
        for name, info in model.model_fields.items()
    ]


def _written_keys(model: type[BaseModel]) -> list[str]:
    """`model_keys` but a field excluded from dumps: derived from another key, never written in a file."""
    return [key for key, info in zip(model_keys(model), model.model_fields.values(), strict=True) if not info.exclude]


def _model_at(root: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model validating the mapping at `loc`, found by walking field annotations from the root."""
    current: Any = root
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        by_key = {key: info for key, info in zip(model_keys(current), current.model_fields.values(), strict=True)}
        if part not in by_key:
            return None
        current = _unwrap(by_key[part].annotation)
        if get_origin(current) is dict:
            if not parts:
                return None
            parts.pop(0)  # the free-form key, e.g. the kind name
            current = _unwrap(get_args(current)[1])
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """`X | None` -> X."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation
