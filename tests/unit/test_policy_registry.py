"""The policy registry imports only the module of the policy a run asks for, and its table of built-in names
matches what the modules register."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from slurmx.core.validation import ConfigError
from slurmx.policies import available_policies, make_policy
from slurmx.policies import base as registry


def test_table_matches_what_each_module_registers() -> None:
    for module in sorted(set(registry.BUILTIN_POLICIES.values())):
        importlib.import_module(f"slurmx.policies.{module}")
    builtin = {name for name, (_, factory) in registry._REGISTRY.items()
               if factory.__module__.startswith("slurmx.policies")}
    assert builtin == set(registry.BUILTIN_POLICIES)
    for name, module in registry.BUILTIN_POLICIES.items():
        factory = registry._REGISTRY[name][1]
        assert factory.__module__.startswith(f"slurmx.policies.{module}"), name
    assert set(registry.BUILTIN_POLICIES) <= set(available_policies())


def test_fifo_run_imports_no_other_policy_module() -> None:
    code = ("import sys; from slurmx.policies import make_policy; make_policy('fifo'); "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('slurmx.policies.') or m == 'scipy')))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    assert "slurmx.policies.baselines" in out
    assert not {"scipy", "slurmx.policies.allox", "slurmx.policies.fitgpp", "slurmx.policies.mlfs"} & set(out)


def test_unknown_name_lists_every_policy_without_importing_them() -> None:
    with pytest.raises(ConfigError) as err:
        make_policy("fitgp")
    text = str(err.value)
    assert "did you mean fitgpp?" in text
    assert "tiresias" in text and "allox_plus" in text


# --- Capabilities: declared on each class, asked instead of a policy's name ----------------------------------------


@pytest.mark.parametrize("name", sorted(registry.BUILTIN_POLICIES))
def test_every_built_in_policy_declares_its_capabilities(name: str) -> None:
    policy = make_policy(name)
    assert isinstance(policy.capabilities, registry.Capabilities)  # type: ignore[attr-defined]
    assert registry.capabilities_of(policy) is policy.capabilities  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(registry.BUILTIN_POLICIES))
def test_what_a_login_node_reads_without_importing_equals_what_the_class_declares(name: str) -> None:
    declared = registry.declared(name)
    assert registry.profiled(name) is declared.profiled
    assert registry.sensitivity_kind(name) == declared.sensitivity_kind
    if name in registry.SENSITIVITY_ARGUMENT:  # the argument the mirror names is the one the class reads
        argument, _ = registry.SENSITIVITY_ARGUMENT[name]
        assert registry.declared(name, {argument: "cpu"}).sensitivity_kind == \
            registry.sensitivity_kind(name, {argument: "cpu"}) == "cpu"


def test_a_login_node_asks_the_capabilities_without_importing_a_policy_module() -> None:
    code = ("import sys; from slurmx.policies.base import profiled, sensitivity_kind; "
            "print(profiled('allox'), profiled('fitgpp'), sensitivity_kind('synergy', {'kind': 'cpu'})); "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('slurmx.policies.') or m == 'numpy')))")
    first, loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                   text=True).stdout.splitlines()
    assert first == "True False cpu"
    assert loaded.split() == ["slurmx.policies.base"]


def test_the_fifo_declaration_follows_its_backfill() -> None:
    strict, easy = make_policy("fifo"), make_policy("fifo", {"backfill": "easy", "backfill_depth": 7})
    assert registry.waits_for_release(strict) and registry.queue_window(strict) is None
    assert not registry.waits_for_release(easy) and registry.queue_window(easy) == 8
    assert registry.max_nodes(strict) is None and registry.places_constraints(strict)


def test_a_policy_that_declares_nothing_gets_the_cautious_defaults() -> None:
    class Bare:
        name = "bare"

        def schedule(self, view: object, now: float) -> object:
            return None

    bare = Bare()
    assert registry.capabilities_of(bare) == registry.Capabilities()  # type: ignore[arg-type]
    assert registry.max_nodes(bare) == 1 and not registry.places_constraints(bare)  # type: ignore[arg-type]
