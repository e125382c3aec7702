"""`make demo`: bring up the real Slurm test cluster and show what slurmx sees and does on it.

Run from a checkout: `python -m slurmx.demo --slurm 24.11`. Steps: cluster up (building images the first
time), the nodes and the site-config check, then the preemption protocol by hand through the adapter —
a held job released, a grace signal that its trap catches, a requeue, and the job resuming with its
restart count — the same calls slurmxd will make.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click
from rich.console import Console

from slurmx.core.model import VariantState
from slurmx.slurm import CliSlurm, RetryPolicy, SlurmError
from slurmx.slurm.records import SlurmJob
from slurmx.slurm.transport import DockerExecTransport

T = TypeVar("T")
console = Console()

JOB = """#!/bin/bash
# A job that checkpoints a counter when the grace signal arrives and resumes from it after requeue.
ckpt={shared}/demo-counter
n=$(cat "$ckpt" 2>/dev/null || echo 0)
echo "$(date +%T) start restart=${{SLURM_RESTART_COUNT:-0}} resuming at $n" >> {log}
trap 'echo $n > "$ckpt"; echo "$(date +%T) USR2: checkpointed $n" >> {log}; exit 0' USR2
while true; do n=$((n+1)); sleep 1; done
"""


def wait_for(probe: Callable[[], T | None], what: str, timeout: float = 120) -> T:
    with console.status(f"waiting for {what}"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = probe()
            if got:
                return got
            time.sleep(1)
    raise click.ClickException(f"timed out waiting for {what}")


def show(cmd: list[str]) -> None:
    console.rule(f"[bold]$ {' '.join(cmd)}")
    subprocess.run(cmd, check=True)


def one(slurm: CliSlurm, job_id: int, *states: VariantState) -> SlurmJob | None:
    found = slurm.jobs(job_ids=[job_id])
    return found[0] if found and found[0].state in states else None


@click.command()
@click.option("--slurm", "version", default="24.11", type=click.Choice(["22.05", "24.11", "26.05"]))
def main(version: str) -> None:
    repo = Path.cwd()
    cluster = repo / "docker-slurm" / "cluster"
    if not cluster.exists():
        raise click.ClickException("run the demo from the slurmx checkout (make demo)")
    console.rule(f"[bold]1. A real Slurm {version} cluster (docker-slurm/cluster up)")
    subprocess.run([str(cluster), "up", "--slurm", version], check=True)
    login = f"slurmx-{version.replace('.', '')}-login"
    site = str(repo / "site-config" / "test-cluster.yaml")
    show([sys.executable, "-m", "slurmx.cli", "--site", site, "--container", login, "nodes"])
    show([sys.executable, "-m", "slurmx.cli", "--site", site, "--container", login, "doctor"])

    site_path = f"/var/tmp/slurmx-cluster/{version}/site.yaml"
    slurmx_cli = [sys.executable, "-m", "slurmx.cli", "--site", site_path]
    console.rule("[bold]2. slurmx submit: one spec, one variant per resource kind, one group")
    dry = subprocess.run([*slurmx_cli, "submit", "--dry-run", "examples/hello.yaml"], check=True,
                         capture_output=True, text=True).stdout
    console.rule("[bold]$ slurmx submit --dry-run examples/hello.yaml  (options of each variant)")
    for line in dry.splitlines():
        if line.startswith("# ----"):
            console.print(line, soft_wrap=True)
    managed = subprocess.run([*slurmx_cli, "submit", "--parsable", "--mode", "managed", "examples/hello.yaml"],
                             check=True, capture_output=True, text=True).stdout.strip()
    console.print(f"managed-mode group {managed}: every variant held until slurmxd chooses one")
    show([*slurmx_cli, "status", managed])
    show([*slurmx_cli, "cancel", managed])
    race = subprocess.run([*slurmx_cli, "submit", "--parsable", "--mode", "race", "examples/hello.yaml"],
                          check=True, capture_output=True, text=True).stdout.strip()
    console.print(f"race-mode group {race}: the first variant to start runs, its siblings cancel themselves")
    status_cmd = [*slurmx_cli, "status", "--json", race]
    wait_for(lambda: '"state": "completed"' in subprocess.run(status_cmd, capture_output=True, text=True).stdout,
             "the race group to finish")
    show([*slurmx_cli, "status", race])

    console.rule("[bold]3. The preemption protocol, step by step, through the adapter")
    shared = Path(f"/var/tmp/slurmx-cluster/{version}/shared")
    log = shared / "demo.log"
    for stale in (log, shared / "demo-counter"):
        stale.unlink(missing_ok=True)
    slurm = CliSlurm(DockerExecTransport(login, "alice"), RetryPolicy(retries=3, timeout_s=60))
    job_id = slurm.submit(JOB.format(shared=shared, log=log), [
        "--hold", "--job-name=demo@gpu", "--partition=gpu", "--gres=gpu:1", "--mem=200M", "--qos=be",
        "--requeue", "--signal=B:USR2@30", "--output=/dev/null", "--comment=slurmx:g=demo,v=gpu"])
    console.print(f"submitted job {job_id} held (managed mode: the daemon decides when it starts)")
    slurm.release([job_id])
    running = wait_for(lambda: one(slurm, job_id, VariantState.RUNNING), "the job to run")
    console.print(f"released -> running on {running.nodes}")
    time.sleep(5)
    slurm.signal([job_id], "USR2", batch_only=True)
    console.print("sent the grace signal USR2 to the batch shell")
    wait_for(lambda: log.exists() and "checkpointed" in log.read_text(), "the job to checkpoint")
    slurm.requeue([job_id])
    console.print("requeued: Slurm restarts it after cred_expire (lowered to 10 s on this cluster)")
    again = wait_for(lambda: one(slurm, job_id, VariantState.RUNNING), "the job to restart", 180)
    wait_for(lambda: "restart=1" in log.read_text(), "the job to resume")
    console.print(f"running again on {again.nodes}, restart count {again.restart_count}")
    console.rule("[bold]the job's own log")
    console.print(log.read_text().rstrip())
    slurm.cancel([job_id])
    console.rule("[bold]done")
    console.print(f"The cluster stays up: `make cluster-down DEMO_VERSION={version}` stops it.")


if __name__ == "__main__":
    try:
        main(standalone_mode=False)
    except (SlurmError, click.ClickException, subprocess.CalledProcessError) as exc:
        message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
        print(f"demo: {message}", file=sys.stderr)
        sys.exit(1)
