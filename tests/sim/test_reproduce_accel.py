"""`slurmx reproduce accel --quick` end to end: every experiment runs, the bound checks hold on every batch,
the paper's numbers sit beside ours, and quick claims are not judged against the paper."""

from __future__ import annotations

import json

from click.testing import CliRunner

from slurmx.cli.reproduce import reproduce_command
from slurmx.reproduce import ReproOptions, run
from slurmx.reproduce.accel.experiment import QUICK, Task, run_task
from tests.sim.claims import assert_machine_checkable


def test_quick_reproduction_runs_every_figure_and_the_bounds_hold() -> None:
    result = run("accel", ReproOptions(quick=True, workers=1, progress=False))
    assert_machine_checkable(result)
    by_what = {c.what: c for c in result.claims}
    bound = next(c for w, c in by_what.items() if w.startswith("every batch planned on true times"))
    assert bound.holds is True and bound.paper == "<= 4 (Theorem 5)"
    n_checked = len(QUICK.fig2_jobs) * QUICK.seeds + len(QUICK.fig3_responders) * QUICK.seeds + QUICK.seeds
    assert f"({n_checked})" in bound.what  # fig2 + fig3 + fig5 at zero error
    assert next(c for w, c in by_what.items() if "non-overlapped" in w).holds is True
    papers = {c.paper for c in result.claims}
    assert {"about 32%", "about 10%", "about 5%", "+20% .. +29%", "about +11%"} <= papers
    assert all(c.holds is None for c in result.claims if c.paper in ("about 32%", "about 10%", "about 5%"))
    assert [t.title.split(":")[0] for t in result.tables] == ["Fig. 2", "Fig. 3", "Fig. 4", "Fig. 5"]
    assert len(result.tables[0].rows) == len(QUICK.fig2_jobs)
    assert not result.failed()


def test_task_results_are_deterministic_and_ours_is_never_worse_with_johnson() -> None:
    task = Task("fig2", 3, 60, 6)
    first, second = run_task(task), run_task(task)
    assert first.makespan == second.makespan
    assert first.makespan["ours_johnson"] <= first.makespan["ours"] + 1e-9
    assert 1.0 <= first.bound_ratio <= 4.0


def test_cli_only_one_experiment_with_json() -> None:
    out = CliRunner().invoke(reproduce_command, ["accel", "--quick", "--only", "fig5", "--workers", "1",
                                                 "--json", "-", "--strict"])
    assert out.exit_code == 0, out.output
    document = json.loads(out.stdout)
    assert {o["experiment"] for o in document["data"]["outcomes"]} == {"fig5"}
    bad = CliRunner().invoke(reproduce_command, ["accel", "--quick", "--only", "fig9"])
    assert bad.exit_code == 1
    assert "Error: accel: unknown experiment(s) fig9; choose from fig2, fig3, fig4, fig5" in bad.output
