"""MLFS's rules (priority terms, order, take-back, host selection, eviction, MLF-C) and the replica's MLF-H, on
hand-built cases computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slurmx.policies.mlfs.model import FloatArray, JobState, ServerState, TaskState
from slurmx.policies.mlfs.rules import (
    MlfsArgs,
    choose_server,
    eviction_candidates,
    job_priorities,
    naive_priorities,
    queue_key,
    relieve,
    system_overloaded,
    take_back,
    term_scale,
    victim_key,
)
from slurmx.reproduce.mlfs.task_mlfh import MlfH
from slurmx.reproduce.mlfs.task_model import Snapshot, TaskPlan


def _task(index: int, stage: int, frac: float, waited_s: float = 0.0, gpu: float = 0.3) -> TaskState:
    return TaskState("j", index, stage, frac, np.array([0.05, 0.05, 0.0]), 0.0 if index == 0 else gpu,
                     waited_s=waited_s)


def diamond() -> JobState:
    """Fig. 2's 5-worker DAG: t1 -> {t2, t3} -> t4 -> t5 -> PS, with given L, I, δl, S, d, r, w."""
    tasks = [_task(0, -1, 0.0), _task(1, 0, 0.4), _task(2, 1, 0.1, waited_s=120.0), _task(3, 1, 0.2),
             _task(4, 2, 0.2, waited_s=60.0), _task(5, 3, 0.1)]
    return JobState(
        job_id="j", submit=0.0, urgency=5, deadline=600.0, stages=(1, 2, 1, 1), iter_time_s=240.0,
        iterations_done=3.0, planned_iterations=8, last_drop=0.2, drop_sum=1.0, loss=1.0, loss_start=2.0,
        accuracy=0.5, accuracy_req=0.9, gpu_seconds=0.0, comm_ps_mb=50.0, comm_worker_mb=50.0, tasks=tasks)


# By hand (now = 0, minutes): L/I · δl/Σδl = 5/4 · 0.2 = 0.25, so P_ML_base = 0.25 S_k;
# d_k - t = 10 - (3 - stage) = 7, 8, 9, 10 min; r = 5 iterations x 4 min = 20 min; w = 0, 2, 0, 1, 0 min.
P_ML = {5: 0.025, 4: 0.05 + 0.8 * 0.025, 2: 0.025 + 0.8 * 0.07, 3: 0.05 + 0.8 * 0.07,
        1: 0.1 + 0.8 * (0.081 + 0.106)}
_C5 = 0.3 / 10 + 0.3 / 20
_C4 = 0.3 / 9 + 0.3 / 20 + 0.35 * 1 + 0.8 * _C5
_C2 = 0.3 / 8 + 0.3 / 20 + 0.35 * 2 + 0.8 * _C4
_C3 = 0.3 / 8 + 0.3 / 20 + 0.8 * _C4
P_C = {5: _C5, 4: _C4, 2: _C2, 3: _C3, 1: 0.3 / 7 + 0.3 / 20 + 0.8 * (_C2 + _C3)}


def test_priority_terms_on_the_diamond_dag_match_the_hand_computation() -> None:
    p = job_priorities(diamond(), 0.0, MlfsArgs())
    assert P_ML[1] == pytest.approx(0.2496)
    assert P_C[1] == pytest.approx(1.2578, abs=1e-4)
    for k in range(1, 6):
        assert p[k] == pytest.approx(0.3 * P_ML[k] + 0.7 * P_C[k], rel=1e-12)
    assert p[0] == math.inf  # the parameter server always first


def test_naive_recursion_agrees_with_the_per_stage_sums() -> None:
    job = diamond()
    assert np.allclose(job_priorities(job, 30.0, MlfsArgs())[1:], naive_priorities(job, 30.0, MlfsArgs())[1:])


