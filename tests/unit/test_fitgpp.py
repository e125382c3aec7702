"""FitGpp and its baselines on hand-built snapshots: the digest's golden values (../shared/papers/fitgpp.md §2.4,
§6.2 A1–A8) and the round's rules (TE ahead of BE, strict FIFO for BE, the cap P, earmarks, determinism)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from slurmx.core.actions import Note, Plan, Preempt, Start
from slurmx.core.model import ClusterView, Group, JobClass, Node, Partition, Variant, VariantState
from slurmx.core.resources import Resources
from slurmx.core.validation import ConfigError
from slurmx.policies import make_policy
from slurmx.policies.fitgpp import FALLBACK_NOTE, FitGpp, FitGppArgs, fallback_count, score, size
from slurmx.policies.fitgpp_baselines import Lrtp, LrtpArgs, Rand, RandArgs

NOW = 10_000.0
GB = 1024


def res(cpus: int, gb: int, gpus: int) -> Resources:
    return Resources(cpus, gb * GB, {"gpu": gpus})


CAP = res(32, 256, 8)


@dataclass(frozen=True, slots=True)
class MarkedGroup(Group):
    """A Group carrying the preemption marks proposed for core (docs/policies/fitgpp.md), as a driver would."""

    grace_deadline: float | None = None
    preempted_for: str | None = None
    preempted_nodes: tuple[str, ...] = ()


def node(name: str, free: Resources, cap: Resources = CAP) -> Node:
    return Node(name, ("gpu",), cap, cap - free, "MIXED")


def running(gid: str, request: Resources, on: str, grace_min: float, remaining_min: float, preemptions: int = 0,
            job_id: int | None = None, submit: float = 0.0, **marks: object) -> Group:
    variant = Variant(gid, "gpu", job_id, VariantState.RUNNING, request, "gpu", (on,),
                      estimate_s=remaining_min * 60, start_time=NOW)
    cls = MarkedGroup if marks else Group
    return cls(gid, gid, "u", JobClass.BE, (variant,), grace_s=int(grace_min * 60), preemptions=preemptions,
               submit_time=submit, **marks)  # type: ignore[arg-type]


def pending(gid: str, request: Resources, job_class: JobClass = JobClass.BE, submit: float = 0.0,
            preemptions: int = 0, **marks: object) -> Group:
    variant = Variant(gid, "gpu", None, VariantState.PENDING, request, "gpu", submit_time=submit)
    cls = MarkedGroup if marks else Group
    return cls(gid, gid, "u", job_class, (variant,), grace_s=60, preemptions=preemptions, submit_time=submit,
               **marks)  # type: ignore[arg-type]


def view(nodes: list[Node], groups: list[Group], now: float = NOW) -> ClusterView:
    return ClusterView(now, {n.name: n for n in nodes}, {"gpu": Partition("gpu", tuple(n.name for n in nodes))},
                       {g.group_id: g for g in groups}, {"gpu": "gpu"})


TE_REQUEST = res(8, 64, 2)


def te(submit: float = 5.0, request: Resources = TE_REQUEST, gid: str = "te") -> Group:
    return pending(gid, request, JobClass.TE, submit=submit)


# The digest's §2.4 example: D_TE = [8, 64, 2]; nodes A, C full, B with (2, 16, 0) free.
EXAMPLE = {  # gid: (node, request, grace [min], true remaining [min])
    "a1": ("A", res(4, 32, 1), 1, 300),
    "a2": ("A", res(28, 224, 7), 2, 50),
    "b1": ("B", res(6, 48, 2), 12, 10),
    "b2": ("B", res(24, 192, 6), 3, 100),
    "c1": ("C", res(16, 128, 4), 1, 200),
    "c2": ("C", res(16, 128, 4), 20, 20),
}
EXAMPLE_NODES = [node("A", res(0, 0, 0)), node("B", res(2, 16, 0)), node("C", res(0, 0, 0))]


def example(preemptions: dict[str, int] | None = None, extra: list[Group] | None = None) -> ClusterView:
    counts = preemptions or {}
    groups = [running(gid, r, n, gp, rem, preemptions=counts.get(gid, 0), job_id=i + 1)
              for i, (gid, (n, r, gp, rem)) in enumerate(EXAMPLE.items())]
    return view(EXAMPLE_NODES, [*groups, te(), *(extra or [])])


def preempted(plan: Plan) -> set[str]:
    return {a.group_id for a in plan.of_type(Preempt)}


def started(plan: Plan) -> dict[str, tuple[str, ...]]:
    return {a.group_id: a.nodes for a in plan.of_type(Start)}


# ----------------------------------------------------------------------------------------------------------- A1: Eq. 1


@pytest.mark.parametrize(
    ("request_", "expected"),
    [(res(8, 64, 2), 0.4330), (res(16, 128, 4), 0.8660), (res(28, 224, 7), 1.5155),
     (res(4, 32, 1), 0.2165), (res(6, 48, 2), 0.3644), (res(24, 192, 6), 1.2990)],
)
def test_size_golden_values(request_: Resources, expected: float) -> None:
    assert size(request_, CAP) == pytest.approx(expected, abs=5e-5)


def test_size_is_unit_free_and_drops_dimensions_the_node_lacks() -> None:
    in_mb = size(Resources(8, 64 * GB), Resources(32, 256 * GB))
    assert in_mb == pytest.approx(size(Resources(8, 64), Resources(32, 256)))
    assert size(Resources(8, 64 * GB, {"gpu": 2}), Resources(32, 256 * GB)) == pytest.approx(0.3536, abs=5e-5)


# ---------------------------------------------------------------------------------------------------- A2, A3: Eqs. 2–4

SCORES = {  # s: (a1, a2, b1, b2, c1, c2), digest §2.4
    0: (0.1429, 1.0, 0.2405, 0.8571, 0.5714, 0.5714),
    1: (0.1929, 1.1, 0.8405, 1.0071, 0.6214, 1.5714),
    4: (0.3429, 1.4, 2.6405, 1.4571, 0.7714, 4.5714),
    8: (0.5429, 1.8, 5.0405, 2.0571, 0.9714, 8.5714),
}


@pytest.mark.parametrize("s", sorted(SCORES))
def test_scores_golden_values(s: int) -> None:
    sizes = {gid: size(r, CAP) for gid, (_, r, _, _) in EXAMPLE.items()}
    max_size, max_gp = max(sizes.values()), max(gp for _, _, gp, _ in EXAMPLE.values())
    assert max_size == pytest.approx(1.5155, abs=5e-5) and max_gp == 20
    got = tuple(score(sizes[g], EXAMPLE[g][2], max_size, max_gp, s) for g in EXAMPLE)
    assert got == pytest.approx(SCORES[s], abs=5e-5)


@pytest.mark.parametrize(("s", "victim"), [(0, "b1"), (1, "c1"), (4, "c1"), (8, "c1")])
def test_victim_of_the_worked_example(s: int, victim: str) -> None:
    plan = FitGpp(FitGppArgs(s=s)).schedule(example(), NOW)
    (action,) = plan.of_type(Preempt)
    assert (action.group_id, action.beneficiary, action.grace_s) == (victim, "te", EXAMPLE[victim][2] * 60)
    assert f"score {SCORES[s][list(EXAMPLE).index(victim)]:.4f}" in action.reason
    assert not plan.of_type(Start) and fallback_count(plan) == 0


def test_eq2_is_against_the_victims_own_node() -> None:
    """a1 has the lowest score at s=0 but [4,32,1] + A's free (0,0,0) cannot hold [8,64,2]; b1 passes only
    because B's own free (2,16,0) tops it up."""
    assert preempted(FitGpp(FitGppArgs(s=0)).schedule(example(), NOW)) == {"b1"}
    no_room_on_b = [EXAMPLE_NODES[0], node("B", res(0, 0, 0)), EXAMPLE_NODES[2]]
    groups = [g for g in example().groups.values() if g.group_id != "b2"]  # keep b1 alone with B's free gone
    assert "b1" not in preempted(FitGpp(FitGppArgs(s=0)).schedule(view(no_room_on_b, groups), NOW))


