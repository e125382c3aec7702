"""A simulation run as one YAML file: cluster shape, policy, workload, seed and the engine's models.

Strict like the site config (unknown keys are errors, one-line messages naming the key), because a sweep of
hundreds of runs is only as trustworthy as the typo it did not silently ignore. Everything that changes a
result is in this file, so the file plus the code version is the whole experiment.

```yaml
seed: 7
cluster:
  partitions:
    - {name: gpu, kind: gpu, nodes: 84, cpus: 32, mem: 256G, gres: "gpu:8"}
policy: {name: fifo, params: {backfill: false}}
workload: {generator: fitgpp, params: {jobs: 65536}}      # or {trace: traces/x.csv, format: philly}
mode: tick                 # event | tick (period 60 s) | round (period 300 s)
checkpoint: keep           # keep | lose: what a preempted job resumes with
estimation_error: {sigma: 0.1}
profiling: {fixed: 0, fraction: 0.03}
```
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from slurmx.core.config import PolicyConfig
from slurmx.core.resources import Resources, parse_gres
from slurmx.core.units import parse_duration, parse_mem
from slurmx.core.validation import ConfigError, load_yaml, validate_model
from slurmx.sim.cluster import MAX_NODES, NodeShape, PartitionShape
from slurmx.sim.holding import Holder, PartitionsHolder
from slurmx.sim.jobs import SimJob
from slurmx.sim.sizing import (
    SizedCluster,
    SwfMachine,
    partitions_from_machines,
    sized_for_load,
)

__all__ = [
    "ClusterConfig",
    "EngineOptions",
    "ErrorModelConfig",
    "FromTraceConfig",
    "NodeGroupConfig",
    "NodeSpecConfig",
    "PartitionConfig",
    "ProfilingConfig",
    "SimConfig",
    "Workload",
    "WorkloadConfig",
    "load_run_document",
    "load_sim_config",
    "load_workload",
    "parse_sim_config",
    "resolve_cluster",
    "swf_header_machine",
]

Mode = Literal["event", "tick", "round"]
DEFAULT_PERIOD_S: dict[str, float] = {"tick": 60.0, "round": 300.0}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _seconds(value: Any) -> Any:
    """Strings go through `parse_duration` ("90s", "5m"); YAML numbers are seconds."""
    return float(parse_duration(value)) if isinstance(value, str) else value


def _mem(value: Any) -> Any:
    return parse_mem(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else value


def _gres(value: Any) -> Any:
    return parse_gres(value) if isinstance(value, str) or value is None else value


class _Capacity(_Model):
    """`mem` ("256G") and `gres` ("gpu:8") are read as the site config reads them."""

    @field_validator("mem_mb", mode="before", check_fields=False)
    @classmethod
    def _parse_mem(cls, value: Any) -> Any:
        return _mem(value)

    @field_validator("gres", mode="before", check_fields=False)
    @classmethod
    def _parse_gres(cls, value: Any) -> Any:
        return _gres(value)


def _features(value: Any) -> Any:
    """`features: bigmem,x86` as Slurm's `Features=` writes them, or a YAML list."""
    return tuple(f.strip() for f in value.split(",") if f.strip()) if isinstance(value, str) else value


_FEATURE_NAME = r"^[A-Za-z0-9_.:+-]+$"  # what a constraint can name (core/placement.py)


class _Featured(_Capacity):
    """`features`: the node features a variant's constraint (`--constraint`) asks for."""

    features: tuple[Annotated[str, StringConstraints(pattern=_FEATURE_NAME)], ...] = ()

    @field_validator("features", mode="before")
    @classmethod
    def _parse_features(cls, value: Any) -> Any:
        return _features(value)


class NodeSpecConfig(_Capacity):
    """One node's capacity (`cpus`, `mem`, `gres`)."""

    cpus: int = Field(ge=1)
    mem_mb: int = Field(alias="mem", ge=1)
    gres: dict[str, int] = Field(default_factory=dict)

    def capacity(self) -> Resources:
        return Resources(self.cpus, self.mem_mb, self.gres)


