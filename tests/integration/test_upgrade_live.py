"""Issue 34's upgrade on the real cluster: the previous release's slurmxd (the 0.1.0 wheel, in a venv of its own)
runs groups until each kind of group is in flight — a group held the old way (no lease), groups waiting under a
lease, groups running, and a victim in its grace period with a TE group waiting for its node — then it is stopped,
its store backed up, and this release's slurmxd started on the same state directory (docs/upgrade.md, "The order of
steps"). Every group must finish exactly once, the victim must get its whole grace period (requeued at the deadline
the old daemon set, by the new one), and afterwards the old release must refuse the upgraded store in one line.

Each payload writes marks on shared storage: a line per run (`.runs`), its grace signal (`.signal`), a heartbeat
per second of each run (`.beat.<restart>`), and a line when its work is done (`.done`): "exactly once" and "no grace
lost" are read from what ran, not from what the daemons say.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from slurmx.core.model import VariantState
from slurmx.daemon.backup import read_backup
from slurmx.daemon.store import MIGRATIONS, Store
from slurmx.slurm import CliSlurm
from tests.integration.conftest import Cluster, make_group_folder, wait_until
from tests.integration.test_daemon_helpers import (
    SLURMXD,
    DaemonProcess,
    Submitted,
    daemon_site,
    jobs_of,
    shared_folder,
    submit_group,
    wait_finished,
    wait_log,
)
from tests.unit.test_upgrade_downgrade import PREVIOUS, release_env, release_venv

pytestmark = pytest.mark.integration

GRACE_S = 40  # long enough for the stop, the backup and the new daemon's start to fall inside it
FIRST_RUN_S = 100  # a long BE job's first run: outlasts the grace, so the victim is requeued, never done by then
OLD_SCHEMA = 6  # 0.1.0's

# A long BE job: notes each run, the grace signal (and carries on: the daemon requeues it at the deadline), a
# heartbeat a second; its first run is long, a run after a requeue short (it "resumes").
_LONG = """M={marks}; G={gid}; R=${{SLURM_RESTART_COUNT:-0}}
echo "$R $(date +%s.%N)" >> $M/$G.runs
trap 'date +%s.%N >> $M/$G.signal' USR2
if [ "$R" = 0 ]; then n={first}; else n=3; fi
for i in $(seq 1 $n); do date +%s.%N > $M/$G.beat.$R; sleep 1 & wait $!; done
echo done >> $M/$G.done
"""
_SHORT = """M={marks}; G={gid}
echo "${{SLURM_RESTART_COUNT:-0}} $(date +%s.%N)" >> $M/$G.runs
sleep 3
echo done >> $M/$G.done
"""

# 0.1.0's site schema, asked of 0.1.0 itself: the keys of the cluster's site file it does not know (added by later
# releases) are dropped, so that both releases read one file, as at a site.
_PRUNE = """import json, sys, yaml
from pydantic import ValidationError
from slurmx.core.config import SiteConfig
data = yaml.safe_load(open(sys.argv[1]))
dropped = []
for _ in range(100):
    try:
        SiteConfig.model_validate(data)
        break
    except ValidationError as exc:
        extra = [e["loc"] for e in exc.errors() if e["type"] == "extra_forbidden"]
        if not extra:
            raise
        for loc in extra:
            parent = data
            for key in loc[:-1]:
                parent = parent[key]
            parent.pop(loc[-1], None)
            dropped.append(".".join(map(str, loc)))