def test_eq3_normalises_over_all_running_be_jobs_not_only_eligible_ones() -> None:
    """a2 (the largest) is at the cap, so it cannot be chosen, yet maxSize is still its 1.5155: c1 scores 0.7714."""
    (action,) = FitGpp(FitGppArgs(s=4)).schedule(example({"a2": 1}), NOW).of_type(Preempt)
    assert action.group_id == "c1" and "score 0.7714" in action.reason


def test_a_be_job_on_two_nodes_counts_in_the_maxima_but_is_never_a_victim() -> None:
    """Outside the paper's model (one node per job): never preempted, but its size on its first node and its grace
    are in Eq. 3's maxima (here both the largest), so every score is normalised by them."""
    variant = Variant("wide", "gpu", 99, VariantState.RUNNING, CAP, "gpu", ("D", "E"), estimate_s=600, start_time=NOW)
    wide = Group("wide", "wide", "u", JobClass.BE, (variant,), grace_s=40 * 60, submit_time=0.0)
    current = example()
    nodes = [*EXAMPLE_NODES, node("D", res(0, 0, 0)), node("E", res(0, 0, 0))]
    plan = FitGpp(FitGppArgs(s=4)).schedule(view(nodes, [*current.groups.values(), wide]), NOW)
    (action,) = plan.of_type(Preempt)
    _, request, grace_min, _ = EXAMPLE[action.group_id]
    expected = score(size(request, CAP), grace_min * 60, size(CAP, CAP), 40 * 60, 4)
    assert action.group_id != "wide" and f"score {expected:.4f}" in action.reason


