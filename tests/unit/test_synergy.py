"""Synergy: profiles, proportional share, PROP/GREEDY/TUNE, OPT against brute force, LP2, queue keys, rounds."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from slurmx.core.resources import Resources
from slurmx.core.validation import ConfigError
from slurmx.policies.base import make_policy
from slurmx.policies.synergy import ClusterShape, QueueState, SynergyPolicy, allocate_round, job_profile, queue_key
from slurmx.policies.synergy.mechanisms import Demand, admit_by_gpus, greedy, tune
from slurmx.policies.synergy.opt import OptJob, spread, super_machine
from slurmx.reproduce.synergy.engine_run import compare, engine_jcts
from slurmx.reproduce.synergy.round_replica import RoundJob, RoundSettings, simulate
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape
from slurmx.sim.config import EngineOptions
from slurmx.sim.engine import Engine
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.workloads.synergy import SynergySpeed

DEFAULT = ClusterShape()
ONE = ClusterShape(1, 8, 24.0, 500.0)


# ---- profiles and the proportional share --------------------------------------------------------------


def test_best_case_demand_and_speedup_from_the_released_profiles() -> None:
    assert job_profile("alexnet", 1).demand == Demand(1, 12, 125, 3, 62.5, 2.94)
    assert job_profile("res18", 1).demand == Demand(1, 9, 62.5, 3, 62.5, 2.4)
    assert job_profile("gnmt", 1).demand == Demand(1, 1, 20, 3, 62.5, 1.0)
    assert job_profile("m5", 2).demand == Demand(2, 12, 375, 6, 125, 2.5)


def test_proportional_share_is_per_gpu_of_the_server() -> None:
    # Paper §2: a 4-GPU / 16-CPU / 200 GB server gives a 1-GPU job 4 CPUs and 50 GB; ours 3 CPUs and 62.5 GB.
    d = job_profile("gnmt", 1, ClusterShape(1, 4, 16.0, 200.0)).demand
    assert (d.prop_cpus, d.prop_mem) == (4.0, 50.0)
    d = job_profile("res50", 4).demand
    assert (d.prop_cpus, d.prop_mem) == (12.0, 250.0)


def test_speedups_renormalised_for_cpu_gpu_ratios_match_the_digest() -> None:
    # App-A.2: ratio 4 alexnet 2.352, res18 1.85; ratio 5 alexnet 1.92, res18 1.568, mobilenet 1.04.
    four, five = ClusterShape(16, 8, 32.0, 500.0), ClusterShape(16, 8, 40.0, 500.0)
    assert job_profile("alexnet", 1, four).demand.speedup == pytest.approx(2.352)
    assert job_profile("res18", 1, four).demand.speedup == pytest.approx(1.846, abs=1e-3)
    assert job_profile("alexnet", 1, five).demand.speedup == pytest.approx(1.9216, abs=1e-4)
    assert job_profile("res18", 1, five).demand.speedup == pytest.approx(1.5686, abs=1e-4)
    assert job_profile("mobilenet", 1, five).demand.speedup == pytest.approx(1.0403, abs=1e-4)
    assert job_profile("res50", 1, five).demand.speedup == 1.0


def test_multi_gpu_best_case_is_capped_at_one_server() -> None:
    # 4-GPU alexnet wants 48 CPUs: capped at 24, speedup by CPU 1 + 1.94 * (24-12)/(48-12) (the digest's 1.65).
    d = job_profile("alexnet", 4).demand
    assert (d.ideal_cpus, d.ideal_mem) == (24.0, 500.0)
    assert d.speedup == pytest.approx(1 + 1.94 * 12 / 36)
    # Larger than one server: proportional, speedup 1.
    assert job_profile("alexnet", 16).demand == Demand(16, 48, 1000, 48, 1000, 1.0)


def test_opt_points_are_fair_and_not_dominated() -> None:
    pts = job_profile("res18", 1).opt.points
    assert all(w >= 1.0 for _, _, w in pts)
    assert (9.0, 62.5, 2.4) in pts and (3.0, 62.5, 1.0) in pts
    assert (12.0, 62.5, 2.4) not in pts  # more CPUs for the same throughput
    assert job_profile("gnmt", 1).opt.points == ((1.0, 20.83, 1.0),)


# ---- mechanisms on one server -------------------------------------------------------------------------


def _profiles(*models: str) -> list[Demand]:
    return [job_profile(m, 1, ONE).demand for m in models]


def test_tune_reverts_the_largest_co_located_over_allocation_until_the_job_fits() -> None:
    st = ONE.servers_state()
    allocs = tune(_profiles("alexnet", "res18", "m5", "deepspeech", "gnmt"), st)
    got = [(a.cpus_per_gpu, a.mem_per_gpu, a.at_ideal) for a in allocs if a is not None]
    # alexnet (12, 125) and res18 (9, 62.5) at best case leave 3 CPUs; m5's (6, 187.5) does not fit, so it
    # gets proportional (3, 62.5); deepspeech (3, 62.5) then finds 0 CPUs: alexnet, the largest CPU holder,
    # goes back to proportional (frees 9 CPUs, 62.5 GB) and res18 keeps its best case; gnmt takes (1, 20).
    assert got == [(3, 62.5, False), (9, 62.5, True), (3, 62.5, False), (3, 62.5, True), (1, 20, True)]
    assert (st.fg[0], st.fc[0], st.fm[0]) == (3.0, 5.0, 500 - 62.5 * 4 - 20)


def test_greedy_skips_what_tune_places() -> None:
    demands = _profiles("alexnet", "alexnet", "alexnet")
    assert [a is not None for a in greedy(demands, ONE.servers_state())] == [True, True, False]
    allocs = tune(demands, ONE.servers_state())
    assert [(a.cpus_per_gpu, a.at_ideal) for a in allocs if a is not None] == [(3, False), (12, True), (3, False)]


def test_split_jobs_keep_cpu_and_memory_proportional_to_gpus_per_server() -> None:
    shape = ClusterShape(2, 8, 24.0, 500.0)
    st = shape.servers_state()
    first = tune([job_profile("gnmt", 6, shape).demand], st)[0]
    second = tune([job_profile("res50", 4, shape).demand], st)[0]
    assert first is not None and second is not None
    assert second.shares == [(0, 2), (1, 2)]
    assert second.cpus_per_gpu == 4.0  # res50's best case per GPU on both servers
    assert (st.fc[0], st.fc[1]) == (24 - 6 - 8, 24 - 8)


@pytest.mark.parametrize("seed", range(6))
def test_tune_places_every_admitted_job_at_no_less_than_proportional(seed: int) -> None:
    rng = random.Random(seed)
    shape = ClusterShape(4, 8, 24.0, 500.0)
    models = ["alexnet", "res18", "res50", "mobilenet", "shufflenet", "gnmt", "lstm", "m5", "deepspeech"]
    queue = [job_profile(rng.choice(models), rng.choice([1, 1, 1, 2, 4, 8]), shape) for _ in range(30)]
    for mech in ("tune", "prop", "opt"):
        st = shape.servers_state()
        out = allocate_round(queue, st, mech)
        free, admitted = 32, 0
        for p in queue:
            if p.demand.gpus <= free:
                free -= p.demand.gpus
                admitted += p.demand.gpus
        assert sum(p.demand.gpus for p, r in zip(queue, out, strict=True) if r is not None) == admitted
        assert all(r[1] >= 1.0 for r in out if r is not None)
        assert min(st.fg) >= 0 and min(st.fc) >= -1e-9 and min(st.fm) >= -1e-9


# ---- OPT -----------------------------------------------------------------------------------------------


def _brute_force(jobs: list[OptJob], cpus: float, mem: float) -> float:
    best = -math.inf
    for combo in itertools.product(*(j.points for j in jobs)):
        c = sum(p[0] * j.gpus for p, j in zip(combo, jobs, strict=True))
        m = sum(p[1] * j.gpus for p, j in zip(combo, jobs, strict=True))
        if c <= cpus + 1e-9 and m <= mem + 1e-9:
            best = max(best, sum(p[2] for p in combo))
    return best


@pytest.mark.parametrize(("models", "cpus", "mem"), [
    (("alexnet", "res18", "gnmt", "m5"), 24.0, 500.0),
    (("alexnet", "alexnet", "shufflenet", "res18"), 30.0, 400.0),
    (("mobilenet", "res50", "m5", "deepspeech", "lstm"), 20.0, 600.0),
])
def test_opt_ilp_equals_brute_force(models: tuple[str, ...], cpus: float, mem: float) -> None:
    jobs = [job_profile(m, 1).opt for m in models]
    expected = _brute_force(jobs, cpus, mem)
    assert super_machine(jobs, cpus, mem).objective == pytest.approx(expected)
    assert super_machine(jobs, cpus, mem, aggregate=False).objective == pytest.approx(expected)
    assert super_machine(jobs, cpus, mem, integral=False).objective >= expected - 1e-9


def test_opt_example_by_hand() -> None:
    # Two alexnets on 24 CPUs / 500 GB: (12, 125) each -> 2.94 + 2.94 = 5.88.
    result = super_machine([job_profile("alexnet", 1).opt] * 2, 24.0, 500.0)
    assert result.objective == pytest.approx(5.88)
    assert result.choice == ((12.0, 125.0, 2.94), (12.0, 125.0, 2.94))


def test_spread_lp_splits_at_most_3s_jobs() -> None:
    rng = np.random.default_rng(3)
    demands = [(1.0, float(rng.choice([1, 3, 6, 9, 12])), float(rng.choice([20.83, 62.5, 125, 187.5])))
               for _ in range(30)]
    result = spread(demands, 4, 8.0, 96.0, 2000.0)
    assert result is not None
    assert result.fragmented <= 3 * 4
    assert np.allclose(result.x.sum(axis=0), 1.0)
    assert (result.x @ np.array([d[1] for d in demands]) <= 96.0 + 1e-6).all()
    assert spread([(1.0, 60.0, 10.0)], 2, 8.0, 24.0, 500.0) is None  # 60 CPUs exceed both servers together


# ---- queue keys ----------------------------------------------------------------------------------------


def test_ftf_serves_the_largest_finish_time_ratio_first_as_themis() -> None:
    p = job_profile("gnmt", 1)
    waited = QueueState(arrival=0.0, remaining_s=100.0, total_s=100.0, attained_s=0.0, profile=p, tiebreak=0)
    fresh = QueueState(arrival=900.0, remaining_s=100.0, total_s=100.0, attained_s=0.0, profile=p, tiebreak=1)
    themis = sorted([fresh, waited], key=lambda q: queue_key("ftf", q, 1000.0, DEFAULT, True))
    released = sorted([fresh, waited], key=lambda q: queue_key("ftf", q, 1000.0, DEFAULT, True, "released"))
    assert themis[0] is waited and released[0] is fresh


def test_srtf_divides_by_the_speedup_only_for_synergy_aware_mechanisms() -> None:
    a = QueueState(0.0, 2940.0, 2940.0, 0.0, job_profile("alexnet", 1), 0)
    g = QueueState(1.0, 1500.0, 1500.0, 0.0, job_profile("gnmt", 1), 1)
    assert queue_key("srtf", a, 0.0, DEFAULT, True) < queue_key("srtf", g, 0.0, DEFAULT, True)
    assert queue_key("srtf", a, 0.0, DEFAULT, False) > queue_key("srtf", g, 0.0, DEFAULT, False)


# ---- the round simulation and the engine ---------------------------------------------------------------


def test_rounds_credit_whole_iterations_and_finish_at_lease_end() -> None:
    job = RoundJob(0, 0.0, 1, "alexnet", 1000, 0.6)
    prop = simulate([job], RoundSettings(mechanism="prop", shape=ONE))
    tuned = simulate([job], RoundSettings(mechanism="tune", shape=ONE))
    assert prop.jct == {0: 600.0}  # floor(300 / 0.6) = 500 iterations per round
    assert tuned.jct == {0: 300.0}  # 2.94x: floor(300 / (0.6 / 2.94)) >= 1000
    assert prop.checked_rounds == 2


def test_synergy_policy_is_registered_with_typed_args() -> None:
    policy = make_policy("synergy", {"mechanism": "tune", "order": "srtf"})
    assert isinstance(policy, SynergyPolicy)
    with pytest.raises(ConfigError, match="mechanism"):
        make_policy("synergy", {"mechanism": "fast"})


def test_engine_runs_the_policy_and_matches_the_round_simulation() -> None:
    models = ["alexnet", "gnmt", "res18", "m5", "transformer", "mobilenet", "lstm", "shufflenet", "deepspeech"] * 3
    rows = [(i, 600.0 * i, m, 3000 + 700 * i) for i, m in enumerate(models)]
    jobs = []
    for i, arrival, model, iters in rows:
        duration = iters * 0.6
        jobs.append(SimJob(f"j{i}", "u", arrival, {"gpu": SimVariant("gpu", Resources(3, 64000, {"gpu": 1}), duration)},
                           speed=SynergySpeed(model, 1, "binary")))
    cluster = ModelCluster([PartitionShape("gpu", "gpu", (NodeShape(1, Resources(24, 512000, {"gpu": 8}), "n"),))])
    policy = SynergyPolicy(make_policy("synergy", {}).args).with_profiles(  # type: ignore[attr-defined]
        {f"j{i}": m for i, _, m, _ in rows})
    result = Engine(cluster, policy, jobs, EngineOptions(mode="round", period_s=300.0)).run()
    engine_mean = float(np.mean([r.finish - r.submit for r in result.jobs]))
    ours = simulate([RoundJob(i, a, 1, m, n, 0.6) for i, a, m, n in rows],
                    RoundSettings(mechanism="tune", shape=ONE, placement="consolidate"))
    assert engine_mean == pytest.approx(ours.mean_h() * 3600, rel=0.05)


def test_the_reproductions_engine_run_uses_the_registered_policy_and_takes_single_gpu_jobs() -> None:
    models = ["alexnet", "gnmt", "res18", "m5", "transformer", "mobilenet", "lstm", "shufflenet", "deepspeech"] * 2
    jobs = [RoundJob(i, 450.0 * i, 1, m, 2500 + 500 * i, 0.6, measured=i % 2 == 0) for i, m in enumerate(models)]
    two = ClusterShape(2, 8, 24.0, 500.0)
    out = compare(jobs, "tune", "fifo", two)
    assert out.measured == 9 and out.policy_calls > 0
    assert abs(out.gap) <= 0.05
    jct, _, _ = engine_jcts(jobs, "prop", "fifo", two)
    assert sorted(jct) == [i for i in range(len(jobs)) if i % 2 == 0]
    with pytest.raises(ValueError, match="single-GPU"):
        engine_jcts([RoundJob(0, 0.0, 2, "alexnet", 100, 0.6)], "tune", "fifo", two)


def test_gpu_only_admission_backfills_past_jobs_that_do_not_fit() -> None:
    assert admit_by_gpus([4, 8, 2, 1], 8) == [0, 2, 3]


def test_consolidate_picks_the_fullest_server_that_fits_and_first_fit_the_first() -> None:
    shape = ClusterShape(3, 8, 24.0, 500.0)
    for how, expected in (("first_fit", 0), ("consolidate", 1)):
        st = shape.servers_state()
        st.fg[1], st.fc[1], st.fm[1] = 2.0, 12.0, 200.0  # server 1 is nearly full but holds alexnet's best case
        allocs = tune([job_profile("alexnet", 1, shape).demand], st, how)  # type: ignore[arg-type]
        assert allocs[0] is not None and allocs[0].shares == [(expected, 1)]


def test_a_job_idle_past_the_starvation_threshold_goes_to_the_front() -> None:
    # One GPU; SRTF would keep serving the short jobs that keep arriving ahead of the long job 0.
    shape = ClusterShape(1, 1, 3.0, 62.5)
    long = RoundJob(0, 0.0, 1, "gnmt", 10_000, 0.6, measured=True)
    shorts = [RoundJob(i, 300.0 * (i - 1), 1, "gnmt", 400, 0.6, measured=False) for i in range(1, 40)]
    plain = simulate([long, *shorts], RoundSettings(mechanism="prop", order="srtf", shape=shape, starvation_s=None))
    # Idle past 7,000 s at the round of 7,200 s, job 0 goes first for good from 7,500 s for its 20 rounds (the shorts
    # queued meanwhile wait at most 6,000 s, below the threshold); without the bump it waits for all 39 shorts.
    bumped = simulate([long, *shorts], RoundSettings(mechanism="prop", order="srtf", shape=shape,
                                                     starvation_s=7000.0, after_trace="stop"))
    assert plain.jct[0] == 39 * 300 + 6000
    assert bumped.jct[0] == 7500 + 6000


def test_the_starvation_check_counts_a_job_that_runs_in_the_round_it_crosses_the_threshold() -> None:
    # One GPU, SRTF+PROP, threshold 1,000 s. Job 0 (3,000 iterations of 0.6 s: 6 rounds) runs at 0; four shorts
    # (1 round each) arriving at 300-1,200 s run ahead of it. At 1,500 s nothing else is queued, so job 0 runs,
    # idle 1,200 s since its lease ended at 300 s: the released check (every queued job, at the round's start)
    # bumps it although it runs. Six more shorts from 1,800 s then wait behind it: it finishes at 1,500 + 5 x 300.
    # Checking only the jobs left idle would miss it: the shorts would run first and the bump come at 3,000 s.
    shape = ClusterShape(1, 1, 3.0, 62.5)
    long = RoundJob(0, 0.0, 1, "gnmt", 3000, 0.6, measured=True)
    arrive = [300.0 * k for k in range(1, 5)] + [1800.0 + 300.0 * k for k in range(6)]
    shorts = [RoundJob(i + 1, a, 1, "gnmt", 500, 0.6, measured=False) for i, a in enumerate(arrive)]
    run = simulate([long, *shorts], RoundSettings(mechanism="prop", order="srtf", shape=shape, starvation_s=1000.0,
                                                  after_trace="stop"))
    assert run.jct[0] == 3000


def test_arrivals_go_on_after_the_trace_until_the_measured_jobs_are_done() -> None:
    # One GPU, SRTF+PROP, 500 iterations a round. Trace: job 0 (measured, 2,000 iterations) at 0, job 1 (500) at
    # 300 s. "stop": job 0 runs at 0, job 1 at 300 (300 s left against 900 s), job 0 again from 600: done at 1,500.
    # "repeat" (the released runner generates jobs until the measured ones finish): the trace again every 300 s
    # (its last arrival), so a long and a short copy arrive every round and a short always runs ahead of job 0.
    # Job 0 (idle since 300 s) and copy 2 (arrived at 300 s) are bumped at the round of 2,100 s (threshold
    # 1,500 s); job 0 has less left, runs from 2,400 s for its 3 rounds and finishes at 3,300 s.
    shape = ClusterShape(1, 1, 3.0, 62.5)
    trace = [RoundJob(0, 0.0, 1, "gnmt", 2000, 0.6, measured=True), RoundJob(1, 300.0, 1, "gnmt", 500, 0.6, False)]
    stop = simulate(trace, RoundSettings(mechanism="prop", order="srtf", shape=shape, starvation_s=1500.0,
                                         after_trace="stop"))
    repeat = simulate(trace, RoundSettings(mechanism="prop", order="srtf", shape=shape, starvation_s=1500.0))
    assert stop.jct == {0: 1500}
    assert repeat.jct == {0: 3300}
    assert repeat.rounds == 11  # rounds 0, 300, ..., 3,000


def test_rounds_compare_tune_with_opt_on_the_same_jobs() -> None:
    # Three 1-GPU alexnet jobs on one 24-CPU server. TUNE: two at best case (12 CPUs, 2.94x); the third reverts
    # the first to proportional and runs there: 2.94 + 1 + 1 = 4.94. OPT's LP1 splits the 24 CPUs 12 + 6 + 6:
    # 2.94 + 1.75 + 1.75 = 6.44. PROP: 3.0.
    jobs = [RoundJob(i, 0.0, 1, "alexnet", 1, 0.6) for i in range(3)]
    tuned = simulate(jobs, RoundSettings(mechanism="tune", shape=ONE, compare_opt=True)).opt_compare
    prop = simulate(jobs, RoundSettings(mechanism="prop", shape=ONE, compare_opt=True)).opt_compare
    assert tuned is not None and prop is not None
    assert (tuned.rounds, tuned.within_10pct) == (1, 0)
    assert (tuned.ours, tuned.opt, tuned.prop) == pytest.approx((4.94, 6.44, 3.0))
    assert tuned.ratio == pytest.approx(4.94 / 6.44) and tuned.worst == pytest.approx(4.94 / 6.44)
    assert tuned.gain_captured == pytest.approx(1.94 / 3.44)
    assert prop.ratio == pytest.approx(3.0 / 6.44) and prop.gain_captured == 0.0
    assert simulate(jobs, RoundSettings(mechanism="tune", shape=ONE)).opt_compare is None


def test_a_measured_sensitivity_sizes_the_best_case_at_its_knee() -> None:
    """slurmxd's search on a 4-CPU, 2-GPU server: a 1-GPU job whose throughput rises up to 3 CPUs and stays flat
    (proportional share: 2 CPUs) gets a best case of 3 CPUs and a speedup of 60/40."""
    from slurmx.policies.synergy.decisions import measured_profile

    shape = ClusterShape(servers=2, gpus=2, cpus=4.0, mem_gb=8.0)
    profile = measured_profile(((1, 20.0), (2, 40.0), (3, 59.0), (4, 60.0)), 1, shape)
    assert (profile.demand.ideal_cpus, profile.demand.prop_cpus) == (3.0, 2.0)
    assert profile.demand.speedup == pytest.approx(59.0 / 40.0)
    assert profile.demand.ideal_mem == profile.demand.prop_mem == 4.0  # memory is not measured
    flat = measured_profile(((1, 50.0), (2, 50.0), (4, 51.0)), 1, shape)  # insensitive: best case below prop
    assert flat.demand.ideal_cpus == 1.0 and flat.demand.speedup == 1.0
    from slurmx.policies.synergy.decisions import insensitive_profile

    assert measured_profile((), 1, shape) == insensitive_profile(1, shape)  # nothing measured: proportional
    assert measured_profile(((4, 1.0),), 3, shape) == insensitive_profile(3, shape)  # more GPUs than a server


def test_the_policy_starts_a_measured_group_with_its_knee_cpus() -> None:
    from slurmx.core.actions import Start
    from slurmx.core.model import ClusterView, Group, JobClass, Node, Partition, Variant, VariantState
    from slurmx.core.resources import Resources

    nodes = {n: Node(n, ("gpu",), Resources(4, 8000, {"gpu": 2}), Resources(), "idle") for n in ("g1", "g2")}
    request = Resources(2, 4000, {"gpu": 1})

    def group(gid: str, rates: tuple[tuple[int, float], ...]) -> Group:
        variant = Variant(gid, "gpu", 1, VariantState.HELD, request, "gpu", estimate_s=600.0, cpu_rates=rates)
        return Group(gid, gid, "alice", JobClass.BE, (variant,), submit_time=0.0)

    view = ClusterView(10.0, nodes, {"gpu": Partition("gpu", ("g1", "g2"))},
                       {"a": group("a", ((1, 20.0), (2, 40.0), (3, 59.0), (4, 60.0))), "b": group("b", ())},
                       {"gpu": "gpu"})
    plan = make_policy("synergy", {"mechanism": "tune"}).schedule(view, 10.0)
    sizes = {a.group_id: a.alloc.cpus for a in plan.actions if isinstance(a, Start) and a.alloc is not None}
    assert sizes == {"a": 3, "b": 2}
