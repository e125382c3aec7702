"""The job spec: one logical job, written once, that becomes one sbatch variant per resource kind.

```yaml
name: train
command: python train.py --epochs 10       # or `script:` with a multi-line body
variants: [cpu, gpu]                      # default: every kind the site defines
class: be                                 # te | be -> the site's QOS
grace: 2m                                 # a duration: an unquoted bare number is seconds
time: 90                                  # a time limit: a bare number is MINUTES, as sbatch --time=90
mem: 8G                                   # or mem_per_cpu: 2G (times each variant's CPUs)
# gpus: 2                                 # (or a100:2) only the kinds with GPUs, each asking for 2
work: 10000                               # amount of work (e.g. steps), for estimators
estimates: {cpu: 2h, gpu: 20m}            # optional per-variant runtime estimates (durations)
env: {DATA: /scratch/data}
overrides:
  gpu: {command: python train.py --cuda, cpus: 4, mem: 16G, gres: "gpu:1", time: 1h}
sbatch: ["--account=proj"]
# constraint: nvlink                      # placement, per kind too: the kinds whose nodes can satisfy it run
# nodelist: c[1-2]                        # (exclude:, exclusive: true); docs/submit.md "Placement"
# nodes: 2                                # multi-node, multi-task (ntasks:, ntasks_per_node:): srun works inside
```

docs/submit.md has what each sbatch option means to a group (and which are refused).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from slurmx.core.config import SiteConfig
from slurmx.core.model import JobClass
from slurmx.core.resources import parse_gres
from slurmx.core.units import UnitError, parse_duration, parse_mem, parse_time_limit, short_repr
from slurmx.core.validation import ConfigError, load_yaml, validate_model
from slurmx.submit.array import parse_array, split_throttle
from slurmx.submit.dependency import parse_dependency
from slurmx.submit.directives import (
    CLIENT_OPTIONS,
    canonical_long_option,
    modelled_key,
    parse_begin,
    parse_export,
    refusal,
    short_option,
)
from slurmx.submit.placement import constraint_field, count_field, hosts_field, layout_problem
from slurmx.submit.signals import parse_signal

__all__ = ["JobSpec", "VariantOverride", "gpu_gres", "gres_with_gpus", "load_spec", "parse_spec",
           "resolve_variants"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODULE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+/-]*$")
# Options slurmx sets itself per variant; a spec must use the typed fields instead.
_RESERVED = ("--partition", "--qos", "--gres", "--mem", "--cpus-per-task", "--job-name", "--comment", "--hold",
             "--output", "--error", "--signal", "--requeue", "--no-requeue", "--parsable", "--wrap",
             # `export:` is the spec's (checked, and the job script made to work without the submitting
             # environment); a file of variables or a login environment slurmx cannot check.
             "--export-file", "--get-user-env",
             # `begin:` is the spec's (managed: in the tag too, as the lease moves Slurm's begin time).
             "--begin",
             "-p", "-c", "-J", "-o", "-e", "-H", "-q", "-b")


def _duration(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    try:
        return parse_duration(value)
    except UnitError as exc:
        raise ValueError(str(exc)) from None


def _time_limit(value: Any) -> Any:
    """`time:`: a bare number is minutes, as in `sbatch --time=30`; `grace` and `estimates` stay durations."""
    if value is None or isinstance(value, bool):
        return value
    try:
        return parse_time_limit(value)
    except UnitError as exc:
        raise ValueError(str(exc)) from None


def _mem(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    try:
        return parse_mem(value)
    except UnitError as exc:
        raise ValueError(str(exc)) from None


_GPUS_RE = re.compile(r"^(?:([A-Za-z][\w.-]*):)?(\d{1,6})$")


def _gpus(value: Any) -> Any:
    """`gpus:` (`--gpus`): COUNT or TYPE:COUNT, at least 1; the kinds with GPUs each ask for that many."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a GPU count like 2 or a100:2, got {short_repr(value)}")
    match = _GPUS_RE.match(value.strip())
    if match is None or int(match.group(2)) < 1:
        raise ValueError(f"expected a GPU count like 2 or a100:2 (at least 1), got {short_repr(value)}")
    return value.strip()


