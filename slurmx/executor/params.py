"""Executor parameters: the job spec's own vocabulary, plus the few things only a function job needs.

Keys are checked when they are set, not at the first submit: an unknown key fails with the list of valid ones,
and the resource keys go through the job spec's validation, so `update_parameters(time="1h")` means what
`time: 1h` means in a spec. submitit's names are translated first (aliases.py).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from slurmx.core.validation import ConfigError
from slurmx.executor.aliases import translate
from slurmx.submit.spec import JobSpec, parse_spec

__all__ = ["EXECUTOR_KEYS", "SPEC_KEYS", "ExecutorParams", "job_name"]

SPEC_KEYS = ("variants", "overrides", "class", "grace", "estimates", "work", "env", "modules", "cpus", "mem",
             "mem_per_cpu", "gpus", "time", "workdir", "sbatch", "checkpoint_dir",
             "constraint", "nodelist", "exclude", "exclusive", "nodes", "ntasks", "ntasks_per_node", "begin")
EXECUTOR_KEYS = {"name": None, "mode": "the site's submit.mode", "pick": None, "python": "this interpreter",
                 "max_requeues": 3, "max_result_bytes": 256 << 20, "poll": 2.0, "setup": "[] (shell lines)",
                 "array_parallelism": "0 (no throttle)"}
_MODES = ("managed", "race", "pick")


@dataclass(frozen=True)
class ExecutorParams:
    """The spec fields (validated as a spec) and the executor's own settings."""

    spec: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None
    mode: str | None = None
    pick: str | None = None
    python: str = sys.executable
    max_requeues: int = 3
    max_result_bytes: int = 256 << 20
    poll: float = 2.0
    setup: tuple[str, ...] = ()  # shell lines the job script runs before the call (submitit's `setup`)
    flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # sbatch options by submitit name
    array_parallelism: int = 0  # map()'s tasks running at once across the kinds (`--array=...%N`); 0: no throttle

    def updated(self, values: Mapping[str, Any], partitions: Mapping[str, str] | None = None) -> ExecutorParams:
        """These parameters with `values` applied; ConfigError naming every bad key, with the valid ones.
        `partitions` (kind -> partition of the site) resolves submitit's `slurm_partition`."""
        translated = translate(values, partitions, SPEC_KEYS)
        problems = list(translated.problems)
        values = translated.values
        unknown = [k for k in values if k not in SPEC_KEYS and k not in EXECUTOR_KEYS]
        if unknown:
            valid = ", ".join([*SPEC_KEYS, *(f"{k} (default {v})" for k, v in EXECUTOR_KEYS.items())])
            problems += [f"update_parameters: unknown key {k!r}; valid keys: {valid}, and submitit's names "
                         "(docs/executor.md)" for k in unknown]
        for name, flags in translated.flags.items():
            try:
                parse_spec({"name": "check", "command": "true", "sbatch": list(flags)}, source="update_parameters")
            except ConfigError as exc:
                problems.append(f"update_parameters: {name} ({' '.join(flags)}): {exc.errors[0].split(': ', 1)[-1]}")
        if problems:
            raise ConfigError(problems)
        spec = {**self.spec, **{k: v for k, v in values.items() if k in SPEC_KEYS}}
        own = {k: v for k, v in values.items() if k in EXECUTOR_KEYS}
        if "setup" in own:
            own["setup"] = _lines(own["setup"])
        new = replace(self, spec=spec, flags={**self.flags, **translated.flags}, **own)
        new.check()
        return new

    def check(self) -> None:
        problems = []
        if self.mode is not None and self.mode not in _MODES:
            problems.append(f"update_parameters: mode must be one of {', '.join(_MODES)}, got {self.mode!r}")
        if isinstance(self.max_requeues, bool) or not isinstance(self.max_requeues, int) or self.max_requeues < 0:
            problems.append(f"update_parameters: max_requeues must be an integer >= 0, got {self.max_requeues!r}")
        if (isinstance(self.array_parallelism, bool) or not isinstance(self.array_parallelism, int)
                or self.array_parallelism < 0):
            problems.append("update_parameters: array_parallelism must be an integer >= 0 (0: no throttle), got "
                            f"{self.array_parallelism!r}")
        if not isinstance(self.python, str) or not self.python or "\n" in self.python:
            problems.append(f"update_parameters: python must be an interpreter path, got {self.python!r}")
        if problems:
            raise ConfigError(problems)
        self.job_spec("check", "true")  # the spec keys, validated as a spec

    def job_spec(self, name: str, script: str) -> JobSpec:
        sbatch = [*self.spec.get("sbatch", ()), *(flag for flags in self.flags.values() for flag in flags)]
        extra = {"sbatch": sbatch} if sbatch else {}
        return parse_spec({**self.spec, **extra, "name": self.name or name, "script": script},
                          source="update_parameters")


def _lines(value: Any) -> tuple[str, ...]:
    """submitit's `setup`: a list of shell lines (one string is one line)."""
    lines = [value] if isinstance(value, str) else value
    if not isinstance(lines, list | tuple) or not all(isinstance(x, str) and "\n" not in x for x in lines):
        raise ConfigError([f"update_parameters: setup must be a list of shell lines, one per string, got {value!r}"])
    return tuple(lines)


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def job_name(fn: Any) -> str:
    """A job name from the function's name (`<lambda>` -> `lambda`), safe for a spec."""
    raw = getattr(fn, "__name__", None) or type(fn).__name__
    name = _UNSAFE.sub("-", str(raw)).strip("-.") or "function"
    return name[:64] if name[0].isalnum() else f"fn-{name}"[:64]
