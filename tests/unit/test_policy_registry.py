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
