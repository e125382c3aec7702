"""submitit's parameter names, understood: one table from each name to the slurmx key it means, or why it has none.

A submitit user's `update_parameters(timeout_min=60, mem_gb=16, slurm_partition="gpu")` works unchanged: each
name is translated into the executor's own vocabulary (docs/executor.md has the table), and then validated as if it
had been written that way. Names are those of submitit 1.5: `AutoExecutor`'s generic ones (`timeout_min`,
`mem_gb`, ...), `SlurmExecutor`'s bare ones (`partition`, `signal_delay_s`, ...) and the same with `AutoExecutor`'s
`slurm_` prefix. A name that has no meaning here fails in one line saying why, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ALIASES", "Translated", "translate"]


def _mem_gb(value: Any) -> Any:
    """submitit's own conversion: whole gigabytes stay `NG`, anything else becomes megabytes."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return f"{int(value)}G" if value == int(value) else f"{int(value * 1024)}M"
    return value  # the spec's validation names what is wrong with it


def _gpus(value: Any) -> Any:
    return None if value == 0 and not isinstance(value, bool) else value  # submitit's default: no GPU asked


@dataclass(frozen=True)
class _Alias:
    """One submitit name: the slurmx key it sets (`to`), the sbatch option it becomes (`flag`), the only value
    that is accepted because slurmx already behaves that way (`only`), or why it has no meaning (`refused`)."""

    to: str | None = None
    convert: Callable[[Any], Any] = lambda value: value
    flag: str | None = None
    only: tuple[Any, ...] = ()
    refused: str = ""
    generic: bool = False  # an AutoExecutor name (never slurm_-prefixed); else a SlurmExecutor name


_NO_SRUN = "the call runs in the batch script itself, as one task, without srun"
_FLAG = "sbatch option"

ALIASES: dict[str, _Alias] = {
    # AutoExecutor's generic names
    "timeout_min": _Alias("time", generic=True),
    "mem_gb": _Alias("mem", _mem_gb, generic=True),
    "tasks_per_node": _Alias("ntasks_per_node", generic=True),
    # both
    "name": _Alias("name", generic=True),
    "nodes": _Alias("nodes"),
    "cpus_per_task": _Alias("cpus"),
    "gpus_per_node": _Alias("gpus", _gpus),
    "stderr_to_stdout": _Alias(only=(False,), refused="the call's stdout and stderr are kept apart "
                               "(job.stdout(), job.stderr())"),
    # SlurmExecutor's names (also as slurm_<name>)
    "job_name": _Alias("name"),
    "partition": _Alias("variants"),  # the site's kinds on that partition, see translate()
    "time": _Alias("time"),
    "mem": _Alias("mem"),
    "mem_per_cpu": _Alias("mem_per_cpu"),
    "num_gpus": _Alias("gpus", _gpus),
    "ntasks_per_node": _Alias("ntasks_per_node"),
    "signal_delay_s": _Alias("grace"),
    "max_num_timeout": _Alias("max_requeues"),
    "python": _Alias("python"),
    "setup": _Alias("setup"),
    "additional_parameters": _Alias(flag="*"),
    **{name: _Alias(flag=name.replace("_", "-")) for name in (
        "cpus_per_gpu", "gpus_per_task", "mem_per_gpu", "account", "mail_type", "mail_user", "wckey")},
    # placement: the spec's own key where the spec has it, else the sbatch option
    **{name: _Alias(name, flag=name) for name in ("constraint", "exclude", "nodelist", "exclusive")},
    "use_srun": _Alias(only=(False,), refused=_NO_SRUN),
    "srun_args": _Alias(refused=_NO_SRUN),
    "qos": _Alias(refused="slurmx sets the QOS from class= ('te' or 'be')"),
    "comment": _Alias(refused="the comment carries slurmx's group tag"),
    "gres": _Alias(refused="ask for GPUs with gpus= (or overrides={kind: {'gres': ...}})"),
    "dependency": _Alias(refused="a dependency on Slurm job ids does not follow a group's variants"),
    "teardown": _Alias(refused="the job script ends with the call (so the grace signal reaches it): "
                       "put the teardown at the end of the function"),
    "array_parallelism": _Alias("array_parallelism"),
    "begin": _Alias("begin"),  # also inside additional_parameters: the spec's own key, as `slurmx submit -b`
}


