"""LST assignment: the fast T_LP search agrees with plain bisection, rounding keeps the 2 T_LP bound.

Postconditions from the digest (`accel_batch.md` §6.2, C2-C3): the LP vertex has at most J + R nonzeros,
integral jobs keep their responder, every responder receives at most one split job, every chosen edge has
p_ij <= T_LP, and the rounded non-overlapped make-span is at most T_LP + max p <= 2 T_LP.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from slurmx.policies.accel_batch.lst import (
    LstError,
    greedy_assignment,
    lower_bound,
    lst_assign,
    nonoverlap_makespan,
    round_vertex,
    search_bisect,
    search_descent,
)


def _random_p(seed: int, jobs: int, responders: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    s = rng.exponential(200.0, jobs)
    rates = 1000.0 * rng.uniform(0.5, 1.5, responders)
    return s[:, None] / rates[None, :] + 0.001 * s[:, None] * rng.uniform(0.3, 3.0, (jobs, responders))


@pytest.mark.parametrize(("seed", "jobs", "responders"), [(0, 12, 3), (1, 40, 5), (2, 80, 8), (3, 25, 10)])
def test_rounding_gives_each_responder_at_most_one_split_job_within_two_t_lp(seed: int, jobs: int,
                                                                              responders: int) -> None:
    p = _random_p(seed, jobs, responders)
    solution = search_descent(p)
    support = solution.y > 1e-9
    assert support.sum() <= jobs + responders  # a vertex
    assign, n_split, used_matching = round_vertex(solution.y, p, solution.t)
    assert not used_matching
    whole = support.sum(axis=1) == 1
    assert np.array_equal(assign[whole], np.argmax(support[whole], axis=1))  # integral jobs keep their responder
    split_per_responder = np.bincount(assign[~whole], minlength=responders)
    assert split_per_responder.max(initial=0) <= 1
    assert n_split == int((~whole).sum())
    assert np.all(p[np.arange(jobs), assign] <= solution.t * (1 + 1e-9))
    assert np.all(support[np.arange(jobs), assign])  # only support edges are used
    biggest = p[np.arange(jobs), assign][~whole].max(initial=0.0)
    assert nonoverlap_makespan(p, assign) <= solution.t + biggest + 1e-7 <= 2 * solution.t + 1e-7


@pytest.mark.parametrize("seed", range(4))
def test_descent_and_plain_bisection_find_the_same_t_lp(seed: int) -> None:
    p = _random_p(seed, 20 + 10 * seed, 2 + seed)
    fast, plain = search_descent(p), search_bisect(p, rel_tol=1e-6)
    assert fast.t == pytest.approx(plain.t, rel=2e-6)
    assert fast.solves < plain.solves
    assert lower_bound(p) <= fast.t <= nonoverlap_makespan(p, greedy_assignment(p)) + 1e-9


def test_t_lp_is_a_lower_bound_on_the_integral_optimum_and_the_rounding_within_twice_it() -> None:
    for seed in range(8):
        p = _random_p(100 + seed, 6, 3)
        best = min(nonoverlap_makespan(p, np.array(a)) for a in itertools.product(range(3), repeat=6))
        result = lst_assign(p)
        assert result.t_lp <= best + 1e-9
        assert result.makespan_nonoverlap(p) <= 2 * best + 1e-9


def test_restriction_keeps_a_job_off_responders_slower_than_t() -> None:
    # One big job (10 on r0, 100 on r1) and ten small ones: unrestricted, the LP would split the big job.
    p = np.array([[10.0, 100.0]] + [[1.0, 1.0]] * 10)
    result = lst_assign(p)
    assert result.t_lp == pytest.approx(10.0)
    assert result.assignment[0] == 0
    assert result.makespan_nonoverlap(p) <= 2 * result.t_lp


def test_breakpoint_just_below_the_bound_is_exact() -> None:
    # Two jobs, two responders: p = [[2, 3], [2, 3]]. Edges at T < 3 leave both on r0 (f = 4 > T); at T = 3
    # the LP balances 2 y + 3 (1 - y) ... to 2.4; so T_LP = 3 (the breakpoint), not 2.4.
    p = np.array([[2.0, 3.0], [2.0, 3.0]])
    assert search_descent(p).t == pytest.approx(3.0)
    assert search_bisect(p, rel_tol=1e-7).t == pytest.approx(3.0, rel=1e-6)


def test_a_non_vertex_split_cannot_be_rounded_and_says_so() -> None:
    # The digest's example: three jobs each split 50/50 over the same two responders (not a vertex).
    y = np.full((3, 2), 0.5)
    with pytest.raises(LstError, match="not a vertex"):
        round_vertex(y, np.ones((3, 2)), 2.0)


def test_bad_matrices_are_rejected_with_the_shape() -> None:
    with pytest.raises(ValueError, match=r"shape \(0, 3\)"):
        lst_assign(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="finite time"):
        lst_assign(np.array([[np.inf, np.inf]]))
