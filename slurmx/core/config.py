"""Site configuration: one YAML file describing the cluster, its resource kinds and how slurmx runs.

Validation is strict (unknown keys are errors, every model is frozen) because a typo in a site file
otherwise shows up hours later as a job in the wrong partition. Errors name the file and the dotted
key path on one line, so they read well in a terminal and in a daemon log alike.
"""

from __future__ import annotations

import ipaddress
import re
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from slurmx.core.model import JobClass
from slurmx.core.resources import Resources, parse_gres
from slurmx.core.units import parse_duration, parse_mem, parse_time_limit, short_repr
from slurmx.core.validation import ConfigError, load_yaml, validate_model

__all__ = [
    "KIND_NAME",
    "ClassConfig",
    "ClassesConfig",
    "ClusterConfig",
    "ConfigError",
    "DaemonConfig",
    "PolicyConfig",
    "PreemptionConfig",
    "ProfileConfig",
    "ResourceKindConfig",
    "SiteConfig",
    "SubmitConfig",
    "SweepConfig",
    "TransportConfig",
    "load_site_config",
    "parse_site_config",
]

KIND_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")  # a resource kind's name, as users pass it to `slurmx submit`
_GRES_RE = re.compile(r"^[A-Za-z][\w.-]*(?::[A-Za-z][\w.-]*)?:\d+$")
_UNCATCHABLE_SIGNALS = frozenset({"KILL", "STOP"})
# Flags slurmx derives from the kind and class; setting them in extra_flags would silently conflict.
_RESERVED_FLAGS = ("--partition", "--qos", "--gres", "--mem", "--cpus-per-task", "-p", "-c")
OLDEST_SLURM = (22, 5)  # the same as slurmx.slurm.versions.OLDEST (which this module cannot import: a cycle)
_HOSTNAME_RE = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                          r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


def _duration(value: Any) -> Any:
    """Strings go through `parse_duration`; YAML numbers are seconds (`1:30` is read by YAML as 90)."""
    return parse_duration(value) if isinstance(value, str | int | float) else value


def _time_limit(value: Any) -> Any:
    """A Slurm time limit (`time:`): a bare number is minutes, quoted or not, as `sbatch --time=30` reads it."""
    return parse_time_limit(value) if isinstance(value, str | int | float) else value


def _megabytes(value: Any) -> Any:
    """`parse_mem`, refusing by name a size that rounds to 0 MiB: Slurm counts in MiB, so 512K would be 0."""
    if not isinstance(value, str | int | float):
        return value
    mb = parse_mem(value)
    number = re.match(r"\s*(\d+(?:\.\d+)?)", value) if isinstance(value, str) else None
    if mb < 1 and number is not None and float(number.group(1)) > 0:
        raise ValueError(f"{short_repr(value)} is below 1 MiB, the smallest amount Slurm requests; write e.g. 1M")
    return mb


def _also_text(kind: str) -> Callable[[dict[str, Any]], None]:
    """A field's JSON Schema also takes the unit text the validator reads (`5m`, `32G`), so editors accept it."""

    def widen(schema: dict[str, Any]) -> None:
        kept: dict[str, Any] = {key: schema.pop(key) for key in ("title", "default", "description") if key in schema}
        options = schema.pop("anyOf", None) or [dict(schema)]
        schema.clear()
        schema.update(kept, anyOf=[*options, {"type": "string", "description": kind}])

    return widen


_DURATION_TEXT = _also_text("a duration like 90s, 5m, 2h or 1-00:00:00 (an unquoted number: seconds)")
_SIZE_TEXT = _also_text("a memory size like 500M or 32G (a bare number: MiB)")
_TIME_LIMIT_TEXT = _also_text("a time limit like 90s, 2h or 1-00:00:00 (a bare number: minutes, as sbatch --time)")



