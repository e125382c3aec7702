"""`make demo`: bring up the real Slurm test cluster and show what slurmx sees and does on it.

Run from a checkout: `python -m slurmx.demo --slurm 24.11`. Steps: cluster up (building images the first
time), the nodes and the site-config check; `slurmx submit` of a three-variant group in managed mode (all
held) and in race mode (one runs, the siblings cancel themselves); then a preemption with `slurmx preempt`
— the protocol slurmxd uses — of the example training loop, which checkpoints in its grace period, is
requeued, resumes from its checkpoint and finishes with every step counted once.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click
from rich.console import Console

from slurmx.slurm import CliSlurm, RetryPolicy, SlurmError
from slurmx.slurm.transport import DockerExecTransport

T = TypeVar("T")
console = Console()



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

    site_path = f"/var/tmp/slurmx-cluster/{version}/site.yaml"  # written by `cluster up`
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

    console.rule("[bold]3. A preemption: grace signal, checkpoint, requeue, resume (examples/train_loop.py)")
    shared = Path(f"/var/tmp/slurmx-cluster/{version}/shared")
    examples = shared / "slurmx-examples"
    examples.mkdir(exist_ok=True)
    examples.chmod(0o1777)
    shutil.copy(repo / "examples" / "train_loop.py", examples / "train_loop.py")
    group = subprocess.run([*slurmx_cli, "submit", "--parsable", "--mode", "pick", "--pick", "cpu",
                            f"--chdir={examples}", "examples/train_loop.yaml"],
                           check=True, capture_output=True, text=True).stdout.strip()
    slurm = CliSlurm(DockerExecTransport(login, "alice"), RetryPolicy(retries=3, timeout_s=60))
    log = shared / "spool" / group / "checkpoint" / "train_loop.log"
    wait_for(lambda: log.exists() and "START" in log.read_text(), "train_loop to start")
    time.sleep(8)
    job_id = json.loads(subprocess.run([*slurmx_cli, "status", "--json", group], check=True, capture_output=True,
                                       text=True).stdout)[0]["variants"][0]["job_id"]
    show([*slurmx_cli, "preempt", str(job_id), "--grace", "20"])
    wait_for(lambda: "DONE" in log.read_text(), "train_loop to resume after the requeue and finish", 240)
    again = slurm.jobs(job_ids=[job_id])
    console.print(f"job {job_id}: restart count {again[0].restart_count if again else '?'}")
    console.rule("[bold]the job's own log: every step counted exactly once across the requeue")
    console.print(log.read_text().rstrip())
    console.rule("[bold]done")
    console.print(f"The cluster stays up: `make cluster-down DEMO_VERSION={version}` stops it.")


if __name__ == "__main__":
    try:
        main(standalone_mode=False)
    except (SlurmError, click.ClickException, subprocess.CalledProcessError) as exc:
        message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
        print(f"demo: {message}", file=sys.stderr)
        sys.exit(1)