class NodeGroupConfig(NodeSpecConfig, _Featured):
    """`nodes` identical nodes; names are `prefix` + a zero-padded number; `features` as Slurm's `Features=`."""

    nodes: int = Field(ge=1, le=MAX_NODES)
    prefix: str | None = None


class PartitionConfig(_Featured):
    """A partition serving one kind: one homogeneous block (`nodes`, `cpus`, `mem`, `gres`, `features`) or a list
    of `groups`, each with its own features."""

    name: str = Field(pattern=r"^[A-Za-z][\w.-]*$")
    kind: str | None = None
    nodes: int | None = Field(None, ge=1, le=MAX_NODES)
    cpus: int | None = Field(None, ge=1)
    mem_mb: int | None = Field(None, alias="mem", ge=1)
    gres: dict[str, int] = Field(default_factory=dict)
    prefix: str | None = None
    groups: tuple[NodeGroupConfig, ...] = ()

    @model_validator(mode="after")
    def _one_shape(self) -> PartitionConfig:
        block = (self.nodes, self.cpus, self.mem_mb)
        if self.groups and (any(v is not None for v in block) or self.gres or self.features):
            raise ValueError("give either nodes/cpus/mem/gres/features or groups, not both")
        if not self.groups and any(v is None for v in block):
            raise ValueError("needs nodes, cpus and mem (or a list of groups)")
        return self

    def shape(self) -> PartitionShape:
        prefix = self.prefix or self.name
        if self.groups:
            shapes = tuple(NodeShape(g.nodes, g.capacity(), g.prefix or prefix, g.features) for g in self.groups)
        else:
            assert self.nodes is not None and self.cpus is not None and self.mem_mb is not None
            shapes = (NodeShape(self.nodes, Resources(self.cpus, self.mem_mb, self.gres), prefix, self.features),)
        return PartitionShape(self.name, self.kind or self.name, shapes)


class SwfHeaderConfig(_Capacity):
    """The machine an SWF log's header describes: MaxNodes nodes of MaxProcs / MaxNodes processors, each with
    `mem_per_cpu` per processor (the header gives no memory; default: the SWF loader's `mem_per_cpu_mb`, 4 GB
    unless the workload's params say otherwise, so a job given the loader's assumed memory always fits)."""

    mem_mb: int | None = Field(None, alias="mem_per_cpu", ge=1)


class FromTraceConfig(_Model):
    """A cluster for a trace (see `slurmx.sim.sizing`): its machine list, the machine its SWF header describes,
    or nodes per kind sized to `load`."""

    nodes_file: str | None = None
    swf_header: SwfHeaderConfig | None = None
    node: dict[str, NodeSpecConfig] = Field(default_factory=dict)
    load: float = Field(0.8, gt=0)

    @model_validator(mode="after")
    def _one_way(self) -> FromTraceConfig:
        if sum((self.nodes_file is not None, self.swf_header is not None, bool(self.node))) != 1:
            raise ValueError("give exactly one of nodes_file (a trace's machine list), swf_header (the machine an "
                             "SWF log's header describes) or node (a shape per kind)")
        return self


class ClusterConfig(_Model):
    partitions: tuple[PartitionConfig, ...] = ()
    from_trace: FromTraceConfig | None = None
    # A job no node set of the cluster could hold: left out and counted (the default, whatever built the cluster),
    # or the run refused naming the first such job.
    oversized: Literal["leave_out", "abort"] = "leave_out"

    @model_validator(mode="after")
    def _one_source(self) -> ClusterConfig:
        if bool(self.partitions) == (self.from_trace is not None):
            raise ValueError("give exactly one of partitions or from_trace")
        return self

    def shapes(self) -> tuple[PartitionShape, ...]:
        if self.from_trace is not None:
            raise ConfigError(["cluster.from_trace: the cluster depends on the jobs; use resolve_cluster()"])
        return tuple(p.shape() for p in self.partitions)


