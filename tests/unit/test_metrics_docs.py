"""docs/daemon.md's metrics table is the registry: every family slurmxd exports is listed with its type and labels,
and nothing listed is missing from a scrape (a dashboard built from the docs finds every series it names)."""

from __future__ import annotations

import re
from pathlib import Path

from slurmx.daemon.metrics import Metrics

DOCS = Path(__file__).resolve().parents[2] / "docs" / "daemon.md"
_ROW = re.compile(r"^\s*\| `(?P<name>[a-z_:]+)(?:\{(?P<labels>[a-z_,]+)\})?` \| (?P<type>[a-z]*) \|")


def documented() -> dict[str, tuple[str, frozenset[str]]]:
    """Metric name as scraped -> (type, label names), from the table under "Metrics and health"."""
    text = DOCS.read_text()
    table = text[text.index("| metric | type | meaning |"):]
    table = table[:table.index("\n\n")]
    rows: dict[str, tuple[str, frozenset[str]]] = {}
    for line in table.splitlines()[2:]:
        match = _ROW.match(line)
        assert match, f"docs/daemon.md: a metrics row not in the form | `name{{labels}}` | type | meaning |: {line}"
        assert match["name"] not in rows, f"docs/daemon.md: {match['name']} listed twice"
        labels = frozenset(match["labels"].split(",")) if match["labels"] else frozenset()
        rows[match["name"]] = (match["type"], labels)
    return rows


def registered() -> dict[str, tuple[str, frozenset[str]]]:
    """The same, from a fresh daemon's registry (counters as scraped, with `_total`)."""
    out: dict[str, tuple[str, frozenset[str]]] = {}
    for family in Metrics().registry.collect():
        name = family.name + "_total" if family.type == "counter" else family.name
        labels = frozenset(k for sample in family.samples for k in sample.labels if k != "le")
        out[name] = (family.type, labels)
    return out


def test_every_registered_metric_is_documented_with_its_type_and_labels() -> None:
    docs, live = documented(), registered()
    missing = {name: live[name] for name in live.keys() - docs.keys()}
    assert not missing, f"docs/daemon.md lacks rows for {missing}"
    wrong = {name: (docs[name], live[name]) for name in live.keys() & docs.keys() if docs[name] != live[name]}
    assert not wrong, f"docs/daemon.md (documented, registered) differ: {wrong}"


def test_every_documented_metric_exists() -> None:
    stale = documented().keys() - registered().keys()
    assert not stale, f"docs/daemon.md lists metrics slurmxd does not export: {sorted(stale)}"


def test_slurmxd_metrics_follow_the_naming_conventions() -> None:
    for name, (kind, _) in registered().items():
        if name.startswith(("process_", "python_")):  # prometheus_client's standard collectors
            continue
        assert name.startswith("slurmxd_"), name
        assert (kind == "counter") == name.endswith("_total"), name
        assert kind != "histogram" or name.endswith("_seconds"), name
        assert not re.search(r"_(ms|milliseconds|minutes|hours|kb|mb|gb)(_|$)", name), f"{name}: not a base unit"
