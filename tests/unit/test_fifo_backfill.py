"""FIFO's backfill modes on a hand-built cluster: strict, EASY (a reservation for the oldest, as Slurm) and greedy.

Two 4-CPU nodes. Running: r1 (3 CPUs on n1, ends at t=100), r2 (4 CPUs on n2, ends at t=300). Waiting, oldest
first: `head` (4 CPUs: fits nowhere now; n1 frees at t=100, so it is reserved n1 at t=100), then `short`
(1 CPU, 50 s: ends before t=100), `long` (1 CPU, 500 s: would hold n1 past t=100) and `tiny` (no estimate).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.core.actions import Start
from slurmx.core.model import ClusterView, Group, JobClass, Node, Partition, Variant, VariantState, expected_end
from slurmx.core.resources import Resources
from slurmx.policies import make_policy
from slurmx.policies.reservation import Started, reserve

NOW = 0.0
CAP = Resources(4, 4000)


def _running(gid: str, cpus: int, node: str, ends: float) -> Group:
    variant = Variant(gid, "cpu", 1, VariantState.RUNNING, Resources(cpus, 100), "cpu", (node,), estimate_s=ends,
                      start_time=NOW)
    return Group(gid, gid, "u", JobClass.BE, (variant,), submit_time=-10)


def _waiting(gid: str, cpus: int, submit: float, estimate: float | None) -> Group:
    variant = Variant(gid, "cpu", None, VariantState.PENDING, Resources(cpus, 100), "cpu", estimate_s=estimate,
                      submit_time=submit)
    return Group(gid, gid, "u", JobClass.BE, (variant,), submit_time=submit)


def _view(*waiting: Group) -> ClusterView:
    used = {"n1": Resources(3, 100), "n2": Resources(4, 100)}
    nodes = {n: Node(n, ("cpu",), CAP, used[n], "MIXED") for n in ("n1", "n2")}
    groups = [_running("r1", 3, "n1", 100), _running("r2", 4, "n2", 300), *waiting]
    return ClusterView(NOW, nodes, {"cpu": Partition("cpu", ("n1", "n2"))}, {g.group_id: g for g in groups},
                       {"cpu": "cpu"})


QUEUE = (_waiting("head", 4, 1, 60), _waiting("short", 1, 2, 50), _waiting("long", 1, 3, 500),
         _waiting("tiny", 1, 4, None))


def _started(backfill: object) -> list[str]:
    plan = make_policy("fifo", {"backfill": backfill}).schedule(_view(*QUEUE), NOW)
    return [a.group_id for a in plan.of_type(Start)]


def test_the_oldest_is_reserved_the_earliest_node_and_time() -> None:
    found = reserve(_view(*QUEUE), QUEUE[0], {}, [], NOW)
    assert found is not None and (found.nodes, found.at, found.spare) == (("n1",), 100, {"n1": Resources(0, 3900)})


@pytest.mark.parametrize(("backfill", "expected"), [
    (False, []),  # strict: nothing passes the blocked head
    (True, ["short"]),  # EASY: only what ends before the head's reservation on n1
    ("easy", ["short"]),
    ("greedy", ["short"]),  # greedy takes n1's only free CPU in queue order as well ...
])
def test_each_mode_starts_what_it_may(backfill: object, expected: list[str]) -> None:
    assert _started(backfill) == expected


def test_easy_refuses_what_would_delay_the_head_where_greedy_starts_it() -> None:
    queue = (QUEUE[0], QUEUE[2], QUEUE[3])  # no short job: the next ones would hold n1 past t=100
    plan = make_policy("fifo", {"backfill": "easy"}).schedule(_view(*queue), NOW)
    assert not plan.of_type(Start) and any("reserved n1 at t=100" in n.text for n in plan.notes)
    greedy = make_policy("fifo", {"backfill": "greedy"}).schedule(_view(*queue), NOW)
    assert [a.group_id for a in greedy.of_type(Start)] == ["long"]  # ... and delays the head by 500 s


def test_a_job_beside_the_head_in_what_the_node_spares_may_run_past_the_reservation() -> None:
    head = _waiting("head", 3, 1, 60)  # n1 at t=100 has 4 CPUs: 3 for the head, 1 to spare
    plan = make_policy("fifo", {"backfill": "easy"}).schedule(_view(_waiting("r0", 4, 0, 10), head, QUEUE[2]), NOW)
    # r0 (4 CPUs) blocks first and is reserved n1 at t=100 with nothing to spare; head and long then wait
    assert not plan.of_type(Start)
    plan = make_policy("fifo", {"backfill": "easy"}).schedule(_view(head, QUEUE[2]), NOW)
    assert [a.group_id for a in plan.of_type(Start)] == ["long"]  # 1 CPU spare beside the head from t=100


def test_the_depth_bounds_how_far_behind_a_blocked_head_a_decision_looks() -> None:
    queue = (QUEUE[0], QUEUE[2], _waiting("later", 1, 5, 50))  # head, long (refused), then a short one
    shallow = make_policy("fifo", {"backfill": "easy", "backfill_depth": 1}).schedule(_view(*queue), NOW)
    assert not shallow.of_type(Start)  # `later` is the second behind the head: not looked at
    deeper = make_policy("fifo", {"backfill": "easy", "backfill_depth": 2}).schedule(_view(*queue), NOW)
    assert [a.group_id for a in deeper.of_type(Start)] == ["later"]


# ---------------------------------------------------------------- the reservation against a plain full scan


def _reference(view: ClusterView, group: Group, taken: dict[str, Resources], started: list[Started],
               now: float) -> tuple[tuple[str, ...], float, dict[str, Resources]] | None:
    """The reservation by brute force: every node of a kind, each with every job on it, ends sorted per node."""
    best: tuple[tuple[str, ...], float, dict[str, Resources]] | None = None
    for kind in view.kinds:
        variant = group.variant(kind)
        if variant is None:
            continue
        request = variant.request
        ends: dict[str, list[tuple[float, Resources]]] = {}
        for running in view.running_groups():
            ran = running.running_variant()
            assert ran is not None
            for name in ran.nodes:
                ends.setdefault(name, []).append((expected_end(ran.start_time, ran.estimate_s, now), ran.request))
        for name, held, end in started:
            ends.setdefault(name, []).append((end, held))
        found: list[tuple[float, str, Resources]] = []
        for node in view.nodes_of_kind(kind):
            if not node.is_usable or not request.fits_in(node.capacity):
                continue
            room = node.free - taken[node.name] if node.name in taken else node.free
            for end, freed in [(now, Resources()), *sorted(ends.get(node.name, []), key=lambda e: e[0])]:
                if math.isinf(end):
                    break
                room = room + freed
                if request.fits_in(room):
                    found.append((max(end, now), node.name, room))  # a job past its estimate: back now
                    break
        if len(found) < variant.node_count:
            continue
        chosen = sorted(found, key=lambda f: (f[0], f[1]))[:variant.node_count]
        if best is None or chosen[-1][0] < best[1]:
            best = (tuple(n for _, n, _ in chosen), chosen[-1][0], {n: r - request for _, n, r in chosen})
    return best


@st.composite
def _crowded(draw: st.DrawFn) -> tuple[ClusterView, Group, dict[str, Resources], list[Started]]:
    """Two kinds of a few 4-CPU nodes, running jobs (some wide, some without an estimate, ends that tie) filling
    them, a plan's own starts, and a head that may be wide."""
    kinds = {"cpu": [f"c{i}" for i in range(draw(st.integers(1, 5)))],
             "gpu": [f"g{i}" for i in range(draw(st.integers(1, 3)))]}
    used = {n: 0 for names in kinds.values() for n in names}
    groups: list[Group] = []
    for i in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(sorted(kinds)))
        width = draw(st.integers(1, 2))
        cpus = draw(st.integers(1, 4))
        on = [n for n in kinds[kind] if used[n] + cpus <= 4][:width]
        if len(on) < width:
            continue
        for n in on:
            used[n] += cpus
        ends = draw(st.one_of(st.none(), st.sampled_from([10.0, 20.0, 30.0]), st.floats(1, 100)))
        variant = Variant(f"r{i}", kind, i, VariantState.RUNNING, Resources(cpus, 10), kind, tuple(on),
                          estimate_s=ends, start_time=NOW - draw(st.sampled_from([0.0, 5.0])), node_count=width)
        groups.append(Group(f"r{i}", f"r{i}", "u", JobClass.BE, (variant,), submit_time=draw(st.integers(-9, -1))))
    taken: dict[str, Resources] = {}
    started: list[Started] = []
    for n in draw(st.lists(st.sampled_from(sorted(used)), max_size=3)):
        if used[n] < 4:
            used[n] += 1
            taken[n] = taken.get(n, Resources()) + Resources(1, 10)
            started.append((n, Resources(1, 10), draw(st.sampled_from([10.0, 20.0, math.inf]))))
    node_state = {n: Node(n, (kind,), CAP, Resources(used[n] - (taken[n].cpus if n in taken else 0), 10 * used[n]),
                          draw(st.sampled_from(["MIXED", "MIXED", "DOWN"])))
                  for kind, names in kinds.items() for n in names}
    head_width = draw(st.integers(1, 3))
    head = Group("head", "head", "u", JobClass.BE, tuple(
        Variant("head", kind, None, VariantState.PENDING, Resources(draw(st.integers(1, 4)), 10), kind,
                estimate_s=60, node_count=head_width)
        for kind in draw(st.lists(st.sampled_from(sorted(kinds)), min_size=1, max_size=2, unique=True))),
        submit_time=1)
    view = ClusterView(NOW, node_state, {k: Partition(k, tuple(names)) for k, names in kinds.items()},
                       {g.group_id: g for g in [*groups, head]}, {k: k for k in kinds})
    return view, head, taken, started


