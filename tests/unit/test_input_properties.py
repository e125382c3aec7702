"""Property tests (hypothesis): malformed specs, site configs and sim run configs — random YAML values in every
field, wrong types, huge numbers, bytes, garbage spliced into the text — end in the documented one-line error
(`ConfigError`, or `UnitError` for a quantity) or load, never in another exception, and each within 2 s.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from slurmx.core.config import load_site_config
from slurmx.core.units import UnitError
from slurmx.core.validation import ConfigError
from slurmx.sim.config import load_sim_config
from slurmx.submit.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
BASES: dict[str, tuple[Callable[[Path], Any], dict[str, Any]]] = {
    "spec": (load_spec, {"name": "hello", "command": "echo hi", "variants": ["cpu", "gpu"], "class": "be",
                         "time": "5m", "mem": "1G", "cpus": 2, "grace": "30s", "env": {"A": "1"},
                         "overrides": {"gpu": {"mem": "2G"}}, "estimates": {"cpu": "10m"}}),
    "site": (load_site_config, yaml.safe_load((REPO / "site-config" / "test-cluster.yaml").read_text())),
    "sim": (load_sim_config, {"seed": 1, "mode": "tick", "period": "30s",
                              "cluster": {"partitions": [{"name": "gpu", "nodes": 2, "cpus": 8, "mem": "64G",
                                                          "gres": "gpu:4"}]},
                              "policy": {"name": "fifo", "params": {}},
                              "workload": {"generator": "fitgpp", "params": {"n_jobs": 10, "nodes": 2}}}),
}
# Each input must finish well inside 2 s; no example database, so nothing is written into the repository.
BOUNDED = settings(max_examples=600, deadline=timedelta(seconds=2), database=None,
                   phases=[Phase.explicit, Phase.generate, Phase.shrink],
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-(10**400), max_value=10**400), st.floats(),
    st.text(max_size=20), st.binary(max_size=12),
    st.sampled_from(["5m", "1e400", "32G", "-1", "0", "1-00:00:00", "gpu:1", "UNLIMITED", "9" * 400 + "s",
                     "9" * 5000, ".inf", "nan", "1.5", "fifo", "cpu", "te", ""]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of `doc` with `value` at `path` (the last step may be a new key)."""
    if not path:
        return value
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[path[0]] = value if len(path) == 1 else _replaced(copy[path[0]], path[1:], value)
    return copy


@st.composite
def broken_documents(draw: st.DrawFn, kind: str) -> bytes:
    """The base document with one to three values replaced or new keys added, dumped as YAML, then sometimes
    bytes spliced into the text."""
    doc: Any = BASES[kind][1]
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(doc))[1:] or [()]))  # the whole document: the bytes test
        if isinstance(_at(doc, path), dict) and draw(st.booleans()):
            path = (*path, draw(st.text(max_size=8)))
        doc = _replaced(doc, path, draw(VALUES))
    text = yaml.safe_dump(doc, allow_unicode=True).encode()
    if draw(st.integers(0, 3)) == 0:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.binary(max_size=16)) + text[at:]
    return text


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


def _load(kind: str, data: bytes, folder: Path) -> None:
    path = folder / f"{kind}.yaml"
    path.write_bytes(data)
    try:
        BASES[kind][0](path)
    except ConfigError as exc:
        assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc), str(exc)
    except UnitError as exc:
        assert "\n" not in str(exc), str(exc)


def test_the_bases_are_valid(folder: Path) -> None:
    for kind, (load, doc) in BASES.items():
        path = folder / f"{kind}.yaml"
        path.write_text(yaml.safe_dump(doc))
        load(path)


@pytest.mark.parametrize("kind", list(BASES))
def test_malformed_documents_give_only_the_documented_error(kind: str, folder: Path) -> None:
    @BOUNDED
    @given(data=broken_documents(kind))
    def check(data: bytes) -> None:
        _load(kind, data, folder)

    check()


@pytest.mark.parametrize("kind", list(BASES))
def test_arbitrary_bytes_give_only_the_documented_error(kind: str, folder: Path) -> None:
    @settings(BOUNDED, max_examples=300)
    @given(data=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
    def check(data: bytes) -> None:
        _load(kind, data, folder)

    check()
