"""A streamed workload (an iterator in submit order, as a trace is read): the same run as the whole sequence,
checks as each job is read, and memory that follows the jobs in the system, not the log."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from slurmx.core.resources import Resources
from slurmx.policies import make_policy
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape, SimulationError
from slurmx.sim.config import EngineOptions
from slurmx.sim.engine import Engine, Progress
from slurmx.sim.jobs import SimJob, SimVariant
from tests.sim.test_engine import tiny_workload, two_kinds


def options(**kw: object) -> EngineOptions:
    return EngineOptions(mode="event", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["fifo", "fitgpp", "allox"])
def test_a_stream_runs_as_the_sequence_estimate_errors_included(policy: str) -> None:
    jobs = tiny_workload({"jobs": 300}, seed=5)
    opts = options(error_sigma=0.4, seed=11)
    whole = Engine(two_kinds(), make_policy(policy), jobs, opts).run()
    streamed = Engine(two_kinds(), make_policy(policy), iter(jobs), opts).run()
    assert streamed.jobs == whole.jobs
    assert streamed.stats.events == whole.stats.events
    assert (streamed.util_values == whole.util_values).all()


def test_a_stream_out_of_submit_order_is_refused_naming_the_job() -> None:
    jobs = tiny_workload({"jobs": 20}, seed=1)
    jobs[7], jobs[8] = jobs[8], jobs[7]
    with pytest.raises(SimulationError, match=r"job j7 is submitted at t=.*before the job read before it"):
        Engine(two_kinds(), make_policy("fifo"), iter(jobs), options()).run()


def test_a_repeated_id_in_a_stream_is_refused_even_after_the_first_ended() -> None:
    first = SimJob("x", "u", 0.0, {"cpu": SimVariant("cpu", Resources(1, 100), 5.0)})
    again = SimJob("x", "u", 100.0, {"cpu": SimVariant("cpu", Resources(1, 100), 5.0)})
    with pytest.raises(SimulationError, match=r"job id 'x' appears twice"):
        Engine(two_kinds(), make_policy("fifo"), iter([first, again]), options()).run()


def test_a_stream_holds_only_the_jobs_in_the_system() -> None:
    # 20,000 one-CPU jobs of 50 s, one every 10 s, on 8 CPUs: at most ~5 run at once and none waits long, so the
    # engine never holds more than a handful of jobs, where a sequence would hold all 20,000.
    def stream() -> Iterator[SimJob]:
        for i in range(20_000):
            yield SimJob(f"s{i}", "u", 10.0 * i, {"cpu": SimVariant("cpu", Resources(1, 100), 50.0)})

    model = ModelCluster([PartitionShape("cpu", "cpu", (NodeShape(2, Resources(4, 4096), "c"),))])
    held: list[int] = []
    engine: Engine

    def watch(_: Progress) -> None:
        held.append(len(engine._jobs))

    engine = Engine(model, make_policy("fifo"), stream(), options(), progress=watch)
    result = engine.run()
    assert len(result.jobs) == 20_000
    assert [r.job_id for r in result.jobs[:3]] == ["s0", "s1", "s2"]
    assert max(held) <= 10
    assert not engine._jobs and not engine._by_id


def test_progress_of_a_stream_has_no_total_until_its_end() -> None:
    seen: list[Progress] = []
    jobs = tiny_workload({"jobs": 50}, seed=2)
    Engine(two_kinds(), make_policy("fifo"), iter(jobs), options(), progress=seen.append).run()
    assert seen[0].total is None
    assert (seen[-1].done, seen[-1].total) == (50, 50)