@settings(max_examples=400, deadline=None)
@given(_crowded())
def test_the_reservation_walk_equals_a_full_scan_of_every_node_and_job(
        case: tuple[ClusterView, Group, dict[str, Resources], list[Started]]) -> None:
    view, head, taken, started = case
    found = reserve(view, head, taken, started, NOW)
    expected = _reference(view, head, taken, started, NOW)
    assert (None if found is None else (found.nodes, found.at, found.spare)) == expected


def test_of_nodes_freed_at_the_same_time_the_first_by_name_is_reserved_whichever_job_ends_first_in_the_queue(
        ) -> None:
    nodes = {n: Node(n, ("cpu",), CAP, Resources(4, 100), "ALLOCATED") for n in ("n1", "n2")}
    running = [_running("early", 4, "n2", 100), _running("late", 4, "n1", 100)]  # same end; n2's job is older
    running[1] = Group("late", "late", "u", JobClass.BE, running[1].variants, submit_time=-1)
    view = ClusterView(NOW, nodes, {"cpu": Partition("cpu", ("n1", "n2"))},
                       {g.group_id: g for g in [*running, QUEUE[0]]}, {"cpu": "cpu"})
    found = reserve(view, QUEUE[0], {}, [], NOW)
    assert found is not None and (found.nodes, found.at) == (("n1",), 100)