# ------------------------------------------------------------------------------------------------------- A4: the cap P


def test_cap_p_is_honoured() -> None:
    # c1 already preempted once: with P=1 the next best at s=4 is a2 (1.4), never c1.
    assert preempted(FitGpp(FitGppArgs(s=4, max_preemptions=1)).schedule(example({"c1": 1}), NOW)) == {"a2"}
    assert preempted(FitGpp(FitGppArgs(s=4, max_preemptions=2)).schedule(example({"c1": 1}), NOW)) == {"c1"}
    assert preempted(FitGpp(FitGppArgs(s=4, max_preemptions=None)).schedule(example({"c1": 5}), NOW)) == {"c1"}
    assert not preempted(FitGpp(FitGppArgs(max_preemptions=0)).schedule(example(), NOW))
    everyone = dict.fromkeys(EXAMPLE, 1)
    plan = FitGpp(FitGppArgs(max_preemptions=1)).schedule(example(everyone), NOW)
    assert not preempted(plan) and fallback_count(plan) == 0  # the fallback respects P by default


def test_one_victim_per_te_job_and_never_twice_in_a_round() -> None:
    """Two TE jobs in one round: the second cannot take c1 again (now in grace) and gets its own victim."""
    plan = FitGpp(FitGppArgs(s=4)).schedule(example(extra=[te(submit=6.0, gid="te2")]), NOW)
    victims = [(a.group_id, a.beneficiary) for a in plan.of_type(Preempt)]
    assert victims[0] == ("c1", "te") and len(victims) == 2 and victims[1][0] != "c1" and victims[1][1] == "te2"


# --------------------------------------------------------------------------------------------------- A5, A6: baselines


def test_lrtp_preempts_a1_then_c1() -> None:
    plan = Lrtp(LrtpArgs()).schedule(example(), NOW)
    assert [(a.group_id, a.beneficiary) for a in plan.of_type(Preempt)] == [("a1", None), ("c1", "te")]


