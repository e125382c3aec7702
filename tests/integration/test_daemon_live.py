"""slurmxd on the real cluster: AlloX picks variants, FitGpp preempts for a TE job, trust rules hold.

Each test runs the daemon as a child process (`slurmxd --site`), exactly as a site runs it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmx.core.actions import Preempt, Start
from slurmx.core.model import VariantState
from slurmx.daemon.store import Store
from slurmx.slurm import CliSlurm
from tests.integration.conftest import Cluster, wait_until
from tests.integration.test_daemon_helpers import (
    DaemonProcess,
    Submitted,
    daemon_site,
    in_process_daemon,
    jobs_of,
    run_until_finished,
    shared_folder,
    submit_group,
    wait_log,
)


def _marker(shared: Path, gid: str, kind: str) -> str:
    return f"echo ran >> {shared}/{gid}.{kind}.ran; sleep"


@pytest.mark.long_behaviour
def test_allox_live_runs_one_variant_per_group_as_the_policy_decides(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    site = daemon_site(cluster, tmp_path, "allox")
    marks = shared_folder(cluster, f"{tag}-marks")
    groups: list[Submitted] = []
    for i in range(12):
        gid = f"{tag}-{i:02d}"
        # Every other group runs much faster on the GPU; the rest barely gain from it: AlloX must tell them apart.
        cpu_est, gpu_est = (24, 6) if i % 2 == 0 else (8, 7)
        groups.append(submit_group(slurm, tag, {
            "cpu": (cpu_est, f"{_marker(marks, gid, 'cpu')} {cpu_est / 4:g}"),
            "gpu": (gpu_est, f"{_marker(marks, gid, 'gpu')} {gpu_est / 4:g}")}, group_id=gid))
    cleanup.extend(j for g in groups for j in g.jobs.values())
    # What the policy decides on this very snapshot, computed here in a process of its own.
    probe = in_process_daemon(site, admin, tmp_path / "probe.sqlite")
    view = probe.observe(probe.clock()).view
    expected = {a.group_id: a.kind for a in probe.policy.schedule(view, view.now).of_type(Start)
                if a.group_id.startswith(tag)}
    assert expected, "the policy starts nothing on a fresh cluster"
    found, daemon = run_until_finished(site, admin, groups, 240, tmp_path / "slurmxd.log")
    store = Store(tmp_path / "state" / "slurmxd.sqlite")
    first_cycle: dict[int, dict[str, str]] = {}
    for entry in store.history(limit=10_000):
        if entry.event == "decide" and entry.detail.startswith("start ") and entry.group_id.startswith(tag):
            first_cycle.setdefault(entry.cycle, {})[entry.group_id] = entry.detail.split()[1]
    earliest = first_cycle[min(first_cycle)]
    assert earliest == expected, "the daemon's first decisions differ from the policy's on the same snapshot"
    for group in groups:
        states = {kind: found[job_id].state for kind, job_id in group.jobs.items()}
        completed = [k for k, s in states.items() if s is VariantState.COMPLETED]
        assert len(completed) == 1, f"{group.group_id}: {states}"
        assert all(s is VariantState.CANCELLED for k, s in states.items() if k not in completed), states
        ran = sorted(p.name for p in marks.glob(f"{group.group_id}.*.ran"))
        assert ran == [f"{group.group_id}.{completed[0]}.ran"], f"payloads that ran: {ran}"
        assert (marks / ran[0]).read_text() == "ran\n", "the chosen payload ran more than once"
    assert "Traceback" not in daemon.text()


_VICTIM = """CK={ck}
LOG={log}
if [ -f "$CK" ]; then echo "resumed from $(cat $CK)" >> "$LOG"; else echo start >> "$LOG"; fi
step=0
trap 'echo $step > "$CK"; echo checkpointed >> "$LOG"; exit 99' USR2
while [ $step -lt {steps} ]; do sleep 1 & wait $!; step=$((step+1)); done
echo done >> "$LOG"
"""


def test_fitgpp_live_preempts_the_policys_victim_which_resumes(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    grace = 10
    site = daemon_site(cluster, tmp_path, "fitgpp", kinds=("cpu",), grace=grace)
    work = shared_folder(cluster, f"{tag}-work")
    be: list[Submitted] = []
    for i, cpus in enumerate((3, 1, 2, 2)):  # fills c1 (3+1) and c2 (2+2)
        gid = f"{tag}-be{i}"
        payload = _VICTIM.format(ck=work / f"{gid}.ck", log=work / f"{gid}.log", steps=40)
        be.append(submit_group(slurm, tag, {"cpu": (60, payload)}, cpus=cpus, group_id=gid))
    cleanup.extend(j for g in be for j in g.jobs.values())
    daemon = DaemonProcess(site, tmp_path / "slurmxd.log")
    daemon.start()
    try:
        wait_until(lambda: all(j.state is VariantState.RUNNING for j in jobs_of(admin, be).values())
                   and len(jobs_of(admin, be)) == 4, 90, "every BE job to run")
        daemon.stop()
        te = submit_group(slurm, tag, {"cpu": (5, "sleep 3")}, job_class="te", cpus=1, group_id=f"{tag}-te")
        cleanup.extend(te.jobs.values())
        probe = in_process_daemon(site, admin, tmp_path / "probe.sqlite")
        view = probe.observe(probe.clock()).view
        picked = [a.group_id for a in probe.policy.schedule(view, view.now).of_type(Preempt)]
        assert len(picked) == 1, f"FitGpp should pick one victim, picked {picked}"
        victim = next(g for g in be if g.group_id == picked[0])
        daemon.start()
        wait_log(daemon, "signalled job", 60)
        te_job = te.jobs["cpu"]
        # A pending job's start_time is Slurm's expected start (its lease's end): wait for it to run.
        wait_until(lambda: jobs_of(admin, [te])[te_job].state in (VariantState.RUNNING, VariantState.COMPLETED),
                   grace + 30, "the TE job to start")
        store = Store(tmp_path / "state" / "slurmxd.sqlite")
        signalled = [e for e in store.history(victim.group_id) if e.event == "preempt"]
        assert signalled, f"the daemon preempted another group than FitGpp's pick {victim.group_id}"
        started = jobs_of(admin, [te])[te_job].start_time
        assert started is not None and started - signalled[0].t <= grace + 15
        victim_log = work / f"{victim.group_id}.log"
        wait_until(lambda: victim_log.exists() and "resumed from" in victim_log.read_text(), 120,
                   "the victim to resume from its checkpoint")
    finally:
        daemon.stop()
    lines = victim_log.read_text().splitlines()
    assert lines[:2] == ["start", "checkpointed"] and lines[2].startswith("resumed from "), lines
    others = jobs_of(admin, [g for g in be if g is not victim])
    assert all(j.restart_count == 0 for j in others.values()), "a job other than the victim was requeued"
    for gid in (g.group_id for g in be if g is not victim):
        assert not [e for e in store.history(gid) if e.event in ("preempt", "requeue")]
    admin.cancel([j for g in be for j in g.jobs.values()])
