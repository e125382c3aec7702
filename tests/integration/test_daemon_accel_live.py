"""slurmxd with the accelerator batch policy (`accel_batch`, Zhao et al.) on the real cluster.

A batch of 8 groups with an accel and a cpu variant each, on three responders: a1 (accel), c1 and c2 (cpu).
Per-node ingress rates and speeds (policy arguments) make every job fit exactly one responder below T_LP, so
the plan is unique and stays the same as the rolling horizon re-plans the rest of the batch: the whole run can
be checked against the plan made on the daemon's first snapshot. MTTF orders each responder's jobs by input
size, and the groups are submitted in another order, so a daemon that started them by job id would fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from slurmx.core.actions import Start
from slurmx.core.model import VariantState
from slurmx.daemon.store import Store
from slurmx.policies.accel_batch import zhao_schedule
from slurmx.policies.accel_batch.model import BatchInstance
from slurmx.slurm import CliSlurm
from tests.integration.conftest import Cluster, make_group_folder
from tests.integration.test_daemon_helpers import (
    Submitted,
    daemon_site,
    in_process_daemon,
    run_until_finished,
    shared_folder,
)

NODES = ("a1", "c1", "c2")  # the responders, in the policy's order (kinds accel, then cpu)
NODE_KIND = {"a1": "accel", "c1": "cpu", "c2": "cpu"}
INGRESS = {"c2": 10.0}  # Mb/s; a1 and c1 keep the default 1000: big inputs must not go to c2
SPEED = {"c2": 10.0}  # c2 computes 10x faster: jobs with small inputs and long computations belong there
KIND_FLAGS = {"cpu": ["--partition=cpu"], "accel": ["--partition=accel", "--gres=accel:1"]}


@dataclass(frozen=True)
class Job:
    name: str
    input_mb: float
    accel_s: float
    cpu_s: float
    node: str  # where the plan must put it (the only responder with p_ij below T_LP)


# Submission order is not the planned order. Allowed p_ij are 2.3 .. 5 s, every other one is 30 s or more.
BATCH = (
    Job("a500", 500, 2, 40, "a1"),
    Job("b900", 900, 40, 2, "c1"),
    Job("s20", 20, 40, 30, "c2"),
    Job("a300", 300, 2, 40, "a1"),
    Job("b500", 500, 40, 2, "c1"),
    Job("a400", 400, 2, 40, "a1"),
    Job("s10", 10, 40, 30, "c2"),
    Job("b700", 700, 40, 2, "c1"),
)
# MTTF: each responder's jobs by ascending s_i / r_j.
PLANNED = {"a1": ["a300", "a400", "a500"], "c1": ["b500", "b700", "b900"], "c2": ["s10", "s20"]}


def _p(job: Job, node: str) -> float:
    """The non-overlapped time of `job` on `node`: what its payload sleeps there (Slurm does not overlap)."""
    estimate = job.accel_s if NODE_KIND[node] == "accel" else job.cpu_s
    return job.input_mb / INGRESS.get(node, 1000.0) + estimate / SPEED.get(node, 1.0)


def _payload(marks: Path, gid: str, kind: str, job: Job) -> str:
    cases = " ".join(f"{n}) t={_p(job, n):.2f};;" for n in NODES if NODE_KIND[n] == kind)
    log = marks / f"{gid}.{kind}.ran"
    return (f'case "$SLURMD_NODENAME" in {cases} *) t=1;; esac\n'
            f'echo "$SLURMD_NODENAME $(date +%s.%N)" >> {log}\nsleep $t\necho "end $(date +%s.%N)" >> {log}')


def _submit(slurm: CliSlurm, marks: Path, gid: str, job: Job) -> Submitted:
    """Held variants with a version-0 tag, as `slurmx submit` wrote them before leases (accel needs its gres, which
    the shared helper lacks): groups queued before an upgrade keep their holds, and slurmxd still runs them."""
    group = Submitted(gid)
    make_group_folder(slurm, gid)
    for kind, estimate in (("accel", job.accel_s), ("cpu", job.cpu_s)):
        group.jobs[kind] = slurm.submit(f"#!/bin/bash\n{_payload(marks, gid, kind, job)}\n", [
            "--hold", f"--comment=slurmx:g={gid},v={kind},c=be,e={estimate:g}", "--qos=be",
            f"--job-name={gid}@{kind}", "--cpus-per-task=1", "--mem=500M", "--output=/dev/null", "--requeue",
            *KIND_FLAGS[kind]])
    return group


def test_plan_of_the_batch_is_the_one_the_test_expects() -> None:
    """The same batch through `zhao_schedule` directly: the exact plan the live test holds the daemon to."""
    instance = BatchInstance(np.array([j.input_mb for j in BATCH]),
                             np.array([INGRESS.get(n, 1000.0) for n in NODES]),
                             np.array([[_p(j, n) - j.input_mb / INGRESS.get(n, 1000.0) for n in NODES]
                                       for j in BATCH]))
    schedule, lst = zhao_schedule(instance)
    assert abs(lst.t_lp - 9.0) < 1e-6  # c2's load: 10/10 + 30/10 and 20/10 + 30/10
    assert {NODES[r]: [BATCH[i].name for i in order] for r, order in enumerate(schedule.orders)} == PLANNED


@pytest.mark.long_behaviour
def test_accel_batch_live_runs_the_planned_batch_on_the_planned_responders_in_order(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    gids = {job.name: f"{tag}-{job.name}" for job in BATCH}
    params = {"kinds": ["accel", "cpu"], "input_mb": {gids[j.name]: j.input_mb for j in BATCH},
              "ingress_mbps": INGRESS, "node_speed": SPEED}
    site = daemon_site(cluster, tmp_path, "accel_batch", kinds=("accel", "cpu"), params=params)
    marks = shared_folder(cluster, f"{tag}-marks")
    groups = [_submit(slurm, marks, gids[job.name], job) for job in BATCH]
    cleanup.extend(j for g in groups for j in g.jobs.values())
    # What the policy decides on this very snapshot (held jobs: the daemon's first one is the same).
    probe = in_process_daemon(site, admin, tmp_path / "probe.sqlite")
    view = probe.observe(probe.clock()).view
    expected = {a.group_id: (a.kind, a.nodes) for a in probe.policy.schedule(view, view.now).of_type(Start)
                if a.group_id.startswith(tag)}
    assert expected == {gids[order[0]]: (NODE_KIND[n], (n,)) for n, order in PLANNED.items()}
    found, daemon = run_until_finished(site, admin, groups, 150, tmp_path / "slurmxd.log")
    assert "Traceback" not in daemon.text()

    # The daemon's decisions: every group started once, on its planned node, each node's in the planned order.
    decided: dict[str, list[tuple[int, str, str]]] = {}
    for entry in Store(tmp_path / "state" / "slurmxd.sqlite").history(limit=10_000):
        if entry.event == "decide" and entry.group_id.startswith(tag):
            words = entry.detail.split()
            assert words[0] == "start" and words[4] == "on", entry.detail
            decided.setdefault(entry.group_id, []).append((entry.cycle, words[1], words[5].rstrip(":")))
    assert all(len(d) == 1 for d in decided.values()), f"a group was decided more than once: {decided}"
    first_cycle = min(c for d in decided.values() for c, _, _ in d)
    earliest = {g: (kind, (node,)) for g, [(c, kind, node)] in decided.items() if c == first_cycle}
    assert earliest == expected, "the daemon's first decisions differ from the policy's on the same snapshot"
    by_node: dict[str, list[tuple[int, str]]] = {}
    for name, gid in gids.items():
        [(cycle, kind, node)] = decided[gid]
        by_node.setdefault(node, []).append((cycle, name))
        assert kind == NODE_KIND[node]
    assert {n: [name for _, name in sorted(d)] for n, d in by_node.items()} == PLANNED

    # What Slurm and the payloads saw: one variant per group, on that node, one job at a time per responder.
    runs: dict[str, list[tuple[float, float, str]]] = {}
    for job in BATCH:
        group = next(g for g in groups if g.group_id == gids[job.name])
        states = {kind: found[job_id].state for kind, job_id in group.jobs.items()}
        kind = NODE_KIND[job.node]
        assert states[kind] is VariantState.COMPLETED, f"{group.group_id}: {states}"
        assert all(s is VariantState.CANCELLED for k, s in states.items() if k != kind), states
        assert found[group.jobs[kind]].nodes == job.node
        ran = sorted(p.name for p in marks.glob(f"{group.group_id}.*.ran"))
        assert ran == [f"{group.group_id}.{kind}.ran"], f"payloads that ran: {ran}"
        lines = (marks / ran[0]).read_text().split("\n")
        assert len(lines) == 3 and lines[0].split()[0] == job.node and lines[1].startswith("end "), lines
        runs.setdefault(job.node, []).append((float(lines[0].split()[1]), float(lines[1].split()[1]), job.name))
    for node, spans in runs.items():
        spans.sort()
        assert [name for _, _, name in spans] == PLANNED[node], f"{node} ran {spans}"
        assert all(a[1] <= b[0] for a, b in pairwise(spans)), f"{node} overlapped: {spans}"