def swf_header_machine(config: SimConfig, spec: SwfHeaderConfig, header: Mapping[str, str]) -> SwfMachine:
    """The machine an SWF header describes, memory per processor from `swf_header`, else the loader's."""
    params = config.workload.params if config.workload is not None else {}
    mem_mb = spec.mem_mb or params.get("mem_per_cpu_mb", 4096)
    try:
        return SwfMachine.of(header, int(mem_mb), params.get("cpus_per_node"))
    except (TypeError, ValueError) as exc:
        raise ConfigError([f"cluster.from_trace.swf_header: {exc}"]) from None


def resolve_cluster(config: SimConfig, jobs: list[SimJob], info: Mapping[str, str] | None = None,
                    trace: bool = False) -> SizedCluster:
    """The partitions a run uses and the jobs it keeps. `info`: what the trace's loader read about it (an SWF
    header's fields). `trace`: the jobs come from a trace file, whose jobs no node set could hold are left out and
    counted (`cluster.oversized`) whatever built the cluster; a generator's are kept, and the engine refuses them
    in one line (the config asks for jobs its cluster cannot run)."""
    spec = config.cluster.from_trace
    if spec is None:
        shapes = config.cluster.shapes()
        return _held(config, PartitionsHolder(shapes), jobs) if trace else SizedCluster(shapes, jobs, (), 0)
    if spec.swf_header is not None:
        return _held(config, swf_header_machine(config, spec.swf_header, info or {}), jobs)
    if spec.nodes_file is not None:
        from slurmx.sim.traces.alibaba import load_alibaba_nodes

        machines = [(m.name, m.capacity, m.gpu_model) for m in load_alibaba_nodes(spec.nodes_file)]
        return partitions_from_machines(machines, jobs)
    try:
        return sized_for_load(jobs, {kind: n.capacity() for kind, n in spec.node.items()}, spec.load)
    except ValueError as exc:
        raise ConfigError([str(exc)]) from None


def _held(config: SimConfig, holder: Holder, jobs: list[SimJob]) -> SizedCluster:
    """The jobs `holder`'s cluster can hold; the others left out and counted, or, with `cluster.oversized: abort`,
    the run refused in one line naming the first."""
    kept = [job for job in jobs if holder.holds(job)]
    skipped = len(jobs) - len(kept)
    if skipped and config.cluster.oversized == "abort":
        first = next(job for job in jobs if not holder.holds(job))
        raise ConfigError([f"cluster.oversized: abort: {holder.problem(first)} ({skipped:,} such jobs); leave "
                           "oversized out (the default) to count them and run the rest"])
    return SizedCluster(holder.partitions, kept, holder.notes(skipped), skipped)


class WorkloadConfig(_Model):
    """Where the jobs come from: a named generator (or `module:function`) with its params and the run's seed,
    or a trace file (relative to the config file) in `format` (detected when omitted) or read by `loader`."""

    generator: str | None = None
    trace: str | None = None
    format: str | None = None
    loader: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_source(self) -> WorkloadConfig:
        if (self.generator is None) == (self.trace is None):
            raise ValueError("give exactly one of generator or trace")
        return self


class ErrorModelConfig(_Model):
    """Estimate = base x (1 + eps), eps ~ Normal(0, sigma) clamped to [-clamp, clamp] (AlloX's model)."""

    sigma: float = Field(ge=0)
    clamp: float = Field(0.99, gt=0, lt=1)


class ProfilingConfig(_Model):
    """A job becomes visible to the policy `fixed + fraction x (longest true duration of its variants)` after
    submission; the sample runs are not placed on the cluster (an assumption, stated in the report)."""

    fixed_s: float = Field(0.0, alias="fixed", ge=0)
    fraction: float = Field(0.0, ge=0)

    @field_validator("fixed_s", mode="before")
    @classmethod
    def _fixed(cls, value: Any) -> Any:
        return _seconds(value)


class ReportConfig(_Model):
    util_bins: int = Field(100, ge=1, le=100_000)


