"""Shared pieces of the slurmxd integration tests (no tests here): a site file for the daemon, the daemon as a
process we can SIGKILL, and groups submitted the way `slurmx submit` does (leased variants with the group tag)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from slurmx.core.config import load_site_config
from slurmx.daemon.loop import Daemon
from slurmx.daemon.store import Store
from slurmx.policies.base import make_policy
from slurmx.slurm import CliSlurm
from slurmx.slurm.records import SlurmJob
from tests.integration.conftest import Cluster, make_group_folder, wait_until

REPO = Path(__file__).resolve().parents[2]
SLURMXD = [sys.executable, "-c", "from slurmx.cli import daemon_main; daemon_main()"]


def daemon_site(cluster: Cluster, folder: Path, policy: str, *, kinds: tuple[str, ...] = ("cpu", "gpu"),
                grace: int = 10, interval: int = 1, start_timeout: int = 60,
                params: Mapping[str, Any] | None = None) -> Path:
    """A site file for slurmxd on the test cluster: root through docker exec, state in `folder`."""
    base = yaml.safe_load((cluster.dir / "site.yaml").read_text())
    base["resources"] = {k: v for k, v in base["resources"].items() if k in kinds}
    base["transport"]["docker_user"] = "root"
    base["policy"] = {"name": policy, "params": dict(params or {})}
    base["preemption"]["grace"] = f"{grace}s"
    base["daemon"] = {"interval": f"{interval}s", "state_dir": str(folder / "state"),
                      "socket": str(folder / "wake.sock"), "start_timeout": f"{start_timeout}s"}
    path = folder / "site.yaml"
    path.write_text(yaml.safe_dump(base))
    return path


@dataclass
class DaemonProcess:
    """`slurmxd --site PATH` as a child process, its log in the state folder."""

    site: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    lives: int = 0

    def start(self) -> None:
        self.lives += 1
        out = self.log.open("ab")
        self.proc = subprocess.Popen([*SLURMXD, "--site", str(self.site)], stdout=out, stderr=out, cwd=REPO,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        out.close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class Submitted:
    group_id: str
    jobs: dict[str, int] = field(default_factory=dict)  # kind -> job id


LEASE_S = 600  # the site's default daemon.lease
KIND_FLAGS = {"cpu": ["--partition=cpu"], "gpu": ["--partition=gpu", "--gres=gpu:1"]}


def submit_group(slurm: CliSlurm, prefix: str, variants: Mapping[str, tuple[float, str]], *, job_class: str = "be",
                 cpus: int = 1, mem: str = "500M", group_id: str | None = None, comment_extra: str = "") -> Submitted:
    """Leased variants tagged like `slurmx submit` tags them (`--begin=now+600`, `l=600`): waiting for slurmxd;
    `variants`: kind -> (estimate s, bash payload)."""
    gid = group_id or f"{prefix}-{uuid.uuid4().hex[:6]}"
    group = Submitted(gid)
    make_group_folder(slurm, gid)  # its folder first, as `slurmx submit` makes it (kept if someone made it before)
    for kind, (estimate, payload) in variants.items():
        script = f"#!/bin/bash\n{payload}\n"
        group.jobs[kind] = slurm.submit(script, [
            f"--begin=now+{LEASE_S}",
            f"--comment=slurmx:1:g={gid},v={kind},c={job_class},e={estimate:g},l={LEASE_S}{comment_extra}",
            f"--qos={job_class}", f"--job-name={gid}@{kind}", f"--cpus-per-task={cpus}", f"--mem={mem}",
            "--output=/dev/null", "--requeue", *KIND_FLAGS[kind]])
    return group


def jobs_of(admin: CliSlurm, groups: list[Submitted]) -> dict[int, SlurmJob]:
    ids = [j for g in groups for j in g.jobs.values()]
    return {j.job_id: j for j in admin.jobs(ids)}


def all_finished(admin: CliSlurm, groups: list[Submitted]) -> bool:
    found = jobs_of(admin, groups)
    return all(j.job_id in found and not found[j.job_id].state.is_active for g in groups for j in
               [found.get(i) for i in g.jobs.values()] if j is not None) and \
        len(found) == sum(len(g.jobs) for g in groups)


def wait_finished(admin: CliSlurm, groups: list[Submitted], timeout: float) -> dict[int, SlurmJob]:
    wait_until(lambda: all_finished(admin, groups), timeout, "every group to finish", every=2.0)
    return jobs_of(admin, groups)


def run_until_finished(site_path: Path, admin: CliSlurm, groups: list[Submitted], timeout: float,
                       log: Path) -> tuple[dict[int, SlurmJob], DaemonProcess]:
    """slurmxd as a process until every group has finished, stopped either way; its log stays readable."""
    daemon = DaemonProcess(site_path, log)
    daemon.start()
    try:
        found = wait_finished(admin, groups, timeout)
    finally:
        daemon.stop()
    return found, daemon


def shared_folder(cluster: Cluster, name: str) -> Path:
    """A new folder on the shared spool that the jobs (another user, on the nodes) can write marks and logs to."""
    folder = cluster.shared / name
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)  # mkdir's mode is masked by the umask
    return folder


def in_process_daemon(site_path: Path, admin: CliSlurm, state: Path) -> Daemon:
    """The daemon's parts in this process (no enforcement unless cycled): what the policy sees right now."""
    site = load_site_config(site_path)
    return Daemon(site, admin, Store(state), make_policy(site.policy.name, site.policy.params), dry_run=True)


def wait_log(daemon: DaemonProcess, text: str, timeout: float = 60) -> None:
    try:
        wait_until(lambda: text in daemon.text(), timeout, f"{text!r} in the daemon log", every=0.5)
    except AssertionError as exc:  # what the daemon did instead is the whole diagnosis
        tail = "\n".join(daemon.text().splitlines()[-40:])
        raise AssertionError(f"{exc}\n--- the daemon log ends:\n{tail}") from None


def settle_pause(seconds: float) -> None:
    """A pause that is the point of the test (letting the daemon run a few cycles unobserved)."""
    time.sleep(seconds)
