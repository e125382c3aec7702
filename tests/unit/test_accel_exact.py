"""Ground truth on tiny batches (J <= 6, R <= 3): the corrected MILP and brute force agree on OPT, and the
4-approximation (either order) stays within 4 OPT, as do SCT and MMI within their trivial bounds (digest C1, C5).
"""

from __future__ import annotations

import numpy as np
import pytest

from slurmx.policies.accel_batch import overlap_lower_bound, zhao_schedule
from slurmx.policies.accel_batch.exact import brute_force_optimum, milp_optimum
from slurmx.policies.accel_batch.model import BatchInstance


def _tiny(seed: int) -> BatchInstance:
    rng = np.random.default_rng(seed)
    jobs, responders = int(rng.integers(3, 7)), int(rng.integers(1, 4))
    sizes = rng.exponential(200.0, jobs)
    rates = 1000.0 * rng.uniform(0.5, 1.5, responders)
    return BatchInstance(sizes, rates, 0.001 * sizes[:, None] * rng.uniform(0.3, 3.0, (jobs, responders)))


@pytest.mark.parametrize("seed", range(4))
def test_milp_and_brute_force_agree_on_opt(seed: int) -> None:
    inst = _tiny(seed)
    assert milp_optimum(inst) == pytest.approx(brute_force_optimum(inst), rel=1e-6)


def test_milp_counts_the_jobs_own_transfer() -> None:
    # The digest's counterexample on one responder: OPT is Johnson's 12.1 (with `l < k` it would be lower).
    inst = BatchInstance(np.array([1.0, 2.0]), np.array([1.0]), np.array([[0.1], [10.0]]))
    assert milp_optimum(inst) == pytest.approx(12.1)
    assert brute_force_optimum(inst) == pytest.approx(12.1)


def test_the_4_approximation_holds_against_the_true_optimum() -> None:
    worst = 0.0
    for seed in range(20):
        inst = _tiny(1000 + seed)
        opt = brute_force_optimum(inst)
        for order in ("mttf", "johnson"):
            schedule, lst = zhao_schedule(inst, order)
            span = schedule.makespan(inst)
            assert overlap_lower_bound(inst, lst.t_lp) <= opt + 1e-9
            assert lst.t_lp <= 2 * opt + 1e-9  # T_LP <= OPT_nonoverlap <= 2 OPT
            assert opt - 1e-9 <= span <= 4 * opt + 1e-9
            worst = max(worst, span / opt)
    assert worst < 2.0  # the digest's prototype saw at most 1.66 on such instances


def test_brute_force_refuses_instances_too_big_to_enumerate() -> None:
    big = BatchInstance(np.ones(20), np.ones(3), np.ones((20, 3)))
    with pytest.raises(ValueError, match="too many"):
        brute_force_optimum(big)