class SimConfig(_Model):
    seed: int = Field(0, ge=0)
    cluster: ClusterConfig
    policy: PolicyConfig = PolicyConfig()
    workload: WorkloadConfig | None = None
    mode: Mode = "event"
    period_s: float | None = Field(None, alias="period", gt=0)
    checkpoint: Literal["keep", "lose"] = "keep"
    # What a job pays each time it starts again after a preemption or requeue (loading its checkpoint, warming
    # up): its work begins this long after the start. 0 (the papers' silent default) makes preemption free.
    restart_cost_s: float = Field(0.0, alias="restart_cost", ge=0, allow_inf_nan=False)
    estimation_error: ErrorModelConfig | None = None
    profiling: ProfilingConfig = ProfilingConfig()
    call_when_idle: bool = False
    view: Literal["incremental", "naive"] = "incremental"
    count_notes: tuple[str, ...] = ()
    report: ReportConfig = ReportConfig()

    @field_validator("period_s", "restart_cost_s", mode="before")
    @classmethod
    def _period(cls, value: Any) -> Any:
        return _seconds(value)

    def engine_options(self) -> EngineOptions:
        return EngineOptions(
            mode=self.mode,
            period_s=self.period_s if self.period_s is not None else DEFAULT_PERIOD_S.get(self.mode, 0.0),
            checkpoint=self.checkpoint,
            error_sigma=self.estimation_error.sigma if self.estimation_error else None,
            error_clamp=self.estimation_error.clamp if self.estimation_error else 0.99,
            profiling_fixed_s=self.profiling.fixed_s,
            profiling_fraction=self.profiling.fraction,
            seed=self.seed,
            call_when_idle=self.call_when_idle,
            view=self.view,
            count_notes=self.count_notes,
            restart_cost_s=self.restart_cost_s,
        )


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """What the engine needs of a run config (the cluster, policy and jobs are passed separately).

    `view="naive"` rebuilds every Node and Group of the snapshot on every policy call: the slow, obviously
    right reference that tests compare the incremental snapshot against and the benchmark measures.
    `call_when_idle=False` skips policy calls while no group is pending (nothing could start).
    `count_notes`: plan-note prefixes to count (e.g. FitGpp's "fitgpp-fallback:"), reported with the metrics.
    """

    mode: Mode = "event"
    period_s: float = 0.0
    checkpoint: Literal["keep", "lose"] = "keep"
    error_sigma: float | None = None
    error_clamp: float = 0.99
    profiling_fixed_s: float = 0.0
    profiling_fraction: float = 0.0
    seed: int = 0
    call_when_idle: bool = False
    view: Literal["incremental", "naive"] = "incremental"
    count_notes: tuple[str, ...] = ()
    start_latency_s: float = 0.0  # Slurm's time from release to start, as `slurmx fidelity` measures it
    # A victim's time from the grace signal to its requeue when its hook exits at once on the signal (measured by
    # `slurmx fidelity`); None: it keeps its node for its whole grace period.
    requeue_delay_s: float | None = None
    restart_cost_s: float = 0.0  # a restarted job's work begins this long after its start (SimConfig.restart_cost)

    def __post_init__(self) -> None:
        if self.mode != "event" and not self.period_s > 0:
            raise ValueError(f"mode {self.mode} needs a period > 0, got {self.period_s}")
        if not self.start_latency_s >= 0:
            raise ValueError(f"start_latency_s must be >= 0, got {self.start_latency_s}")
        if self.requeue_delay_s is not None and not self.requeue_delay_s >= 0:
            raise ValueError(f"requeue_delay_s must be >= 0, got {self.requeue_delay_s}")
        if not (self.restart_cost_s >= 0 and math.isfinite(self.restart_cost_s)):
            raise ValueError(f"restart_cost_s must be finite and >= 0, got {self.restart_cost_s}")


def parse_sim_config(data: Mapping[str, Any], source: str = "<sim>") -> SimConfig:
    return validate_model(SimConfig, data, source)


def load_sim_config(path: str | Path) -> SimConfig:
    """Read and validate a run config; relative file paths in it are taken relative to the config file."""
    return parse_sim_config(load_run_document(path), str(path))


_FILE_KEYS = (("workload", "trace"), ("cluster", "from_trace", "nodes_file"))  # paths a run config may hold


