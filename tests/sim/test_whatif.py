"""`slurmx whatif`: the FIFO replay of a recorded history reproduces Slurm's start order where nothing else ran,
and the command runs end to end on recorded accounting of each Slurm version (tables, JSON, plot)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmx.cli import app
from slurmx.core.config import load_site_config
from slurmx.core.model import Node
from slurmx.core.resources import Resources
from slurmx.sim.traces.sacct_text import SACCT_FIELDS
from slurmx.sim.whatif import WhatIfError, cluster_from_nodes, load_history, read_nodes, replay
from slurmx.slurm.versions import TESTED

ROOT = Path(__file__).parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
SITE = ROOT / "site-config" / "test-cluster.yaml"
NODES = FIXTURES / "slurm" / "24.11" / "nodes.json"
ALONE = FIXTURES / "sacct" / "alone.txt"


def _history(path: Path) -> list[str]:
    """A day where each partition ran one job at a time: cpu jobs take the whole cpu node, gpu jobs both GPUs.

    Jobs are submitted in a burst, then Slurm starts each one a second after the one before it ended. Returns
    the recorded start order of the cpu partition.
    """
    t0 = datetime(2026, 11, 2, 9, 0, 0)
    rows = ["|".join(SACCT_FIELDS)]
    free = {"cpu": t0, "gpu": t0}
    order = []
    for i, (partition, minutes) in enumerate([("cpu", 10), ("gpu", 25), ("cpu", 3), ("cpu", 40), ("gpu", 5),
                                              ("cpu", 1), ("cpu", 15), ("gpu", 2), ("cpu", 7)]):
        submit = t0 + timedelta(seconds=30 * i)
        start = max(free[partition], submit) + timedelta(seconds=1)
        end = start + timedelta(minutes=minutes)
        free[partition] = end
        tres = "cpu=4,mem=8000M,node=1" if partition == "cpu" else "cpu=2,mem=1G,gres/gpu=2,node=1"
        job_id = str(200 + i)
        rows.append("|".join([job_id, f"j{i}", "alice", partition, "be", submit.isoformat(), start.isoformat(),
                              end.isoformat(), str(minutes * 60), "COMPLETED", tres, tres, "1-00:00:00", "0:0"]))
        if partition == "cpu":
            order.append(job_id)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return order


ONE_EACH = [Node("c1", ("cpu",), Resources(4, 8000), Resources(), "IDLE"),
            Node("g1", ("gpu",), Resources(4, 8000, {"gpu": 2}), Resources(), "IDLE")]


def test_fifo_replay_reproduces_the_recorded_start_order(tmp_path: Path) -> None:
    path = tmp_path / "history.txt"
    recorded = _history(path)
    site = load_site_config(SITE)
    what = replay(load_history(path, site), ONE_EACH, site, ["fifo"])
    _, times = what.runs["fifo"]
    for partition in ("cpu", "gpu"):  # in each partition, the order Slurm started its jobs in
        simulated = [t.job_id for t in sorted(times, key=lambda t: t.start) if t.partition == partition]
        actual = [t.job_id for t in sorted(what.actual, key=lambda t: t.start) if t.partition == partition]
        assert simulated == actual
        if partition == "cpu":
            assert actual == recorded


def test_one_partition_replays_at_slurms_times_less_its_start_latency(tmp_path: Path) -> None:
    """Our FIFO's head blocks every partition (Slurm's blocks its own), so times are compared on one partition."""
    path = tmp_path / "history.txt"
    _history(path)
    site = load_site_config(SITE)
    what = replay(load_history(path, site), ONE_EACH[:1], site, ["fifo"])
    _, times = what.runs["fifo"]
    assert what.skipped == {"kind gpu: no node of the listing serves it": 3}
    for k, (sim, real) in enumerate(zip(sorted(times), sorted(what.actual), strict=True)):
        assert real.start - sim.start == k + 1  # Slurm started each job 1 s after the one before it ended


def test_cluster_from_the_recorded_node_listing() -> None:
    partitions, notes = cluster_from_nodes(read_nodes(NODES), {"cpu": "cpu", "gpu": "gpu", "accel": "accel"})
    assert [(p.name, p.kind, sum(s.count for s in p.nodes)) for p in partitions] == [
        ("cpu", "cpu", 2), ("gpu", "gpu", 2), ("accel", "accel", 1)]
    assert "cpu (cpu) 2 nodes" in notes[0]
    with pytest.raises(WhatIfError, match="no node in the site's partitions"):
        cluster_from_nodes(read_nodes(NODES), {"compute": "cpu"})


def test_the_listed_nodes_keep_their_features() -> None:
    cap = Resources(4, 8000)
    nodes = [Node("c1", ("cpu",), cap, Resources(), "IDLE", ("x86",)),
             Node("c2", ("cpu",), cap, Resources(), "IDLE", ("x86", "bigmem")),
             Node("c3", ("cpu",), cap, Resources(), "IDLE", ("x86",))]
    partitions, _ = cluster_from_nodes(nodes, {"cpu": "cpu"})
    assert sorted((s.count, s.features) for s in partitions[0].nodes) == [(1, ("x86", "bigmem")), (2, ("x86",))]


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app.cli, ["whatif", "--site", str(SITE), *args])
    return result.exit_code, result.output


def test_whatif_cli_end_to_end(tmp_path: Path) -> None:
    code, out = _run("--sacct", str(ALONE), "--nodes", str(NODES), "--json", str(tmp_path / "r.json"),
                     "--plot", str(tmp_path / "plots"))
    assert code == 0, out
    for text in ("Slurm (actual)", "fifo", "jobs moved most", "left out of the replay: 4",
                 "1 never started (PENDING)", "allox could not replay this history"):
        assert text in out
    doc = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert doc["jobs"]["replayed"] == 6 and doc["jobs"]["skipped_total"] == 4  # 104 runs on 2 nodes
    # FitGpp and AlloX place a job on one node: the 2-node job is handed over to EASY backfill, and runs
    assert set(doc["policies"]) == {"fifo", "fitgpp"}
    assert doc["failed"] == {  # found before the replay, not by its stall check
        "allox": "never starts 1 of the jobs, even alone on the empty cluster: 1 like gpu TE cpus=2 mem=1G gpu:2"}
    assert doc["actual"]["all"]["wait"]["count"] == 6
    assert (tmp_path / "plots" / "wait_cdf.png").stat().st_size > 0


@pytest.mark.parametrize("version", TESTED)
def test_whatif_on_recorded_json(version: str) -> None:
    code, out = _run("--sacct", str(FIXTURES / "slurm" / version / "sacct.json"),
                     "--nodes", str(FIXTURES / "slurm" / version / "nodes.json"), "--policy", "fifo,fitgpp",
                     "--json", "-")
    assert code == 0, out
    doc = json.loads(out[: out.rindex("}\n") + 2])
    assert doc["jobs"]["skipped"] == {"running when dumped (no end time)": 2}
    assert doc["policies"]["fifo"]["jobs"] == doc["actual"]["jobs"] > 0


def test_slurms_own_scheduling_is_replayed_at_the_cadence_its_config_states(tmp_path: Path) -> None:
    """`--policy slurm`: FIFO with EASY backfill at the recorded cluster's cadence (bf_interval=5)."""
    config = FIXTURES / "slurm" / "24.11" / "show-config.txt"
    code, out = _run("--sacct", str(ALONE), "--nodes", str(NODES), "--policy", "slurm,fifo",
                     "--slurm-config", str(config), "--json", str(tmp_path / "r.json"))
    assert code == 0, out
    assert "slurm: EASY backfill every 5 s, window 1440 min, resolution 60 s, 500 jobs per pass (set by the site: " \
           "bf_interval)" in " ".join(out.split())
    doc = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert set(doc["policies"]) == {"slurm", "fifo"}
    assert doc["policies"]["slurm"]["jobs"] == doc["actual"]["jobs"] == 6
    assert any(a.startswith("slurm: EASY backfill every 5 s") for a in doc["assumptions"])
    bad = tmp_path / "bad.txt"
    bad.write_text("SchedulerParameters = bf_interval=soon\n", encoding="utf-8")
    code, out = _run("--sacct", str(ALONE), "--nodes", str(NODES), "--policy", "slurm", "--slurm-config", str(bad))
    assert code == 1 and "bf_interval='soon' is not a whole number" in out and "Traceback" not in out


