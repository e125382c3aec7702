"""Where a variant may run and on how many nodes and tasks, as a group's options ask: checked, then fitted to kinds.

`--constraint`, `--nodelist`, `--exclude` and `--exclusive`, and `--nodes`, `--ntasks`, `--ntasks-per-node`, are
fields of a spec, per kind (`overrides.<kind>.constraint`). A value given for the whole group (an sbatch option, or
a spec's top-level key) applies to the kinds whose nodes can satisfy it: a feature only the gpu partition's nodes
have drops the other variants with a note, since sbatch would refuse them and with them the whole group. A value a
kind's own override gives must be satisfiable by that kind's nodes. This needs the nodes' features and partitions,
read once at submission (`fit_kinds` is pure over them).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import Any, Protocol

from slurmx.core.config import SiteConfig
from slurmx.core.model import Node
from slurmx.core.placement import ConstraintError, parse_constraint, satisfies
from slurmx.core.validation import ConfigError
from slurmx.slurm.errors import SlurmParseError
from slurmx.slurm.hostlist import expand_hostlist

__all__ = ["COUNT_FIELDS", "PLACEMENT_FIELDS", "check_constraint", "check_nodelist", "constraint_field", "count_field",
           "fit_kinds", "hosts_field", "kind_constraint", "layout_problem", "needs_cluster", "parse_count"]

PLACEMENT_FIELDS = ("constraint", "nodelist", "exclude")  # the fields that need the cluster's nodes to fit
COUNT_FIELDS = ("nodes", "ntasks", "ntasks_per_node")
_CONSTRAINT_CHARS = re.compile(r"[A-Za-z0-9_.:+\-&|,()\[\]]+")
_NODE_RANGE = re.compile(r"([0-9]{1,9})-([0-9]{1,9})")


class _Spec(Protocol):
    def variant_field(self, kind: str, name: str) -> Any: ...

    @property
    def overrides(self) -> Any: ...


def check_constraint(value: str) -> str:
    """A `--constraint` as one `#SBATCH` word (blanks dropped); ValueError with ConstraintError's one line."""
    text = "".join(value.split())  # once read: blanks only ever stand between tokens
    try:
        parse_constraint(value)
    except ConstraintError as exc:
        raise ValueError(str(exc)) from None
    if not _CONSTRAINT_CHARS.fullmatch(text):  # pragma: no cover - parse_constraint admits no other character
        raise ValueError(f"constraint {value!r}: features are letters, digits and _ . : + -")
    return text