def test_lrtp_skips_jobs_at_the_cap_and_counts_remaining_from_the_start() -> None:
    assert preempted(Lrtp(LrtpArgs()).schedule(example({"a1": 1}), NOW)) == {"c1"}
    later = NOW + 150 * 60  # elapsed 150 min: a1 has 150 left, c1 50, b2 0 ... still a1 then c1
    assert preempted(Lrtp(LrtpArgs()).schedule(example(), later)) == {"a1", "c1"}
    # estimate_s read as already-remaining: the same order as at NOW, whatever the clock
    assert preempted(Lrtp(LrtpArgs(estimate_from="now")).schedule(example(), later)) == {"a1", "c1"}


def test_lrtp_node_scope_preempts_on_one_node_only() -> None:
    plan = Lrtp(LrtpArgs(scope="node")).schedule(example(), NOW)
    assert [(a.group_id, a.beneficiary) for a in plan.of_type(Preempt)] == [("a1", "te"), ("a2", "te")]


def _fits_after(view_: ClusterView, victims: set[str]) -> bool:
    need = res(8, 64, 2)
    for name, n in view_.nodes.items():
        freed = sum((EXAMPLE[v][1] for v in victims if EXAMPLE[v][0] == name), Resources())
        if need.fits_in(n.free + freed):
            return True
    return False


def test_rand_preempts_until_the_te_job_fits_and_is_deterministic_for_a_seed() -> None:
    outcomes = set()
    for seed in range(24):
        plan = Rand(RandArgs(seed=seed)).schedule(example(), NOW)
        assert plan == Rand(RandArgs(seed=seed)).schedule(example(), NOW)
        victims = preempted(plan)
        assert victims and _fits_after(example(), victims)
        assert sum(1 for a in plan.of_type(Preempt) if a.beneficiary == "te") >= 1
        outcomes.add(frozenset(victims))
    assert len(outcomes) > 2  # the seed matters


def test_rand_honours_the_cap() -> None:
    capped = {"a1": 1, "a2": 1, "b1": 1, "b2": 1, "c2": 1}
    for seed in range(8):
        assert preempted(Rand(RandArgs(seed=seed)).schedule(example(capped), NOW)) == {"c1"}


# -------------------------------------------------------------------------------------------- A7: grace, earmark, head


def test_victim_keeps_its_resources_during_grace_then_te_starts_on_the_freed_node() -> None:
    policy = FitGpp(FitGppArgs(s=4))
    q = pending("q", res(4, 32, 1), submit=1.0)  # an older BE job, waiting
    assert preempted(policy.schedule(example(extra=[q]), NOW)) == {"c1"}

    # During c1's grace: nothing starts, nothing else is preempted for te.
    groups = dict(example(extra=[q]).groups)
    groups["c1"] = running("c1", res(16, 128, 4), "C", 1, 200, preemptions=1, job_id=5,
                           grace_deadline=NOW + 60, preempted_for="te")
    plan = policy.schedule(view(EXAMPLE_NODES, list(groups.values())), NOW + 30)
    assert not plan.actions and Note("waits for 1 victim(s) in grace", "te") in plan.notes

    # c1 requeued: C is free; te starts there first, c1 heads the BE queue (ahead of the older q) and, not
    # fitting in what te leaves, blocks q although q would fit (strict FIFO).
    groups["c1"] = pending("c1", res(16, 128, 4), submit=2.0, preemptions=1, preempted_for="te",
                           preempted_nodes=("C",))
    nodes = [EXAMPLE_NODES[0], EXAMPLE_NODES[1], node("C", res(16, 128, 4))]
    plan = policy.schedule(view(nodes, list(groups.values())), NOW + 60)
    assert started(plan) == {"te": ("C",)} and not preempted(plan)
    assert any(n.group_id == "c1" and n.text.startswith("head of the BE queue") for n in plan.notes)


