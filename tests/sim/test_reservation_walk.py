"""EASY's reservation for a blocked head (`policies.reservation.reserve`) against a plain computation written here.

The walk reads the running jobs by expected end and keeps two integers per node for a request of CPUs and memory
(the fast path), or `Resources` per node otherwise. The reference knows nothing of either: for every node of the
kind it adds the jobs on that node back one by one in end order and notes the first time the head's request fits;
the head gets the `node_count` earliest of those times (by name on a tie). Checked on random running sets and heads
(wide, partial nodes, GRES on the nodes, overdue jobs, jobs that never end, the plan's own starts), and on whole
replays: the engine's schedule with the walk equals the schedule with the plain computation, job by job.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.core.model import ClusterView, Group, JobClass, KindName, Node, Partition, Variant, VariantState
from slurmx.core.placement import ANYWHERE, Placement
from slurmx.core.resources import Resources
from slurmx.policies import make_policy
from slurmx.policies import reservation as reservation_module
from slurmx.policies.reservation import Started, reserve
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.metrics import SimResult
from slurmx.sim.traces import load_trace
from tests.sim import run

NOW = 1000.0
KTH = Path(__file__).resolve().parents[3] / "shared" / "traces" / "pwa_swf" / "KTH-SP2-1996-2.1-cln.swf.gz"


def _plain_earliest(view: ClusterView, kind: KindName, variant: Variant, taken: dict[str, Resources],
                    started: list[Started], now: float, before: float) -> list[tuple[float, str, Resources]] | None:
    """Every node of `kind`, each with every job on it in end order: the first time its room holds the need."""
    jobs: dict[str, list[tuple[float, float, str, Resources]]] = {}  # node -> (end, submit, id, freed)
    for group in view.running_groups():
        ran = group.running_variant()
        assert ran is not None and ran.start_time is not None
        end = math.inf if ran.estimate_s is None or not math.isfinite(ran.estimate_s) else \
            ran.start_time + ran.estimate_s
        for name in ran.nodes:
            jobs.setdefault(name, []).append((end, group.submit_time, group.group_id, ran.request))
    for i, (name, held, end) in enumerate(started):  # after the running jobs that end at the same time
        jobs.setdefault(name, []).append((end, math.inf, f"~{i:09d}", held))
    ready: list[tuple[float, str, Resources]] = []
    for node in view.nodes_of_kind(kind):
        if not node.is_usable:
            continue
        if not variant.placement.admits(node.name, node.features):
            continue
        need = node.capacity if variant.placement.exclusive else variant.request
        if not variant.request.fits_in(node.capacity):
            continue
        room = node.free - taken[node.name] if node.name in taken else node.free
        for end, _, _, freed in [(now, 0.0, "", Resources()), *sorted(jobs.get(node.name, []))]:
            if math.isinf(end):
                break
            room = room + freed
            if need.fits_in(room):
                ready.append((max(end, now), node.name, room))
                break
    ready.sort(key=lambda r: (r[0], r[1]))
    chosen = ready[:variant.node_count]
    if len(chosen) < variant.node_count or chosen[-1][0] >= before:
        return None
    return chosen


_GRES = st.sampled_from([{}, {}, {"gpu": 2}])


@st.composite
def _cluster_and_head(draw: st.DrawFn) -> tuple[ClusterView, Group, dict[str, Resources], list[Started]]:
    """Two kinds of 1-14 nodes (8 CPUs, 32 GB, some with GPUs), filled by running jobs of 1-5 nodes with partial
    or whole-node requests, estimates that tie, have passed (overdue) or are unknown; a few starts of the plan
    being built; a head of up to 6 nodes, on one kind or both, with or without a GPU or whole nodes."""
    cap_cpus, cap_mem = 8, 32_000
    kinds: dict[str, list[str]] = {"cpu": [f"c{i:02d}" for i in range(draw(st.integers(1, 14)))],
                                   "big": [f"b{i:02d}" for i in range(draw(st.integers(1, 6)))]}
    gres = {n: draw(_GRES) for names in kinds.values() for n in names}
    used = {n: [0, 0] for names in kinds.values() for n in names}
    groups: list[Group] = []
    for i in range(draw(st.integers(0, 24))):
        kind = draw(st.sampled_from(sorted(kinds)))
        width = draw(st.integers(1, 5))
        cpus = draw(st.sampled_from([1, 2, 3, 4, 8]))
        mem = draw(st.sampled_from([1000, 4000, 16_000, 32_000]))
        on = [n for n in kinds[kind] if used[n][0] + cpus <= cap_cpus and used[n][1] + mem <= cap_mem][:width]
        if len(on) < width:
            continue
        for n in on:
            used[n][0] += cpus
            used[n][1] += mem
        estimate = draw(st.one_of(st.none(), st.sampled_from([100.0, 200.0, 300.0, math.inf]),
                                  st.floats(1, 2000, allow_nan=False)))
        start = NOW - draw(st.sampled_from([0.0, 50.0, 150.0, 500.0]))  # some past their expected end
        variant = Variant(f"r{i:02d}", kind, i, VariantState.RUNNING, Resources(cpus, mem), kind, tuple(on),
                          estimate_s=estimate, start_time=start, node_count=width)
        groups.append(Group(f"r{i:02d}", f"r{i:02d}", "u", JobClass.BE, (variant,),
                            submit_time=draw(st.integers(-9, -1))))
    taken: dict[str, Resources] = {}
    started: list[Started] = []
    for n in draw(st.lists(st.sampled_from(sorted(used)), max_size=4)):
        if used[n][0] < cap_cpus and used[n][1] + 1000 <= cap_mem:
            used[n][0] += 1
            used[n][1] += 1000
            taken[n] = taken.get(n, Resources()) + Resources(1, 1000)
            started.append((n, Resources(1, 1000), NOW + draw(st.sampled_from([100.0, 250.0, math.inf]))))
    nodes = {n: Node(n, (kind,), Resources(cap_cpus, cap_mem, gres[n]),
                     Resources(used[n][0] - (taken[n].cpus if n in taken else 0),
                               used[n][1] - (taken[n].mem_mb if n in taken else 0)),
                     draw(st.sampled_from(["MIXED"] * 5 + ["DOWN*"])))
             for kind, names in kinds.items() for n in names}
    head_gres = draw(st.sampled_from([{}, {}, {}, {"gpu": 1}]))
    exclusive = draw(st.sampled_from([False, False, False, True]))
    head = Group("head", "head", "u", JobClass.BE, tuple(
        Variant("head", kind, None, VariantState.PENDING,
                Resources(draw(st.integers(1, 8)), draw(st.sampled_from([1000, 8000, 32_000])), head_gres), kind,
                estimate_s=60, node_count=draw(st.integers(1, 6)),
                placement=Placement(exclusive=True) if exclusive else ANYWHERE)
        for kind in draw(st.lists(st.sampled_from(sorted(kinds)), min_size=1, max_size=2, unique=True))),
        submit_time=1)
    view = ClusterView(NOW, nodes, {k: Partition(k, tuple(names)) for k, names in kinds.items()},
                       {g.group_id: g for g in [*groups, head]}, {k: k for k in kinds})
    return view, head, taken, started


def _plain_reserve(view: ClusterView, group: Group, taken: dict[str, Resources], started: list[Started],
                   now: float) -> tuple[tuple[str, ...], float, dict[str, Resources]] | None:
    """`reserve` from `_plain_earliest`: the earliest kind in the site's order, its rooms less the head's need."""
    best: tuple[tuple[str, ...], float, dict[str, Resources]] | None = None
    for kind in view.kinds:
        variant = group.variant(kind)
        if variant is None:
            continue
        chosen = _plain_earliest(view, kind, variant, taken, started, now, math.inf if best is None else best[1])
        if chosen is not None:
            need = view.nodes[chosen[0][1]].capacity if variant.placement.exclusive else variant.request
            best = (tuple(n for _, n, _ in chosen), chosen[-1][0], {n: room - need for _, n, room in chosen})
    return best


@settings(max_examples=500, deadline=None)
@given(_cluster_and_head())
def test_the_reservation_is_the_plain_per_node_computation(
        case: tuple[ClusterView, Group, dict[str, Resources], list[Started]]) -> None:
    view, head, taken, started = case
    found = reserve(view, head, taken, started, NOW)
    assert (None if found is None else (found.nodes, found.at, found.spare)) == \
        _plain_reserve(view, head, taken, started, NOW)


# ---------------------------------------------------------------- whole replays: the walk against the plain one


def _records(result: SimResult) -> list[tuple[str, float | None, float]]:
    return [(r.job_id, r.first_start, r.finish) for r in result.jobs]


def _replay(jobs: list[SimJob], model: ModelCluster, params: dict[str, Any]) -> SimResult:
    return run(jobs, make_policy("fifo", {"backfill": "easy", **params}), model)


def _both(jobs: list[SimJob], nodes: int, cpus: int, params: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
          ) -> tuple[list[tuple[str, float | None, float]], list[tuple[str, float | None, float]]]:
    def model() -> ModelCluster:
        return ModelCluster([PartitionShape("p", "cpu", (NodeShape(nodes, Resources(cpus, cpus * 4096), "n"),))])

    walked = _records(_replay(jobs, model(), params))
    with monkeypatch.context() as patched:
        patched.setattr(reservation_module, "_earliest_nodes", _plain_earliest)
        plain = _records(_replay(jobs, model(), params))
    return walked, plain


@st.composite
def _wide_jobs(draw: st.DrawFn) -> list[SimJob]:
    """Curie in small: jobs of 1-12 of 16 nodes, whole or partial nodes, estimates above and below the truth."""
    jobs: list[SimJob] = []
    t = 0.0
    for i in range(draw(st.integers(5, 40))):
        t += draw(st.sampled_from([0.0, 1.0, 7.0, 30.0, 61.0, 200.0]))
        duration = draw(st.sampled_from([10.0, 45.0, 100.0, 333.0, 900.0]))
        estimate = draw(st.sampled_from([None, duration, duration * 2, duration / 2, 600.0]))
        cpus = draw(st.sampled_from([1, 4, 16, 16]))
        variant = SimVariant("cpu", Resources(cpus, cpus * 4000), duration, estimate,
                             nodes=draw(st.sampled_from([1, 1, 2, 5, 12])))
        jobs.append(SimJob(f"j{i:03d}", "u", t, {"cpu": variant}))
    return jobs


@settings(max_examples=60, deadline=None)
@given(_wide_jobs(), st.sampled_from([{}, {"cadence": "slurm"}, {"cadence": "slurm", "backfill_resolution_s": 0}]))
def test_a_replay_with_the_walk_starts_every_job_when_the_plain_computation_does(
        jobs: list[SimJob], params: dict[str, Any]) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        walked, plain = _both(jobs, 16, 16, params, monkeypatch)
    assert walked == plain


@pytest.mark.skipif(not KTH.exists(), reason="the shared KTH-SP2 log is not on this machine")
@pytest.mark.parametrize("params", [{}, {"cadence": "slurm"}])
def test_kth_sp2_slice_with_the_walk_is_the_plain_schedule(params: dict[str, Any],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The first 1,500 jobs of KTH-SP2 (100 one-CPU nodes, jobs up to 100 nodes wide), at both cadences."""
    jobs = list(load_trace(KTH, "swf", limit=1500).jobs)
    walked, plain = _both(jobs, 100, 1, params, monkeypatch)
    assert walked == plain and sum(1 for _, start, _ in walked if start is not None) == 1500