def check_nodelist(value: Any, option: str) -> str:
    """`--nodelist`/`--exclude`: a Slurm host list (`c[1-2],g1`), or in a spec a list of names; ValueError else."""
    if isinstance(value, list | tuple):
        value = ",".join(str(item) for item in value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected node names like c1,c2 or c[1-2], got {value!r}")
    text = "".join(value.split())
    if "/" in text:
        raise ValueError(f"{text!r} reads as a file of node names, which slurmx cannot check; write the names "
                         f"themselves (--{option}=c1,c2)")
    try:
        names = expand_hostlist(text)
    except SlurmParseError as exc:
        raise ValueError(f"expected node names like c1,c2 or c[1-2]: {exc.message}") from None
    if not names or any(not re.fullmatch(r"[A-Za-z0-9_.\-]+", name) for name in names):
        raise ValueError(f"expected node names like c1,c2 or c[1-2], got {value!r}")
    return text


def parse_count(value: Any, option: str) -> int:
    """`--nodes`/`--ntasks`/`--ntasks-per-node`: one whole number, at least 1 (`2-2` is 2); a range for nodes is
    refused with the fix (a policy plans one count), as is anything else."""
    given = value
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    text = value.strip() if isinstance(value, str) else ""
    pair = _NODE_RANGE.fullmatch(text)
    if pair is not None and pair.group(1) == pair.group(2):
        text = pair.group(1)
    if text.isdigit() and 1 <= int(text) <= 100_000:
        return int(text)
    if pair is not None and option == "nodes":
        low, high = pair.groups()
        raise ValueError(f"a node range lets Slurm choose the count when the job starts, which the policies cannot "
                         f"plan; give one count (--nodes={low} or --nodes={high})")
    raise ValueError(f"expected a whole number from 1 to 100000, like --{option}=2, got {given!r}")


def constraint_field(value: Any) -> Any:
    """A spec's `constraint:` (pydantic's before-validator)."""
    return check_constraint(value) if isinstance(value, str) else value


def hosts_field(value: Any, option: str) -> Any:
    """A spec's `nodelist:`/`exclude:` (a host list or a list of names)."""
    return None if value is None else check_nodelist(value, option)


def count_field(value: Any, option: str) -> Any:
    """A spec's `nodes:`, `ntasks:`, `ntasks_per_node:`."""
    return None if value is None else parse_count(value, option)


def layout_problem(nodes: int | None, ntasks: int | None, nodelist: str | None, where: str = "") -> str | None:
    """Node and task counts that cannot go together, with the fix (`where`: `overrides.gpu.` or '')."""
    listed = len(expand_hostlist(nodelist)) if nodelist else None
    if nodes is not None and listed is not None and nodes > listed:
        return (f"{where}nodes: {nodes} with {where}nodelist {nodelist} naming {listed} node(s): slurmx places such "
                f"a job only on the listed nodes; list {nodes} nodes, or ask for nodes: {listed}")
    if ntasks is not None and nodes is not None and ntasks < nodes:
        return (f"{where}ntasks: {ntasks} with {where}nodes: {nodes}: every node runs at least one task; ask for "
                f"ntasks: {nodes} or more, or nodes: {ntasks}")
    return None


def needs_cluster(spec: _Spec, kinds: Sequence[str]) -> bool:
    """Whether fitting `kinds` to the spec needs the nodes' features and partitions (most specs do not)."""
    return any(spec.variant_field(kind, name) not in (None, "") for kind in kinds for name in PLACEMENT_FIELDS) or \
        any((spec.variant_field(kind, "nodes") or 1) > 1 for kind in kinds)


def kind_constraint(site: SiteConfig, kind: str) -> str | None:
    """The `--constraint` of a kind's own `extra_flags` in the site config (the last one, as sbatch reads it)."""
    found = None
    for flag in site.kind(kind).extra_flags:
        if flag.startswith("--constraint="):
            found = flag.partition("=")[2]
        elif flag.startswith("-C") and len(flag) > 2:
            found = flag[2:].removeprefix("=")
    return found


def _problem(spec: _Spec, site: SiteConfig, kind: str, nodes: Sequence[Node]) -> str | None:
    """Why no allocation of `kind`'s partition can satisfy the spec's placement and node count; None when one can."""
    partition = site.kind(kind).partition
    in_partition = [node for node in nodes if partition in node.partitions]
    members = in_partition
    own = kind_constraint(site, kind)
    if own is not None:
        with contextlib.suppress(ConstraintError):  # the site's own flag: sbatch is the judge of it
            members = [node for node in members if satisfies(own, frozenset(node.features))]
    constraint = spec.variant_field(kind, "constraint")
    required = expand_hostlist(spec.variant_field(kind, "nodelist") or "")
    excluded = set(expand_hostlist(spec.variant_field(kind, "exclude") or ""))
    count = spec.variant_field(kind, "nodes") or max(len(required), 1)
    by_name = {node.name: node for node in members}
    if required:
        known = {node.name for node in in_partition}
        outside = [name for name in required if name not in known]
        if outside:
            return f"{', '.join(outside[:3])} {'is' if len(outside) == 1 else 'are'} not in its partition {partition}"
        lacking = [name for name in required if name not in by_name]
        if lacking:
            verb = "lacks" if len(lacking) == 1 else "lack"
            return f"{', '.join(lacking[:3])} {verb} the kind's own --constraint={own} (site config)"
        barred = [name for name in required if name in excluded]
        if barred:
            return f"--exclude removes {', '.join(barred[:3])}, which --nodelist asks for"
        if constraint:
            lacking = [name for name in required if not satisfies(constraint, frozenset(by_name[name].features))]
            if lacking:
                return f"{', '.join(lacking[:3])} of --nodelist lack --constraint={constraint}"
        return None
    fit = [node for node in members if node.name not in excluded and
           (not constraint or satisfies(constraint, frozenset(node.features)))]
    if len(fit) >= count:
        return None
    if constraint and not any(satisfies(constraint, frozenset(node.features)) for node in members):
        return f"no node of its partition {partition} has --constraint={constraint}"
    what = " with --constraint=" + constraint if constraint else ""
    left = " left by --exclude" if excluded else ""
    return f"its partition {partition} has {len(fit)} node(s){what}{left}, and {count} are asked for"


def _own(spec: _Spec, kind: str) -> list[str]:
    """The placement and node-count fields `kind`'s own override sets (their problem is the spec's, not a reason to
    leave the kind out)."""
    override = spec.overrides.get(kind)
    return [f"overrides.{kind}.{name}" for name in (*PLACEMENT_FIELDS, "nodes")
            if override is not None and getattr(override, name, None) not in (None, "")]


def _features(site: SiteConfig, kinds: Sequence[str], nodes: Sequence[Node]) -> str:
    """`cpu: x86,bigmem; gpu: nvlink,x86`: what the user may ask of each kind (a fix for a constraint none has)."""
    shown = []
    for kind in kinds:
        partition = site.kind(kind).partition
        names = sorted({f for node in nodes if partition in node.partitions for f in node.features})
        shown.append(f"{kind}: {','.join(names[:12]) or 'none'}")
    return "; ".join(shown)


def _members(site: SiteConfig, kinds: Sequence[str], nodes: Sequence[Node]) -> str:
    shown = []
    for kind in kinds:
        partition = site.kind(kind).partition
        names = [node.name for node in nodes if partition in node.partitions]
        shown.append(f"{kind}: {','.join(names[:8])}{',...' if len(names) > 8 else ''}")
    return "; ".join(shown)


def fit_kinds(spec: _Spec, site: SiteConfig, kinds: Sequence[str], nodes: Sequence[Node],
              source: str = "<spec>") -> tuple[tuple[str, ...], list[str]]:
    """(the kinds whose nodes can satisfy the spec's placement and node count, a note per kind left out).

    A kind's own override that cannot be satisfied, or a group-wide value no kind can satisfy, is a ConfigError in
    one line with the fix. Pure: `nodes` is the cluster as `SlurmAdapter.nodes()` read it.
    """
    kept: list[str] = []
    notes: list[str] = []
    problems: dict[str, str] = {}
    for kind in kinds:
        problem = _problem(spec, site, kind, nodes)
        if problem is None:
            kept.append(kind)
            continue
        own = _own(spec, kind)
        if own:
            shown = ", ".join(own)
            raise ConfigError([f"{source}: {shown}: kind {kind} cannot run {'it' if len(own) == 1 else 'them'}: "
                               f"{problem}; change {shown} or leave {'it' if len(own) == 1 else 'them'} out"])
        problems[kind] = problem
        notes.append(f"variant {kind} left out: {problem}")
    if kept:
        return tuple(kept), notes
    reasons = "; ".join(f"{kind}: {why}" for kind, why in problems.items())
    if any(spec.variant_field(kind, "nodelist") for kind in kinds):
        fix = f"list nodes of one kind's partition ({_members(site, kinds, nodes)})"
    elif any(spec.variant_field(kind, "constraint") for kind in kinds):
        fix = f"ask for features one kind's nodes have ({_features(site, kinds, nodes)})"
    else:
        fix = "ask for fewer nodes, or exclude fewer"
    raise ConfigError([f"{source}: no variant can run where this job asks ({reasons}); {fix}"])
