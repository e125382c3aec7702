"""The fidelity command's pure parts: the workload, the model of the live cluster, the comparison."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from slurmx.cli.fidelity import fidelity_command
from slurmx.core.model import JobClass, Node, Partition
from slurmx.core.resources import Resources
from slurmx.daemon.loop import acquire_lock
from slurmx.fidelity import compare, mixed_workload, sim_outcome
from slurmx.fidelity.compare import Outcome, model_of
from tests.unit.test_daemon import SITE


def test_the_workload_is_deterministic_shaped_to_the_site_and_minute_scale() -> None:
    jobs = mixed_workload(SITE, ("cpu", "gpu"), groups=30, seed=3)
    assert jobs == mixed_workload(SITE, ("cpu", "gpu"), groups=30, seed=3)
    assert jobs != mixed_workload(SITE, ("cpu", "gpu"), groups=30, seed=4)
    assert [j.submit_time for j in jobs] == sorted(j.submit_time for j in jobs) and jobs[0].submit_time == 0
    for j in jobs:
        assert set(j.variants) == {"cpu", "gpu"}
        assert j.variants["gpu"].request.gres == {"gpu": 1}
        assert 5 <= j.variants["gpu"].duration_s <= j.variants["cpu"].duration_s <= 120
        assert j.variants["cpu"].estimate_s == j.variants["cpu"].duration_s
    assert {j.job_class for j in mixed_workload(SITE, ("cpu",), 50, 0, te_fraction=0.5)} == {JobClass.TE, JobClass.BE}
    scaled = mixed_workload(SITE, ("cpu",), 5, 0, time_scale=0.1)
    assert max(j.variants["cpu"].duration_s for j in scaled) <= 12


def test_the_model_of_the_live_cluster_and_the_comparison() -> None:
    nodes = [Node("c1", ("cpu",), Resources(4, 8000), Resources(), "IDLE"),
             Node("c2", ("cpu",), Resources(2, 4000), Resources(), "IDLE"),
             Node("g1", ("gpu",), Resources(4, 8000, {"gpu": 2}), Resources(), "IDLE")]
    cluster = model_of(SITE, nodes, [Partition("cpu", ("c1", "c2"), "cpu"), Partition("gpu", ("g1",), "gpu")])
    assert sorted(cluster.resources(n.capacity).cpus for n in cluster.nodes) == [2, 4, 4]
    jobs = mixed_workload(SITE, ("cpu", "gpu"), groups=8, seed=1)
    sim = sim_outcome(SITE, cluster, jobs)
    assert set(sim.groups) == {j.job_id for j in jobs}
    late = Outcome({g: (s, start + 2, end + 2, kind) for g, (s, start, end, kind) in sim.groups.items()})
    result = compare(sim, late)
    (name, s, v, diff), *_ = result.rows()
    assert name == "average JCT (s)" and v == s + 2 and diff > 0
    assert result.same_start_order() and result.first_order_difference() is None and result.same_kinds() == 1.0


def test_an_output_path_is_checked_before_the_long_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(fidelity_command, ["mixed", "--site", str(tmp_path / "none.yaml"),
                                                   "--json", str(tmp_path / "missing" / "x.json")])
    assert result.exit_code == 1
    assert result.output == (f"Error: --json {tmp_path / 'missing' / 'x.json'}: {tmp_path / 'missing'} does not "
                             "exist; create the folder or pass another path\n")


def test_the_live_run_refuses_to_run_beside_a_slurmxd(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster: {{name: t}}\nresources: {{cpu: {{partition: cpu, cpus: 1, mem: 500M}}}}\n"
                    f"daemon: {{state_dir: {tmp_path / 'state'}}}\n")
    handle = acquire_lock(tmp_path / "state")
    try:
        result = CliRunner().invoke(fidelity_command, ["mixed", "--site", str(site)])
    finally:
        handle.close()
    assert result.exit_code == 1
    assert "slurmxd is running on this site" in result.output and "stop it first" in result.output


def test_the_live_run_refuses_a_queue_holding_other_slurmx_groups() -> None:
    import click
    import pytest

    from slurmx.cli.fidelity import _check_no_other_groups
    from slurmx.core.model import VariantState
    from tests.unit.test_daemon import FakeSlurm, job

    _check_no_other_groups(FakeSlurm([job(1, None), job(2, "done", state=VariantState.COMPLETED)]))  # type: ignore[arg-type]
    with pytest.raises(click.ClickException, match=r"1 slurmx group\(s\) are in the queue \(queued\)"):
        _check_no_other_groups(FakeSlurm([job(3, "queued")]))  # type: ignore[arg-type]