yaml.safe_dump(data, open(sys.argv[1], "w"))
print(json.dumps(dropped))
"""


@dataclass
class ReleaseDaemon(DaemonProcess):
    """slurmxd of an installed release (its venv's `bin/slurmxd`), run away from this checkout."""

    venv_python: Path = Path()

    def start(self) -> None:
        self.lives += 1
        out = self.log.open("ab")
        self.proc = subprocess.Popen([str(self.venv_python.parent / "slurmxd"), "--site", str(self.site)],
                                     stdout=out, stderr=out, cwd=self.log.parent,
                                     env={**release_env(), "PYTHONUNBUFFERED": "1"})
        out.close()


def _both_releases_site(cluster: Cluster, folder: Path, python: Path) -> Path:
    path = daemon_site(cluster, folder, "fitgpp", kinds=("cpu",), grace=GRACE_S)
    pruned = subprocess.run([str(python), "-c", _PRUNE, str(path)], capture_output=True, text=True, timeout=120,
                            cwd=folder, env=release_env(), check=False)
    assert pruned.returncode == 0, f"{PREVIOUS} cannot read the site file: {pruned.stderr[-2000:]}"
    print(f"site keys {PREVIOUS} does not know, dropped: {json.loads(pruned.stdout)}")
    return path


def _held_group(slurm: CliSlurm, marks: Path, gid: str) -> Submitted:
    """A group as queued before leases: a real hold, no `l=` in its tag (slurmxd still releases it)."""
    make_group_folder(slurm, gid)
    job = slurm.submit(f"#!/bin/bash\n{_SHORT.format(marks=marks, gid=gid)}", [
        "--hold", f"--comment=slurmx:1:g={gid},v=cpu,c=be,e=5", "--qos=be", f"--job-name={gid}@cpu",
        "--cpus-per-task=1", "--mem=500M", "--output=/dev/null", "--requeue", "--partition=cpu"])
    return Submitted(gid, {"cpu": job})


def _all_running(admin: CliSlurm, groups: list[Submitted]) -> bool:
    found = jobs_of(admin, groups)
    return len(found) == len(groups) and all(j.state is VariantState.RUNNING for j in found.values())


def _floats(path: Path) -> list[float]:
    return [float(line.split()[-1]) for line in path.read_text().splitlines()] if path.exists() else []


def _digest(path: Path) -> str:
    """The store file's bytes once every committed write is in it: the WAL checkpointed first, so a write anyone
    made shows, and pages merely waiting in the WAL since the last daemon do not (any connection's close moves
    them into the file)."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.long_behaviour
def test_upgrade_from_the_previous_release_with_groups_in_flight_runs_each_once_and_keeps_the_grace(
        cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tmp_path: Path, tag: str, cleanup: list[int]) -> None:
    python = release_venv(tmp_path / f"v{PREVIOUS}")
    site = _both_releases_site(cluster, tmp_path, python)
    store_path = tmp_path / "state" / "slurmxd.sqlite"
    marks = shared_folder(cluster, f"{tag}-marks")
    old = ReleaseDaemon(site, tmp_path / "old.log", venv_python=python)
    new = DaemonProcess(site, tmp_path / "new.log")

    def long(i: int, cpus: int) -> Submitted:
        gid = f"{tag}-be{i}"
        return submit_group(slurm, tag, {"cpu": (FIRST_RUN_S, _LONG.format(marks=marks, gid=gid, first=FIRST_RUN_S))},
                            cpus=cpus, group_id=gid)

    def short(gid: str, job_class: str = "be") -> Submitted:
        return submit_group(slurm, tag, {"cpu": (5, _SHORT.format(marks=marks, gid=gid))}, job_class=job_class,
                            group_id=gid)

    running = [long(i, cpus) for i, cpus in enumerate((3, 1, 2, 2))]  # fills c1 (3+1) and c2 (2+2)
    cleanup.extend(j for g in running for j in g.jobs.values())
    old.start()
    try:
        wait_log(old, "slurmxd started")
        wait_until(lambda: _all_running(admin, running), 90, "every long BE job to run")
        waiting = [short(f"{tag}-wait{i}") for i in range(2)]  # no room: they wait under their lease
        held = _held_group(slurm, marks, f"{tag}-held")
        te = short(f"{tag}-te", "te")  # FitGpp preempts a long BE job for it
        cleanup.extend(j for g in [*waiting, held, te] for j in g.jobs.values())
        wait_log(old, "signalled job", 60)
        signalled = wait_until(lambda: [g for g in running if (marks / f"{g.group_id}.signal").exists()], 30,
                               "the victim's payload to receive the grace signal")
    finally:
        old.stop()
    stopped = time.time()
    groups = [*running, *waiting, held, te]
    [victim] = signalled
    signal_at = _floats(marks / f"{victim.group_id}.signal")[0]
    assert stopped < signal_at + GRACE_S - 10, "the old daemon was stopped too late for the grace to span the upgrade"
    assert old.proc is not None and old.proc.returncode == 0, old.text()[-2000:]

    # Every kind of group is in flight at the upgrade.
    now = jobs_of(admin, groups)
    assert all(now[g.jobs["cpu"]].state is VariantState.RUNNING for g in running), now
    assert all(now[g.jobs["cpu"]].state is not VariantState.RUNNING and (now[g.jobs["cpu"]].begin_time or 0) >
               stopped + 60 for g in [*waiting, te]), "a leased group was not waiting under its lease"
    assert now[held.jobs["cpu"]].state is VariantState.HELD

    # The backup of the procedure, taken with this release's command: the old store as the old release left it.
    backup = tmp_path / f"before-{PREVIOUS}-upgrade.sqlite"
    took = subprocess.run([*SLURMXD, "--site", str(site), "backup", str(backup)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert took.returncode == 0 and f"(schema {OLD_SCHEMA})" in took.stdout, took.stderr
    assert read_backup(backup).schema == OLD_SCHEMA
    old_store = Store(backup)  # a copy: migrating it here leaves the live store to the new daemon
    intent = old_store.intent(f"preempt:{victim.jobs['cpu']}")
    assert intent is not None and intent.step == "signalled", old_store.intents()
    deadline = float(intent.data["deadline"])
    old_store.close()

    new.start()
    try:
        wait_log(new, "slurmxd started")
        assert Store(store_path).version == len(MIGRATIONS)
        found = wait_finished(admin, groups, FIRST_RUN_S + 240)
        wait_until(lambda: not Store(store_path).intents(), 60, "the new daemon to close its last intents")
    finally:
        new.stop()

    for group in groups:
        job = found[group.jobs["cpu"]]
        assert job.state is VariantState.COMPLETED, f"{group.group_id}: {job.state}"
        assert (marks / f"{group.group_id}.done").read_text() == "done\n", f"{group.group_id} did its work twice"
        runs = (marks / f"{group.group_id}.runs").read_text().splitlines()
        assert len(runs) == (2 if group is victim else 1), f"{group.group_id} runs: {runs}"
        assert job.restart_count == (1 if group is victim else 0), group.group_id
    # The whole grace: the victim ran on until the deadline the old daemon set, and the new daemon requeued it then.
    last_beat = _floats(marks / f"{victim.group_id}.beat.0")[-1]
    assert deadline - GRACE_S - 2 <= signal_at <= deadline, (signal_at, deadline)
    assert last_beat >= deadline - 1.5, f"grace lost: requeued {deadline - last_beat:.1f} s before its deadline"
    assert last_beat <= deadline + 15, f"requeued {last_beat - deadline:.1f} s after its deadline"
    history = Store(store_path).history(victim.group_id)
    events = [(e.event, e.t) for e in history]
    assert [e for e, t in events if e == "preempt" and t < stopped], "the old daemon's audit did not carry over"
    assert [e for e, t in events if e == "requeue" and t > stopped], f"the new daemon did not requeue: {events}"
    assert "Traceback" not in old.text() and "Traceback" not in new.text()

    # Downgrade: the previous release, with its real start-up checks, refuses the upgraded store and leaves it be.
    before = _digest(store_path)
    refused = subprocess.run([str(python.parent / "slurmxd"), "--site", str(site), "--once"], capture_output=True,
                             text=True, timeout=120, cwd=tmp_path, env=release_env(), check=False)
    assert refused.returncode == 1
    last = (refused.stderr.splitlines() or [""])[-1]
    assert last == (f"slurmxd: {store_path}: schema version {len(MIGRATIONS)} is newer than this slurmx "
                    f"({OLD_SCHEMA}); upgrade slurmx"), refused.stderr
    assert _digest(store_path) == before
