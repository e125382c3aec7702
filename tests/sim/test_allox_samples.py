"""Profiling samples that hold machines (the AlloX authors' simulator's model, option `profiling_samples`):
the engine holds a job until its samples finish, and the policies start samples first, in their order."""

from __future__ import annotations

from slurmx.core.actions import Start
from slurmx.core.model import JobClass
from slurmx.core.resources import Resources
from slurmx.policies.allox_baselines import Drfs, DrfsArgs, EqualShare, EqualShareArgs
from slurmx.reproduce.allox import ablation
from slurmx.reproduce.allox.experiment import AS_AUTHORS_SIM, FULL, UNIT_S, RunSpec
from slurmx.reproduce.allox.samples import is_sample, with_samples
from slurmx.sim.config import parse_sim_config
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.runner import run_config
from tests.unit.test_allox import Spec, _nodes, _Run, _view


def _job(job_id: str, user: str, submit: float, gpu_units: float, cpu_units: float) -> SimJob:
    variants = {"gpu": SimVariant("gpu", Resources(1, 2048, {"gpu": 1}), gpu_units * UNIT_S),
                "cpu": SimVariant("cpu", Resources(32, 2048), cpu_units * UNIT_S)}
    return SimJob(job_id, user, submit * UNIT_S, variants)


def _run(jobs: list[SimJob], samples_first: bool) -> dict[str, tuple[float, float, str]]:
    config = parse_sim_config({
        "cluster": {"partitions": [{"name": "gpu", "kind": "gpu", "nodes": 1, "cpus": 4, "mem": "61G",
                                    "gres": "gpu:1"},
                                   {"name": "cpu", "kind": "cpu", "nodes": 1, "cpus": 32, "mem": "64G"}]},
        "policy": {"name": "drfs", "params": {"samples_first": samples_first}},
    }, "test")
    result = run_config(config, jobs)
    return {r.job_id: (r.first_start / UNIT_S if r.first_start is not None else -1.0, r.finish / UNIT_S,
                       r.kind or "") for r in result.jobs}


def test_samples_are_ceiled_to_whole_units_and_a_job_waits_for_its_arrival_group() -> None:
    jobs = with_samples([_job("a", "ann", 0, 10, 250), _job("b", "bob", 0, 20, 30), _job("c", "ann", 5, 10, 50)],
                        UNIT_S)
    by_id = {j.job_id: j for j in jobs}
    # 1% and 2% of 250 CPU units: 2.5 -> 3, 5; of 10 GPU units: 0.1 -> 1 (at least one unit), 0.2 -> 1
    assert [by_id[f"a~{n}"].variants[k].duration_s / UNIT_S for n, k in
            ((1, "cpu"), (2, "cpu"), (3, "gpu"), (4, "gpu"))] == [3, 5, 1, 1]
    assert set(by_id["a"].meta["after"]) == {f"{x}~{n}" for x in "ab" for n in range(1, 5)}
    assert set(by_id["c"].meta["after"]) == {f"c~{n}" for n in range(1, 5)}
    assert all(is_sample(j.job_id) == ("~" in j.job_id) for j in jobs)


def test_the_engine_shows_a_job_only_after_its_group_s_samples_and_samples_go_first() -> None:
    jobs = with_samples([_job("a", "ann", 0, 10, 250), _job("b", "bob", 0, 20, 30)], UNIT_S)
    got = _run(jobs, samples_first=True)
    samples_end = max(got[f"{x}~{n}"][1] for x in "ab" for n in range(1, 5))
    # one GPU and one CPU node: the eight samples run one after another per kind; a (CPU 3 + 5 units) and b
    # (CPU 1 + 1) take 10 units of the CPU node; nothing of a or b starts before the last sample ends
    assert samples_end == 10.0
    assert min(got["a"][0], got["b"][0]) == samples_end
    # round robin by user: ann's first sample (CPU), bob's first (CPU, refused: the node is taken) ...
    assert got["a~1"][0] == 0.0 and got["a~3"][0] == 0.0


def test_without_the_option_a_policy_never_starts_samples_first() -> None:
    # the same samples without samples_first are ordinary waiting jobs to DRFS (DRF over users, SJF): they
    # still run, and the jobs are still held until they finish
    jobs = with_samples([_job("a", "ann", 0, 10, 250), _job("b", "bob", 0, 20, 30)], UNIT_S)
    got = _run(jobs, samples_first=False)
    assert min(got["a"][0], got["b"][0]) >= max(got[f"{x}~{n}"][1] for x in "ab" for n in range(1, 5))