def test_alpha_gamma_and_switches_isolate_the_terms() -> None:
    job = diamond()
    ml_only = job_priorities(job, 0.0, MlfsArgs(alpha=1.0))
    assert [ml_only[k] for k in range(1, 6)] == pytest.approx([P_ML[k] for k in range(1, 6)])
    flat = job_priorities(job, 0.0, MlfsArgs(alpha=1.0, gamma=0.0))
    assert [flat[k] for k in range(1, 6)] == pytest.approx([0.25 * f for f in (0.4, 0.1, 0.2, 0.2, 0.1)])
    no_urgency = job_priorities(job, 0.0, MlfsArgs(alpha=1.0, use_urgency=False))
    assert no_urgency[1] == pytest.approx(P_ML[1] / 5)
    no_deadline = job_priorities(job, 0.0, MlfsArgs(alpha=0.0, use_deadline=False, gamma=0.0))
    assert no_deadline[5] == pytest.approx(0.3 / 20)
    job.iterations_done = 0.0  # I = 1: empty Σδl, the loss factor is 1
    first = job_priorities(job, 0.0, MlfsArgs(alpha=1.0, gamma=0.0))
    assert first[1] == pytest.approx(5 * 1 * 0.4)


def test_past_deadline_and_exhausted_remaining_time_are_capped() -> None:
    job = diamond()
    job.iterations_done = 8.0
    p = job_priorities(job, 10_000.0, MlfsArgs(alpha=0.0, gamma=0.0))
    assert p[5] == pytest.approx(0.3 * 60 + 0.3 * 60)


State4 = tuple[FloatArray, FloatArray, FloatArray, FloatArray]


def _state(observed: list[list[float]], gpus: list[list[float]]) -> State4:
    o, g = np.array(observed, dtype=np.float64), np.array(gpus, dtype=np.float64)
    return o.copy(), o, g.copy(), g


def test_host_is_the_candidate_nearest_the_ideal_virtual_host() -> None:
    state = _state([[0.5, 0.5, 0.0], [0.2, 0.3, 0.0], [0.95, 0.1, 0.0]], [[0.2, 0.8], [0.5, 0.6], [0.1, 0.1]])
    demand = np.array([0.1, 0.1, 0.0])
    # U_V over the underloaded servers 0 and 1: (0.2, 0.3, 0, 0.2, 0, 0); distances² 0.13 and 0.09
    assert choose_server(demand, 0.3, np.zeros(3), 0.0, state, MlfsArgs()) == (1, 0)
    # a 0.5-GPU task would push server 1's least-loaded GPU to 1.0 > h_r: only server 0 is a candidate
    assert choose_server(demand, 0.5, np.zeros(3), 0.0, state, MlfsArgs()) == (0, 0)
    # traffic it can keep local on server 0 (U_V's traffic = 1): 0.13 + 0 beats 0.09 + 1
    assert choose_server(demand, 0.3, np.array([1.0, 0.0, 0.0]), 0.0, state, MlfsArgs()) == (0, 0)
    assert choose_server(demand, 0.3, np.array([1.0, 0.0, 0.0]), 0.0, state, MlfsArgs(use_bandwidth=False)) == (1, 0)
    assert choose_server(demand, 0.95, np.zeros(3), 0.0, state, MlfsArgs()) is None


def test_no_resource_passes_h_r_after_placement() -> None:
    state = _state([[0.85, 0.2, 0.0], [0.2, 0.2, 0.0]], [[0.0, 0.0], [0.0, 0.0]])
    assert choose_server(np.array([0.1, 0.0, 0.0]), 0.2, np.zeros(2), 0.0, state, MlfsArgs()) == (1, 0)


def test_eviction_candidates_are_the_lowest_priority_fraction() -> None:
    tasks = [(("j", i), float(p)) for i, p in enumerate([5, 1, 9, 3, 7, 2, 8, 4, 6, 10])]
    assert eviction_candidates(tasks, 0.1) == [("j", 1)]
    assert eviction_candidates(tasks, 0.25) == [("j", 1), ("j", 5), ("j", 3)]


def _server(tasks: list[TaskState]) -> ServerState:
    nominal = np.sum([t.demand for t in tasks], axis=0)
    gpu = np.zeros(2)
    for t in tasks:
        assert t.gpu is not None
        gpu[t.gpu] += t.gpu_demand
    return ServerState(0, nominal, nominal.copy(), gpu, gpu.copy())


def _running(index: int, cpu: float, gpu: int, gpu_demand: float) -> TaskState:
    return TaskState("j", index, 0, 0.1, np.array([cpu, 0.1, 0.0]), gpu_demand, server=0, gpu=gpu)