# ---------------------------------------------------------------- the whole plan against a plain one


def _plain_starts(view: ClusterView, backfill: str, depth: int) -> list[tuple[str, str, tuple[str, ...]]]:
    """FIFO's plan the plain way: every group behind a blocked head tried on every node, nothing remembered."""
    taken: dict[str, Resources] = {}
    started: list[Started] = []
    starts: list[tuple[str, str, tuple[str, ...]]] = []
    allowed = None
    blocked, looked = False, 0
    for group in view.pending_groups():
        if blocked:
            looked += 1
            if looked > depth:
                break
        placed = None
        for kind in view.kinds:
            variant = group.variant(kind)
            if variant is None:
                continue
            end = expected_end(None, variant.estimate_s, NOW)
            chosen = [node.name for node in view.nodes_of_kind(kind) if node.is_usable
                      and variant.request.fits_in(node.free - taken.get(node.name, Resources()))
                      and (allowed is None or allowed.allows(node.name, variant.request, end))]
            if len(chosen) >= variant.node_count:
                placed = (kind, tuple(chosen[:variant.node_count]), variant.request, end)
                break
        if placed is None:
            if backfill == "easy" and not blocked:
                allowed = reserve(view, group, taken, started, NOW)
            blocked = True
            continue
        kind, nodes, request, end = placed
        for name in nodes:
            taken[name] = taken.get(name, Resources()) + request
            started.append((name, request, end))
            if allowed is not None:
                allowed.take(name, request, end)
        starts.append((group.group_id, kind, nodes))
    return starts


