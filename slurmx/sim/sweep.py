"""Parameter sweeps: one run config, a grid of overrides, one result per point, in grid order.

`--param policy=fifo,fitgpp --param load=1.5,2.0` expands to the cartesian product (the first parameter
varies slowest). A key is a dotted path into the run config (`policy.params.s`, `estimation_error.sigma`);
two short forms: `policy` means `policy.name`, and a bare key the run config does not have at its top level
(`load`, `jobs`) means `workload.params.<key>`; such a key must be a parameter of the base's built-in generator,
and is refused when it looks like a misspelt run config key (`polcy`). Values are read as YAML scalars (`2.0`,
`true`, `fifo`).

Every point is validated before anything runs, so a typo in the tenth point fails in a second, not after
nine simulations. A point's result is its run's metrics, byte-identical wherever it runs (locally on a
process pool, or on a Slurm cluster as a job array: see `slurmx.sim.sweep_slurm`).
"""

from __future__ import annotations

import copy
import difflib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmx.core.validation import ConfigError, model_keys, parse_yaml
from slurmx.sim.config import SimConfig, load_run_document, load_workload, parse_sim_config
from slurmx.sim.metrics import compute_metrics
from slurmx.sim.runner import run_config
from slurmx.sim.workloads import WORKLOADS

__all__ = ["SweepPoint", "expand_grid", "load_base", "parse_param", "point_row", "run_point"]

_SHORT = {"policy": "policy.name"}


@dataclass(frozen=True)
class SweepPoint:
    """One point of the grid: the overrides that define it and the whole run config it becomes."""

    index: int
    label: Mapping[str, Any]
    document: Mapping[str, Any]


def parse_param(text: str) -> tuple[str, list[Any]]:
    """`key=v1,v2` -> (dotted key, [values]); one-line errors show the expected form."""
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise ConfigError([f"--param {text!r}: expected KEY=VALUE[,VALUE...], e.g. policy=fifo,fitgpp"])
    parsed = []
    for raw in values.split(","):
        value = raw.strip()
        try:
            parsed.append(parse_yaml(value, f"--param {key}"))  # the caps of every user-YAML load
        except ConfigError as exc:
            shown = value if len(value) <= 40 else value[:37] + "..."
            reason = str(exc).removeprefix(f"--param {key}: ").removeprefix("line 1, ")
            raise ConfigError([f"--param {key}: cannot read value {shown!r}: {reason}"]) from None
    return key, parsed


def _full_key(key: str) -> str:
    if key in _SHORT:
        return _SHORT[key]
    if "." in key or key in SimConfig.model_fields or any(f.alias == key for f in SimConfig.model_fields.values()):
        return key
    return f"workload.params.{key}"


def _check_bare(base: Mapping[str, Any], short: str, key: str) -> None:
    """A bare key goes to `workload.params`; refuse it there when it is a typo of a run config key (`polcy`) or
    not a parameter of the base's built-in generator, which would otherwise fail only when the points run."""
    if short == key or key != f"workload.params.{short}":
        return
    top = [*_SHORT, *(k for k in model_keys(SimConfig) if k not in _SHORT)]
    close = difflib.get_close_matches(short, top, n=1, cutoff=0.75)
    workload = base.get("workload")
    generator = workload.get("generator") if isinstance(workload, Mapping) else None
    known = model_keys(WORKLOADS[generator][0]) if isinstance(generator, str) and generator in WORKLOADS else None
    if known is not None and short in known:
        return
    if close:
        raise ConfigError([f"--param {short}: not a run config key; did you mean {close[0]}? (a bare key is a "
                           f"workload parameter: write workload.params.{short} to mean that)"])
    if known is not None:
        meant = difflib.get_close_matches(short, known, n=1, cutoff=0.6)
        hint = f"did you mean {meant[0]}? " if meant else ""
        raise ConfigError([f"--param {short}: neither a run config key nor a parameter of workload {generator}; "
                           f"{hint}its parameters: {', '.join(known)}"])


def _set(document: dict[str, Any], dotted: str, value: Any) -> None:
    node = document
    parts = dotted.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError([f"--param {dotted}: {part} is a {type(child).__name__} in the run config, not a map"])
        node = child
    node[parts[-1]] = value


def load_base(path: str | Path) -> dict[str, Any]:
    """The run config as a plain document, with its file paths made relative to it (as `sim run` reads it)."""
    return load_run_document(path)


def expand_grid(base: Mapping[str, Any], params: Sequence[tuple[str, list[Any]]], source: str = "sweep") \
        -> list[SweepPoint]:
    """The cartesian product of `params` over `base`; every point is validated here."""
    keys = [_full_key(k) for k, _ in params]
    for (short, _), key in zip(params, keys, strict=True):
        _check_bare(base, short, key)
    if len(set(keys)) != len(keys):
        raise ConfigError([f"{source}: a parameter is given twice ({', '.join(keys)})"])
    points = []
    for index, combo in enumerate(itertools.product(*(values for _, values in params))):
        document = copy.deepcopy(dict(base))
        label = {}
        for (short, _), key, value in zip(params, keys, combo, strict=True):
            _set(document, key, value)
            label[short] = value
        where = ", ".join(f"{k}={v}" for k, v in label.items()) or "base"
        parse_sim_config(document, f"{source} point {index} ({where})")
        points.append(SweepPoint(index, label, document))
    return points


def run_point(document: Mapping[str, Any]) -> dict[str, Any]:
    """Run one point; returns its metrics (JSON-ready, no wall times). Top level so a pool can pickle it."""
    config = parse_sim_config(document, "sweep point")
    workload = load_workload(config.workload, config.seed)
    result = run_config(config, workload.jobs, info=workload.info)
    # A JSON round trip makes the local result the very same document a Slurm task writes and we read back.
    metrics: dict[str, Any] = json.loads(json.dumps(compute_metrics(result, config.report.util_bins),
                                                    sort_keys=True, allow_nan=False))
    return metrics


def point_row(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The headline numbers of a point, for the sweep's table."""
    jct, slow = metrics["jct"], metrics["slowdown"]
    return {
        "jobs": metrics["jobs"]["completed"],
        "jct_mean_s": jct.get("mean"),
        "jct_p50_s": jct.get("p50"),
        "jct_p95_s": jct.get("p95"),
        "jct_p99_s": jct.get("p99"),
        "makespan_s": metrics["makespan"],
        "slowdown_p95": slow["all"].get("p95"),
        "te_slowdown_p95": slow.get("te", {}).get("p95"),
        "be_slowdown_p50": slow.get("be", {}).get("p50"),
        "preempted": metrics["preemptions"]["jobs_preempted"],
    }