def test_earmark_is_not_taken_by_the_be_head_or_an_earlier_te_job() -> None:
    # C has (4,32,1) free and c1 (4,32,1) in grace for te: the BE head q would fit now but must not start.
    c_nodes = [EXAMPLE_NODES[0], node("C", res(4, 32, 1))]
    c1 = running("c1", res(4, 32, 1), "C", 1, 200, preemptions=1, grace_deadline=NOW + 60, preempted_for="te")
    fill_a = running("fa", res(32, 256, 8), "A", 1, 10)
    q = pending("q", res(4, 32, 1), submit=1.0)
    plan = FitGpp().schedule(view(c_nodes, [c1, fill_a, te(), q]), NOW + 30)
    assert not started(plan)
    # After the release, an earlier TE job that would fit in C's (8,64,2) must leave it to te.
    c1_back = pending("c1", res(4, 32, 1), submit=2.0, preemptions=1, preempted_for="te", preempted_nodes=("C",))
    early = te(submit=1.0, request=res(8, 64, 2), gid="early")
    nodes = [EXAMPLE_NODES[0], node("C", res(8, 64, 2))]
    plan = FitGpp().schedule(view(nodes, [c1_back, fill_a, te(), early]), NOW + 60)
    assert started(plan) == {"te": ("C",)}


def test_a_finished_victim_whose_marks_still_show_keeps_its_earmark() -> None:
    # A driver may still show a victim that ended in its grace (neither running nor waiting): the room it left on
    # C stays te's, so the earlier TE job that would fit there does not take it.
    variant = Variant("c1", "gpu", 5, VariantState.COMPLETED, res(4, 32, 1), "gpu", ("C",), start_time=NOW - 600)
    c1_done = MarkedGroup("c1", "c1", "u", JobClass.BE, (variant,), grace_s=60, preemptions=1, submit_time=2.0,
                          preempted_for="te", preempted_nodes=("C",))
    early = te(submit=1.0, request=res(8, 64, 2), gid="early")
    fill_a = running("fa", res(32, 256, 8), "A", 1, 10)
    nodes = [EXAMPLE_NODES[0], node("C", res(8, 64, 2))]
    assert started(FitGpp().schedule(view(nodes, [c1_done, fill_a, te(), early]), NOW + 60)) == {"te": ("C",)}


def test_earmarks_follow_the_queue_not_the_drivers_mapping_order() -> None:
    # te has two victims: vb, older, back in the queue, named it for B; va, still in its grace on A, which has
    # room for te besides. The older victim's node comes first, whichever order the driver's mapping has.
    v_b = pending("vb", res(32, 256, 8), submit=1.0, preemptions=1, preempted_for="te", preempted_nodes=("B",))
    v_a = running("va", res(4, 32, 1), "A", 1, 200, preemptions=1, submit=2.0, grace_deadline=NOW + 60,
                  preempted_for="te")
    nodes = [node("A", CAP - res(4, 32, 1)), node("B", CAP)]
    for order in ([v_b, v_a, te()], [v_a, v_b, te()], [te(), v_a, v_b]):
        plan = FitGpp().schedule(view(nodes, order), NOW)
        assert started(plan)["te"] == ("B",), [g.group_id for g in order]


def requeued(gid: str, submit: float, requeued_at: float) -> Group:
    """A victim back in the queue: Slurm keeps the group's submit time but resets the job's at requeue."""
    variant = Variant(gid, "gpu", None, VariantState.PENDING, CAP, "gpu", submit_time=requeued_at)
    return Group(gid, gid, "u", JobClass.BE, (variant,), preemptions=1, submit_time=submit)


def test_requeued_victims_go_to_the_head_in_the_chosen_order() -> None:
    """Two whole-node victims back in the queue, one free node: only the first in order restarts."""
    groups = [pending("waiting", CAP, submit=10.0), requeued("old", 50.0, NOW - 100), requeued("new", 90.0, NOW - 10)]
    nodes = [node("A", CAP)]
    assert started(FitGpp().schedule(view(nodes, groups), NOW)) == {"old": ("A",)}  # original submit time
    latest = FitGppArgs(requeued_order="latest_first")
    assert started(FitGpp(latest).schedule(view(nodes, groups), NOW)) == {"new": ("A",)}


# --------------------------------------------------------------------------------------------------- the round's rules