def load_run_document(path: str | Path) -> dict[str, Any]:
    """The run config as a plain document, with a relative `workload.trace` and `cluster.from_trace.nodes_file`
    made relative to the config file (what `sim run` validates, and what a sweep overrides point by point)."""
    document = dict(load_yaml(path, SimConfig, "write a sim run config (see slurmx/sim/config.py)"))
    for *parents, key in _FILE_KEYS:
        holder: Any = document
        for name in parents:
            holder = holder.get(name) if isinstance(holder, dict) else None
        value = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(value, str) and not Path(value).is_absolute():
            holder[key] = str(Path(path).parent / value)
    return document


def _resolve(ref: str, what: str) -> Callable[..., Any]:
    """`package.module:function` -> the function; errors name the config key."""
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError([f"workload.{what}: cannot import {module_name!r}: {exc}"]) from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ConfigError([f"workload.{what}: {module_name} has no function {attr!r}"])
    return fn  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Workload:
    """The jobs of a run and where they came from, with what a trace loader had to assume."""

    jobs: list[SimJob]
    source: str
    assumptions: tuple[str, ...] = ()
    skipped: Mapping[str, int] = field(default_factory=dict)
    info: Mapping[str, str] = field(default_factory=dict)  # what the loader read about the trace (SWF header)
    count: int | None = None  # how many jobs ran, for a streamed trace (whose `jobs` are not kept)

    @property
    def job_count(self) -> int:
        return self.count if self.count is not None else len(self.jobs)

    def on_cluster(self, notes: tuple[str, ...], left_out: int) -> Workload:
        """This workload as a cluster sized from the trace left it: its notes added to the assumptions, the jobs
        no node set of it can hold counted as skipped (and out of `count`)."""
        skipped = {**self.skipped, **({"larger than any node": left_out} if left_out else {})}
        count = None if self.count is None else self.count - left_out
        return replace(self, assumptions=(*self.assumptions, *notes), skipped=skipped, count=count)


def load_workload(workload: WorkloadConfig | None, seed: int, trace: str | None = None) -> Workload:
    """Build the jobs of a run from the generator or the trace the config names (`trace` overrides the path).

    A generator name goes to `slurmx.sim.workloads.generate(name, params, seed)`, a trace to
    `slurmx.sim.traces.load_trace(path, format, **params)` (format detected when not given). `module:function`
    refs are called as `fn(params, seed)` (generator) or `fn(path, params, seed)` (loader) and may return jobs
    or an object with `jobs` (and optionally `assumptions`, `skipped`).
    """
    params = dict(workload.params) if workload is not None else {}
    path = trace if trace is not None else (workload.trace if workload is not None else None)
    produced: Any
    if path is not None:
        loader = workload.loader if workload is not None else None
        if loader is not None:
            produced = _resolve(loader, "loader")(path, params, seed)
        else:
            from slurmx.sim.traces import LOADERS, load_trace

            fmt = workload.format if workload is not None else None
            if fmt is None:
                produced = load_trace(path, **params)
            elif fmt in LOADERS:
                produced = LOADERS[fmt](path, **params)
            else:
                raise ConfigError([f"workload.format: unknown trace format {fmt!r}; expected one of "
                                   f"{', '.join(LOADERS)}"])
        source = f"trace:{path}"
    elif workload is not None and workload.generator is not None:
        if ":" in workload.generator:
            produced = _resolve(workload.generator, "generator")(params, seed)
        else:
            from slurmx.sim.workloads import generate

            try:
                produced = generate(workload.generator, params, seed)
            except ValueError as exc:
                if isinstance(exc, ConfigError):
                    raise
                raise ConfigError([f"workload.generator: {exc}"]) from None
        source = f"generator:{workload.generator}"
    else:
        raise ConfigError(["workload: required key is missing (a generator or a trace; or pass --trace PATH)"])
    jobs = list(getattr(produced, "jobs", produced))
    for i, job in enumerate(jobs):
        if not isinstance(job, SimJob):
            raise ConfigError([f"workload: item {i} is a {type(job).__name__}, expected SimJob"])
    return Workload(jobs, source, tuple(getattr(produced, "assumptions", ())),
                    dict(getattr(produced, "skipped", {})), dict(getattr(produced, "info", {})))