def test_relieve_takes_from_the_lowest_priorities_of_the_hot_gpu_and_stops_when_relieved() -> None:
    tasks = [_running(i, 0.1 + 0.01 * i, 0, 0.24) for i in range(1, 5)] + [_running(5, 0.1, 1, 0.2)]
    priority = {("j", 1): 4.0, ("j", 2): 1.0, ("j", 3): 2.0, ("j", 4): 3.0, ("j", 5): 0.5}
    # GPU 0 at 0.96 > 0.9; p_s = 50%: tasks 2 and 3 are eligible (task 5, lowest overall, is on the cool GPU);
    # U_o takes the max GPU use and min CPU (CPU not overloaded): task 2 (cpu 0.12) is nearer than task 3 (0.13)
    evicted = relieve(_server(tasks), tasks, priority, {}, MlfsArgs(p_s=0.5))
    assert evicted == [("j", 2)]  # 0.96 - 0.24 = 0.72: relieved after one


def test_relieve_without_a_hot_gpu_considers_every_task() -> None:
    tasks = [_running(1, 0.3, 0, 0.1), _running(2, 0.5, 1, 0.1), _running(3, 0.2, 0, 0.1)]
    priority = {("j", 1): 1.0, ("j", 2): 9.0, ("j", 3): 2.0}
    # CPU at 1.0 > 0.9: U_o = max CPU (0.5), so the biggest CPU user leaves even though its P is highest
    assert relieve(_server(tasks), tasks, priority, {}, MlfsArgs()) == [("j", 2)]


def test_system_overload_rule() -> None:
    idle = [ServerState(0, np.full(3, 0.5), np.full(3, 0.5), np.full(4, 0.5), np.full(4, 0.5))]
    busy = [ServerState(0, np.full(3, 0.95), np.full(3, 0.95), np.full(4, 0.95), np.full(4, 0.95))]
    assert system_overloaded(True, idle, MlfsArgs())
    assert not system_overloaded(False, idle, MlfsArgs())
    assert system_overloaded(False, busy, MlfsArgs())  # ‖U‖/sqrt(4) = 0.95 > h_s
    assert system_overloaded(False, idle, MlfsArgs(overload_norm="none"))  # ‖U‖ = 1.0 > 0.9 unnormalised


def _one_job_snapshot(queued: bool) -> Snapshot:
    job = diamond()
    servers = [ServerState(i, np.zeros(3), np.zeros(3), np.zeros(4), np.zeros(4)) for i in range(3)]
    if not queued:
        for t in job.tasks:
            t.server, t.gpu = 0, (None if t.is_ps else t.index % 4)
    return Snapshot(0.0, {"j": job}, servers)


def test_mlf_c_switches_jobs_only_under_overload() -> None:
    assert MlfH(MlfsArgs(mlf_c=True)).decide(_one_job_snapshot(queued=True)).stop_at_requirement == ["j"]
    assert MlfH(MlfsArgs(mlf_c=True)).decide(_one_job_snapshot(queued=False)).stop_at_requirement == []
    assert MlfH(MlfsArgs()).decide(_one_job_snapshot(queued=True)).stop_at_requirement == []


def test_mlf_h_places_a_whole_job_ps_first() -> None:
    plan = MlfH().decide(_one_job_snapshot(queued=True))
    assert set(plan.assign) == {("j", k) for k in range(6)}
    assert plan.assign[("j", 0)][1] is None  # the PS takes no GPU
    assert next(iter(plan.assign)) == ("j", 0)


def test_terms_normalised_by_their_largest_value_do_not_depend_on_the_time_unit() -> None:
    job = diamond()
    # by hand (minutes): max L/I·δl·S = 0.25 · 0.4; max 1/(d_k - t) = 1/7; 1/r = 1/20; max w = 2 min
    scale = term_scale([job], 0.0, MlfsArgs())
    assert tuple(scale) == pytest.approx((0.1, 1 / 7, 1 / 20, 2.0))
    p = job_priorities(job, 0.0, MlfsArgs(), scale)
    # sink t5: P_ML = 0.25·0.1/0.1 = 0.25; P_C = 0.3·(1/10)/(1/7) + 0.3·1 + 0.35·0/2 = 0.51
    assert p[5] == pytest.approx(0.3 * 0.25 + 0.7 * 0.51)
    in_seconds = MlfsArgs(time_unit_s=1.0, inverse_cap=3600.0)
    assert job_priorities(job, 0.0, in_seconds, term_scale([job], 0.0, in_seconds)) == pytest.approx(p)
    raw_minutes, raw_seconds = job_priorities(job, 0.0, MlfsArgs()), job_priorities(job, 0.0, in_seconds)
    ratio = raw_seconds[1:] / raw_minutes[1:]  # raw, a change of unit rescales the terms unevenly
    assert ratio.max() / ratio.min() > 100