@st.composite
def _queued(draw: st.DrawFn) -> ClusterView:
    """`_crowded`'s cluster with a queue of like groups behind its head: few shapes, mixed estimates, some on
    either kind, some wide, so a plan's remembered misses decide most of them."""
    view, head, _, _ = draw(_crowded())
    waiting: list[Group] = [head]
    for i in range(draw(st.integers(0, 14))):
        gid = f"w{i:02d}"
        kinds = draw(st.lists(st.sampled_from(sorted(view.kinds)), min_size=1, max_size=2, unique=True))
        cpus, width = draw(st.integers(1, 4)), draw(st.sampled_from([1, 1, 2]))
        estimate = draw(st.sampled_from([None, 5.0, 30.0, 200.0, math.inf]))
        waiting.append(Group(gid, gid, "u", JobClass.BE, tuple(
            Variant(gid, kind, None, VariantState.PENDING, Resources(cpus, 10), kind, estimate_s=estimate,
                    submit_time=2 + i, node_count=width) for kind in kinds), submit_time=2 + i))
    groups = {**{g.group_id: g for g in view.groups.values() if g.group_id != "head"},
              **{g.group_id: g for g in waiting}}
    return ClusterView(NOW, view.nodes, view.partitions, groups, view.kinds)


@settings(max_examples=300, deadline=None)
@given(_queued(), st.sampled_from(["easy", "greedy"]), st.integers(1, 6))
def test_backfill_starts_what_a_plain_scan_of_every_group_and_node_starts(
        view: ClusterView, backfill: str, depth: int) -> None:
    """The misses a plan remembers, and each group's shapes kept between plans, change no start: asked twice
    (the second time from what it kept) and with the site's kinds in the other order (the same group objects)."""
    policy = make_policy("fifo", {"backfill": backfill, "backfill_depth": depth})
    expected = _plain_starts(view, backfill, depth)
    for _ in range(2):
        plan = policy.schedule(view, NOW)
        assert [(a.group_id, a.kind, a.nodes) for a in plan.of_type(Start)] == expected
    turned = ClusterView(NOW, view.nodes, view.partitions, view.groups, dict(reversed(list(view.kinds.items()))))
    plan = policy.schedule(turned, NOW)
    assert [(a.group_id, a.kind, a.nodes) for a in plan.of_type(Start)] == _plain_starts(turned, backfill, depth)


_AMOUNTS = st.builds(Resources, st.integers(0, 6), st.integers(0, 60),
                     st.dictionaries(st.sampled_from(["gpu", "fpga"]), st.integers(0, 3), max_size=2))


@settings(max_examples=400, deadline=None)
@given(_AMOUNTS, _AMOUNTS, _AMOUNTS, st.lists(_AMOUNTS, max_size=2), st.floats(0, 200))
def test_a_reserved_node_admits_exactly_what_fits_in_its_spare(
        head: Resources, extra: Resources, request: Resources, taken: list[Resources], end: float) -> None:
    """`allows` on a node nothing was taken from compares without building the spare: the same answer as
    `fits_in(room - head)`, before and after backfilled jobs ending past the reserved time took from it."""
    from slurmx.policies.reservation import Reservation

    reservation = Reservation("head", 100.0, {"n1": head + extra}, head)
    for held in taken:
        assert reservation.allows("n1", request, end) == (end <= 100.0 or request.fits_in(extra))
        reservation.take("n1", held, 150.0)
        extra = extra - held
    assert reservation.allows("n1", request, end) == (end <= 100.0 or request.fits_in(extra))
    assert reservation.allows("n2", request, end)  # not reserved