def test_output_paths_are_checked_before_the_work(tmp_path: Path) -> None:
    code, out = _run("--sacct", str(ALONE), "--nodes", str(NODES), "--json", str(tmp_path / "no" / "r.json"))
    assert code == 1 and "--json" in out and "does not exist" in out


def test_bad_inputs_are_one_line(tmp_path: Path) -> None:
    code, out = _run("--sacct", str(ALONE), "--nodes", str(tmp_path / "missing.json"))
    assert code == 1 and "--nodes" in out and "scontrol show nodes --json" in out
    bad = tmp_path / "bad.txt"
    bad.write_text("JobID|Partition\n", encoding="utf-8")
    code, out = _run("--sacct", str(bad), "--nodes", str(NODES))
    assert code == 1 and "column Submit" in out and "Traceback" not in out


def test_without_nodes_the_site_cluster_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmx.cli import whatif as whatif_cli
    from slurmx.slurm.adapter import CliSlurm, RetryPolicy
    from slurmx.slurm.transport import CommandResult, ReplayTransport

    recorded = FIXTURES / "slurm" / "24.11"
    transport = ReplayTransport({
        ("scontrol", "--version"): CommandResult((), 0, (recorded / "version.txt").read_text(encoding="utf-8"), ""),
        ("scontrol", "show", "nodes"): CommandResult((), 0, (recorded / "nodes.json").read_bytes(), ""),
    })
    monkeypatch.setattr(whatif_cli, "adapter_from_config", lambda _: CliSlurm(transport, RetryPolicy(retries=0)))
    code, out = _run("--sacct", str(ALONE), "--policy", "fifo")
    assert code == 0, out
    assert "replayed on the nodes of slurmx-test" in out
    assert ("scontrol", "show", "nodes", "--json") in [call[0] for call in transport.calls]