def test_te_goes_ahead_of_queued_be() -> None:
    be = pending("be", res(8, 64, 2), submit=1.0)
    plan = FitGpp().schedule(view([node("A", res(8, 64, 2))], [be, te(submit=9.0)]), NOW)
    assert started(plan) == {"te": ("A",)} and not preempted(plan)


def test_strict_fifo_for_be_no_backfill() -> None:
    big = pending("big", res(32, 256, 8), submit=1.0)
    small = pending("small", res(1, 8, 0), submit=2.0)
    busy = running("busy", res(16, 128, 4), "A", 1, 10)
    plan = FitGpp().schedule(view([node("A", res(16, 128, 4))], [big, small, busy]), NOW)
    assert not plan.actions  # small fits but waits behind the blocked head; BE never preempts BE


def test_placement_first_fit_or_best_fit() -> None:
    nodes = [node("A", CAP), node("B", res(8, 64, 2))]
    assert started(FitGpp().schedule(view(nodes, [te()]), NOW)) == {"te": ("A",)}
    assert started(FitGpp(FitGppArgs(placement="best_fit")).schedule(view(nodes, [te()]), NOW)) == {"te": ("B",)}


def test_blocked_te_skip_or_stop() -> None:
    """A TE job that can neither start nor get a victim (every BE job at the cap): `skip` still serves the small
    TE job behind it, `stop` does not."""
    capped = running("x", res(30, 240, 7), "A", 1, 10, preemptions=1)
    big, small = te(submit=1.0, request=res(16, 128, 4), gid="big"), te(submit=2.0, request=res(2, 16, 1), gid="small")
    groups = [capped, big, small]
    nodes = [node("A", res(2, 16, 1))]
    assert started(FitGpp().schedule(view(nodes, groups), NOW)) == {"small": ("A",)}
    assert not FitGpp(FitGppArgs(blocked_te="stop")).schedule(view(nodes, groups), NOW).actions


def test_te_larger_than_any_node_preempts_nothing() -> None:
    plan = FitGpp().schedule(example(extra=[te(submit=1.0, request=res(64, 512, 16), gid="huge")]), NOW)
    assert "huge" not in {a.beneficiary for a in plan.of_type(Preempt)}


# ----------------------------------------------------------------------------------------------- fallback, determinism


def _halves() -> ClusterView:
    """Every node holds two half-node BE jobs: no single job plus its node's free room fits a whole-node TE."""
    half = res(16, 128, 4)
    groups = [running(f"{n}{i}", half, n, 2, 10, job_id=k) for k, (n, i) in
              enumerate([(n, i) for n in "ABC" for i in (1, 2)])]
    return view([node(n, res(0, 0, 0)) for n in "ABC"], [*groups, te(request=CAP)])


def test_random_fallback_fires_counts_and_is_deterministic_for_a_seed() -> None:
    victims = set()
    for seed in range(16):
        plan = FitGpp(FitGppArgs(seed=seed)).schedule(_halves(), NOW)
        assert plan == FitGpp(FitGppArgs(seed=seed)).schedule(_halves(), NOW)
        assert fallback_count(plan) == 1 and sum(str(n).startswith(FALLBACK_NOTE) for n in plan.notes) == 1
        (action,) = plan.of_type(Preempt)
        assert action.beneficiary == "te"
        victims.add(action.group_id)
    assert len(victims) > 1
    assert fallback_count(FitGpp(FitGppArgs(fallback="none")).schedule(_halves(), NOW)) == 0


def test_fallback_until_fits_preempts_a_whole_node() -> None:
    plan = FitGpp(FitGppArgs(fallback_until_fits=True, seed=3)).schedule(_halves(), NOW)
    target = [a for a in plan.of_type(Preempt) if a.beneficiary == "te"]
    assert fallback_count(plan) == 1 and len(target) == 2 and target[0].group_id[0] == target[1].group_id[0]


