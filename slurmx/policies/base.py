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
from importlib.metadata import entry_points
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict

from slurmx.core.actions import Plan
from slurmx.core.model import ClusterView, Variant
from slurmx.core.validation import ConfigError, validate_model

__all__ = ["Policy", "PolicyArgs", "available_policies", "can_place", "make_policy", "max_nodes",
           "places_constraints", "policy_args",
           "policy_args_model", "queue_window", "register", "waits_for_release"]


class PolicyArgs(BaseModel):
    """Base of every policy's argument class: typed, frozen, unknown keys rejected with the valid ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@runtime_checkable
class Policy(Protocol):
    """What the daemon and the simulator call."""

    name: ClassVar[str]

    def schedule(self, view: ClusterView, now: float) -> Plan: ...


def max_nodes(policy: Policy) -> int | None:
    """How many nodes the policy can start one job on: what its class declares as `max_nodes` (None: any), else 1.

    Most policies place a job on one node (the papers' model); a run refuses, before it starts, a workload with
    a wider variant, instead of failing on the first `Start` that names one node for it, hours into a replay."""
    declared: int | None = getattr(policy, "max_nodes", 1)
    return declared


def places_constraints(policy: Policy) -> bool:
    """Whether the policy places a variant only where its `placement` admits (features, the user's node lists,
    whole nodes): what its class declares as `places_constraints`, else False. A policy that does not is never
    shown a group with such a variant; the cycle leaves those to one that does (`cycle/handover.py`)."""
    declared: bool = getattr(policy, "places_constraints", False)
    return declared


def can_place(policy: Policy, variants: Iterable[Variant]) -> bool:
    """Whether the policy can place every one of a group's variants as it asks (node count and placement)."""
    widest = max_nodes(policy)
    placing = places_constraints(policy)
    for variant in variants:
        if widest is not None and variant.node_count > widest:
            return False
        if not placing and not variant.placement.anywhere:
            return False
    return True


def waits_for_release(policy: Policy) -> bool:
    """Whether the policy, once it leaves groups waiting, can start none of them until resources are given back
    or an older group appears (arrivals behind the queue change nothing): what its class declares, else False.

    The simulator then does not ask it again at an instant that brought only new arrivals; the plan it would
    have returned is empty, so the run is the same, with fewer calls (strict FIFO under a long queue)."""
    declared: bool = getattr(policy, "waits_for_release", False)
    return declared


def queue_window(policy: Policy) -> int | None:
    """How many pending groups, from the head of the queue, one decision of the policy reads at most, when its
    plan depends on nothing else that time changes but the running jobs' expected ends: what its class declares
    as `queue_window`, else None (no such bound).

    A decision that changed nothing, with at least that many groups waiting, would then be repeated unchanged
    at an instant that brought only arrivals (they queue past the window), gave no room back and found no job
    running past its expected end; the simulator does not ask it (EASY backfill under a long queue)."""
    declared: int | None = getattr(policy, "queue_window", None)
    return declared


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


def _unknown(name: str) -> str:
    known = _known_names()
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    meant = f"did you mean {close[0]}? " if close else ""
    return f"unknown policy {name!r}; {meant}available: {', '.join(known)}"