def _solo(job_id: str, urgency: int, done: float, planned: int, running: bool) -> JobState:
    """A one-worker job (PS + worker using 0.8 of a GPU) on server 0, GPU 0 when `running`."""
    where = 0 if running else None
    tasks = [TaskState(job_id, 0, -1, 0.0, np.array([0.05, 0.05, 0.0]), 0.0, server=where),
             TaskState(job_id, 1, 0, 1.0, np.array([0.1, 0.1, 0.0]), 0.8, server=where, gpu=where)]
    return JobState(
        job_id=job_id, submit=0.0, urgency=urgency, deadline=1e7, stages=(1,), iter_time_s=60.0,
        iterations_done=done, planned_iterations=planned, last_drop=0.01, drop_sum=1.0, loss=1.0, loss_start=2.0,
        accuracy=0.5, accuracy_req=0.9, gpu_seconds=0.0, comm_ps_mb=50.0, comm_worker_mb=50.0, tasks=tasks)


def _contest(running: JobState, queued: JobState) -> Snapshot:
    """One server with one GPU: the running job's worker holds 0.8 of it, so the queued one cannot fit beside it."""
    use = np.array([0.15, 0.15, 0.0])
    server = ServerState(0, use, use.copy(), np.array([0.8]), np.array([0.8]))
    return Snapshot(0.0, {running.job_id: running, queued.job_id: queued}, [server])


def test_a_queued_job_of_higher_priority_preempts_a_running_one() -> None:
    # the running job is 50 of 1,000 iterations in (1/I small, 950 min left); the new one is fresh and short
    snapshot = _contest(_solo("old", 1, 50.0, 1000, running=True), _solo("new", 5, 0.0, 5, running=False))
    plan = MlfH().decide(snapshot)
    assert sorted(plan.to_queue) == [("old", 0), ("old", 1)]
    assert plan.assign == {("new", 0): (0, None), ("new", 1): (0, 0)}
    assert MlfH(MlfsArgs(preempt=False)).decide(snapshot) == TaskPlan()


def test_a_queued_job_of_lower_priority_preempts_nothing() -> None:
    snapshot = _contest(_solo("short", 5, 1.0, 5, running=True), _solo("long", 1, 50.0, 1000, running=False))
    assert MlfH().decide(snapshot) == TaskPlan()


def test_take_back_takes_the_lowest_ranks_until_the_unit_fits_then_puts_back_the_unneeded() -> None:
    # running units of sizes 1, 2, 3 with ranks 0.1, 0.2, 0.3; a queued unit of rank 0.5 needs 3 freed
    sizes = {"a": 1, "b": 2, "c": 3}
    freed: list[int] = [0]

    def remove_and_fit(v: str) -> bool:
        freed[0] += sizes[v]
        return freed[0] >= 3

    def put_back(v: str) -> bool:
        if freed[0] - sizes[v] >= 3:
            freed[0] -= sizes[v]
            return True
        return False

    victims = [(0.1, "a"), (0.2, "b"), (0.3, "c")]
    assert take_back(0.5, victims, remove_and_fit, put_back) == ["a", "b"]  # 1 + 2: both needed
    freed[0] = 0
    sizes["a"] = 0  # a frees nothing, b alone does not fit, c does: a and b both go back
    assert take_back(0.5, victims, remove_and_fit, put_back) == ["c"]
    freed[0] = 0
    assert take_back(0.25, victims, remove_and_fit, put_back) is None  # c ranks above the unit: never taken
    assert sorted([victim_key(0.2, 5.0, "x"), victim_key(0.2, 9.0, "y"), victim_key(0.1, 0.0, "z")]) == [
        victim_key(0.1, 0.0, "z"), victim_key(0.2, 9.0, "y"), victim_key(0.2, 5.0, "x")]
    assert sorted([queue_key(0.2, 1.0, "a"), queue_key(0.9, 5.0, "b"), queue_key(0.2, 0.5, "c")]) == [
        queue_key(0.9, 5.0, "b"), queue_key(0.2, 0.5, "c"), queue_key(0.2, 1.0, "a")]
