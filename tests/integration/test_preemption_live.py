"""Issue 4's acceptance on a real Slurm: the preemption protocol against the examples, end to end.

Each job is submitted through slurmx's submit API (one `cpu` variant, pick mode: no daemon needed), preempted
through `slurmx.daemon.preemption` (or the `slurmx preempt` command), requeued by Slurm, and restarted; the
examples' own logs on shared storage prove what each run did. The runs are shortened (a few hundred steps at
0.1 s) so that a Slurm version takes about four minutes; the cluster's requeue delay is ~11 s.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from slurmx.cli.preempt import preempt_command
from slurmx.core.config import SiteConfig, load_site_config
from slurmx.core.model import VariantState
from slurmx.daemon.preemption import Ending, Settlement, preempt_and_wait
from slurmx.hooks import read_progress
from slurmx.slurm import CliSlurm
from slurmx.slurm.records import SlurmJob
from slurmx.submit.spec import JobSpec, parse_spec
from slurmx.submit.submitter import SubmittedGroup, submit_group

from .conftest import REPO, Cluster, wait_until

pytestmark = pytest.mark.integration

EXAMPLES = REPO / "examples"
GRACE_S = 20


@dataclass(frozen=True)
class Deployed:
    """The examples copied to the cluster's shared storage, where the nodes run them (as a user would)."""

    folder: Path  # train_loop.py, counter.sh
    work: Path  # world-writable: checkpoint folders and markers (jobs run as alice)
    site_path: Path
    site: SiteConfig


@pytest.fixture(scope="module")
def deployed(cluster: Cluster) -> Iterator[Deployed]:
    folder = cluster.shared / f"examples-{os.getpid()}"
    work = cluster.shared / f"preempt-{os.getpid()}"
    for path in (folder, work):
        shutil.rmtree(path, ignore_errors=True)
    folder.mkdir()
    work.mkdir()
    work.chmod(0o1777)
    for source in (EXAMPLES / "train_loop.py", EXAMPLES / "counter.sh"):  # hook.sh comes with the job template
        shutil.copy(source, folder / source.name)
    for path in [folder, *folder.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    site_path = cluster.dir / "site.yaml"
    yield Deployed(folder, work, site_path, load_site_config(site_path))
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)


def example_spec(name: str, deployed: Deployed, tag: str, **fields: Any) -> JobSpec:
    """examples/<name>.yaml as shipped, with a shorter run, a checkpoint folder of its own and the working
    directory pointing at the deployed copy (`slurmx submit --chdir=... examples/<name>.yaml`)."""
    data = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    data.update(name=f"{tag}-{name}", checkpoint_dir=str(deployed.work / f"{tag}-ckpt"), **fields)
    data["sbatch"] = [*data.get("sbatch", []), f"--chdir={deployed.folder}"]
    return parse_spec(data, f"examples/{name}.yaml")


def submit(spec: JobSpec, deployed: Deployed, slurm: CliSlurm, cleanup: list[int]) -> tuple[SubmittedGroup, int]:
    group = submit_group(spec, deployed.site, slurm, mode="pick", pick="cpu")
    [job_id] = group.job_ids()
    cleanup.append(job_id)
    return group, job_id


def snapshot(slurm: CliSlurm, job_id: int) -> SlurmJob | None:
    found = slurm.jobs(job_ids=[job_id])
    return found[0] if found else None


def log_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def wait_for_line(path: Path, pattern: str, timeout: float, what: str) -> re.Match[str]:
    """The first line of the example's log matching `pattern` (the log survives requeues on shared storage)."""
    def probe() -> re.Match[str] | None:
        return next((m for line in log_lines(path) if (m := re.fullmatch(pattern, line))), None)

    return wait_until(probe, timeout, f"{what} in {path.name}: {log_lines(path)[-3:]}")


def wait_for_step(group: SubmittedGroup, job_id: int, restarts: int, step: int, timeout: float = 90) -> None:
    """Until the job's progress file (slurmx.hooks.progress) shows this run past `step`."""
    path = Path(group.spool_dir) / f"progress-{job_id}.json"

    def probe() -> bool:
        data = read_progress(path)
        return bool(data and data.get("restart_count") == restarts and int(data.get("step") or 0) >= step)

    wait_until(probe, timeout, f"job {job_id} run {restarts} past step {step}", every=0.5)


def preempt(slurm: CliSlurm, deployed: Deployed, group: SubmittedGroup, job_id: int,
            grace_s: float = GRACE_S) -> Ending:
    """The protocol as the daemon runs it: intent file in the group's spool, signal, wait, requeue."""
    prefs = deployed.site.preemption
    return preempt_and_wait(slurm, job_id, grace_s, signal=prefs.signal, spool_dir=group.spool_dir,
                            reason="integration test", requeue_exit_code=prefs.requeue_exit_code, poll=0.5)