def _gres(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"expected NAME:COUNT, got {value!r}")
    try:
        parse_gres(value)
    except UnitError as exc:
        raise ValueError(str(exc)) from None
    if "(" in value:
        raise ValueError(f"expected NAME:COUNT, got {value!r}")
    return ",".join(item.strip() for item in value.split(","))


# Variables that change how the wrapper script itself runs (word splitting, start-up files, tracing).
_SHELL_OWNED = {"IFS", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "CDPATH", "GLOBIGNORE"}


def _env(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    for key, item in value.items():
        if not isinstance(key, str) or not _ENV_RE.fullmatch(key):
            raise ValueError(f"environment variable names are letters, digits and _, got {key!r}")
        if key.upper().startswith(("SLURMX_", "SLURM_", "_SLURMX")) or key in _SHELL_OWNED:
            raise ValueError(f"{key} is used by slurmx, Slurm or the shell; choose another name")
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise ValueError(f"{key}: expected a string or number, got {item!r}")
    return {k: str(v) for k, v in value.items()}


def _clean_text(value: Any, where: str = "") -> Any:
    """Reject NUL bytes (bash drops them silently) and text that is not valid UTF-8, anywhere in the spec."""
    if isinstance(value, str):
        if "\0" in value:
            raise ValueError(f"{where or 'a value'} contains a NUL byte")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{where or 'a value'} is not valid UTF-8 text") from None
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _clean_text(key, where)
            _clean_text(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _clean_text(item, f"{where}[{i}]")
    return value


# A modelled sbatch option (`directives.modelled_key`) -> the spec key that says it.
_SPEC_KEY = {"job-name": "name", "time": "time", "mem": "mem", "mem-per-cpu": "mem_per_cpu",
             "cpus-per-task": "cpus", "qos": "class", "partition": "variants", "gpus": "gpus",
             "dependency": "dependency", "array": "array", "export": "export",
             "output": "output", "error": "error", "signal": "signal",
             "begin": "begin", "constraint": "constraint", "nodelist": "nodelist", "exclude": "exclude",
             "exclusive": "exclusive", "nodes": "nodes", "ntasks": "ntasks", "ntasks-per-node": "ntasks_per_node"}


def _flags(value: Any) -> Any:
    if not isinstance(value, list | tuple):
        return value
    for flag in value:
        if not isinstance(flag, str) or not flag.startswith("-") or "\n" in flag:
            raise ValueError(f"expected an sbatch option like --account=proj, got {flag!r}")
        name, eq, given = flag.partition("=")
        if name.startswith("--"):
            # sbatch accepts any unambiguous prefix (--parti=gpu), so check the option it will really mean.
            canonical = canonical_long_option(name[2:])
            if canonical is None:
                raise ValueError(f"sbatch has no option {name} (or it is an ambiguous abbreviation)")
            option_value = given if eq else None
        else:
            canonical = short_option(flag[1:2]) or ""
            option_value = flag[2:].removeprefix("=") or None
        problem = refusal(canonical, option_value)
        if problem is not None:
            raise ValueError(problem)
        key = modelled_key(canonical, option_value)
        if key is not None:
            shown = name if name.startswith("--") else name[:2]
            raise ValueError(f"{shown} is what the spec's '{_SPEC_KEY[key]}:' says; write {_SPEC_KEY[key]}: "
                             "instead")
        if canonical in CLIENT_OPTIONS:
            raise ValueError(f"{name} is an option of the command: give `slurmx submit --{canonical}`")
        if f"--{canonical}" in _RESERVED or (re.match(r"^-[pcJoeHq]", name) is not None):
            raise ValueError(f"{name} is set by slurmx (use the spec's own fields); remove it")
    return value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class VariantOverride(_Model):
    """Per-variant changes: any field left out falls back to the spec, then to the site's kind."""

    @model_validator(mode="before")
    @classmethod
    def _text(cls, data: Any) -> Any:
        return _clean_text(data)

    command: str | None = None
    script: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    modules: tuple[str, ...] = ()
    cpus: int | None = Field(None, ge=1)
    mem_mb: int | None = Field(None, validation_alias="mem", ge=1)
    gres: str | None = None
    time_s: int | None = Field(None, validation_alias="time", gt=0)
    sbatch: tuple[str, ...] = ()
    # where the variant may run and on how many nodes and tasks (submit/placement.py)
    constraint: str | None = None
    nodelist: str | None = None
    exclude: str | None = None
    exclusive: bool | None = None
    nodes: int | None = None
    ntasks: int | None = None
    ntasks_per_node: int | None = None

    _v_env = field_validator("env", mode="before")(classmethod(lambda cls, v: _env(v)))
    _v_mem = field_validator("mem_mb", mode="before")(classmethod(lambda cls, v: _mem(v)))
    _v_constraint = field_validator("constraint", mode="before")(classmethod(lambda cls, v: constraint_field(v)))
    _v_nodelist = field_validator("nodelist", mode="before")(classmethod(lambda cls, v: hosts_field(v, "nodelist")))
    _v_exclude = field_validator("exclude", mode="before")(classmethod(lambda cls, v: hosts_field(v, "exclude")))
    _v_nodes = field_validator("nodes", mode="before")(classmethod(lambda cls, v: count_field(v, "nodes")))
    _v_ntasks = field_validator("ntasks", mode="before")(classmethod(lambda cls, v: count_field(v, "ntasks")))
    _v_per_node = field_validator("ntasks_per_node", mode="before")(
        classmethod(lambda cls, v: count_field(v, "ntasks-per-node")))
    _v_gres = field_validator("gres", mode="before")(classmethod(lambda cls, v: _gres(v)))
    _v_time = field_validator("time_s", mode="before")(classmethod(lambda cls, v: _time_limit(v)))
    _v_flags = field_validator("sbatch", mode="before")(classmethod(lambda cls, v: _flags(v)))

    @model_validator(mode="after")
    def _payload(self) -> VariantOverride:
        if self.command is not None and self.script is not None:
            raise ValueError("give one of 'command' or 'script', not both")
        return self

    @field_validator("modules")
    @classmethod
    def _modules(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for module in value:
            if not _MODULE_RE.fullmatch(module):
                raise ValueError(f"expected a module name like cuda/12.2, got {module!r}")
        return value


class JobSpec(_Model):
    """One logical job. Exactly one of `command` and `script` gives the payload."""

    @model_validator(mode="before")
    @classmethod
    def _text(cls, data: Any) -> Any:
        return _clean_text(data)

    name: str
    command: str | None = None
    script: str | None = None
    args: tuple[str, ...] = ()
    variants: tuple[str, ...] | None = None
    overrides: dict[str, VariantOverride] = Field(default_factory=dict)
    job_class: JobClass = Field(JobClass.BE, validation_alias="class")
    grace_s: int | None = Field(None, validation_alias="grace", ge=0)
    checkpoint_dir: str | None = None
    work: float | None = Field(None, gt=0, lt=1e18, allow_inf_nan=False)  # steps: the tag's n= holds 18 digits
    estimates: dict[str, int] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    modules: tuple[str, ...] = ()
    cpus: int | None = Field(None, ge=1)
    mem_mb: int | None = Field(None, validation_alias="mem", ge=1)
    mem_per_cpu_mb: int | None = Field(None, validation_alias="mem_per_cpu", ge=1)
    gpus: str | None = None
    time_s: int | None = Field(None, validation_alias="time", gt=0)
    workdir: str | None = None
    sbatch: tuple[str, ...] = ()
    # sbatch's syntax with group ids (submit/dependency.py); resolved to variant job ids at submission
    dependency: str | None = None
    array: tuple[int, ...] | None = None  # `--array`: a Slurm array per kind, else a group per index (array.py)
    # Its `%N` (0: none), taken from `array` (never a key of its own): only a Slurm array per kind can keep it.
    array_throttle: int = Field(0, ge=0, exclude=True)
    export: str | None = None  # `--export`: ALL, NONE, NIL or [ALL,]NAME[=value],... on every variant
    output: str | None = None  # `-o`: a file name pattern; each variant its own file (submit/output.py)
    error: str | None = None  # `-e`: the same for standard error
    signal: str | None = None  # `--signal`: [B:]SIG[@SECONDS], sent by the job script (submit/signals.py)
    begin: str | None = None  # `--begin`: every variant waits for it (managed: leases too, render.py)
    # Where the variants may run and on how many nodes and tasks (submit/placement.py); per kind in `overrides`.
    # Given here they apply to the kinds whose nodes can satisfy them (the others are left out, with a note).
    constraint: str | None = None
    nodelist: str | None = None
    exclude: str | None = None
    exclusive: bool | None = None
    nodes: int | None = None
    ntasks: int | None = None
    ntasks_per_node: int | None = None

    _v_env = field_validator("env", mode="before")(classmethod(lambda cls, v: _env(v)))
    _v_mem = field_validator("mem_mb", "mem_per_cpu_mb", mode="before")(classmethod(lambda cls, v: _mem(v)))
    _v_gpus = field_validator("gpus", mode="before")(classmethod(lambda cls, v: _gpus(v)))
    _v_time = field_validator("time_s", mode="before")(classmethod(lambda cls, v: _time_limit(v)))
    _v_grace = field_validator("grace_s", mode="before")(classmethod(lambda cls, v: _duration(v)))
    _v_flags = field_validator("sbatch", mode="before")(classmethod(lambda cls, v: _flags(v)))
    _v_constraint = field_validator("constraint", mode="before")(classmethod(lambda cls, v: constraint_field(v)))
    _v_nodelist = field_validator("nodelist", mode="before")(classmethod(lambda cls, v: hosts_field(v, "nodelist")))
    _v_exclude = field_validator("exclude", mode="before")(classmethod(lambda cls, v: hosts_field(v, "exclude")))
    _v_nodes = field_validator("nodes", mode="before")(classmethod(lambda cls, v: count_field(v, "nodes")))
    _v_ntasks = field_validator("ntasks", mode="before")(classmethod(lambda cls, v: count_field(v, "ntasks")))
    _v_per_node = field_validator("ntasks_per_node", mode="before")(
        classmethod(lambda cls, v: count_field(v, "ntasks-per-node")))

    @field_validator("dependency")
    @classmethod
    def _dependency(cls, value: str | None) -> str | None:
        if value is not None:
            parse_dependency(value)
        return value

    @field_validator("export")
    @classmethod
    def _export(cls, value: str | None) -> str | None:
        return parse_export(value) if value is not None else None

    @field_validator("begin")
    @classmethod
    def _begin(cls, value: str | None) -> str | None:
        return parse_begin(value) if value is not None else None

    @field_validator("signal")
    @classmethod
    def _signal(cls, value: str | None) -> str | None:
        return str(parse_signal(value)) if value is not None else None

    @field_validator("output", "error")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or "\n" in value):
            raise ValueError("expected a file name pattern like out-%j.log")
        return value

    @model_validator(mode="before")
    @classmethod
    def _array_throttle(cls, data: Any) -> Any:
        """`array: 0-9%3`: the indices go to `array`, the throttle to `array_throttle`."""
        if isinstance(data, dict) and isinstance(data.get("array"), str) and "%" in data["array"]:
            indices, throttle = split_throttle(data["array"])
            data = {**data, "array": indices, "array_throttle": throttle}
        return data

    @field_validator("array", mode="before")
    @classmethod
    def _array(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        return parse_array(value) if isinstance(value, str) else value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME_RE.fullmatch(value):
            raise ValueError(f"expected letters, digits, '_', '.', '-' (at most 64), got {value!r}")
        return value

    @field_validator("estimates", mode="before")
    @classmethod
    def _estimates(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            seconds = {k: _duration(v) for k, v in value.items()}
            for kind, v in seconds.items():
                if isinstance(v, int) and v <= 0:  # the tag's e= is a positive number of seconds
                    raise ValueError(f"{kind}: {v} s; give a positive duration (e.g. 20m), or leave {kind} out")
            return seconds
        return value

    @field_validator("modules")
    @classmethod
    def _modules(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return VariantOverride._modules(value)

    @field_validator("variants", mode="before")
    @classmethod
    def _variants(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, list | tuple) and not value:
            raise ValueError("list at least one resource kind, or leave the key out for all of them")
        return value

    @model_validator(mode="after")
    def _payload(self) -> JobSpec:
        if self.command is not None and self.script is not None:
            raise ValueError("give one of 'command' or 'script', not both")
        if self.command is None and self.script is None and not self.overrides:
            raise ValueError("give the payload: 'command' (one line) or 'script' (a body)")
        if self.mem_mb is not None and self.mem_per_cpu_mb is not None:
            raise ValueError("give one of 'mem' (the job's) or 'mem_per_cpu', not both (sbatch refuses the pair)")
        problem = layout_problem(self.nodes, self.ntasks, self.nodelist)
        for kind, override in self.overrides.items():
            if problem is None and (override.nodes, override.ntasks, override.nodelist) != (None, None, None):
                problem = layout_problem(override.nodes or self.nodes, override.ntasks or self.ntasks,
                                          override.nodelist or self.nodelist, f"overrides.{kind}.")
        if problem is not None:
            raise ValueError(problem)
        return self

    def variant_field(self, kind: str, name: str) -> Any:
        """The value of `name` for variant `kind`: the override if set, else the spec's own."""
        override = self.overrides.get(kind)
        value = getattr(override, name, None) if override is not None else None
        return value if value not in (None, (), {}) else getattr(self, name, None)


def parse_spec(data: Mapping[str, Any], source: str = "<spec>") -> JobSpec:
    return validate_model(JobSpec, data, source)


def load_spec(path: str | Path) -> JobSpec:
    data = load_yaml(path, JobSpec, "pass the path of a job spec (.yaml) or a batch script")
    return parse_spec(data, str(path))


def gpu_gres(gres: str | None) -> tuple[int, str | None] | None:
    """(index, type) of the `gpu[:type]:N` item in a kind's comma-separated GRES, or None when it has no GPUs."""
    for index, item in enumerate((gres or "").split(",")):
        parts = item.split(":")
        if parts[0] == "gpu" and len(parts) in (2, 3):
            return index, parts[1] if len(parts) == 3 else None
    return None


def _override_gres(spec: JobSpec, kind: str) -> str | None:
    override = spec.overrides.get(kind)
    return override.gres if override is not None else None


def gres_with_gpus(gres: str, gpus: str) -> str:
    """A kind's GRES with its GPU item asking for `gpus` (`N` keeps the kind's GPU type, `TYPE:N` sets one)."""
    found = gpu_gres(gres)
    if found is None:
        return gres
    index, kind_type = found
    wanted_type, _, count = gpus.rpartition(":")
    gpu_type = wanted_type or kind_type
    items = gres.split(",")
    items[index] = f"gpu:{gpu_type}:{count}" if gpu_type else f"gpu:{count}"
    return ",".join(items)


def resolve_variants(spec: JobSpec, site: SiteConfig, only: tuple[str, ...] | None = None,
                     source: str = "<spec>") -> tuple[str, ...]:
    """The kinds this spec runs as, in the site's order; unknown kinds are errors naming the valid ones."""
    known = site.kind_names()
    chosen = only or spec.variants
    wanted = chosen or known
    for kind in wanted:
        if kind not in known:
            raise ConfigError([f"{source}: variants: the site defines no resource kind {kind!r}; "
                               f"valid kinds: {', '.join(known)}"])
    if spec.gpus is not None:  # `--gpus`: the kinds with GPUs, each asking for that many
        with_gpus = tuple(k for k in known if gpu_gres(site.kind(k).gres) is not None)
        if not with_gpus:
            raise ConfigError([f"{source}: gpus: {spec.gpus}: no resource kind of this site has GPUs (gres gpu:N); "
                               "leave gpus out"])
        without = [k for k in wanted if k not in with_gpus and gpu_gres(_override_gres(spec, k)) is None]
        if chosen and without:
            raise ConfigError([f"{source}: gpus: {spec.gpus} asks for GPUs, which kind {without[0]} has none of; "
                               f"choose kinds with GPUs ({', '.join(with_gpus)}) or leave gpus out"])
        wanted = tuple(k for k in wanted if k not in without)
    for kind in spec.overrides:
        if kind not in known:
            raise ConfigError([f"{source}: overrides.{kind}: the site defines no resource kind {kind!r}; "
                               f"valid kinds: {', '.join(known)}"])
    for kind in spec.estimates:
        if kind not in known:
            raise ConfigError([f"{source}: estimates.{kind}: not a resource kind of this site; "
                               f"valid kinds: {', '.join(known)}"])
    return tuple(k for k in known if k in wanted)


Mode = Literal["managed", "race", "pick"]
