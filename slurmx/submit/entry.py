"""From what a user typed to a JobSpec: a YAML spec, or an existing sbatch script with `#SBATCH` lines.

`slurmx submit [sbatch options] [--variants cpu,gpu] job.yaml|script.sh [args]`: command-line options win
over the script's directives, exactly as with sbatch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmx.core.config import SiteConfig
from slurmx.core.validation import ConfigError, load_yaml
from slurmx.slurm.hostlist import expand_hostlist
from slurmx.submit.directives import Directives, parse_directives, sort_options, split_options
from slurmx.submit.output import output_note
from slurmx.submit.signals import grace_signal_clash, parse_signal
from slurmx.submit.spec import JobSpec, parse_spec, resolve_variants

__all__ = ["Submission", "build_spec", "build_submission"]

_SPEC_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Submission:
    """What `slurmx submit` was asked: the spec, notes for the user, and `--wait`, `--parsable`, `--test-only`."""

    spec: JobSpec
    notes: list[str]
    client: frozenset[str] = frozenset()

    @property
    def wait(self) -> bool:
        return "wait" in self.client

    @property
    def parsable(self) -> bool:
        return "parsable" in self.client

    @property
    def test_only(self) -> bool:
        return "test-only" in self.client


def _job_class(qos: str, site: SiteConfig, where: str) -> str:
    for job_class in ("te", "be"):
        if site.qos_for(job_class) == qos:
            return job_class
    raise ConfigError([f"{where}: --qos={qos} is not a slurmx class QOS; use --qos={site.qos_for('te')} (te) "
                       f"or --qos={site.qos_for('be')} (be)"])


def _kinds_on(partitions: str, site: SiteConfig, where: str) -> list[str]:
    """`-p NAME[,NAME]`: the resource kinds on those partitions (what the partition means to slurmx)."""
    kinds: list[str] = []
    for name in (p.strip() for p in partitions.split(",")):
        matching = [kind for kind in site.kind_names() if site.kind(kind).partition == name]
        if not matching:
            known = ", ".join(f"{site.kind(k).partition} ({k})" for k in site.kind_names())
            raise ConfigError([f"{where}: --partition={partitions}: {name!r} is the partition of no resource kind; "
                               f"known partitions (kind): {known}; or choose kinds with --variants"])
        kinds += [kind for kind in matching if kind not in kinds]
    return kinds


def _fields(directives: Directives, site: SiteConfig, where: str) -> dict[str, Any]:
    mapping = {"job-name": "name", "time": "time", "mem": "mem", "mem-per-cpu": "mem_per_cpu",
               "cpus-per-task": "cpus", "gpus": "gpus", "dependency": "dependency", "array": "array",
               "export": "export", "output": "output", "error": "error", "signal": "signal",
               "begin": "begin", "constraint": "constraint", "nodelist": "nodelist", "exclude": "exclude",
               "exclusive": "exclusive", "nodes": "nodes", "ntasks": "ntasks", "ntasks-per-node": "ntasks_per_node"}
    fields: dict[str, Any] = {mapping[k]: v for k, v in directives.fields.items() if k in mapping}
    if "exclusive" in fields:
        fields["exclusive"] = True  # `--exclusive` bare (`=user|mcs|topo` passes on)
    if "qos" in directives.fields:
        fields["class"] = _job_class(directives.fields["qos"], site, directives.places.get("qos", where))
    if "partition" in directives.fields:
        fields["variants"] = _kinds_on(directives.fields["partition"], site,
                                       directives.places.get("partition", where))
    if "name" in fields:
        fields["name"] = str(fields["name"]).split("@")[0]
    if "signal" in fields and parse_signal(fields["signal"]).name == site.preemption.signal:
        raise ConfigError([f"{directives.places.get('signal', where)}: --signal={fields['signal']}: "
                           f"{grace_signal_clash(site.preemption.signal)}"])
    return fields


def _layout(fields: Mapping[str, Any], sources: Sequence[Directives]) -> None:
    """Counts from the command line and the script taken together (the later source wins each one): refused in one
    line naming where, when they cannot go together."""
    def place(key: str) -> str:
        return next((d.places[key] for d in reversed(sources) if key in d.places), "command line")

    def given_as(key: str) -> str:
        return next((d.given_as[key] for d in reversed(sources) if key in d.given_as), key)

    nodes, ntasks = fields.get("nodes"), fields.get("ntasks")
    per_node = fields.get("ntasks_per_node")
    nodelist = fields.get("nodelist")
    if nodes is not None and nodelist is not None:
        listed = len(expand_hostlist(nodelist))
        if int(nodes) > listed:
            raise ConfigError([f"{place('nodes')}: --nodes={nodes} with --nodelist={nodelist} (at "
                               f"{place('nodelist')}) naming {listed} node(s): slurmx places such a job only on the "
                               f"listed nodes; list {nodes} nodes, or ask for --nodes={listed}"])
    if nodes is not None and ntasks is not None and int(ntasks) < int(nodes):
        raise ConfigError([f"{place('ntasks')}: --ntasks={ntasks} with --nodes={nodes}: every node runs at least one "
                           f"task; ask for --ntasks={nodes} or more, or --nodes={ntasks}"])
    gpus = fields.get("gpus")
    option = given_as("gpus")
    if gpus is not None and option == "gpus" and int(nodes or 1) > 1:
        raise ConfigError([f"{place('gpus')}: --gpus={gpus} with --nodes={nodes}: slurmx asks for GPUs per node (each "
                           f"kind's GRES); write the GPUs each node needs as --gpus-per-node"])
    if gpus is not None and option == "gpus-per-task" and (int(ntasks or 1) > 1 or int(per_node or 1) > 1):
        raise ConfigError([f"{place('gpus')}: --gpus-per-task={gpus} with several tasks: slurmx asks for GPUs per "
                           "node (each kind's GRES); write the GPUs each node needs as --gpus-per-node"])


def _output_notes(spec: JobSpec, site: SiteConfig, source: str) -> list[str]:
    """Where `-o`/`-e` output goes when the variants cannot share the pattern (submit/output.py)."""
    if spec.output is None and spec.error is None:
        return []
    kinds = resolve_variants(spec, site, source=source)  # the kinds that will run (`-G 1`: those with GPUs)
    notes = [output_note(option, pattern, kinds) for option, pattern in (("output", spec.output),
                                                                         ("error", spec.error)) if pattern]
    return [note for note in notes if note is not None]


def _without_other_memory(data: dict[str, Any], winner: dict[str, Any]) -> dict[str, Any]:
    """Command-line memory replaces the script's or spec's, in either form (`--mem` or `--mem-per-cpu`)."""
    if "mem" in winner or "mem_per_cpu" in winner:
        return {k: v for k, v in data.items() if k not in ("mem", "mem_per_cpu")}
    return data


def _read_script(file: Path, path: str) -> str:
    """The script exactly as it is on disk (bytes decoded, no newline translation), refused where sbatch would
    refuse it."""
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError([f"{path}: no such file; pass a batch script or a job spec (.yaml)"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError([f"{path}:{line}: byte 0x{data[exc.start]:02x} is not UTF-8; save the script as "
                           "UTF-8"]) from None
    if not text.startswith("#!"):
        raise ConfigError([f"{path}:1: a batch script starts with #! and its interpreter (e.g. #!/bin/bash), as "
                           "sbatch requires"])
    if "\r\n" in text:
        line = text.count("\n", 0, text.index("\r\n")) + 1
        raise ConfigError([f"{path}:{line}: the script has DOS line breaks (\\r\\n), which sbatch refuses too; "
                           f"convert it with `dos2unix {path}`"])
    return text


def _name_from(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", path.stem)[:64] or "job"


def build_submission(path: str, options: Sequence[str], args: Sequence[str], site: SiteConfig,
                     variants: tuple[str, ...] | None = None) -> Submission:
    """The spec, the notes on options slurmx dropped because each variant sets them itself, and the submitting
    command's own options (`--wait`, `--parsable`) from the command line or the script."""
    file = Path(path)
    release = site.cluster.slurm_version
    cli = sort_options(split_options(list(options), "command line"), release=release)
    if file.suffix in _SPEC_SUFFIXES:
        data = load_yaml(file, JobSpec, "pass a job spec (.yaml) or a batch script")
        if not isinstance(data, dict):
            raise ConfigError([f"{path}: expected a mapping of keys at top level"])
        cli_fields = _fields(cli, site, "command line")
        _layout(cli_fields, [cli])
        data = {**_without_other_memory(data, cli_fields), **cli_fields}
        if cli.passthrough:
            data["sbatch"] = [*data.get("sbatch", []), *cli.passthrough]
        if args:
            data["args"] = list(args)
        if variants:
            data["variants"] = list(variants)
        notes = [f"ignoring {o} from the command line: each variant sets it" for o in cli.dropped]
        spec = parse_spec(data, path)
        return Submission(spec, notes + _output_notes(spec, site, path), frozenset(cli.client))
    text = _read_script(file, path)
    directives = parse_directives(text, path, release)
    cli_fields = _fields(cli, site, "command line")
    script_fields = _without_other_memory(_fields(directives, site, path), cli_fields)
    fields = {"name": _name_from(file), **script_fields, **cli_fields}
    _layout(fields, [directives, cli])
    data = {**fields, "script": text, "args": list(args), "sbatch": directives.passthrough + cli.passthrough}
    if variants:
        data["variants"] = list(variants)
    notes = [f"ignoring {o} from {path}: each variant sets it" for o in directives.dropped]
    notes += [f"ignoring {o} from the command line: each variant sets it" for o in cli.dropped]
    spec = parse_spec(data, path)
    return Submission(spec, notes + _output_notes(spec, site, path), frozenset(cli.client | directives.client))


def build_spec(path: str, options: Sequence[str], args: Sequence[str], site: SiteConfig,
               variants: tuple[str, ...] | None = None) -> tuple[JobSpec, list[str]]:
    """(spec, notes): `build_submission` without the command's own options."""
    submission = build_submission(path, options, args, site, variants)
    return submission.spec, submission.notes


