"""slurmxd's view carries each variant's placement and node count, from Slurm and the user's own node lists."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmx.core.actions import Plan, Start
from slurmx.core.model import VariantState
from slurmx.core.placement import ANYWHERE, Placement
from slurmx.core.resources import Resources
from slurmx.daemon.backend import SlurmBackend
from slurmx.daemon.observe import StartMark, build_view
from slurmx.slurm.records import SlurmJob
from tests.unit.test_daemon import NODES, PARTITIONS, SITE, FakeSlurm, _apply, _enforcer, _obs, job, spool_owners


def _view(jobs: list[SlurmJob], user_nodes: dict[int, tuple[str, str]] | None = None) -> Any:
    return build_view(SITE, jobs, NODES, PARTITIONS, 1000.0, owner_of=spool_owners(jobs), user_nodes=user_nodes)


def test_a_variant_carries_its_constraint_node_lists_and_whole_nodes() -> None:
    jobs = [replace(job(1, "a"), features="x86&bigmem", required_nodes="c[1-2]", excluded_nodes="g1",
                    exclusive=True, node_count=2), job(2, "a", "gpu"), job(3, "b")]
    groups = _view(jobs).view.groups
    cpu, gpu = groups["a"].variants
    assert cpu.placement == Placement("x86&bigmem", ("c1", "c2"), ("g1",), True)
    assert cpu.node_count == 2 and gpu.node_count == 1
    assert gpu.placement is ANYWHERE and groups["b"].variants[0].placement is ANYWHERE


def test_a_multi_node_variant_asks_per_node_what_slurm_shows_as_totals() -> None:
    """squeue's tres_req_str of `-N 2 -c 3 --mem=1G --gpus-per-node=1` is the job's total: 6 cpus, 2048 MB, 2 gpus."""
    jobs = [replace(job(1, "a", "gpu"), node_count=2, request=Resources(6, 2048, {"gpu": 2})),
            replace(job(2, "b"), node_count=3, request=Resources(4, 1000))]
    groups = _view(jobs).view.groups
    assert groups["a"].variants[0].request == Resources(3, 1024, {"gpu": 1})
    assert groups["b"].variants[0].request == Resources(2, 334)  # rounded up: never less than Slurm gives a node


def test_a_node_list_shorter_than_the_node_count_is_left_to_steering() -> None:
    """`-w c1 -N 2` holds c1 and any other node: as `Placement.required` (the only nodes allowed) no plan could
    start it, so the policy places it anywhere and steering keeps c1 or leaves the job to Slurm."""
    placement = _view([replace(job(1, "a"), required_nodes="c1", excluded_nodes="g1", node_count=2)]) \
        .view.groups["a"].variants[0].placement
    assert (placement.required, placement.excluded) == ((), ("g1",))
    assert _view([replace(job(1, "a"), required_nodes="c[1-2]", node_count=2)]) \
        .view.groups["a"].variants[0].placement.required == ("c1", "c2")


def test_the_node_lists_are_the_users_first_seen_never_slurmxds_steering() -> None:
    """Once steered, squeue shows slurmxd's ReqNodeList (and a requeued job keeps it): the store's first-seen
    lists are the user's; a job the store does not know was never steered, so squeue's lists are the user's."""
    steered = replace(job(1, "a"), required_nodes="c1")
    assert _view([steered], {1: ("", "")}).view.groups["a"].variants[0].placement is ANYWHERE
    user = _view([steered], {1: ("c[1-2]", "g1")}).view.groups["a"].variants[0].placement
    assert (user.required, user.excluded) == (("c1", "c2"), ("g1",))
    assert _view([steered], {}).view.groups["a"].variants[0].placement.required == ("c1",)


def test_after_a_steered_start_the_view_keeps_the_users_list(tmp_path: Path) -> None:
    """End to end through the enforcer: the lists it records before steering are the ones the next view reads."""
    fake = FakeSlurm([replace(job(1, "a"), excluded_nodes="g1")])
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    _apply(enforcer, Plan((Start("a", "cpu", ("c1",)),)), _obs(fake, store, now[0]), now[0])
    assert fake.verbs() == ["update_each 1:c1", "release"]
    fake.table[1] = replace(fake.table[1], required_nodes="c1")  # as Slurm shows it once steered
    placement = _obs(fake, store, now[0]).view.groups["a"].variants[0].placement
    assert (placement.required, placement.excluded) == ((), ("g1",))


@pytest.mark.parametrize("constraint", ["bigmem*2", "!gpu", "a&&b", "(x86", "x" * 2000])
def test_a_constraint_slurmx_cannot_read_leaves_the_group_to_slurm_in_one_line(constraint: str,
                                                                               tmp_path: Path) -> None:
    """Not in the view (no policy places it wrongly), one reason line, its leases no longer renewed (Slurm starts
    a variant once its lease runs out, by its own grammar); the other groups go on; siblings still cancelled."""
    jobs = [replace(job(1, "a"), features=constraint), job(2, "a", "gpu"), job(3, "b")]
    fake = FakeSlurm(jobs)
    now = [1000.0]
    enforcer, store = _enforcer(tmp_path, fake, now)
    obs = _obs(fake, store, now[0])
    assert set(obs.view.groups) == {"b"} and obs.unplaced == frozenset({"a"}) and "a" in obs.groups
    [rejected] = obs.rejected
    assert (rejected.group_id, rejected.job_ids) == ("a", (1, 2))
    assert rejected.reason.startswith("placement slurmx cannot read (cpu job 1: ")
    assert "left to Slurm" in rejected.reason and "\n" not in rejected.reason and len(rejected.reason) < 1400
    renewed: list[list[int]] = []

    class Leases:
        def renew(self, jobs: Any, now: float, skip: Any = ()) -> list[int]:
            renewed.append([j.job_id for j in jobs])
            return []

    backend = SlurmBackend(SITE, Leases(), store, enforcer)  # type: ignore[arg-type]
    backend.obs = obs
    backend.renew_leases(now[0])
    assert renewed == [[3]]
    fake.run(2, "g1")  # Slurm started the gpu variant: the cpu one is cancelled as for any group
    enforcer.follow_up(_obs(fake, store, now[0]), now[0])
    assert fake.calls[-1] == ("cancel", (1,))


def test_a_node_list_slurmx_cannot_expand_is_set_aside_too() -> None:
    obs = _view([replace(job(1, "a"), required_nodes="c[1-"), job(3, "b")])
    assert set(obs.view.groups) == {"b"} and obs.unplaced == frozenset({"a"})


@given(st.text(max_size=60))
def test_any_constraint_either_places_by_its_rule_or_is_left_to_slurm(constraint: str) -> None:
    """Whatever a user's constraint, the cycle goes on: the group is in the view with that constraint, or set aside."""
    obs = _view([replace(job(1, "a"), features=constraint), job(3, "b")])
    assert "b" in obs.view.groups
    if "a" in obs.view.groups:
        assert obs.view.groups["a"].variants[0].placement.constraint == constraint
    else:
        assert obs.unplaced == frozenset({"a"}) and len(obs.rejected) == 1


def test_an_exclusive_variant_released_but_not_started_holds_its_whole_node_in_the_view() -> None:
    jobs = [replace(job(1, "a", state=VariantState.PENDING), exclusive=True), job(2, "a", "gpu")]
    obs = build_view(SITE, jobs, NODES, PARTITIONS, 300.0, owner_of=spool_owners(jobs),
                     starts={"a": StartMark("cpu", 1, ("c1",), 250.0)})
    assert obs.view.nodes["c1"].free == Resources()  # nothing else is put beside it before Slurm starts it