def lookup(key: str) -> tuple[str, _Alias] | None:
    """(submitit name without its prefix, its entry), or None when `key` is not a submitit name."""
    entry = ALIASES.get(key)
    if entry is not None and key not in ("time", "mem", "mem_per_cpu", "python"):  # slurmx's own keys too
        return key, entry
    bare = key.removeprefix("slurm_")
    entry = ALIASES.get(bare) if bare != key else None
    return (bare, entry) if entry is not None and not entry.generic else None


def _flag(name: str, value: Any) -> tuple[str, ...]:
    """An sbatch option as submitit writes it (`key_name` -> `--key-name`, True -> a bare flag, False: none)."""
    option = "--" + name.replace("_", "-")
    if value is False or value is None:
        return ()
    return (option if value is True else f"{option}={value}",)


@dataclass(frozen=True)
class Translated:
    """`update_parameters` values in slurmx's vocabulary: keys to set, sbatch options by submitit name (each
    replacing the same name's earlier ones, as a later update does in submitit), and what could not be."""

    values: dict[str, Any]
    flags: dict[str, tuple[str, ...]]
    problems: list[str]


def translate(values: Mapping[str, Any], partitions: Mapping[str, str] | None,
              spec_keys: tuple[str, ...] = ()) -> Translated:
    """Translate the submitit names among `values` (slurmx's own keys pass through unchanged).

    `partitions` maps each resource kind of the site to its partition, so `slurm_partition="gpu"` runs the call
    on the kinds of that partition; None (no site: the local executors) leaves Slurm-only names unused, as
    submitit's AutoExecutor does for another cluster's names. `spec_keys`: the job spec's keys, which a placement
    name (`constraint`, ...) sets when the spec has it.
    """
    done = Translated({}, {}, [])
    for key, value in values.items():
        found = lookup(key)
        if found is None:
            done.values[key] = value
        elif found[0] == "additional_parameters":
            _additional(key, value, partitions, spec_keys, done)
        else:
            _one(key, value, found, partitions, spec_keys, done)
    return done


def _one(key: str, value: Any, found: tuple[str, _Alias], partitions: Mapping[str, str] | None,
         spec_keys: tuple[str, ...], done: Translated) -> None:
    bare, alias = found
    if alias.refused:
        if alias.only and any(value == ok and type(value) is type(ok) for ok in alias.only):
            return  # what slurmx does anyway
        shown = f"{key}={value!r}" if alias.only else key
        done.problems.append(f"update_parameters: {shown} has no meaning here: {alias.refused}"
                             + (f" (only {', '.join(map(repr, alias.only))} is accepted)" if alias.only else ""))
    elif bare == "partition":
        _partition(key, value, partitions, done)
    elif alias.to is not None and (alias.flag is None or alias.to in spec_keys):
        done.values[alias.to] = alias.convert(value)
    elif alias.flag is not None:
        done.flags[bare] = _flag(alias.flag, value)


def _additional(key: str, value: Any, partitions: Mapping[str, str] | None, spec_keys: tuple[str, ...],
                done: Translated) -> None:
    """submitit's `additional_parameters` dict: a name of the table means what it means there; any other is an
    sbatch option (`mail_type: END` -> `--mail-type=END`), checked as the spec checks its `sbatch:` list."""
    if not isinstance(value, Mapping):
        done.problems.append(f"update_parameters: {key}: expected a dict of sbatch options like "
                             f"{{'mail_type': 'END'}}, got {type(value).__name__}")
        return
    flags: list[str] = []
    for name, item in value.items():
        bare = str(name).replace("-", "_")
        found = (bare, ALIASES[bare]) if bare in ALIASES and not ALIASES[bare].generic else None
        if found is not None and found[0] != "additional_parameters" and (found[1].flag is None or found[1].to):
            _one(f"{key}[{name!r}]", item, found, partitions, spec_keys, done)
        else:
            flags += _flag(bare, item)
    done.flags["additional_parameters"] = tuple(flags)


def _partition(key: str, value: Any, partitions: Mapping[str, str] | None, done: Translated) -> None:
    if partitions is None:
        return  # a Slurm-only name, unused by a local executor
    wanted = [p.strip() for p in value.split(",")] if isinstance(value, str) else []
    kinds = [kind for kind, partition in partitions.items() if partition in wanted]
    if not kinds:
        known = ", ".join(sorted(set(partitions.values())))
        done.problems.append(f"update_parameters: {key}={value!r}: no resource kind of the site runs on it "
                             f"(partitions: {known}); or name the kinds with variants=[...]")
    else:
        done.values["variants"] = kinds
