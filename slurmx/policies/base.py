"""The policy interface, its registry and typed arguments.

A policy is pure: `plan = policy.schedule(view, now)`. It does no I/O, keeps no hidden state between calls,
and is deterministic given its seed, so the daemon and the simulator can run the very same object.
"Cannot place this job" is a note in the returned plan, never an exception: an exception means a bug.
Policies are found by name (`policy: {name: fifo}` in the site config); outside packages register through
the entry-point group `slurmx.policies`.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict

from slurmx.core.actions import Plan
from slurmx.core.model import ClusterView, Variant
from slurmx.core.validation import ConfigError, validate_model

__all__ = [
    "BackfillPasses",
    "Capabilities",
    "Policy",
    "PolicyArgs",
    "available_policies",
    "backfill_passes",
    "can_place",
    "capabilities_of",
    "declared",
    "make_policy",
    "max_nodes",
    "places_constraints",
    "policy_args",
    "policy_args_model",
    "profiled",
    "queue_window",
    "register",
    "sensitivity_kind",
    "waits_for_release",
]


class PolicyArgs(BaseModel):
    """Base of every policy's argument class: typed, frozen, unknown keys rejected with the valid ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class BackfillPasses:
    """A policy that, as Slurm's backfill scheduler, makes a full pass only every `period_s`: between passes the
    simulator asks `between` (Slurm's main scheduler: FIFO without backfill) at each event. The daemon asks the
    policy itself at every cycle, which already comes at the cadence of a backfill pass."""

    period_s: float
    between: Policy


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a policy needs and can do, declared on its class (`capabilities`: a class constant, or a property when
    its arguments decide). Config, profiling, the cycle, the simulator, fidelity and the tests ask this, never the
    policy's name.

    `profiled`: its decisions read run-time estimates, so slurmxd's profiler (sample runs, history) is on for it
    unless the site says otherwise. `sensitivity_kind`: the kind whose variants get the CPU/memory sensitivity
    search (Synergy's), None for none. `max_nodes`: how many nodes it starts one job on (None: any); most place
    a job on one node (the papers' model), and a run refuses a wider variant before it starts, not hours into a
    replay. `places_constraints`: it places a variant only where its `placement` admits (features, node lists,
    whole nodes); one that does not is never shown such a group (`cycle/handover.py`). `waits_for_release`: once
    it leaves groups waiting, it starts none of them until room its oldest waiting group fits in is given back or
    an older group appears, so the simulator does not ask it at an instant that brought only arrivals, or room
    only where that group still fits nowhere (strict FIFO under a long queue).
    `queue_window`: how many pending groups from the head one decision reads at most, when nothing else that time
    changes but the running jobs' expected ends moves its plan (EASY backfill): a decision that changed nothing is
    not repeated at an instant that brought only arrivals, gave no room back and found no job past its end.
    `te_preempts_be`: a TE group preempts BE groups to start (FitGpp's round), so a workload that exercises it
    mixes TE groups in. `backfill_passes`: it makes its full pass only every so often, as Slurm's backfill
    scheduler, with another policy deciding in between (`BackfillPasses`; FIFO under `cadence: slurm`)."""

    profiled: bool = True
    sensitivity_kind: str | None = None
    max_nodes: int | None = 1
    places_constraints: bool = False
    waits_for_release: bool = False
    queue_window: int | None = None
    te_preempts_be: bool = False
    backfill_passes: BackfillPasses | None = None


UNDECLARED = Capabilities()


@runtime_checkable
class Policy(Protocol):
    """What the daemon and the simulator call. A policy class also declares `capabilities: Capabilities`."""

    name: ClassVar[str]

    def schedule(self, view: ClusterView, now: float) -> Plan: ...


def capabilities_of(policy: Policy) -> Capabilities:
    """What the policy declares; the defaults (the cautious answers: one node, no placement rules, asked at every
    event) for one that declares nothing, such as a wrapper or a plugin written before the declaration."""
    declared = getattr(policy, "capabilities", UNDECLARED)
    return declared if isinstance(declared, Capabilities) else UNDECLARED


def max_nodes(policy: Policy) -> int | None:
    """How many nodes the policy can start one job on (None: any)."""
    return capabilities_of(policy).max_nodes


def places_constraints(policy: Policy) -> bool:
    """Whether the policy places a variant only where its `placement` admits."""
    return capabilities_of(policy).places_constraints


def can_place(policy: Policy, variants: Iterable[Variant]) -> bool:
    """Whether the policy can place every one of a group's variants as it asks (node count and placement)."""
    declared = capabilities_of(policy)
    widest = declared.max_nodes
    placing = declared.places_constraints
    for variant in variants:
        if widest is not None and variant.node_count > widest:
            return False
        if not placing and not variant.placement.anywhere:
            return False
    return True


def waits_for_release(policy: Policy) -> bool:
    """Whether the policy's waiting groups wait for room given back (Capabilities.waits_for_release)."""
    return capabilities_of(policy).waits_for_release


def queue_window(policy: Policy) -> int | None:
    """How many pending groups from the head one decision reads at most (Capabilities.queue_window), or None."""
    return capabilities_of(policy).queue_window


def backfill_passes(policy: Policy) -> BackfillPasses | None:
    """The policy's backfill cadence (Capabilities.backfill_passes), None when every decision is a full pass."""
    return capabilities_of(policy).backfill_passes


A = TypeVar("A", bound=PolicyArgs)
PolicyFactory = Callable[[Any], Policy]
_REGISTRY: dict[str, tuple[type[PolicyArgs], PolicyFactory]] = {}


def register(name: str, args: type[A]) -> Callable[[Callable[[A], Policy]], Callable[[A], Policy]]:
    """Class or factory decorator: `@register("fifo", FifoArgs)`. A duplicate name is an error."""

    def decorate(factory: Callable[[A], Policy]) -> Callable[[A], Policy]:
        if name in _REGISTRY:
            raise ValueError(f"policy {name!r} is registered twice")
        _REGISTRY[name] = (args, factory)
        return factory

    return decorate


# Where each built-in policy is registered: a run imports only the module of the policy it asks for (AlloX's
# needs scipy, 45 MB of a FIFO replay's memory otherwise). `tests/unit/test_policy_registry.py` checks this
# table against what the modules register. One name per line (keeps merges trivial).
BUILTIN_POLICIES: Mapping[str, str] = {
    "accel_batch": "accel_batch",
    "allox": "allox",
    "allox_plus": "allox",
    "drfa": "allox_baselines",
    "drff": "allox_baselines",
    "drfs": "allox_baselines",
    "es": "allox_baselines",
    "fifo": "baselines",
    "fitgpp": "fitgpp",
    "gandiva": "mlfs.baselines",
    "jsq_plus": "allox_baselines",
    "lrtp": "fitgpp_baselines",
    "mlfs": "mlfs",
    "mlfs-fairshare": "mlfs.baselines",
    "mmi": "accel_batch",
    "rand": "fitgpp_baselines",
    "sct": "accel_batch",
    "sjf": "allox_baselines",
    "sjf_plus": "allox_baselines",
    "slaq": "mlfs.baselines",
    "srpt": "allox_baselines",
    "synergy": "synergy",
    "tiresias": "mlfs.baselines",
}


def _load(name: str) -> bool:
    """Make sure policy `name` is registered (its built-in module, else an installed plugin); whether it is."""
    if name in _REGISTRY:
        return True
    module = BUILTIN_POLICIES.get(name)
    if module is not None:
        importlib.import_module(f"slurmx.policies.{module}")
    else:
        for entry in entry_points(group="slurmx.policies", name=name):
            entry.load()
    return name in _REGISTRY


def _known_names() -> list[str]:
    """Every policy a name can ask for, built-in or plugin, without importing any."""
    plugins = {entry.name for entry in entry_points(group="slurmx.policies")}
    return sorted(set(BUILTIN_POLICIES) | set(_REGISTRY) | plugins)


def available_policies() -> list[str]:
    return _known_names()


def policy_args(name: str, params: Mapping[str, Any] | None = None, source: str = "policy",
                at: tuple[str, ...] = ()) -> PolicyArgs:
    """The validated arguments of policy `name`, without building the policy: what `slurmx config check` and the
    daemon's start-up check. Errors read `<source>: <at>.name` or `<source>: <at>.params.<key>`, one per problem."""
    if not _load(name):
        raise ConfigError([f"{source}: {'.'.join((*at, 'name'))}: {_unknown(name)}"])
    return validate_model(_REGISTRY[name][0], dict(params or {}), source, (*at, "params"))


def policy_args_model(name: str) -> type[PolicyArgs]:
    """The arguments model policy `name` registered (its JSON Schema documents `policy.params`)."""
    if not _load(name):
        raise ConfigError([f"policy.name: {_unknown(name)}"])
    return _REGISTRY[name][0]


def make_policy(name: str, params: Mapping[str, Any] | None = None, source: str = "policy") -> Policy:
    """Build a policy from its name and parameters; errors name the key and list the valid ones."""
    if not _load(name):
        raise ConfigError([f"{source}.name: {_unknown(name)}"])
    args_cls, factory = _REGISTRY[name]
    args = validate_model(args_cls, dict(params or {}), f"{source}.params")
    return factory(args)


def declared(name: str, params: Mapping[str, Any] | None = None) -> Capabilities:
    """What policy `name` with `params` declares: the policy is built to ask it (its arguments may decide)."""
    return capabilities_of(make_policy(name, params))


# What `slurmx submit` on a login node asks of the site's policy without importing it: every built-in module but
# FIFO's needs numpy and scipy, which the client install leaves out. The built-ins whose class declares
# `profiled=False`, and for those that declare a `sensitivity_kind`, the argument that sets it and its default.
# tests/unit/test_policy_registry.py holds both equal to what the classes declare.
UNPROFILED_BUILTINS = frozenset({"fifo", "fitgpp"})
SENSITIVITY_ARGUMENT: Mapping[str, tuple[str, str]] = {"synergy": ("kind", "gpu")}


def profiled(name: str) -> bool:
    """Whether policy `name` reads profiled run-time estimates (Capabilities.profiled), without importing a
    built-in's module."""
    if name in BUILTIN_POLICIES:
        return name not in UNPROFILED_BUILTINS
    return declared(name).profiled


def sensitivity_kind(name: str, params: Mapping[str, Any] | None = None) -> str | None:
    """The kind whose variants get the sensitivity search under policy `name` (Capabilities.sensitivity_kind),
    without importing a built-in's module; None for none."""
    if name not in BUILTIN_POLICIES:
        return declared(name, params).sensitivity_kind
    if name not in SENSITIVITY_ARGUMENT:
        return None
    argument, default = SENSITIVITY_ARGUMENT[name]
    kind = (params or {}).get(argument, default)
    return kind if isinstance(kind, str) else None


def _unknown(name: str) -> str:
    known = _known_names()
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    meant = f"did you mean {close[0]}? " if close else ""
    return f"unknown policy {name!r}; {meant}available: {', '.join(known)}"
