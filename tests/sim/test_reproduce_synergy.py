"""`slurmx reproduce synergy --quick`: the whole pipeline, small, with every invariant checked every round."""

from __future__ import annotations

from collections import Counter

import pytest

from slurmx.policies.synergy.profiles import MODELS
from slurmx.reproduce import UnknownPaper
from slurmx.reproduce.base import ReproOptions
from slurmx.reproduce.synergy import EXPERIMENTS, reproduce
from slurmx.reproduce.synergy.experiment import PEER_JOBLIST, W2, RunSpec, peer_jobs, run_one
from slurmx.reproduce.synergy.report import ENGINE_CHECK
from tests.sim.claims import assert_machine_checkable


def test_quick_reproduction_runs_every_experiment_and_checks_the_invariant() -> None:
    rep = reproduce(ReproOptions(quick=True, workers=1, progress=False))
    assert_machine_checkable(rep)
    titles = [t.title for t in rep.tables]
    assert len(titles) == len(EXPERIMENTS) - 1  # philly reads a file outside the repository: full runs only
    assert any(c.startswith("philly: skipped (quick run") for c in rep.conditions)
    invariant = [c for c in rep.claims if c.check == "checked every round"]
    assert len(invariant) == 1 and invariant[0].holds is True
    assert "0 violations" in invariant[0].ours
    # The registered policy in the engine agrees with the replica on the same trace, at any size.
    engine = [c for c in rep.claims if c.check == ENGINE_CHECK]
    assert len(engine) == 2 and all(c.holds is True for c in engine)
    assert {r["mechanism"] for r in rep.data["engine"]} == {"prop", "tune"}
    # Quick runs are too small to compare with the paper: the other claims are printed but not judged.
    assert all(c.holds is None for c in rep.claims if c is not invariant[0] and c not in engine)
    runs = rep.data["runs"]
    assert {r["mechanism"] for r in runs} == {"prop", "greedy", "tune", "opt"}
    # TUNE never loses to PROP on the same trace and policy, and OPT bounds TUNE.
    by_key = {(r["trace"], r["order"], r["load"], r["split"], r["multi_gpu"], r["cpus"], r["seed"], r["mechanism"]):
              r for r in runs}
    for key, r in by_key.items():
        if key[-1] == "tune":
            prop = by_key.get((*key[:-1], "prop"))
            if prop is not None:
                assert r["mean_h"] <= prop["mean_h"] + 1e-9
            opt = by_key.get((*key[:-1], "opt"))
            if opt is not None:
                assert opt["mean_h"] <= r["mean_h"] + 1e-9


def test_single_experiment_and_unknown_names() -> None:
    with pytest.raises(UnknownPaper, match="headline"):
        reproduce(ReproOptions(quick=True, workers=1, progress=False, only=("fig99",)))


def test_a_tiny_static_run_finishes_every_job() -> None:
    spec = RunSpec("tune", "fifo", "static", 1.0, (60.0, 30.0, 10.0), servers=1, n_jobs=12, window=(0, 12))
    out = run_one(spec)
    assert out.makespan_h > 0 and out.checked_rounds == out.rounds


@pytest.mark.skipif(not PEER_JOBLIST.exists(), reason="../shared/peers not present")
def test_w2_job_list_keeps_the_authors_arrivals_and_durations_with_w2_models() -> None:
    w1, w2 = peer_jobs((4000, 5000)), peer_jobs((4000, 5000), W2)
    assert len(w1) == len(w2) == 6925
    assert [j.arrival for j in w1] == [j.arrival for j in w2]
    assert [j.measured for j in w1] == [j.measured for j in w2]
    tasks = Counter(MODELS[j.model].task for j in w2)
    assert tasks == {"image": 3463, "speech": 3462}  # 50/50, no language model; the first job takes image
    assert [j.model for j in w2[:4]] == ["alexnet", "m5", "res18", "deepspeech"]
    for a, b in zip(w1, w2, strict=True):  # the same duration at the proportional share, to one iteration
        assert abs(a.total_iters * a.iter_time_s - b.total_iters * b.iter_time_s) < b.iter_time_s
        if a.model == b.model:
            assert a.total_iters == b.total_iters
