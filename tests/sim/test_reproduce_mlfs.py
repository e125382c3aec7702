"""`slurmx reproduce mlfs --quick` end to end: every policy runs, every claim is printed, nothing is compared."""

from __future__ import annotations

from slurmx.reproduce import ReproOptions, run
from slurmx.reproduce.mlfs import POLICIES
from tests.sim.claims import assert_machine_checkable


def test_quick_reproduction_runs_every_policy_and_prints_the_claims() -> None:
    result = run("mlfs", ReproOptions(quick=True, workers=1, progress=False))
    assert_machine_checkable(result)
    table = result.tables[0]
    assert sorted(row[0] for row in table.rows) == sorted(POLICIES)
    assert all(row[1] == row[2] for row in table.rows)  # every job finished
    assert len(result.claims) == 16  # per baseline: JCT ordering, JCT band, deadline ordering; then 4 more
    assert all(c.holds is None for c in result.claims)  # a quick run is never compared with the paper
    assert any("0.47x" in c.paper for c in result.claims)
    assert len(result.data["runs"]) == len(POLICIES)
