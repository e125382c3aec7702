"""Read `#SBATCH` directives the way sbatch does, so an existing batch script works unchanged.

sbatch reads `#SBATCH` lines from the top of the script and stops at the first line that is neither blank nor
a comment. Every option lands in one of five places:

- modelled: name, time, memory (`--mem`, `--mem-per-cpu`), CPUs, GPUs (`--gpus`/`-G`, `--gpus-per-task`,
  `--gpus-per-node`), QOS and partition become spec fields, applied per resource kind (`-p gpu` means the
  kinds on partition gpu; `--gpus=2` means the kinds with GPUs, each asking for two); `--dependency` names
  groups (submit/dependency.py) and `--array` one Slurm array per kind (submit/array.py);
- the submitting command's own: `--wait` (wait for the group), `--parsable` (print the group id) and
  `--test-only` (submit nothing: `--dry-run`);
- placement and layout: `--constraint`, `--nodelist`, `--exclude`, `--exclusive`, `--nodes`, `--ntasks`,
  `--ntasks-per-node` become spec fields too, applied to the kinds whose nodes can satisfy them
  (submit/placement.py);
- refused, in one line saying what to write instead: options whose meaning a group of variants cannot keep
  (per-GPU amounts, node ranges);
- dropped with a note: options each variant sets itself (output, signal, hold, GRES other than GPUs ...);
- passed through: every other valid option.

An option sbatch does not know is an error naming the line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from slurmx.core.units import UnitError, parse_mem, parse_time_limit
from slurmx.core.validation import ConfigError
from slurmx.submit.array import parse_array
from slurmx.submit.dependency import parse_dependency
from slurmx.submit.placement import check_constraint, check_nodelist, parse_count
from slurmx.submit.signals import parse_signal

__all__ = ["CLIENT_OPTIONS", "Directives", "canonical_long_option", "modelled_key", "parse_begin",
           "parse_directives", "parse_export", "refusal", "release_refusal", "short_option", "sort_options",
           "split_command_line", "split_options"]

# sbatch long options and whether they take a value ("opt" = optional value), from sbatch(1).
_LONG: dict[str, str] = {
    "account": "arg", "acctg-freq": "arg", "array": "arg", "batch": "arg", "bb": "arg", "bbf": "arg",
    "begin": "arg", "chdir": "arg", "cluster-constraint": "arg", "clusters": "arg", "comment": "arg",
    "constraint": "arg", "container": "arg", "container-id": "arg", "contiguous": "flag", "core-spec": "arg",
    "cores-per-socket": "arg", "cpu-freq": "arg", "cpus-per-gpu": "arg", "cpus-per-task": "arg",
    "deadline": "arg", "delay-boot": "arg", "dependency": "arg", "distribution": "arg", "error": "arg",
    "exclude": "arg", "exclusive": "opt", "export": "arg", "export-file": "arg", "extra": "arg",
    "extra-node-info": "arg", "get-user-env": "opt", "gid": "arg", "gpu-bind": "arg", "gpu-freq": "arg",
    "gpus": "arg", "gpus-per-node": "arg", "gpus-per-socket": "arg", "gpus-per-task": "arg", "gres": "arg",
    "gres-flags": "arg", "hint": "arg", "hold": "flag", "ignore-pbs": "flag", "input": "arg",
    "job-name": "arg", "kill-on-invalid-dep": "arg", "licenses": "arg", "mail-type": "arg",
    "mail-user": "arg", "mcs-label": "arg", "mem": "arg", "mem-bind": "arg", "mem-per-cpu": "arg",
    "mem-per-gpu": "arg", "mincpus": "arg", "network": "arg", "nice": "opt", "no-kill": "opt",
    "no-requeue": "flag", "nodefile": "arg", "nodelist": "arg", "nodes": "arg", "ntasks": "arg",
    "ntasks-per-core": "arg", "ntasks-per-gpu": "arg", "ntasks-per-node": "arg", "ntasks-per-socket": "arg",
    "open-mode": "arg", "output": "arg", "overcommit": "flag", "oversubscribe": "flag", "parsable": "flag",
    "partition": "arg", "power": "arg", "prefer": "arg", "priority": "arg", "profile": "arg",
    "propagate": "opt", "qos": "arg", "quiet": "flag", "reboot": "flag", "requeue": "flag",
    "reservation": "arg", "signal": "arg", "sockets-per-node": "arg", "spread-job": "flag",
    "switches": "arg", "test-only": "flag", "thread-spec": "arg", "threads-per-core": "arg", "time": "arg",
    "time-min": "arg", "tmp": "arg", "tres-bind": "arg", "tres-per-task": "arg", "uid": "arg",
    "use-min-nodes": "flag", "verbose": "flag", "wait": "flag", "wait-all-nodes": "arg", "wckey": "arg",
    "wrap": "arg",
    # newer than 22.05 (see _SINCE)
    "resv-ports": "opt", "segment": "arg", "stepmgr": "flag", "oom-kill-step": "opt", "consolidate-segments": "flag",
    "resources": "arg", "spread-segments": "flag", "container-type": "arg", "mem-update": "arg",
}
# The Slurm release whose sbatch(1) first lists an option, for those newer than the oldest release slurmx reads
# (22.05); and the release that dropped one. From doc/man/man1/sbatch.1 of each release's first tag.
_SINCE: dict[str, str] = {
    "container-id": "23.02", "extra": "23.02", "tres-per-task": "23.02", "tres-bind": "23.11",
    "resv-ports": "24.05", "segment": "24.05", "stepmgr": "24.05", "oom-kill-step": "24.11",
    "consolidate-segments": "25.11", "resources": "25.11", "spread-segments": "25.11",
    "container-type": "26.05", "mem-update": "26.05",
}
_DROPPED_IN: dict[str, str] = {"power": "24.05"}
# Values of an option that a release added after the option itself.
_VALUE_SINCE: dict[tuple[str, str], str] = {("export", "NIL"): "23.11"}
_SHORT: dict[str, str] = {
    "A": "account", "a": "array", "b": "begin", "C": "constraint", "c": "cpus-per-task", "D": "chdir",
    "d": "dependency", "e": "error", "F": "nodefile", "G": "gpus", "H": "hold", "i": "input", "J": "job-name",
    "k": "no-kill", "L": "licenses", "M": "clusters", "m": "distribution", "N": "nodes", "n": "ntasks",
    "O": "overcommit", "o": "output", "p": "partition", "q": "qos", "Q": "quiet", "s": "oversubscribe",
    "S": "core-spec", "t": "time", "v": "verbose", "W": "wait", "w": "nodelist", "x": "exclude",
}
# Options each variant sets itself: dropped from a script's directives (with a note).
# GRES belongs to the resource kind too, except GPUs (`--gres=gpu:2` is `--gpus=2`): a script's other GRES must not
# follow it onto a variant of another kind.
_VARIANT_OWNED = {"requeue", "no-requeue", "hold", "comment", "wrap", "gres"}
# Options that become typed spec fields: option -> the key in `Directives.fields`. A variant asks for GPUs per node
# (its kind's GRES): `--gpus` and `--gpus-per-task` mean that on one node and one task, and are refused beyond
# (submit/entry.py); `--gpus-per-node` and `--gres=gpu:N` mean it always.
_MODELLED = {"job-name": "job-name", "time": "time", "mem": "mem", "mem-per-cpu": "mem-per-cpu",
             "cpus-per-task": "cpus-per-task", "qos": "qos", "partition": "partition", "gpus": "gpus",
             "gpus-per-task": "gpus", "gpus-per-node": "gpus", "dependency": "dependency", "array": "array",
             "export": "export", "output": "output", "error": "error", "signal": "signal",
             "begin": "begin", "constraint": "constraint", "nodelist": "nodelist", "exclude": "exclude",
             "exclusive": "exclusive", "nodes": "nodes", "ntasks": "ntasks", "ntasks-per-node": "ntasks-per-node"}
# Placement and layout options checked where written (`--exclusive` bare only: `=user|mcs|topo` passes on).
_PLACEMENT = ("constraint", "nodelist", "exclude", "exclusive", "nodes", "ntasks", "ntasks-per-node")
# Options of the submitting command itself, which `slurmx submit` applies to the whole group (`--test-only`
# submits nothing: it is `--dry-run`).
CLIENT_OPTIONS = ("wait", "parsable", "test-only")
# Options a group of variants cannot honour: what to write instead.
_REFUSED = {
    "mem-per-gpu": "write the job's whole memory as --mem (mem: in a spec)",
    "cpus-per-gpu": "write the job's whole CPU count as --cpus-per-task (cpus: in a spec)",
    "ntasks-per-gpu": "each kind has its own GPUs per node; ask for the tasks with --ntasks or --ntasks-per-node "
                      "and the GPUs per node with --gpus-per-node",
    "nodefile": "write the node names as --nodelist=c1,c2 (nodelist: in a spec), which slurmx checks against the "
                "kinds' partitions",
    "gpus-per-socket": "write the job's GPUs as --gpus (gpus: in a spec)",
    "tres-per-task": "write --cpus-per-task and --gpus (cpus: and gpus: in a spec)",
}
_MEMORY = ("mem", "mem-per-cpu")
# `slurmx submit`'s own options (cli.py), which must come before the first sbatch option.
_SUBMIT_OWN = ("variants", "mode", "pick", "dry-run", "scripts", "json")


def refusal(name: str, value: str | None) -> str | None:
    """Why option `--name[=value]` cannot be submitted as a group, and what to write instead; None if it can."""
    if name in _REFUSED:
        return f"--{name} is not supported: {_REFUSED[name]}"
    return None


def _key(version: str) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    return int(major), int(minor)


def release_refusal(name: str, value: str | None, release: str | None) -> str | None:
    """Why Slurm `release` (the site's cluster.slurm_version) does not know `--name[=value]`; None when it does
    or the release is not configured."""
    if release is None:
        return None
    since = _SINCE.get(name) or _VALUE_SINCE.get((name, (value or "").strip().upper()))
    shown = f"--{name}" if value is None or name not in {n for n, _ in _VALUE_SINCE} else f"--{name}={value}"
    if since is not None and _key(release) < _key(since):
        return (f"{shown} is new in Slurm {since}; this site runs Slurm {release} (cluster.slurm_version), whose "
                "sbatch refuses it: leave it out")
    dropped = _DROPPED_IN.get(name)
    if dropped is not None and _key(release) >= _key(dropped):
        return (f"--{name} was removed in Slurm {dropped}; this site runs Slurm {release} (cluster.slurm_version): "
                "leave it out")
    return None


def modelled_key(name: str, value: str | None = None) -> str | None:
    """The spec-field key option `name` (with `value`) becomes, or None when it is not modelled (`--exclusive=user`
    is not: it passes on)."""
    if name == "exclusive" and value is not None:
        return None
    return _MODELLED.get(name)


def short_option(letter: str) -> str | None:
    """The long option sbatch's `-letter` stands for."""
    return _SHORT.get(letter)


def canonical_long_option(name: str) -> str | None:
    """The sbatch long option `name` means: itself, or the one option it is an unambiguous prefix of."""
    if name in _LONG:
        return name
    matches = [option for option in _LONG if option.startswith(name)]
    return matches[0] if len(matches) == 1 and name else None


@dataclass
class Directives:
    """What a script's `#SBATCH` lines asked for, sorted into spec fields, pass-through flags and notes."""

    fields: dict[str, str] = field(default_factory=dict)
    passthrough: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    client: set[str] = field(default_factory=set)  # CLIENT_OPTIONS given
    places: dict[str, str] = field(default_factory=dict)  # field key -> where it was set (file:line)
    given_as: dict[str, str] = field(default_factory=dict)  # field key -> the option that set it (`gpus-per-task`)


def split_options(words: Sequence[str], where: str) -> list[tuple[str, str | None]]:
    """sbatch-style words -> [(long option name, value or None)]; unknown options raise ConfigError."""
    parsed: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            given, eq, value = word[2:].partition("=")
            name = canonical_long_option(given) or given
            kind = _LONG.get(name)
            if kind is None and given in _SUBMIT_OWN:
                raise ConfigError([f"{where}: --{given} is an option of slurmx submit itself: give it before the "
                                   f"sbatch options (slurmx submit --{given} ... --time=... job.sh)"])
            if kind is None:
                raise ConfigError([f"{where}: sbatch has no option --{given}; see `man sbatch`"])
            if kind == "flag" and eq:
                raise ConfigError([f"{where}: --{name} takes no value"])
            if kind == "arg" and not eq:
                if i + 1 >= len(words):
                    raise ConfigError([f"{where}: --{name} needs a value"])
                i += 1
                value = words[i]
            parsed.append((name, value if (eq or kind == "arg") else None))
        elif word.startswith("-") and len(word) >= 2:
            letter = word[1]
            name_ = _SHORT.get(letter)
            if name_ is None:
                raise ConfigError([f"{where}: sbatch has no option -{letter}; see `man sbatch`"])
            kind = _LONG[name_]
            rest = word[2:]
            if kind in ("flag", "opt"):
                if rest:
                    raise ConfigError([f"{where}: -{letter} takes no value"])
                parsed.append((name_, None))
            else:
                if not rest:
                    if i + 1 >= len(words):
                        raise ConfigError([f"{where}: -{letter} needs a value"])
                    i += 1
                    rest = words[i]
                parsed.append((name_, rest.removeprefix("=")))
        elif word in ("hetjob", "packjob"):
            raise ConfigError([f"{where}: heterogeneous jobs ({word}) are not supported: a group runs one job of one "
                               "kind; submit each component as a group of its own"])
        else:
            raise ConfigError([f"{where}: expected an sbatch option, got {word!r}"])
        i += 1
    return parsed


_C_SPACE = " \t\n\v\f\r"  # C's isspace(), which sbatch uses; str.isspace() also takes \x1c-\x1f, \x85, U+2028 ...


def _directive_lines(text: str) -> list[tuple[int, str]]:
    """(line number, options text) of each `#SBATCH` line, found exactly as sbatch finds them (src/sbatch/opt.c):
    lines end only at `\n`; `#SBATCH` counts at column 0 only; reading stops at the first line holding anything
    but C whitespace before a `#`."""
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.startswith("#SBATCH"):
            found.append((number, line[len("#SBATCH"):]))
            continue
        stripped = line.lstrip(_C_SPACE)
        if stripped and not stripped.startswith("#"):
            break  # sbatch stops reading directives at the first command
    return found


def _sbatch_words(body: str, where: str) -> list[str]:
    """An `#SBATCH` line's words as sbatch's _get_argument() reads them: C whitespace separates words; single
    and double quotes group them; a backslash takes the next character as it is, inside quotes too; an unquoted,
    unescaped `#` ends the line."""
    words: list[str] = []
    i, n = 0, len(body)
    while True:
        while i < n and body[i] in _C_SPACE:
            i += 1
        if i >= n:
            return words
        word: list[str] = []
        quote = ""
        escaped = False
        while i < n and (escaped or quote or body[i] not in _C_SPACE):
            char = body[i]
            i += 1
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
                continue
            elif quote:
                if char == quote:
                    quote = ""
                    continue
            elif char in "\"'":
                quote = char
                continue
            elif char == "#":
                if word:
                    words.append("".join(word))
                return words
            word.append(char)
        if quote:
            raise ConfigError([f"{where}: cannot read #SBATCH line (No closing quotation)"])
        words.append("".join(word))


def _gpu_count(gres: str) -> str | None:
    """`--gres=gpu[:type][:count]` -> the `--gpus` value it means on one node (`type:count` or `count`)."""
    parts = gres.strip().split(":")
    if parts[0] != "gpu" or len(parts) > 3 or "," in gres or (len(parts) == 3 and not parts[2].isdigit()):
        return None
    count = parts[-1] if len(parts) > 1 and parts[-1].isdigit() else "1"
    gpu_type = parts[1] if len(parts) == 3 or (len(parts) == 2 and not parts[1].isdigit()) else ""
    return f"{gpu_type}:{count}" if gpu_type else count


def sort_options(options: Sequence[tuple[str, str | None]], into: Directives | None = None,
                 where: str = "command line", release: str | None = None) -> Directives:
    """Sort parsed options into spec fields, the command's own options, pass-through flags and dropped ones
    (later options win); an option a group cannot honour, or the site's Slurm `release` does not know, raises
    ConfigError naming `where`."""
    result = into if into is not None else Directives()
    for name, value in options:
        problem = refusal(name, value) or release_refusal(name, value, release)
        if problem is not None:
            raise ConfigError([f"{where}: {problem}"])
        key = _MODELLED.get(name)
        given = name
        if name == "gres" and value is not None and _gpu_count(value) is not None:
            name, value, key = "gpus", _gpu_count(value), "gpus"  # one node: its GPUs are the job's
        if name == "exclusive" and value is None:
            value = ""  # a flag: whole nodes
        if key is not None and value is not None and modelled_key(name, value or None) is not None:
            value = _check_value(key, value, where)
            if key in _MEMORY:
                other = _MEMORY[1 - _MEMORY.index(key)]
                if other in result.fields:
                    raise ConfigError([f"{where}: --{key} and --{other} (at {result.places[other]}) ask for memory "
                                       f"twice, and sbatch refuses the pair; keep one"])
            result.fields[key] = value
            result.places[key] = where
            result.given_as[key] = given
        elif name in CLIENT_OPTIONS:
            result.client.add(name)
        elif name in _VARIANT_OWNED:
            result.dropped.append(f"--{name}")
        else:
            result.passthrough.append(f"--{name}" if value is None else f"--{name}={value}")
    return result


_NO_UNLIMITED = ("a variant's time limit is finite: slurmx sends its grace signal before the limit; leave --time "
                 "out (each variant then gets its kind's limit from the site config, else the partition's default) "
                 "or give one like --time=2-00:00:00")
_NO_WHOLE_NODE = ("all of a node's memory is not a size a group can ask for (each kind's nodes differ, and the "
                  "policies place by size); leave --{key} out (each variant then asks for its kind's memory from the "
                  "site config) or give a size like --{key}=32G")


_EXPORT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_export(value: str) -> str:
    """`--export` as sbatch reads it: ALL, NONE, NIL, or `[ALL,]NAME[=value],...`; keywords in capitals. A
    variable slurmx sets in each variant (SLURMX_*) cannot be given; ValueError says what to write instead."""
    items = value.strip().split(",")
    first = items[0].upper()
    if first in ("ALL", "NONE", "NIL"):
        items[0] = first
        if first != "ALL" and len(items) > 1:
            raise ValueError(f"{first} exports no variable, so it takes no list; write --export={first}, or "
                             f"--export={','.join(items[1:])} for those variables alone")
    for item in items[1:] if first in ("ALL", "NONE", "NIL") else items:
        name = item.partition("=")[0]
        if not _EXPORT_NAME.fullmatch(name):
            raise ValueError(f"expected ALL, NONE, NIL or NAME[=value] items separated by commas, got {item!r}")
        if name.upper().startswith("SLURMX_"):
            raise ValueError(f"{name} is set by slurmx in each variant; choose another name")
    return ",".join(items)


_BEGIN = re.compile(r"now(\+[0-9]{1,9}(seconds?|minutes?|hours?|days?|weeks?|[smhdw])?)?|midnight|noon|elevenses|fika|"
                    r"teatime|today|tomorrow|[0-9]{1,2}:[0-9]{2}(:[0-9]{2})?([AP]M)?|"
                    r"[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2})?)?|[0-9]{6}|[0-9]{2}/[0-9]{2}(/[0-9]{2})?",
                    re.IGNORECASE)


def parse_begin(value: str) -> str:
    """`--begin` in one of sbatch's forms (sbatch(1) `--begin`); ValueError naming them otherwise."""
    if not _BEGIN.fullmatch(value.strip()):
        raise ValueError("expected a time as sbatch takes it: now+1hour, 16:00, 2026-12-01T08:00, tomorrow, ...")
    return value.strip()


def _check_resource(key: str, value: str) -> None:
    """Time, memory and CPU values as sbatch reads them, refused with what to write instead."""
    if key == "time":
        if value.strip().upper() in ("UNLIMITED", "INFINITE", "-1"):
            raise ValueError(_NO_UNLIMITED)
        try:
            seconds = parse_time_limit(value)
        except UnitError as exc:
            raise ValueError(str(exc)) from None
        if seconds == 0:  # sbatch: "a time limit of zero requests that no time limit be imposed"
            raise ValueError(_NO_UNLIMITED)
    elif key in _MEMORY:
        try:
            megabytes = parse_mem(value)
        except UnitError as exc:
            raise ValueError(str(exc)) from None
        if megabytes == 0:
            raise ValueError(_NO_WHOLE_NODE.format(key=key))
    elif key == "export":
        parse_export(value)
    elif key == "signal":
        parse_signal(value)
    elif key == "begin":
        parse_begin(value)
    elif key == "cpus-per-task" and (not value.strip().isdigit() or int(value) < 1):
        raise ValueError(f"expected a whole number of CPUs, at least 1, like --cpus-per-task=4, got {value!r}")


def _check_placement(key: str, value: str) -> str:
    """A placement or layout value as the spec keeps it (a constraint without blanks, a count as digits)."""
    if key == "constraint":
        return check_constraint(value)
    if key in ("nodelist", "exclude"):
        return check_nodelist(value, key)
    if key == "exclusive":
        return value
    return str(parse_count(value, key))


def _check_value(key: str, value: str, where: str) -> str:
    """A modelled value is checked where it was written (`file:line` or the command line), so the error names the
    place the user has to fix; returns it as the spec keeps it."""
    check = {"array": parse_array, "dependency": parse_dependency}.get(key)
    try:
        if key in _PLACEMENT:
            return _check_placement(key, value)
        if check is not None:
            check(value)
        else:
            _check_resource(key, value)
    except ValueError as exc:
        # A constraint's own message quotes the value and names the character: the place is all it needs.
        shown = "" if key == "constraint" else f"--{key}={value}: "
        raise ConfigError([f"{where}: {shown}{exc}"]) from None
    return value


def parse_directives(text: str, source: str, release: str | None = None) -> Directives:
    """Sort a script's `#SBATCH` options (checked against the site's Slurm `release` when known); errors name
    `source:line`."""
    result = Directives()
    for number, body in _directive_lines(text):
        where = f"{source}:{number}"
        words = _sbatch_words(body, where)
        sort_options(split_options(words, where), result, where, release)
    return result


def split_command_line(words: Sequence[str]) -> tuple[list[str], str | None, list[str]]:
    """`sbatch`-style command line -> (option words, script path, script arguments), as sbatch splits it:
    options up to the first word that is neither an option nor an option's value."""
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("-") or word == "-":
            return list(words[:i]), word, list(words[i + 1:])
        if word.startswith("--"):
            name, eq, _ = word[2:].partition("=")
            if _LONG.get(name) == "arg" and not eq:
                i += 1
        elif len(word) == 2 and _LONG.get(_SHORT.get(word[1], ""), "") == "arg":
            i += 1
        i += 1
    return list(words), None, []