def test_pure_same_view_same_plan() -> None:
    v = example(extra=[pending("q", res(4, 32, 1), submit=1.0)])
    for policy in (FitGpp(), Lrtp(LrtpArgs()), Rand(RandArgs(seed=7))):
        assert policy.schedule(v, NOW) == policy.schedule(v, NOW)


# ----------------------------------------------------------------------------------------- A8: FIFO baseline, registry


def test_fifo_baseline_never_preempts_and_blocks_at_the_head() -> None:
    fifo = make_policy("fifo", {"backfill": False})
    big = pending("big", res(32, 256, 8), submit=1.0)
    small = pending("small", res(1, 8, 0), submit=2.0)
    plan = fifo.schedule(example(extra=[big, small]), NOW)
    assert not plan.actions  # te (submit 5) is behind big (submit 1) in the one FIFO queue; nothing preempted


def test_registered_with_typed_arguments() -> None:
    assert isinstance(make_policy("fitgpp", {"s": 8, "max_preemptions": None}), FitGpp)
    assert isinstance(make_policy("lrtp", {"scope": "node"}), Lrtp)
    assert isinstance(make_policy("rand", {"seed": 3}), Rand)
    with pytest.raises(ConfigError) as err:
        make_policy("fitgpp", {"S": 4, "s": -1})
    assert len(err.value.errors) == 2


def test_in_grace_reselect_chooses_again_while_the_first_victim_is_in_grace() -> None:
    """in_grace: "wait" (default) lets te wait for c1's grace; "reselect" (the reproduction's reading of Tables 2-3)
    chooses again as if c1's room were not coming: FitGpp's next-best score is a2 (1 + 4 * 2/20 = 1.4, the maxima
    now over the jobs not in grace), LRTP takes a1 (300 min left, A still too small) then b2 (B fits)."""
    groups = dict(example().groups)
    groups["c1"] = running("c1", res(16, 128, 4), "C", 1, 200, preemptions=1, job_id=5,
                           grace_deadline=NOW + 60, preempted_for="te")
    during = view(EXAMPLE_NODES, list(groups.values()))
    assert not preempted(FitGpp(FitGppArgs(s=4)).schedule(during, NOW + 30))
    assert preempted(FitGpp(FitGppArgs(s=4, in_grace="reselect")).schedule(during, NOW + 30)) == {"a2"}
    assert not preempted(Lrtp().schedule(during, NOW + 30))
    assert preempted(Lrtp(LrtpArgs(in_grace="reselect")).schedule(during, NOW + 30)) == {"a1", "b2"}


def test_node_arrays_carried_from_the_last_round_equal_arrays_read_afresh() -> None:
    """A round reuses the last round's node layout and free rows where the view hands the same node objects; a
    node that fills, empties, drains or is resized must read as a fresh round reads it."""
    import numpy as np

    from slurmx.policies import fitgpp

    rng = np.random.default_rng(11)
    nodes = {name: node(name, CAP) for name in "ABCD"}
    shapes = [CAP, res(16, 128, 4), res(64, 512, 8)]
    for step in range(400):
        name = "ABCD"[int(rng.integers(4))]
        cap = nodes[name].capacity if rng.random() < 0.9 else shapes[int(rng.integers(3))]
        used = res(int(rng.integers(0, 17)), int(rng.integers(0, 129)), int(rng.integers(0, 5)))
        state = "DRAIN" if rng.random() < 0.05 else "MIXED"
        nodes[name] = Node(name, ("gpu",), cap, used, state)
        current = view(list(nodes.values()), [te(request=res(4, 32, 1)), pending("q", res(2, 16, 1), submit=1.0)])
        warm = fitgpp.Round(current, NOW, FitGppArgs())
        warm_plan = FitGpp().schedule(current, NOW)
        fitgpp._LAST_NODES.clear()
        cold = fitgpp.Round(current, NOW, FitGppArgs())
        assert np.array_equal(warm.ledger.free, cold.ledger.free), step
        assert np.array_equal(warm.capacity, cold.capacity) and warm.node_names == cold.node_names, step
        assert FitGpp().schedule(current, NOW) == warm_plan, step
