"""The native test cluster: the same roles as host processes, with the host's Debian bookworm Slurm 22.05.

It installs packages, creates users and starts root daemons on the host, so it only runs when asked:
`make test-native`, as root. The module brings the cluster up through
`docker-slurm/cluster up --native` and its last test takes it down again.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# Kept out of tests/integration (which `make test` runs): it starts host Slurm daemons as root and may apt-get
# install them, so it runs only through `make test-native`.
pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "docker-slurm" / "cluster"
ROOT = Path(os.environ.get("SLURMX_CLUSTER_ROOT", "/var/tmp/slurmx-cluster"))
DIR = ROOT / "22.05-native"
CONF = DIR / "etc" / "slurm.conf"
PID_FILE = DIR / "run" / "pids"
NODES = {"a1", "c1", "c2", "g1", "g2"}


def cluster(*args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLUSTER), *args, "--native", "--slurm", "22.05"], capture_output=True, text=True,
                          timeout=timeout, check=False)


def slurm(argv: list[str], user: str = "root", timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """A Slurm client on the host against the native cluster, as `user` (runuser keeps SLURM_CONF)."""
    prefix = [] if user == "root" else ["runuser", "-u", user, "--"]
    return subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "SLURM_CONF": str(CONF)})


def recorded() -> list[tuple[int, str]]:
    """(pid, start time) of every process the pid file names."""
    return [(int(f[2]), f[3]) for f in (line.split() for line in PID_FILE.read_text().splitlines()) if len(f) == 4]


def running(pid: int, start: str) -> bool:
    """The same process still runs: not gone, not a zombie, and its PID not handed to another process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] not in ("Z", "X") and fields[19] == start


@pytest.fixture(scope="module")
def native() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.fail("the native cluster needs root")
    proc = cluster("up")
    if proc.returncode != 0:
        pytest.fail(f"cluster up --native failed:\n{proc.stderr[-3000:]}")
    assert f"SLURM_CONF={CONF}" in proc.stdout
    assert "kind: local" in proc.stdout
    yield DIR
    cluster("down", timeout=300)  # a no-op when test_down_stops_every_recorded_process already ran


def test_version_is_22_05(native: Path) -> None:
    proc = slurm(["scontrol", "--version"])
    assert proc.returncode == 0, proc.stderr
    assert "22.05" in proc.stdout


def test_every_node_idle(native: Path) -> None:
    proc = slurm(["sinfo", "-h", "-N", "-o", "%N %t"])
    assert proc.returncode == 0, proc.stderr
    states = dict(line.split() for line in proc.stdout.splitlines() if line.strip())
    assert set(states) == NODES
    assert set(states.values()) == {"idle"}


def test_job_as_alice_completes_and_is_accounted(native: Path) -> None:
    out = native / "shared" / f"native-{os.getpid()}.out"
    submit = slurm(["sbatch", "--parsable", "-p", "cpu", "-n", "1", f"--chdir={native / 'shared'}",
                    f"--output={out}", "--wrap", "echo hello from $(id -un)"], user="alice")
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 180
    fields: list[str] = []
    while time.monotonic() < deadline:
        proc = slurm(["sacct", "-n", "-X", "-P", "-j", job, "-o", "JobID,User,State,ExitCode"], user="alice")
        fields = proc.stdout.strip().split("|") if proc.returncode == 0 else []
        if len(fields) == 4 and fields[2] not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING"):
            break
        time.sleep(2)
    assert fields[:4] == [job, "alice", "COMPLETED", "0:0"], fields
    assert out.read_text().strip() == "hello from alice"


def test_status_reports_the_recorded_processes(native: Path) -> None:
    proc = cluster("status", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for pid, _start in recorded():
        assert f'"pid": {pid}' in proc.stdout


def test_down_stops_every_recorded_process(native: Path) -> None:
    procs = recorded()
    # at least the four role wrappers, mariadbd, slurmdbd and a slurmd per node
    assert len([1 for pid, start in procs if running(pid, start)]) >= 4 + 2 + len(NODES)
    proc = cluster("down", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert [pid for pid, start in procs if running(pid, start)] == []
