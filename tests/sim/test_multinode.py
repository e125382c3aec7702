"""Multi-node jobs in the engine and FIFO: all of a job's nodes at once or none, released together, and EASY's
reservation for a head that needs several nodes. Every expected time is worked out in the test's comment."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurmx.cli.app import cli
from slurmx.core.actions import Start
from slurmx.core.resources import Resources
from slurmx.core.validation import ConfigError
from slurmx.policies import make_policy
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape, SimulationError
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.metrics import SimResult, utilisation
from slurmx.sim.traces import load_swf
from tests.sim import Scripted, cluster, run


def wide(job_id: str, submit: float, nodes: int, duration: float, cpus: int = 4, estimate: float | None = None) \
        -> SimJob:
    return SimJob(job_id, "u", submit, {"cpu": SimVariant("cpu", Resources(cpus, 100), duration, estimate, nodes)})


def starts(result: SimResult) -> dict[str, tuple[float | None, float]]:
    return {r.job_id: (r.first_start, r.finish) for r in result.jobs}


def test_a_multi_node_job_starts_on_all_its_nodes_at_once_and_frees_them_together() -> None:
    # 4 nodes of 4 CPUs. a takes 3 whole nodes for 100 s; b needs 2 whole nodes: only n4 is free until a ends,
    # so b waits (it never starts on one node), then runs 100-110 on two of the freed nodes.
    result = run([wide("a", 0, 3, 100), wide("b", 1, 2, 10)], model=cluster(nodes=4))
    assert starts(result) == {"a": (0, 100), "b": (100, 110)}
    # utilisation counts every node a job holds: 12 of 16 CPUs for 100 s, then 8 of 16 for 10 s, over 110 s
    mean = utilisation(result, 0.0, 110.0, 11)["mean"]["cpu/cpus"]
    assert mean == pytest.approx((12 * 100 + 8 * 10) / (16 * 110))


def test_the_view_shows_the_node_count_and_every_node_of_a_running_job() -> None:
    policy = Scripted(lambda view, now: make_policy("fifo").schedule(view, now).actions)
    run([wide("a", 0, 2, 10), wide("b", 1, 1, 5, cpus=1)], policy, cluster(nodes=3))
    at_b = next(s for s in policy.seen if "b" in s.pending)
    a = at_b.view.groups["a"].running_variant()
    assert a is not None and a.node_count == 2 and a.nodes == ("c001", "c002")
    assert at_b.view.groups["b"].variants[0].node_count == 1


def test_easy_reserves_enough_nodes_for_a_wide_head_and_backfills_only_what_ends_before() -> None:
    # a holds n1-n3 until 100. b (2 nodes) is blocked at t=1: n4 is free now and n1 at 100, so it is reserved
    # n4 + n1 at t=100. c (1 node, estimate 50: ends at 52) may take n4 meanwhile; d (estimate 200) may not,
    # neither at 3 nor when c leaves n4 at 52: it would hold a reserved node past 100. It starts beside b at 100.
    jobs = [wide("a", 0, 3, 100, estimate=100), wide("b", 1, 2, 10, estimate=10), wide("c", 2, 1, 50, estimate=50),
            wide("d", 3, 1, 200, estimate=200)]
    easy = starts(run(jobs, make_policy("fifo", {"backfill": "easy"}), cluster(nodes=4)))
    assert easy == {"a": (0, 100), "b": (100, 110), "c": (2, 52), "d": (100, 300)}
    # greedy lets d take n4 at 52; b still finds two nodes at 100 here (a frees three)
    greedy = starts(run(jobs, make_policy("fifo", {"backfill": "greedy"}), cluster(nodes=4)))
    assert greedy == {"a": (0, 100), "b": (100, 110), "c": (2, 52), "d": (52, 252)}
    strict = starts(run(jobs, make_policy("fifo"), cluster(nodes=4)))
    assert strict == {"a": (0, 100), "b": (100, 110), "c": (100, 150), "d": (100, 300)}  # all fit at 100


def test_a_job_wider_than_its_partition_is_refused_before_the_run() -> None:
    with pytest.raises(SimulationError, match=r"job a variant cpu: runs on 5 nodes; partition cpu has 4"):
        run([wide("a", 0, 5, 10)], model=cluster(nodes=4))


def test_a_start_naming_fewer_nodes_than_the_variant_runs_on_is_a_loud_error() -> None:
    policy = Scripted(lambda view, now: [Start("a", "cpu", ("c001",))] if "a" in view.groups else [])
    with pytest.raises(SimulationError, match=r"names 1 node\(s\) \(c001\) for a variant that runs on 2 distinct"):
        run([wide("a", 0, 2, 10)], policy, cluster(nodes=4))


WIDE_SWF = """\
; Version: 2.2
; Installation: a test machine of 8 nodes x 4 processors (written for slurmx)
; MaxNodes: 8
; MaxProcs: 32
1 0 0 100 8 -1 -1 8 200 1048576 1 1 1 -1 -1 1 -1 -1
2 10 0 50 16 -1 -1 12 100 -1 1 2 1 -1 -1 1 -1 -1
3 20 0 200 4 -1 -1 4 400 -1 1 1 1 -1 -1 1 -1 -1
4 30 0 100 32 -1 -1 32 100 -1 1 3 1 -1 -1 1 -1 -1
5 40 0 10 2 -1 100000000 2 20 -1 1 2 1 -1 -1 1 -1 -1
"""


def test_a_wide_swf_job_runs_on_the_headers_node_shape_with_nothing_dropped(tmp_path: Path) -> None:
    path = tmp_path / "wide.swf"
    path.write_text(WIDE_SWF, encoding="utf-8")
    trace = load_swf(path)
    shape = {j.job_id: (j.variants["cpu"].nodes, j.variants["cpu"].request) for j in trace.jobs}
    assert shape == {
        "swf-1": (2, Resources(4, 4096)),  # 8 allocated processors on 4-processor nodes; 1 GB per processor
        "swf-2": (4, Resources(4, 16384)),  # the allocated 16, not the requested 12
        "swf-3": (1, Resources(4, 16384)),
        "swf-4": (8, Resources(4, 16384)),
        "swf-5": (1, Resources(2, 97656)),  # 95 GB "per processor" is the job's total, on its one node
    }
    assert any("nodes of 4 processors (header MaxProcs / MaxNodes): 3 jobs span several nodes" in a
               for a in trace.assumptions)
    assert any("1 jobs give more than 32768 MB per processor, read as the job's total" in a for a in trace.assumptions)
    model = ModelCluster([PartitionShape("cpu", "cpu", (NodeShape(8, Resources(4, 128 * 1024), "n"),))])
    result = run(trace.jobs, make_policy("fifo", {"backfill": "easy"}), model)
    assert len(result.jobs) == 5 and all(not r.cancelled for r in result.jobs)
    # whatever the order, every processor-second of the log is allocated once: 8x100 + 16x50 + 4x200 + 32x100
    # + 2x10 = 5,620 over 32 processors between the first submission and the last end
    end = max(r.finish for r in result.jobs)
    mean = utilisation(result, 0.0, end, 10)["mean"]["cpu/cpus"]
    assert mean * 32 * end == pytest.approx(5620)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 4), st.integers(1, 4), st.integers(1, 60),
                          st.one_of(st.none(), st.integers(1, 120))), min_size=1, max_size=25),
       st.sampled_from(["none", "easy", "greedy"]))
def test_any_wide_workload_runs_every_job_once_with_every_processor_second_allocated_once(
        rows: list[tuple[int, int, int, int, int | None]], backfill: str) -> None:
    # 4 nodes of 4 CPUs; each job: submit, nodes, CPUs per node, run time, estimate (possibly wrong or none)
    jobs = [wide(f"j{i}", float(t), n, float(d), cpus=c, estimate=None if e is None else float(e))
            for i, (t, n, c, d, e) in enumerate(rows)]
    result = run(jobs, make_policy("fifo", {"backfill": backfill}), cluster(nodes=4))
    assert sorted(r.job_id for r in result.jobs) == sorted(j.job_id for j in jobs)
    assert all(not r.cancelled and r.first_start is not None and r.first_start >= r.submit for r in result.jobs)
    assert all(r.finish - r.first_start == pytest.approx(j.variants["cpu"].duration_s)  # type: ignore[operator]
               for r, j in zip(sorted(result.jobs, key=lambda r: r.job_id), sorted(jobs, key=lambda j: j.job_id),
                               strict=True))
    end = max(r.finish for r in result.jobs)
    offered = sum(n * c * d for _, n, c, d, _ in rows)
    mean = utilisation(result, 0.0, end, 5)["mean"]["cpu/cpus"]
    assert mean * 16 * end == pytest.approx(offered)


def test_a_cluster_from_the_swf_header_is_its_machine_and_what_it_cannot_hold_is_counted(tmp_path: Path) -> None:
    (tmp_path / "wide.swf").write_text(WIDE_SWF, encoding="utf-8")
    config = tmp_path / "run.yaml"
    config.write_text("cluster: {from_trace: {swf_header: {mem_per_cpu: 4G}}}\n"
                      "workload: {trace: wide.swf, format: swf}\npolicy: {name: fifo, params: {backfill: easy}}\n")
    out = tmp_path / "out.json"
    result = CliRunner().invoke(cli, ["sim", "run", str(config), "--json", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    # 8 nodes of 4 processors and 16 GB; swf-5's 95 GB on one node fits none and is counted, not run
    assert "the SWF header's machine: 8 nodes of 4 processors (MaxNodes 8, MaxProcs 32)" in text
    assert '"completed": 4' in text and '"larger than any node": 1' in text


def test_a_header_of_mixed_nodes_is_refused_in_one_line_naming_the_fix(tmp_path: Path) -> None:
    (tmp_path / "mixed.swf").write_text(WIDE_SWF.replace("MaxProcs: 32", "MaxProcs: 33"), encoding="utf-8")
    config = tmp_path / "run.yaml"
    config.write_text("cluster: {from_trace: {swf_header: {}}}\nworkload: {trace: mixed.swf, format: swf}\n")
    result = CliRunner().invoke(cli, ["sim", "run", str(config), "--json", str(tmp_path / "out.json")])
    assert isinstance(result.exception, ConfigError)  # `slurmx` prints a ConfigError as its one line
    assert str(result.exception) == (
        "cluster.from_trace.swf_header: the trace's header gives no machine of equal nodes (MaxNodes and "
        "MaxProcs: MaxNodes 8, MaxProcs 33); give cluster.partitions with the node shape instead")


@pytest.mark.parametrize("name", ["fitgpp", "allox", "mlfs", "tiresias"])
def test_a_one_node_policy_runs_a_wide_workload_through_the_handover(name: str) -> None:
    # The policy is never shown b or c: EASY backfill starts them on what its plan leaves. 4 nodes: a (1 node,
    # 0-10) and b (2 nodes, 5-15) run side by side; c needs 3 nodes, 2 are free until b ends at 15: 15-25.
    jobs = [wide("a", 0, 1, 10), wide("b", 5, 2, 10), wide("c", 9, 3, 10)]
    assert starts(run(jobs, make_policy(name, {}), cluster(nodes=4))) == {"a": (0, 10), "b": (5, 15),
                                                                          "c": (15, 25)}


def test_a_group_with_a_wide_variant_is_handed_over_whole_under_a_one_node_policy() -> None:
    # the policy cannot place every variant of a, so EASY decides the group: it starts its first kind that fits
    both = SimJob("a", "u", 0.0, {"cpu": SimVariant("cpu", Resources(4, 100), 10.0, None, 2),
                                 "gpu": SimVariant("gpu", Resources(1, 100, {"gpu": 1}), 10.0)})
    model = ModelCluster([PartitionShape("cpu", "cpu", (NodeShape(2, Resources(4, 4096), "c"),)),
                          PartitionShape("gpu", "gpu", (NodeShape(1, Resources(4, 4096, {"gpu": 1}), "g"),))])
    result = run([both], make_policy("sjf", {}), model)
    assert [(r.kind, r.finish) for r in result.jobs] == [("cpu", 10.0)]


def test_the_header_machine_takes_the_loaders_memory_and_refuses_another_node_size(tmp_path: Path) -> None:
    (tmp_path / "wide.swf").write_text(WIDE_SWF, encoding="utf-8")
    config = tmp_path / "run.yaml"
    out = tmp_path / "out.json"
    config.write_text("cluster: {from_trace: {swf_header: {}}}\n"  # memory per processor: the loader's 32 GB
                      "workload: {trace: wide.swf, format: swf, params: {mem_per_cpu_mb: 32768}}\n")
    result = CliRunner().invoke(cli, ["sim", "run", str(config), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "8 nodes of 4 processors (MaxNodes 8, MaxProcs 32) and 32,768 MB per processor" in out.read_text()
    assert '"completed": 5' in out.read_text()  # swf-5's 95 GB fits a 128 GB node now
    config.write_text("cluster: {from_trace: {swf_header: {}}}\n"
                      "workload: {trace: wide.swf, format: swf, params: {cpus_per_node: 8}}\n")
    result = CliRunner().invoke(cli, ["sim", "run", str(config), "--json", str(out)])
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception) == (
        "cluster.from_trace.swf_header: workload.params.cpus_per_node 8 split the jobs over nodes of that size, but "
        "the header's nodes have 4 processors; drop cpus_per_node, or give cluster.partitions")
