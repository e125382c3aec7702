"""Placement in the simulator: node features, constrained, pinned, excluded, exclusive and multi-node variants,
under every registered policy (its own placement, or the cycle's handover), with the model's invariants checked at
every event (`tests/sim/invariants.py`). Every expected time is worked out in the test's comment."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmx.cli.app import cli
from slurmx.core.actions import Start
from slurmx.core.placement import ANYWHERE, Placement
from slurmx.core.resources import Resources
from slurmx.core.validation import ConfigError
from slurmx.policies import available_policies, make_policy
from slurmx.policies.base import Capabilities, Policy
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape, SimulationError, SimulationInvariantError
from slurmx.sim.config import EngineOptions, parse_sim_config
from slurmx.sim.engine_actions import ActionSteps
from slurmx.sim.engine_state import JobState
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.metrics import SimResult, utilisation
from slurmx.sim.sizing import partitions_from_machines
from slurmx.sim.traces import load_alibaba
from slurmx.sim.workloads import generate
from tests.sim import Scripted, Seen
from tests.sim.invariants import CheckedEngine

FIXTURES = Path(__file__).parent / "fixtures"
GRES = {"gpu": {"gpu": 1}, "accel": {"accel": 1}}
ACCEL = {"accel_batch", "mmi", "lrtp", "sct", "jsq_plus", "rand"}  # policies of accelerator kinds (as in parity)
ONE_KIND = {"synergy": ("gpu",)}  # a policy that places only its own kind (`kind: gpu`): groups of it alone
# Synergy's model is a homogeneous cluster (its servers are shaped as the kind's first node): nodes alike for it.
SAME_SIZE = {"synergy"}


PLACING = Capabilities(max_nodes=None, places_constraints=True)  # a script that keeps to placements

def two_nodes() -> ModelCluster:
    """c001 (x86) and c002 (x86, bigmem), 4 CPUs each."""
    return ModelCluster([PartitionShape("cpu", "cpu", (NodeShape(1, Resources(4, 4096), "c", ("x86",)),
                                                       NodeShape(1, Resources(4, 4096), "d", ("x86", "bigmem"))))])


def one(job_id: str, submit: float, duration: float, cpus: int = 1, nodes: int = 1,
        placement: Placement = ANYWHERE) -> SimJob:
    return SimJob(job_id, "u", submit, {"cpu": SimVariant("cpu", Resources(cpus, 100), duration, duration, nodes,
                                                          placement)})


def checked(jobs: Sequence[SimJob], policy: Policy | None = None, model: ModelCluster | None = None,
            **options: object) -> tuple[SimResult, CheckedEngine]:
    engine = CheckedEngine(model or two_nodes(), policy or make_policy("fifo", {"backfill": "easy"}), jobs,
                           EngineOptions(**options))  # type: ignore[arg-type]
    return engine.run(), engine


def where(result: SimResult, engine: CheckedEngine) -> dict[str, tuple[float | None, float]]:
    return {r.job_id: (r.first_start, r.finish) for r in result.jobs}


def test_the_view_shows_node_features_and_each_variants_placement_and_node_count() -> None:
    seen = Scripted(lambda view, now: [], capabilities=Capabilities(max_nodes=None, places_constraints=True))
    engine = CheckedEngine(two_nodes(), seen, [one("a", 0, 10, nodes=2, placement=Placement("x86"))],
                           EngineOptions(call_when_idle=True))
    with pytest.raises(SimulationError, match="stalled"):
        engine.run()
    view = seen.seen[0].view
    assert view.nodes["c001"].features == ("x86",) and view.nodes["d001"].features == ("x86", "bigmem")
    variant = view.groups["a"].variants[0]
    assert variant.placement == Placement("x86") and variant.node_count == 2


def test_a_constrained_variant_runs_only_where_its_features_are() -> None:
    # a (bigmem) can only take d001; b and c (anywhere, 4 CPUs) then share c001 in turn: b 0-10, c 10-20.
    # d (bigmem) waits for a to leave d001 at 30, though c001 is free from 20.
    jobs = [one("a", 0, 30, cpus=4, placement=Placement("bigmem")), one("b", 1, 9, cpus=4),
            one("c", 2, 10, cpus=4), one("d", 3, 5, cpus=4, placement=Placement("bigmem"))]
    result, engine = checked(jobs)
    assert where(result, engine) == {"a": (0, 30), "b": (1, 10), "c": (10, 20), "d": (30, 35)}
    assert engine.checks > len(jobs)


def test_an_exclusive_variant_holds_its_node_whole_and_alone() -> None:
    # a asks 1 CPU but exclusive: it takes c001 whole (first fit); b (1 CPU) goes to d001 beside nothing;
    # c (exclusive) cannot share d001 with b: it waits for a to leave c001 at 10, runs 10-15.
    jobs = [one("a", 0, 10, placement=Placement(exclusive=True)), one("b", 1, 20),
            one("c", 2, 5, placement=Placement(exclusive=True))]
    result, engine = checked(jobs)
    assert where(result, engine) == {"a": (0, 10), "b": (1, 21), "c": (10, 15)}
    # c001 is held whole (4 of 4 CPUs) 0-10 and 10-15, b holds 1 CPU 1-21: 4*15 + 1*20 = 80 CPU-s over 8 x 21
    mean = utilisation(result, 0.0, 21.0, 21)["mean"]["cpu/cpus"]
    assert mean * 8 * 21 == pytest.approx(80)


def test_required_and_excluded_nodes_are_honoured() -> None:
    # a is pinned to d001 (-w), b may not take c001 (-x): both queue on d001, 0-10 then 10-20; c (anywhere,
    # 4 CPUs) takes c001 at once.
    jobs = [one("a", 0, 10, cpus=4, placement=Placement(required=("d001",))),
            one("b", 1, 10, cpus=4, placement=Placement(excluded=("c001",))), one("c", 2, 10, cpus=4)]
    result, engine = checked(jobs)
    assert where(result, engine) == {"a": (0, 10), "b": (10, 20), "c": (2, 12)}


def test_a_placement_no_node_admits_is_refused_before_the_run_in_one_line() -> None:
    with pytest.raises(SimulationError) as refused:
        checked([one("a", 0, 10), one("b", 1, 10, nodes=2, placement=Placement("bigmem"))])
    assert str(refused.value) == ("job b variant cpu: its placement (features bigmem) admits only 1 node of "
                                  "partition cpu that can hold cpus=1 mem=100M; it runs on 2")
    with pytest.raises(SimulationError, match=r"^job a variant cpu: its placement \(features gpu\) admits no node"):
        checked([one("a", 0, 10, placement=Placement("gpu"))])


def test_a_streamed_workload_places_alike_and_refuses_an_unplaceable_job_when_it_is_read() -> None:
    jobs = [one("a", 0, 30, cpus=4, placement=Placement("bigmem")), one("b", 1, 9, cpus=4),
            one("c", 2, 10, cpus=4), one("d", 3, 5, cpus=4, placement=Placement("bigmem"))]
    listed = checked(jobs)[0]
    streamed = CheckedEngine(two_nodes(), make_policy("fifo", {"backfill": "easy"}), iter(jobs)).run()
    assert [(r.job_id, r.first_start, r.finish) for r in streamed.jobs] == \
        [(r.job_id, r.first_start, r.finish) for r in listed.jobs]
    engine = CheckedEngine(two_nodes(), make_policy("fifo"), iter([one("a", 0, 10), one("b", 5, 10, nodes=2,
                                                                                         placement=Placement("gpu"))]))
    with pytest.raises(SimulationError, match=r"^job b variant cpu: its placement \(features gpu\) admits no node"):
        engine.run()


def test_a_start_on_a_node_the_placement_does_not_admit_is_an_invariant_error() -> None:
    policy = Scripted(lambda view, now: [Start("a", "cpu", ("c001",))] if "a" in view.groups else [],
                      capabilities=PLACING)
    with pytest.raises(SimulationInvariantError,
                       match=r"t=0: Start a: node c001 is not one its cpu variant may run on \(features bigmem\)"):
        checked([one("a", 0, 10, placement=Placement("bigmem"))], policy)


def test_the_invariant_checker_sees_what_the_engine_would_let_through(monkeypatch: pytest.MonkeyPatch) -> None:
    # With the engine's own check switched off, a start on a node without the feature is caught by the checker
    # at the decision that made it.
    monkeypatch.setattr(ActionSteps, "_check_admits", lambda *args: None)
    policy = Scripted(lambda view, now: [Start("a", "cpu", ("c001",))] if "a" in Seen(now, view).pending else [],
                      capabilities=PLACING)
    with pytest.raises(SimulationInvariantError, match=r"t=0: group a \(cpu\) runs on c001 \(x86\), which its "
                                                       r"placement \(features bigmem\) does not admit"):
        checked([one("a", 0, 10, placement=Placement("bigmem"))], policy)
    # An engine that forgot an exclusive job holds its node whole releases only its request: the node leaks.
    monkeypatch.setattr(JobState, "whole", property(lambda self: False, lambda self, value: None), raising=False)
    with pytest.raises(SimulationInvariantError, match=r"^t=10: node c001: its jobs hold \[0, 0\], the model says "
                                                       r"\[3, 3996\]$"):
        checked([one("a", 0, 10, placement=Placement(exclusive=True))])


@pytest.mark.parametrize("name", ["fitgpp", "allox", "mlfs", "tiresias", "sjf"])
def test_a_one_node_policy_runs_wide_and_constrained_groups_through_the_handover(name: str) -> None:
    # The policy is never shown b (2 nodes) nor c (bigmem): EASY backfill decides them on what its plan leaves.
    jobs = [one("a", 0, 10), one("b", 5, 10, nodes=2), one("c", 9, 10, placement=Placement("bigmem")),
            one("d", 12, 10, cpus=2)]
    result, _ = checked(jobs, make_policy(name, {}))
    assert sorted(r.job_id for r in result.jobs if not r.cancelled and r.first_start is not None) == \
        ["a", "b", "c", "d"]


def test_features_come_from_the_run_config() -> None:
    config = parse_sim_config({
        "cluster": {"partitions": [
            {"name": "cpu", "groups": [{"nodes": 1, "cpus": 4, "mem": "4G", "prefix": "c", "features": "x86"},
                                       {"nodes": 1, "cpus": 4, "mem": "4G", "prefix": "d",
                                        "features": ["x86", "bigmem"]}]}]},
        "workload": {"generator": "fitgpp"}})
    model = ModelCluster(config.cluster.shapes())
    assert {n.name: n.features for n in model.node_views.values()} == {"c001": ("x86",),
                                                                      "d001": ("x86", "bigmem")}


# ---- every registered policy, on random small clusters ---------------------------------------------------------

FEATURES = ("a", "b")
CONSTRAINTS = ("", "a", "b", "a&b", "a|b")


@st.composite
def clusters(draw: st.DrawFn, kinds: tuple[str, ...], same_size: bool = False) -> ModelCluster:
    """One partition per kind of 1-4 nodes, 4 or 8 CPUs each (all alike with `same_size`), features drawn from
    {a, b}."""
    partitions = []
    for kind in kinds:
        count = draw(st.integers(1, 4))
        size = draw(st.sampled_from([4, 8]))
        shapes = tuple(NodeShape(1, Resources(size if same_size else draw(st.sampled_from([4, 8])), 8192,
                                              GRES.get(kind, {})),
                                 f"{kind[0]}{i}-", tuple(draw(st.sets(st.sampled_from(FEATURES)))))
                       for i in range(count))
        partitions.append(PartitionShape(kind, kind, shapes))
    return ModelCluster(partitions)


@st.composite
def placements(draw: st.DrawFn, names: Sequence[str]) -> Placement:
    shape = draw(st.sampled_from(["anywhere", "anywhere", "constraint", "required", "excluded", "exclusive"]))
    if shape == "constraint":
        return Placement(draw(st.sampled_from(CONSTRAINTS[1:])))
    if shape == "required":
        return Placement(required=(draw(st.sampled_from(names)),))
    if shape == "excluded":
        return Placement(excluded=(draw(st.sampled_from(names)),))
    if shape == "exclusive":
        return Placement(draw(st.sampled_from(CONSTRAINTS)), exclusive=True)
    return ANYWHERE


def placeable(model: ModelCluster, kind: str, variant: SimVariant) -> bool:
    """Whether enough nodes of the kind could ever hold the variant (the engine refuses the others at set-up)."""
    nodes = [model.nodes[i] for i in model.kind_nodes[kind]]
    fit = [n for n in nodes if variant.placement.admits(n.name, n.features)
           and variant.request.cpus <= n.capacity[0]]
    return len(fit) >= variant.nodes


@st.composite
def workloads(draw: st.DrawFn, model: ModelCluster) -> list[SimJob]:
    jobs = []
    for i in range(draw(st.integers(1, 10))):
        variants: dict[str, SimVariant] = {}
        for kind in model.kinds:
            skip: bool = draw(st.booleans())
            if variants and skip:  # one variant at least; the others each by a coin
                continue
            names = [model.nodes[n].name for n in model.kind_nodes[kind]]
            duration = float(draw(st.integers(1, 60)))
            variant = SimVariant(kind, Resources(draw(st.integers(1, 4)), 500, GRES.get(kind, {})), duration,
                                 duration, draw(st.integers(1, 2)), draw(placements(names)))
            if placeable(model, kind, variant):
                variants[kind] = variant
        if variants:
            jobs.append(SimJob(f"j{i}", "u", float(draw(st.integers(0, 40))), variants))
    return jobs


@pytest.mark.parametrize("name", available_policies())
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_policy_keeps_the_invariants_and_runs_every_group_it_can(name: str, data: st.DataObject) -> None:
    kinds = ONE_KIND.get(name) or (("cpu", "gpu", "accel") if name in ACCEL else ("cpu", "gpu"))
    model = data.draw(clusters(kinds, name in SAME_SIZE))
    jobs = data.draw(workloads(model))
    if not jobs:
        return
    result, engine = checked(jobs, make_policy(name, {}), model, checkpoint="lose")
    assert engine.checks >= 2 * len(jobs)  # at least its arrival and its finish
    ran = {r.job_id for r in result.jobs if not r.cancelled and r.first_start is not None}
    assert ran == {j.job_id for j in jobs}, f"{name}: never ran: {sorted({j.job_id for j in jobs} - ran)}"


# ---- workloads and traces that carry placement -------------------------------------------------------------------

MIX = {"placement": {"constrained_fraction": 0.4, "constraints": {"cpu": "bigmem"}, "multi_node_fraction": 0.3,
                     "multi_node_max": 3}}


def test_a_generator_makes_a_seeded_share_of_constrained_and_multi_node_groups() -> None:
    plain = generate("allox", {"n_users": 4, "jobs_per_user": 50}, seed=7)
    mixed = generate("allox", {"n_users": 4, "jobs_per_user": 50, **MIX}, seed=7)
    assert mixed == generate("allox", {"n_users": 4, "jobs_per_user": 50, **MIX}, seed=7)  # the seed decides all
    assert mixed != generate("allox", {"n_users": 4, "jobs_per_user": 50, **MIX}, seed=8)
    # the generator's own draws are untouched: same ids, times, requests and durations
    assert [(j.job_id, j.submit_time, {k: (v.request, v.duration_s) for k, v in j.variants.items()})
            for j in mixed] == [(j.job_id, j.submit_time, {k: (v.request, v.duration_s)
                                                            for k, v in j.variants.items()}) for j in plain]
    pinned = [j for j in mixed if j.variants["cpu"].placement != ANYWHERE]
    wide = [j for j in mixed if j.variants["cpu"].nodes > 1]
    assert 0.25 * 200 < len(pinned) < 0.55 * 200 and 0.15 * 200 < len(wide) < 0.45 * 200
    assert all(j.variants["cpu"].placement == Placement("bigmem") and j.variants["gpu"].placement == ANYWHERE
               for j in pinned)  # only the kinds `constraints` names
    assert all(2 <= j.variants["gpu"].nodes == j.variants["cpu"].nodes <= 3 for j in wide)


def test_a_placement_share_needs_its_constraints_and_a_readable_one() -> None:
    with pytest.raises(ConfigError, match=r"placement: .*constrained_fraction needs constraints"):
        generate("allox", {"placement": {"constrained_fraction": 0.1}})
    with pytest.raises(ConfigError, match=r"placement: .*constraints.cpu: constraint 'a\*2'"):
        generate("allox", {"placement": {"constrained_fraction": 0.1, "constraints": {"cpu": "a*2"}}})


@pytest.mark.parametrize("name", ["allox", "fifo", "srpt"])
def test_a_mixed_generated_workload_runs_whole_with_the_invariants_held(name: str) -> None:
    jobs = generate("allox", {"n_users": 3, "jobs_per_user": 8, **MIX}, seed=3)
    model = ModelCluster([
        PartitionShape("cpu", "cpu", (NodeShape(2, Resources(32, 65536), "c", ("x86",)),
                                      NodeShape(3, Resources(32, 65536), "d", ("x86", "bigmem")))),
        PartitionShape("gpu", "gpu", (NodeShape(3, Resources(8, 65536, {"gpu": 4}), "g"),))])
    result, engine = checked(jobs, make_policy(name, {}), model)
    assert all(not r.cancelled and r.first_start is not None for r in result.jobs) and len(result.jobs) == 24
    assert engine.checks > 48


def test_alibaba_gpu_models_become_a_constraint_met_by_the_machines_of_that_model() -> None:
    pods = FIXTURES / "alibaba_pods.csv"
    assert all(v.placement == ANYWHERE for j in load_alibaba(pods).jobs for v in j.variants.values())
    trace = load_alibaba(pods, gpu_spec="constraint")
    pinned = {j.job_id: v.placement for j in trace.jobs for v in j.variants.values() if v.placement != ANYWHERE}
    assert pinned == {"openb-pod-0035": Placement("V100M16|V100M32")}
    assert any("1 GPU pods name the GPU models they accept" in a for a in trace.assumptions)
    machines = [("a", Resources(96, 786_432, {"gpu": 8}), "V100M32"), ("b", Resources(96, 786_432, {"gpu": 8}), "T4"),
                ("c", Resources(96, 786_432, {"gpu": 8}), "T4")]
    sized = partitions_from_machines(machines, list(trace.jobs))
    model = ModelCluster(sized.partitions)
    assert sorted(n.features for n in model.node_views.values()) == [("T4",), ("T4",), ("V100M32",)]
    result, _ = checked(sized.jobs, make_policy("fifo", {"backfill": "easy"}), model)
    ran_on = {r.job_id: r.kind for r in result.jobs}
    assert ran_on["openb-pod-0035"] == "gpu"


def test_a_run_config_with_node_features_and_a_placement_mix_runs_from_the_command_line(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(
        "cluster:\n  partitions:\n"
        "    - {name: cpu, groups: [{nodes: 1, cpus: 32, mem: 64G, prefix: c, features: x86},\n"
        "                           {nodes: 3, cpus: 32, mem: 64G, prefix: d, features: 'x86,bigmem'}]}\n"
        "    - {name: gpu, nodes: 3, cpus: 8, mem: 64G, gres: 'gpu:4'}\n"
        "workload:\n  generator: allox\n  params: {n_users: 2, jobs_per_user: 10, placement: {\n"
        "    constrained_fraction: 0.5, constraints: {cpu: bigmem}, multi_node_fraction: 0.3, multi_node_max: 3}}\n"
        "policy: {name: allox}\n", encoding="utf-8")
    out = tmp_path / "out.json"
    result = CliRunner().invoke(cli, ["sim", "run", str(config), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert '"completed": 20' in out.read_text(encoding="utf-8")
    config.write_text(config.read_text(encoding="utf-8").replace("bigmem}", "gpu}"), encoding="utf-8")
    result = CliRunner().invoke(cli, ["sim", "run", str(config), "--json", str(out)])
    assert result.exit_code != 0
    assert "variant cpu: its placement (features gpu) admits no node of partition cpu" in result.output
