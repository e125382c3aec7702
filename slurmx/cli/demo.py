"""`make demo`: bring up the real Slurm test cluster and show what slurmx sees and does on it.

Run from a checkout: `python -m slurmx.cli.demo --slurm 24.11`. Steps: cluster up (building images the first
time), the nodes and the site-config check; `slurmx submit` of a three-variant group in managed mode (all
waiting under a lease for slurmxd) and in race mode (one runs, the siblings cancel themselves); then slurmxd
with AlloX choosing the cpu or gpu variant of six groups, and slurmxd with FitGpp preempting one of eight
example training loops that fill the cpu partition for a TE job: the victim checkpoints in its grace period, is
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

from slurmx.slurm import SlurmError
from slurmx.slurm.versions import DEFAULT, TESTED

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


def daemon_site(base: Path, work: Path, policy: str, kinds: tuple[str, ...], grace: int = 30) -> Path:
    """A site file for slurmxd next to the cluster's own: root (Slurm's operator here), the given policy."""
    import yaml

    data = yaml.safe_load(base.read_text())
    data["resources"] = {k: v for k, v in data["resources"].items() if k in kinds}
    data["transport"]["docker_user"] = "root"
    data["policy"] = {"name": policy, "params": {}}
    data["preemption"]["grace"] = f"{grace}s"
    data["daemon"] = {"interval": "1s", "state_dir": str(work / f"state-{policy}"), "start_timeout": "60s"}
    path = work / f"site-{policy}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def start_daemon(site: Path, log: Path) -> subprocess.Popen[bytes]:
    console.print(f"[bold]$ slurmxd --site {site}[/bold]   (log: {log})")
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-c", "from slurmx.cli import daemon_main; daemon_main()",
                                 "--site", str(site)], stdout=out, stderr=out)


def stop_daemon(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def _group_state(cli: list[str], group: str) -> str:
    out = subprocess.run([*cli, "status", "--json", group], capture_output=True, text=True).stdout
    try:
        return str(json.loads(out)[0]["state"])
    except (ValueError, IndexError, KeyError):
        return "?"


def show(cmd: list[str]) -> None:
    console.rule(f"[bold]$ {' '.join(cmd)}")
    subprocess.run(cmd, check=True)


@click.command()
@click.option("--slurm", "version", default=DEFAULT, type=click.Choice(TESTED))
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
    console.print(f"managed-mode group {managed}: every variant waits under a lease until slurmxd chooses one "
                  "(if slurmxd is gone, Slurm runs one variant once the lease runs out)")
    show([*slurmx_cli, "status", managed])
    show([*slurmx_cli, "cancel", managed])
    race = subprocess.run([*slurmx_cli, "submit", "--parsable", "--mode", "race", "examples/hello.yaml"],
                          check=True, capture_output=True, text=True).stdout.strip()
    console.print(f"race-mode group {race}: the first variant to start runs, its siblings cancel themselves")
    status_cmd = [*slurmx_cli, "status", "--json", race]
    wait_for(lambda: '"state": "completed"' in subprocess.run(status_cmd, capture_output=True, text=True).stdout,
             "the race group to finish")
    show([*slurmx_cli, "status", race])

    console.rule("[bold]3. slurmxd with AlloX: which variant of each group runs")
    shared = Path(f"/var/tmp/slurmx-cluster/{version}/shared")
    work = shared / "slurmx-demo"
    work.mkdir(exist_ok=True)
    work.chmod(0o1777)
    allox_site = daemon_site(Path(site_path), work, "allox", ("cpu", "gpu"))
    daemon = start_daemon(allox_site, work / "slurmxd-allox.log")
    groups = []
    try:
        for i in range(6):  # half gain 4x on a GPU, half barely: AlloX sends them to different kinds
            estimates = "{cpu: 40s, gpu: 10s}" if i % 2 == 0 else "{cpu: 12s, gpu: 10s}"
            spec = work / f"demo-{i}.yaml"
            spec.write_text(f"name: demo{i}\ncommand: sleep 6\nvariants: [cpu, gpu]\nclass: be\ntime: 5m\n"
                            f"estimates: {estimates}\n")
            groups.append(subprocess.run([*slurmx_cli, "submit", "--parsable", str(spec)], check=True,
                                         capture_output=True, text=True).stdout.strip())
        console.print(f"submitted {len(groups)} groups, every variant waiting for slurmxd: {', '.join(groups)}")
        wait_for(lambda: all(_group_state(slurmx_cli, g) == "completed" for g in groups),
                 "every group to run one variant and finish", 240)
    finally:
        stop_daemon(daemon)
    show([*slurmx_cli, "--site", str(allox_site), "status", *groups[:1]])
    show([*slurmx_cli, "--site", str(allox_site), "explain", groups[0]])
    show([*slurmx_cli, "--site", str(allox_site), "explain", groups[1]])

    console.rule("[bold]4. slurmxd with FitGpp: a TE job into a full cpu partition preempts one BE job, "
                 "which resumes")
    shutil.copy(repo / "examples" / "train_loop.py", work / "train_loop.py")
    fit_site = daemon_site(Path(site_path), work, "fitgpp", ("cpu",), grace=15)
    daemon = start_daemon(fit_site, work / "slurmxd-fitgpp.log")
    be: list[str] = []
    try:
        # Long enough (~4 min each) that the partition is still full when the TE job arrives.
        be_spec = work / "train_loop_long.yaml"
        be_spec.write_text((repo / "examples" / "train_loop.yaml").read_text().replace("work: 600", "work: 2400"))
        be += [subprocess.run([*slurmx_cli, "submit", "--parsable", "--variants", "cpu", f"--chdir={work}",
                               str(be_spec)], check=True, capture_output=True, text=True).stdout.strip()
               for _ in range(8)]  # 8 x 1 cpu: c1 and c2 full
        wait_for(lambda: all(_group_state(slurmx_cli, g) == "running" for g in be), "the BE jobs to fill the cpus")
        te_spec = work / "te.yaml"
        te_spec.write_text("name: te-probe\ncommand: sleep 5\nvariants: [cpu]\nclass: te\ntime: 5m\n")
        te = subprocess.run([*slurmx_cli, "submit", "--parsable", str(te_spec)], check=True, capture_output=True,
                            text=True).stdout.strip()
        console.print(f"TE group {te} submitted into a full cluster")
        wait_for(lambda: _group_state(slurmx_cli, te) == "completed", "the TE job to preempt its way in", 120)
        victims = [g for g in be if (shared / "spool" / g / "checkpoint" / "train_loop.log").exists()
                   and "CHECKPOINT" in (shared / "spool" / g / "checkpoint" / "train_loop.log").read_text()]
        console.print(f"victim(s): {', '.join(victims) or 'none'}")
        show([*slurmx_cli, "--site", str(fit_site), "explain", te])
        for victim in victims:
            log = shared / "spool" / victim / "checkpoint" / "train_loop.log"
            wait_for(lambda log=log: "START restart=1" in log.read_text(),  # type: ignore[misc]
                     "the victim to be started again and resume from its checkpoint", 300)
            show([*slurmx_cli, "--site", str(fit_site), "explain", victim])
            console.rule(f"[bold]{victim}: its own log: checkpoint at the grace signal, resume from it")
            console.print(log.read_text().rstrip())
    finally:
        stop_daemon(daemon)
        for group in be:
            subprocess.run([*slurmx_cli, "cancel", group], capture_output=True, check=False)
    console.rule("[bold]done")
    console.print(f"The cluster stays up: `make cluster-down DEMO_VERSION={version}` stops it.")


if __name__ == "__main__":
    try:
        main(standalone_mode=False)
    except (SlurmError, click.ClickException, subprocess.CalledProcessError) as exc:
        message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
        print(f"demo: {message}", file=sys.stderr)
        sys.exit(1)