def _single_partition(value: Any, alternative: str) -> Any:
    """One Slurm partition name: sbatch takes a list, but a kind or a sweep runs on exactly one."""
    if isinstance(value, str) and (not value or re.search(r"[\s,]", value)):
        raise ValueError(f"expected a single partition name{alternative}, got {value!r}")
    return value

class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClusterConfig(_Model):
    name: str = Field(min_length=1)
    slurm_version: str | None = None  # any release from OLDEST_SLURM on (slurmx.slurm.versions)

    @field_validator("slurm_version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        # Unquoted `24.11` is a float in YAML.
        return f"{value:.2f}" if isinstance(value, float) else value

    @field_validator("slurm_version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is None:
            return None
        match = re.fullmatch(r"(\d{2})\.(\d{2})", value)
        if match is None or not 1 <= int(match.group(2)) <= 12:  # YY.MM: the release's year and month
            raise ValueError(f"expected a Slurm release as YY.MM, the year and month it came out (e.g. '24.11'), "
                             f"got {value!r}")
        if (int(match.group(1)), int(match.group(2))) < OLDEST_SLURM:
            raise ValueError(f"Slurm {value} is older than {OLDEST_SLURM[0]}.{OLDEST_SLURM[1]:02d}, the oldest "
                             "release slurmx reads")
        return value


class ResourceKindConfig(_Model):
    """How to request one resource kind: partition, per-job amount, and submission extras."""

    partition: str
    cpus: int = Field(ge=1)
    mem_mb: int = Field(validation_alias="mem", ge=1, json_schema_extra=_SIZE_TEXT)
    gres: str | None = None
    template: str | None = None
    extra_flags: tuple[str, ...] = ()
    time_s: int | None = Field(None, validation_alias="time", gt=0, json_schema_extra=_TIME_LIMIT_TEXT)

    @field_validator("partition", mode="before")
    @classmethod
    def _partition(cls, value: Any) -> Any:
        return _single_partition(value, "")

    @field_validator("mem_mb", mode="before")
    @classmethod
    def _mem(cls, value: Any) -> Any:
        return _megabytes(value)

    @field_validator("gres", mode="before")
    @classmethod
    def _gres(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError(f"expected NAME:COUNT, got {value!r}")
        items = [item.strip() for item in value.split(",")]
        for item in items:
            if not _GRES_RE.match(item):
                raise ValueError(f"expected NAME:COUNT, got {item!r}")
        return ",".join(items)

    @field_validator("time_s", mode="before")
    @classmethod
    def _time(cls, value: Any) -> Any:
        return _time_limit(value)

    @field_validator("extra_flags")
    @classmethod
    def _flags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for flag in value:
            if not flag.startswith("-"):
                raise ValueError(f"expected an sbatch option like --constraint=x, got {flag!r}")
            name = flag.split("=", 1)[0]
            if name in _RESERVED_FLAGS or (len(name) > 2 and name[:2] in ("-p", "-c") and name[1] != "-"):
                raise ValueError(f"{name} is set by slurmx from the kind and class; remove it")
        return value

    @property
    def resources(self) -> Resources:
        return Resources(self.cpus, self.mem_mb, parse_gres(self.gres))


class ClassConfig(_Model):
    qos: str = Field(min_length=1)


class ClassesConfig(_Model):
    te: ClassConfig = ClassConfig(qos="te")
    be: ClassConfig = ClassConfig(qos="be")

    @model_validator(mode="after")
    def _distinct(self) -> ClassesConfig:
        """slurmxd tells a job's class by its QOS; one QOS for both would make every te job a be job."""
        if self.te.qos == self.be.qos:
            raise ValueError(f"te and be both use QOS {self.te.qos!r}; give each class its own QOS "
                             "(slurmxd tells the classes apart by it)")
        return self


class PolicyConfig(_Model):
    name: str = Field("fifo", pattern=r"^[a-z][a-z0-9_-]*$")
    params: dict[str, Any] = Field(default_factory=dict)


class PreemptionConfig(_Model):
    signal: str = "USR2"
    grace_s: int = Field(120, validation_alias="grace", ge=0, json_schema_extra=_DURATION_TEXT)
    # The longest grace slurmxd grants a job that asks for its own (`grace:` in a spec, carried by the group tag).
    max_grace_s: int = Field(3600, validation_alias="max_grace", ge=0, json_schema_extra=_DURATION_TEXT)
    max_per_job: int = Field(3, ge=0)
    requeue_exit_code: int = Field(99, ge=1, le=255)
    mode: Literal["requeue", "requeuehold"] = "requeue"
    # What the job-side hook does after its checkpoint callback: exit with requeue_exit_code, or wait.
    on_signal: Literal["exit", "wait"] = "exit"

    @field_validator("signal", mode="before")
    @classmethod
    def _signal(cls, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError(f"expected a signal name like USR2, got {value!r}")
        name = value.strip().upper().removeprefix("SIG")
        if name in _UNCATCHABLE_SIGNALS:
            raise ValueError(f"SIG{name} cannot be caught, so jobs get no grace; use e.g. USR2 or TERM")
        if f"SIG{name}" not in signal.Signals.__members__ or name.startswith("RT"):
            raise ValueError(f"unknown signal {value!r}; expected a name like USR2 or TERM")
        return name

    @field_validator("grace_s", "max_grace_s", mode="before")
    @classmethod
    def _grace(cls, value: Any) -> Any:
        return _duration(value)


class DaemonConfig(_Model):
    interval_s: int = Field(5, validation_alias="interval", gt=0, json_schema_extra=_DURATION_TEXT)
    state_dir: Path = Path("/var/lib/slurmx")
    socket: Path | None = None
    start_timeout_s: int = Field(120, validation_alias="start_timeout", gt=0, json_schema_extra=_DURATION_TEXT)
    # Managed variants are submitted with `--begin=now+lease` and slurmxd keeps pushing that begin time forward:
    # if slurmxd is gone, the lease runs out and Slurm runs the group by itself, one variant (docs/failsafe.md).
    lease_s: int = Field(600, validation_alias="lease", ge=60, le=7 * 86_400, json_schema_extra=_DURATION_TEXT)
    # Prometheus `/metrics` and `/healthz` on metrics_address:metrics_port (port None: off; a port below 1024
    # needs root or CAP_NET_BIND_SERVICE); `log_format: json` writes one JSON object per log line.
    metrics_port: int | None = Field(None, ge=0, le=65535)
    metrics_address: str = "127.0.0.1"
    log_format: Literal["text", "json"] = "text"
    # Audit log retention, applied at start-up and then every `audit_prune_every` cycles: entries older than
    # `audit_keep` go, and of the rest only the newest `audit_keep_rows` stay (0 turns either limit off).
    audit_keep_s: int = Field(30 * 86_400, validation_alias="audit_keep", ge=0, json_schema_extra=_DURATION_TEXT)
    audit_keep_rows: int = Field(1_000_000, ge=0)
    audit_prune_every: int = Field(720, gt=0)

    @field_validator("interval_s", "start_timeout_s", "audit_keep_s", "lease_s", mode="before")
    @classmethod
    def _durations(cls, value: Any) -> Any:
        return _duration(value)

    @field_validator("metrics_address")
    @classmethod
    def _address(cls, value: str) -> str:
        """An IP address or a host name: a URL or a host:port here would fail only at bind time, later."""
        try:
            return str(ipaddress.ip_address(value.strip("[]")))
        except ValueError:
            if _HOSTNAME_RE.match(value):
                return value
        raise ValueError(f"expected an IP address or a host name (e.g. 127.0.0.1, ::1, 0.0.0.0), got {value!r}")


class SubmitConfig(_Model):
    mode: Literal["managed", "race", "pick"] = "managed"
    templates_dir: Path | None = None
    # Shared storage seen at the same path by the submitter and every node: outputs, progress, race markers.
    spool_dir: str = "/var/tmp/slurmx/spool"
    # Race mode: how long a starting variant waits for siblings that start at the same moment.
    race_settle_s: int = Field(2, validation_alias="race_settle", ge=0, json_schema_extra=_DURATION_TEXT)

    @field_validator("race_settle_s", mode="before")
    @classmethod
    def _settle(cls, value: Any) -> Any:
        return _duration(value)

    @field_validator("spool_dir")
    @classmethod
    def _spool(cls, value: str) -> str:
        # It lands in #SBATCH --output, which expands neither ~ nor variables, and in every job script.
        if not value.startswith("/") or re.search(r"[\s'\"\\`$;&|<>(){}*?]", value):
            raise ValueError(f"expected an absolute path on shared storage without spaces or shell "
                             f"characters, got {value!r}")
        return value.rstrip("/") or "/"


class ProfileConfig(_Model):
    """slurmxd's profiler (docs/profiler.md): sample runs, sacct history and progress feed the variants' estimates.

    `enabled` None: on when the site's policy reads profiled estimates (its `Capabilities.profiled`: FIFO and
    FitGpp do not), except for the policies named in `off_for`.
    `sampling`: `slurmx.profile.sampling.SamplingParams` fields (qos, overhead_budget, max_samples, max_cpus ...),
    checked when slurmxd starts. `history_max_age`: runs older than this do not replace sampling.
    """

    enabled: bool | None = None
    off_for: tuple[str, ...] = ()
    sampling: dict[str, Any] = Field(default_factory=dict)
    history_since: str = Field("now-7days", pattern=r"^[A-Za-z0-9:+-]+$")
    history_max_age_s: int = Field(7 * 86400, validation_alias="history_max_age", gt=0,
                                   json_schema_extra=_DURATION_TEXT)

    @field_validator("history_max_age_s", mode="before")
    @classmethod
    def _age(cls, value: Any) -> Any:
        return _duration(value)

    def active_for(self, policy: str, profiled: bool) -> bool:
        """Whether slurmxd profiles under `policy`, which declares whether it reads profiled estimates
        (`slurmx.profile.sampling.profiling_on` asks the declaration)."""
        return self.enabled if self.enabled is not None else profiled and policy not in self.off_for


class SweepConfig(_Model):
    """`slurmx sim sweep --slurm`: how simulation points run as a job array on this cluster.

    The sweep ships its own copy of slurmx next to the points (on the shared spool), so the nodes need only
    `python` with slurmx's third-party dependencies (numpy, scipy, pydantic, msgspec, pyyaml), found on
    `pythonpath` when they are not installed there.
    """

    python: str = "python3"
    pythonpath: tuple[str, ...] = ()
    partition: str | None = None
    cpus: int = Field(1, ge=1)
    mem_mb: int = Field(2048, validation_alias="mem", ge=1, json_schema_extra=_SIZE_TEXT)
    time_s: int = Field(3600, validation_alias="time", gt=0, json_schema_extra=_TIME_LIMIT_TEXT)
    max_parallel: int | None = Field(None, ge=1)  # the array's %N throttle

    @field_validator("python")
    @classmethod
    def _python(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("expected the command that runs Python on the nodes, e.g. python3 or /opt/py/bin/python")
        return value

    @field_validator("pythonpath")
    @classmethod
    def _pythonpath(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Each entry is joined into PYTHONPATH on a node, where a relative path means the job's directory."""
        for entry in value:
            if not entry.startswith("/") or ":" in entry:
                raise ValueError(f"expected absolute directories seen by every node, one per entry (no ':'), "
                                 f"got {entry!r}")
        return value

    @field_validator("partition", mode="before")
    @classmethod
    def _partition(cls, value: Any) -> Any:
        return _single_partition(value, " (or no key for Slurm's default)")

    @field_validator("mem_mb", mode="before")
    @classmethod
    def _mem(cls, value: Any) -> Any:
        return _megabytes(value) if isinstance(value, str) else value

    @field_validator("time_s", mode="before")
    @classmethod
    def _time(cls, value: Any) -> Any:
        return _time_limit(value)


class TransportConfig(_Model):
    kind: Literal["local", "ssh", "docker"] = "local"
    host: str | None = Field(None, validate_default=True)
    port: int = Field(22, ge=1, le=65535)
    user: str | None = None
    known_hosts: str = "~/.ssh/known_hosts"
    key_file: str | None = None
    container: str | None = Field(None, validate_default=True)
    docker_user: str | None = None
    timeout_s: int = Field(30, validation_alias="timeout", gt=0, json_schema_extra=_DURATION_TEXT)
    retries: int = Field(5, ge=0)
    backoff_s: int = Field(1, validation_alias="backoff", ge=0, json_schema_extra=_DURATION_TEXT)
    implementation: Literal["cli", "pyslurm"] = "cli"

    @field_validator("host")
    @classmethod
    def _host(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("kind") == "ssh" and not value:
            raise ValueError("required when transport kind is 'ssh'")
        return value

    @field_validator("container")
    @classmethod
    def _container(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("kind") == "docker" and not value:
            raise ValueError("required when transport kind is 'docker'")
        return value

    @field_validator("timeout_s", "backoff_s", mode="before")
    @classmethod
    def _durations(cls, value: Any) -> Any:
        return _duration(value)


class SiteConfig(_Model):
    """The whole site file. Kinds keep the file's order, which is also the default variant order."""

    cluster: ClusterConfig
    resources: dict[str, ResourceKindConfig]
    classes: ClassesConfig = ClassesConfig()
    policy: PolicyConfig = PolicyConfig()
    preemption: PreemptionConfig = PreemptionConfig()
    daemon: DaemonConfig = DaemonConfig()
    submit: SubmitConfig = SubmitConfig()
    sweep: SweepConfig = SweepConfig()
    profile: ProfileConfig = ProfileConfig()
    transport: TransportConfig = TransportConfig()

    @field_validator("resources", mode="before")
    @classmethod
    def _kind_names(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            if not value:
                raise ValueError("at least one resource kind is required, e.g. cpu: {partition: ..., ...}")
            for name in value:
                if not isinstance(name, str) or not KIND_NAME.match(name):
                    raise ValueError(f"invalid kind name {name!r}; expected lower-case like cpu or gpu_a100")
        return value

    @field_validator("resources")
    @classmethod
    def _default_templates(cls, value: dict[str, ResourceKindConfig]) -> dict[str, ResourceKindConfig]:
        return {
            name: kind if kind.template else kind.model_copy(update={"template": f"{name}.sh.j2"})
            for name, kind in value.items()
        }

    def kind(self, name: str) -> ResourceKindConfig:
        try:
            return self.resources[name]
        except KeyError:
            known = ", ".join(self.resources)
            raise KeyError(f"unknown resource kind {name!r}; site defines: {known}") from None

    def kind_names(self) -> tuple[str, ...]:
        return tuple(self.resources)

    def qos_for(self, job_class: JobClass | str) -> str:
        config: ClassConfig = getattr(self.classes, JobClass(job_class).value)
        return config.qos

    def resources_for(self, kind: str) -> Resources:
        return self.kind(kind).resources




def load_site_config(path: str | Path) -> SiteConfig:
    """Read and validate a site file; every failure is a `ConfigError` naming the file."""
    data = load_yaml(path, SiteConfig, "pass --site PATH or set SLURMX_SITE")
    return validate_model(SiteConfig, data, str(path))


def parse_site_config(data: Mapping[str, Any], source: str = "<site>") -> SiteConfig:
    """Validate already-parsed data (e.g. from tests or another loader)."""
    return validate_model(SiteConfig, data, source)
