"""The "add a policy" walk-through (docs/add-a-policy.md) holds: its example, one file plus an entry point, is found
by name, decides alike in the simulator and through the daemon (the parity harness), and runs from `slurmx sim run`.

The entry point is registered as an installed package registers it: a `.dist-info` folder with `entry_points.txt`
on the import path, read by `importlib.metadata` (what `pip install` of the plugin would leave).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmx.cli import app
from slurmx.policies import available_policies, base
from slurmx.policies.base import capabilities_of, make_policy
from tests.parity.harness import differences, run_both
from tests.parity.test_parity import KINDS, _trace

EXAMPLE = Path(__file__).parents[2] / "examples" / "policies"
NAME = "shortest-first"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The example as a plugin package would install it; unregistered and unimported afterwards."""
    info = tmp_path / "site" / "slurmx_example_policies-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: slurmx-example-policies\nVersion: 0.1\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[slurmx.policies]\n{NAME} = shortest_first\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.syspath_prepend(str(EXAMPLE))
    yield
    base._REGISTRY.pop(NAME, None)  # only the example's entry: policies imported meanwhile stay registered
    sys.modules.pop("shortest_first", None)


@pytest.mark.usefixtures("installed")
def test_the_example_is_found_by_name_and_declares_what_it_needs() -> None:
    assert NAME in available_policies()
    policy = make_policy(NAME, {"max_starts": 5})
    assert capabilities_of(policy).max_nodes == 1 and capabilities_of(policy).profiled


@pytest.mark.usefixtures("installed")
@pytest.mark.parametrize("kinds", KINDS, ids=len)
def test_the_example_decides_alike_in_the_simulator_and_through_the_daemon(kinds: tuple[str, ...],
                                                                          tmp_path: Path) -> None:
    runs = run_both(NAME, _trace(kinds), kinds, tmp_path)
    assert runs.sim.records, "the trace made the policy do nothing"
    assert differences(runs) == []


@pytest.mark.usefixtures("installed")
def test_the_example_runs_from_the_command_line(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(f"""seed: 1
cluster:
  partitions:
    - {{name: gpu, kind: gpu, nodes: 2, cpus: 32, mem: 256G, gres: "gpu:8"}}
policy: {{name: {NAME}}}
workload: {{generator: fitgpp, params: {{n_jobs: 200, nodes: 2}}}}
mode: event
""", encoding="utf-8")
    result = CliRunner().invoke(app.cli, ["sim", "run", str(config), "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    assert "200 completed" in result.output