def test_start_samples_takes_each_user_s_rth_waiting_sample_in_turn_and_stops_a_kind_when_full() -> None:
    # 3 GPUs, 0 free CPU nodes: ann has samples g1 g2 g3 (all GPU), bob b1 (GPU); round 0: ann's 1st (g1),
    # bob's 1st (b1); round 1: ann's 2nd still waiting is g3 (g2 moved to 1st when g1 started); then GPUs full
    specs = [*(Spec(name, user, {"gpu": 1.0}, job_class=JobClass.TE)
               for name, user in (("a~1", "ann"), ("a~2", "ann"), ("a~3", "ann"), ("b~1", "bob"))),
             Spec("x", "bob", {"gpu": 1.0})]
    view = _view(0.0, specs, {}, {s.name: 1.0 for s in specs}, set(), _nodes(1, 3, 0))
    plan = Drfs(DrfsArgs(samples_first=True)).schedule(view, 0.0)
    assert [a.group_id for a in plan.of_type(Start)] == ["a~1", "b~1", "a~3"]


def test_the_option_runs_samples_only_where_the_authors_profile_and_never_by_default() -> None:
    def spec(policy: str, variant: str) -> RunSpec:
        return RunSpec.make(policy, 0, FULL, source="authors", variant=variant)

    assert all(spec(p, AS_AUTHORS_SIM).samples for p in ("drfs", "es", "drfa", "allox"))
    assert not spec("drff", AS_AUTHORS_SIM).samples  # DRFF never profiles
    assert not any(spec(p, "").samples for p in ("drfs", "es", "drfa", "allox"))
    assert spec("drfs", AS_AUTHORS_SIM).config().profiling.fraction == 0.0  # the samples are the profiling


def test_the_ablation_shares_a_run_between_settings_whose_options_do_not_touch_the_policy() -> None:
    on = ablation.SETTINGS["as the authors' simulator (all options)"]
    assert ablation._key("drfs", on) == ablation._key("drfs", f"{AS_AUTHORS_SIM}:-es_gpu_pass")
    assert ablation._key("drfs", on) != ablation._key("drfs", f"{AS_AUTHORS_SIM}:-profiling_samples")
    assert ablation._key("srpt", on) == ablation._key("srpt", "")  # no option applies to SRPT
    table = ablation.table({"s": {"allox": 50.0, "drff": 1000.0, "drfs": 100.0, "es": 200.0, "drfa": 50.0,
                                  "srpt": 40.0}}, {"drff": 0.95, "drfs": 0.84, "es": 0.88, "drfa": 0.53})
    assert table.rows[1][:6] == ("s", "95.0%", "50.0%", "75.0%", "0.0%", "20.0%")


def test_es_with_samples_in_passes_starts_a_waiting_sample_on_a_gpu_before_her_jobs() -> None:
    # one GPU, one CPU node busy with ann's r; ann's CPU sample a~2 (also runnable on a GPU, 1 unit) waits
    specs = [Spec("a~2", "ann", {"cpu": 5.0, "gpu": 1.0}, job_class=JobClass.TE), Spec("a", "ann", {"gpu": 10.0}),
             Spec("r", "ann", {"cpu": 100.0})]
    running = {"r": _Run("cpu", "c1", 0.0, 1.0)}
    view = _view(1.0, specs, running, {s.name: 1.0 for s in specs}, set(), _nodes(1, 1, 1))

    def starts(**args: bool) -> list[tuple[str, str]]:
        plan = EqualShare(EqualShareArgs(samples_first=True, **args)).schedule(view, 1.0)
        return [(a.group_id, a.kind) for a in plan.of_type(Start)]

    assert starts(samples_in_passes=True) == [("a~2", "gpu")]
    assert starts() == [("a", "gpu")]  # the sample waits for a CPU node


def test_es_samples_sorted_take_a_user_s_older_samples_shortest_first_and_new_ones_last() -> None:
    # one GPU, one idle CPU node: ann's samples a~1 (arrived at 0, 3 units on a GPU), a~2 (at 0, 1 unit), n~1
    # (arrived now, 0.5 units). In arrival order a~1 takes the GPU; by length a~2 does: n~1, though
    # shortest, arrived now and sits behind both (their ES has not sorted it yet)
    specs = [Spec("a~1", "ann", {"gpu": 3.0}, job_class=JobClass.TE),
             Spec("a~2", "ann", {"gpu": 1.0}, job_class=JobClass.TE),
             Spec("n~1", "ann", {"gpu": 0.5}, submit=1.0, job_class=JobClass.TE)]

    def starts(view_specs: list[Spec], cpu_busy: bool, **args: str) -> list[str]:
        running = {"r": _Run("cpu", "c1", 0.0, 1.0)} if cpu_busy else {}
        view = _view(1.0, view_specs, running, {s.name: 1.0 for s in view_specs}, set(), _nodes(1, 1, 1))
        plan = EqualShare(EqualShareArgs(samples_first=True, **args)).schedule(view, 1.0)
        return [a.group_id for a in plan.of_type(Start)]

    assert starts(specs, False) == ["a~1"]
    assert starts(specs, False, samples_order="base_kind") == ["a~2"]
    # older samples waiting for every kind (a CPU sample behind bob's r): their turn filled every kind, so
    # their ES did not run and did not sort: arrival order, as without the option
    more = [*specs, Spec("c~1", "ann", {"cpu": 2.0}, job_class=JobClass.TE), Spec("r", "bob", {"cpu": 9.0})]
    assert starts(more, True, samples_order="base_kind") == ["a~1"]
