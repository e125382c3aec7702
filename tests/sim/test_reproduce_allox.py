"""`slurmx reproduce allox`: the quick run end to end, its claims, and behaviour that holds on a small instance."""

from __future__ import annotations

import pytest

from slurmx.core.model import JobClass
from slurmx.core.resources import Resources
from slurmx.reproduce import Reproduction, ReproOptions, UnknownPaper, run
from slurmx.reproduce.allox.experiment import (
    EXPERIMENTS,
    FULL,
    STORED_CODE,
    experiment_specs,
    progress_spread,
)
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.metrics import JobRecord
from tests.sim.claims import assert_machine_checkable


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Reproduction:
    plots = tmp_path_factory.mktemp("plots")
    return run("allox", ReproOptions(quick=True, workers=1, progress=False, plot_dir=plots))


def test_quick_run_reports_every_experiment_with_well_formed_claims(quick: Reproduction) -> None:
    assert_machine_checkable(quick)
    assert quick.quick and quick.paper == "allox"
    ran = set(EXPERIMENTS) - {"authors"}  # the authors' input is outside the repository: full runs only
    assert ran <= set(quick.data) and "authors" not in quick.data
    assert any(c.startswith("authors: skipped (quick run") for c in quick.conditions)
    prefixes = {c.what.split(":")[0] for c in quick.claims}
    assert prefixes == ran
    for claim in quick.claims:
        assert claim.paper and claim.ours
        assert claim.holds in (True, False, None)
        assert claim.holds is None or claim.check  # a check that is evaluated says what it evaluates
    reductions = [c.paper for c in quick.claims if c.what.startswith("main: AlloX's JCT reduction")]
    assert reductions == ["95% (§5.2.2)", "84% (§5.2.2)", "88% (§5.2.2)", "53% (§5.2.2)"]
    assert any("Google" in a for a in quick.assumptions)
    assert {t.title.split(":")[0] for t in quick.tables} == ran
    assert sorted(p.name for p in quick.figures) == ["allox_alpha.png", "allox_jct_cdf.png"]
    assert all(p.stat().st_size > 1000 for p in quick.figures)


def test_shared_runs_are_simulated_once(quick: Reproduction) -> None:
    # main 7 + alpha 2 more + error 2x3 more + overhead 2x3 more (DRFF's overhead is always 0): 21 distinct runs
    assert quick.data["runs"] == 7 + 2 + 6 + 6
    assert quick.data["alpha"]["mean_jct"][0] == quick.data["main"]["mean_jct"]["allox"]
    assert len(set(quick.data["overhead"]["mean_jct"]["drff"])) == 1


def test_small_instance_allox_beats_the_static_split_and_drfa_and_profiling_costs_time(quick: Reproduction) -> None:
    """On the quick workload (150 jobs, one seed) the matching beats ES's static split and DRFA's one converted
    resource by a wide margin, and a 15% profiling overhead delays AlloX's jobs against none."""
    jct = quick.data["main"]["mean_jct"]
    assert jct["allox"] < 0.8 * jct["es"]
    assert jct["allox"] < 0.8 * jct["drfa"]
    overhead = quick.data["overhead"]["mean_jct"]
    assert overhead["allox"][-1] > overhead["allox"][0] + 10  # 15% of a 40-450 unit CPU time, on every job


def test_unknown_experiment_is_a_one_line_error() -> None:
    with pytest.raises(UnknownPaper, match=r"unknown experiment.*choose from authors, main, alpha, error, overhead"):
        run("allox", ReproOptions(quick=True, workers=1, progress=False, only=("mian",)))


def test_the_authors_input_also_runs_es_and_drfa_as_the_stored_code_has_them() -> None:
    specs = experiment_specs("authors", FULL, range(1))
    stored = {s.policy: s for s in specs if s.variant == STORED_CODE}
    assert sorted(stored) == ["drfa", "es"] and len(specs) == 9
    jobs = [_job("j1", "u1", 10.0, 70.0), _job("j2", "u2", 10.0, 30.0)]
    assert stored["es"].config(jobs).policy.params == {"split": "online"}
    assert stored["drfa"].config(jobs).policy.params == {"beta": {"cpu": 1.0, "gpu": 69.0 / 32}}
    paper = next(s for s in specs if s.policy == "drfa" and not s.variant)
    assert paper.config(jobs).policy.params == {"beta": {"cpu": 1.0, "gpu": 5.0}}  # the average speedup


def _job(job_id: str, user: str, gpu_s: float, cpu_s: float) -> SimJob:
    variants = {"gpu": SimVariant("gpu", Resources(1, 2048, {"gpu": 1}), gpu_s),
                "cpu": SimVariant("cpu", Resources(32, 2048), cpu_s)}
    return SimJob(job_id, user, 0.0, variants)


def _record(job_id: str, user: str, submit: float, start: float, finish: float, kind: str) -> JobRecord:
    return JobRecord(job_id, user, JobClass.BE, submit, start, finish, finish - start, kind, 0)


def test_progress_spread_is_the_time_averaged_std_of_speedup_discounted_shares() -> None:
    # a: GPU-favoured (5 vs 20) runs on the GPU over [0, 10): value 1/20. b: runs on the CPU over [0, 10) with
    # times 5 (GPU) and 20 (CPU): value 1/20 * 5/20 = 1/80. c arrives at 10 (horizon = last arrival = 10).
    jobs = [_job("a", "u", 5, 20), _job("b", "v", 5, 20), _job("c", "w", 5, 20)]
    records = [_record("a", "u", 0, 0, 10, "gpu"), _record("b", "v", 0, 0, 10, "cpu"),
               _record("c", "w", 10, 10, 15, "gpu")]
    spread = progress_spread(jobs, records)
    gap = 1 / 20 - 1 / 80
    assert spread == pytest.approx(gap / 2**0.5, rel=1e-12)  # sample std of two values = |difference| / sqrt 2


def test_progress_spread_is_zero_with_one_active_user() -> None:
    jobs = [_job("a", "u", 5, 20), _job("b", "u", 5, 20)]
    records = [_record("a", "u", 0, 0, 10, "gpu"), _record("b", "u", 5, 10, 30, "cpu")]
    assert progress_spread(jobs, records) == 0.0