def assert_checkpointed_inside_grace(outcome: Ending, job_id: int) -> None:
    assert outcome.error is None, outcome.error
    # It checkpointed and exited with the requeue code: slurmx requeues it, or Slurm itself does where the site sets
    # RequeueExit (the test cluster does, so accounting records the run as REQUEUED, not FAILED).
    by_slurm = outcome.action is Settlement.ALREADY_REQUEUED and "Slurm requeued it (RequeueExit" in outcome.why
    assert outcome.action is Settlement.REQUEUE_BY_JOB or by_slurm, outcome.line()
    assert (outcome.requeued or by_slurm) and outcome.waited_s < GRACE_S  # on its own, well before the deadline


def finished(slurm: CliSlurm, job_id: int, restarts: int) -> SlurmJob:
    """Squeue agrees with the log: completed, exit 0, restarted exactly `restarts` times."""
    final = wait_until(lambda: (j := snapshot(slurm, job_id)) and j.state is VariantState.COMPLETED and j,
                       60, f"job {job_id} to complete")
    assert final.restart_count == restarts and final.exit_code == 0
    return final


# ------------------------------------------------------------------------------------------------ the examples


@pytest.mark.long_behaviour
def test_train_loop_checkpoints_requeues_and_resumes(slurm: CliSlurm, deployed: Deployed, tag: str,
                                                    cleanup: list[int]) -> None:
    steps = 250
    group, job_id = submit(example_spec("train_loop", deployed, tag, work=steps), deployed, slurm, cleanup)
    log = deployed.work / f"{tag}-ckpt" / "train_loop.log"
    wait_for_step(group, job_id, restarts=0, step=40)

    outcome = preempt(slurm, deployed, group, job_id)
    assert_checkpointed_inside_grace(outcome, job_id)
    assert not (Path(group.spool_dir) / f"preempt-{job_id}").exists()  # the intent is closed after the requeue
    saved = wait_for_line(log, r"CHECKPOINT restart=0 at=(\d+) sum=(\d+) left=([\d.]+)s", 5, "the checkpoint")
    at, left = int(saved.group(1)), float(saved.group(3))
    assert at >= 40 and 0 < left <= GRACE_S + 1  # written inside the grace period the protocol announced

    resumed = wait_for_line(log, r"START restart=1 from=(\d+) sum=(\d+)", 90, "the restart")
    assert int(resumed.group(1)) == at and resumed.group(2) == saved.group(2)  # from the checkpoint, not zero
    done = wait_for_line(log, r"DONE steps=(\d+) sum=(\d+) expected=(\d+) restarts=(\d+) runs=(\S+)", 90, "DONE")
    assert done.groups() == (str(steps), done.group(3), str(steps * (steps - 1) * (2 * steps - 1) // 6), "1",
                             f"0-{at},{at}-{steps}")  # every step exactly once, over two runs
    assert log_lines(log)[0] == "START restart=0 from=0 sum=0"
    finished(slurm, job_id, restarts=1)


def test_bash_counter_checkpoints_requeues_and_resumes(slurm: CliSlurm, deployed: Deployed, tag: str,
                                                      cleanup: list[int]) -> None:
    """The same for counter.sh, preempted through the admin command `slurmx preempt`."""
    total = 150
    spec = example_spec("counter", deployed, tag, work=total, env={"COUNTER_STEP_S": "0.1"})
    group, job_id = submit(spec, deployed, slurm, cleanup)
    log = deployed.work / f"{tag}-ckpt" / "counter.log"
    wait_for_step(group, job_id, restarts=0, step=30)

    result = CliRunner().invoke(preempt_command, [str(job_id), "--grace", str(GRACE_S), "--poll", "0.5",
                                                  "--site", str(deployed.site_path)])
    assert result.exit_code == 0, result.output
    assert re.fullmatch(rf"job {job_id}: checkpointed and exited for requeue \(exit 99\) after \d+ s; requeued\n"
                        rf"|job {job_id}: checkpointed and exited 99; Slurm requeued it \(RequeueExit, restart 1\) "
                        rf"after \d+ s; nothing to do\n", result.output), result.output

    saved = wait_for_line(log, r"CHECKPOINT restart=0 at=(\d+) sum=(\d+) left=(\d+)s", 5, "the checkpoint")
    at = int(saved.group(1))
    assert at >= 30 and 0 < int(saved.group(3)) <= GRACE_S + 1
    resumed = wait_for_line(log, r"START restart=1 from=(\d+) sum=(\d+)", 90, "the restart")
    assert resumed.groups() == saved.groups()[:2]
    done = wait_for_line(log, r"DONE count=(\d+) sum=(\d+) expected=(\d+) restarts=(\d+) runs=(\S+)", 90, "DONE")
    assert done.groups() == (str(total), str(total * (total - 1) // 2), str(total * (total - 1) // 2), "1",
                             f"0-{at},{at}-{total}")
    finished(slurm, job_id, restarts=1)


@pytest.mark.long_behaviour
def test_a_job_preempted_twice_resumes_twice(slurm: CliSlurm, deployed: Deployed, tag: str,
                                             cleanup: list[int]) -> None:
    steps = 300
    group, job_id = submit(example_spec("train_loop", deployed, tag, work=steps), deployed, slurm, cleanup)
    log = deployed.work / f"{tag}-ckpt" / "train_loop.log"
    cuts = []
    for run, after in ((0, 40), (1, 40)):
        wait_for_step(group, job_id, restarts=run, step=(cuts[-1] if cuts else 0) + after)
        assert_checkpointed_inside_grace(preempt(slurm, deployed, group, job_id), job_id)
        saved = wait_for_line(log, rf"CHECKPOINT restart={run} at=(\d+) sum=\d+ left=[\d.]+s", 5, "a checkpoint")
        cuts.append(int(saved.group(1)))
        resumed = wait_for_line(log, rf"START restart={run + 1} from=(\d+) sum=\d+", 90, "a restart")
        assert int(resumed.group(1)) == cuts[-1]
    first, second = cuts
    assert 0 < first < second < steps
    done = wait_for_line(log, r"DONE steps=(\d+) sum=(\d+) expected=(\d+) restarts=(\d+) runs=(\S+)", 90, "DONE")
    assert done.group(2) == done.group(3) and done.group(4) == "2"
    assert done.group(5) == f"0-{first},{first}-{second},{second}-{steps}"
    finished(slurm, job_id, restarts=2)


# ------------------------------------------------------------------------------------------------ the edges


@pytest.mark.long_behaviour
def test_a_job_that_ignores_the_signal_is_requeued_at_the_deadline(slurm: CliSlurm, deployed: Deployed, tag: str,
                                                                   cleanup: list[int]) -> None:
    """No handler anywhere and no forwarding: the batch shell swallows the signal; the requeue comes anyway."""
    marks = deployed.work / f"{tag}-runs"
    spec = parse_spec({"name": f"{tag}-deaf", "class": "be", "grace": "8s", "time": "10m", "mem": "100M",
                       "env": {"MARKS": str(marks)},
                       "command": 'echo "run restart=${SLURM_RESTART_COUNT:-0}" >> "$MARKS"; exec sleep 600'})
    group, job_id = submit(spec, deployed, slurm, cleanup)
    wait_until(lambda: "run restart=0" in (marks.read_text() if marks.exists() else ""), 90, "the first run")
    grace = 8
    started = time.monotonic()
    outcome = preempt(slurm, deployed, group, job_id, grace_s=grace)
    waited = time.monotonic() - started
    assert outcome.error is None and outcome.action is Settlement.REQUEUE_AT_DEADLINE, outcome.line()
    assert outcome.requeued and grace <= waited < grace + 6
    wait_until(lambda: "run restart=1" in marks.read_text(), 90, "the restart after the deadline")
    again = snapshot(slurm, job_id)
    assert again is not None and again.restart_count == 1


@pytest.mark.long_behaviour
def test_a_job_that_finishes_during_grace_is_left_alone(slurm: CliSlurm, deployed: Deployed, tag: str,
                                                        cleanup: list[int]) -> None:
    marks = deployed.work / f"{tag}-runs"
    spec = parse_spec({"name": f"{tag}-brief", "class": "be", "grace": "30s", "time": "10m", "mem": "100M",
                       "env": {"MARKS": str(marks)},
                       "command": 'echo "run restart=${SLURM_RESTART_COUNT:-0}" >> "$MARKS"; sleep 6; exit 0'})
    group, job_id = submit(spec, deployed, slurm, cleanup)
    wait_until(lambda: marks.exists(), 90, "the run to start")
    outcome = preempt(slurm, deployed, group, job_id, grace_s=30)
    assert outcome.error is None and outcome.action is Settlement.FINISHED, outcome.line()
    assert not outcome.requeued and outcome.waited_s < 30
    assert not (Path(group.spool_dir) / f"preempt-{job_id}").exists()
    final = snapshot(slurm, job_id)
    assert final is not None and final.state is VariantState.COMPLETED and final.restart_count == 0
    time.sleep(3)  # and it stays that way: nothing requeues it behind our back
    assert marks.read_text() == "run restart=0\n"
    assert (j := snapshot(slurm, job_id)) is not None and j.restart_count == 0
