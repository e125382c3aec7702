"""Issue 34's acceptance on the cluster's login node: the client wheel that `make dist` builds from a clean clone,
installed with pip into a fresh venv there, gives `slurmx submit` and `status` against the real cluster, and no
numpy or scipy.

The login node runs Debian's Python, for which the package index reachable here has no wheels of every dependency
(pydantic-core): the image carries slurmx-hpc's base dependencies as Debian packages (docker-slurm/Dockerfile) and
the venv sees them (`--system-site-packages`), as a site whose login nodes take Python libraries from the
distribution would install it. pip still resolves each requirement of the wheel against what is installed, offline
(`--no-index`): whatever it could not satisfy would fail the install, so the venv holds exactly slurmx-hpc on top of
the base dependencies, and numpy/scipy being absent shows that nothing of a login node needs them.

On the daemon's host the same wheel with the `daemon` extra, the shipped unit (site-config/slurmxd.service) under a
real systemd, booted as PID 1 of a container: slurmxd runs as its own unprivileged user, `slurmx doctor` is green,
and the daemon releases a managed group that then runs.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tomllib
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from slurmx.slurm.versions import RELEASES
from tests.integration.conftest import REPO, Cluster, wait_until

pytestmark = pytest.mark.integration

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _login(cluster: Cluster, *argv: str, user: str = "alice", timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "exec", "-u", user, cluster.container("login"), *argv], capture_output=True,
                          text=True, timeout=timeout, check=False)


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{' '.join(map(str, done.args))} exited {done.returncode}: {done.stderr[-3000:]}"
    return done.stdout


def _skip_without_client_packages(cluster: Cluster) -> None:
    """One line when the login node cannot hold the lean client from its distribution's packages."""
    suite = next(r.suite for r in RELEASES if r.version == cluster.version)
    probe = _login(cluster, "python3", "-c", "import ensurepip, pydantic; print(pydantic.VERSION)")
    if probe.returncode != 0:
        pytest.skip(f"the login image slurmx-slurm:{cluster.version} lacks python3-venv or python3-pydantic (built "
                    f"before docker-slurm/Dockerfile installed them): `docker-slurm/cluster down --slurm "
                    f"{cluster.version}; docker rmi slurmx-slurm:{cluster.version}` and run again")
    pydantic = next(Requirement(r) for r in PROJECT["dependencies"] if Requirement(r).name == "pydantic")
    have = probe.stdout.strip()
    if not pydantic.specifier.contains(have):
        pytest.skip(f"Debian {suite}'s python3-pydantic is {have}; slurmx-hpc needs {pydantic}")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make dist` in a clean clone of this repository's HEAD. The clone uses this checkout's venv for the build
    tools (`-o` keeps make from recreating that venv for the clone, whose files are all newer than it)."""
    clone = tmp_path_factory.mktemp("clone") / "slurmx"
    _ok(subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(clone)], capture_output=True,
                       text=True, timeout=120, check=False))
    venv = REPO / ".venv"
    _ok(subprocess.run(["make", "-C", str(clone), "dist", f"VENV={venv}", "-o", str(venv / "bin" / "slurmx")],
                       capture_output=True, text=True, timeout=600, check=False))
    wheels = sorted((clone / "dist").glob("slurmx_hpc-*-py3-none-any.whl"))
    sdists = sorted((clone / "dist").glob("slurmx_hpc-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted((clone / "dist").iterdir())
    return wheels[0]


@pytest.fixture
def dist(cluster: Cluster, wheel: Path, tag: str) -> Iterator[Path]:
    """The wheel in a folder of its own on the shared storage, which the containers see at the same path."""
    folder = cluster.shared / f"{tag}-dist"
    folder.mkdir(mode=0o755)
    shutil.copy(wheel, folder)
    (folder / wheel.name).chmod(0o644)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def login_venv(cluster: Cluster, tag: str) -> Iterator[str]:
    """A venv path on the login node's own disk, alice's, gone afterwards."""
    path = f"/tmp/{tag}-venv"
    yield path
    _login(cluster, "rm", "-rf", path)


# Its Slurm calls (submit, status) every release's suite makes; what is new here is the install, on the suite of
# the release that runs the long behaviour tests.
@pytest.mark.long_behaviour
def test_the_client_wheel_installs_on_the_login_node_and_submits_without_numpy_or_scipy(
        cluster: Cluster, dist: Path, login_venv: str, tag: str) -> None:
    _skip_without_client_packages(cluster)
    bin_ = f"{login_venv}/bin"

    _ok(_login(cluster, "python3", "-m", "venv", "--system-site-packages", login_venv))
    installed = _ok(_login(cluster, f"{bin_}/pip", "install", "--no-index", "--find-links", str(dist),
                           "--disable-pip-version-check", PROJECT["name"]))
    # Every requirement was met by what the login node has: the wheel is the one thing pip installed.
    assert f"Successfully installed {PROJECT['name']}-{PROJECT['version']}\n" in installed, installed
    assert _ok(_login(cluster, f"{bin_}/pip", "check", "--disable-pip-version-check")).startswith("No broken")
    where = _ok(_login(cluster, f"{bin_}/python", "-c", "import slurmx; print(slurmx.__file__)"))
    assert where.startswith(f"{login_venv}/lib/"), where
    for module in ("numpy", "scipy"):
        probe = _login(cluster, f"{bin_}/python", "-c", f"import {module}")
        assert probe.returncode == 1 and f"No module named '{module}'" in probe.stderr, (module, probe.stderr)

    # A login node's site file: Slurm's commands are local there.
    site = yaml.safe_load((cluster.dir / "site.yaml").read_text())
    site["transport"] = {"kind": "local"}
    site_path = dist / "site.yaml"
    site_path.write_text(yaml.safe_dump(site))
    spec = dist / "job.yaml"
    spec.write_text(f"name: {tag}\nvariants: [cpu]\ntime: 5m\n"
                    'command: echo "ran $SLURMX_VARIANT as $(id -un)" > "$SLURMX_SPOOL_DIR/ran"\n')
    for path in (site_path, spec):
        path.chmod(0o644)
    slurmx = [f"{bin_}/slurmx", "--site", str(site_path)]

    # Race mode: the only variant starts without waiting for slurmxd.
    submitted = json.loads(_ok(_login(cluster, *slurmx, "submit", "--json", "--mode", "race", str(spec))))
    assert list(submitted["variants"]) == ["cpu"], submitted
    group = submitted["group"]

    def finished() -> dict[str, object] | None:
        [shown] = json.loads(_ok(_login(cluster, *slurmx, "status", "--json", group)))
        return shown if shown["state"] in ("completed", "failed", "cancelled") else None

    shown = wait_until(finished, 180, f"group {group} to finish", every=2.0)
    assert (shown["state"], shown["user"]) == ("completed", "alice"), shown
    assert Path(submitted["spool"], "ran").read_text() == "ran cpu as alice\n"
    doctor = _login(cluster, *slurmx, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr


# The daemon's host: the shipped unit under a real systemd, PID 1 of a container. The image is the cluster's (its
# munge key, Slurm's client commands, the login node's client packages) with systemd and the daemon extra's
# libraries from Debian: built once per cluster image, about 80 s, in one layer.
DAEMON_HOST_PACKAGES = "systemd systemd-sysv dbus python3-numpy python3-scipy python3-prometheus-client"
DAEMON_USER, DAEMON_UID = "slurmxd", 2100  # the account docker-slurm/cluster makes an operator and the lua guard trusts
# On a host with cgroup v1 only (the Docker engine here), systemd 256 and later refuse to boot: the container gets
# a cgroup v2 hierarchy of its own (its own cgroup namespace, so nothing of the host's shows or is touched).
_BOOT = """#!/bin/sh
set -e
mkdir -p /etc/slurm
cp "$SLURMX_CLUSTER_DIR"/etc/*.conf "$SLURMX_CLUSTER_DIR"/etc/*.lua /etc/slurm/  # as role.sh does
if ! grep -q '^cgroup2 /sys/fs/cgroup ' /proc/mounts; then
  umount -R /sys/fs/cgroup 2>/dev/null || umount -l /sys/fs/cgroup
  mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
fi
exec /sbin/init
"""


def _daemon_host_image(cluster: Cluster) -> str:
    base = f"slurmx-slurm:{cluster.version}"
    image = f"slurmx-daemonhost:{cluster.version}"
    base_id = _ok(subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", base], capture_output=True,
                                 text=True, timeout=60, check=False)).strip()
    have = subprocess.run(["docker", "image", "inspect", "-f", '{{index .Config.Labels "slurmx.base"}}', image],
                          capture_output=True, text=True, timeout=60, check=False)
    if have.returncode == 0 and have.stdout.strip() == base_id:
        return image
    dockerfile = (f"FROM {base}\n"
                  "RUN apt-get -o Acquire::Check-Valid-Until=false update"
                  f" && apt-get install -y --no-install-recommends {DAEMON_HOST_PACKAGES}"
                  " && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb"
                  " && systemctl mask slurmctld slurmd slurmdbd mariadb\n")
    _ok(subprocess.run(["docker", "build", "--network", "host", "--label", f"slurmx.base={base_id}", "-t", image, "-"],
                       input=dockerfile, capture_output=True, text=True, timeout=1800, check=False))
    return image


@pytest.fixture
def daemon_host(cluster: Cluster, tmp_path: Path) -> Iterator[str]:
    """A booted container with systemd as PID 1, on the host's network like the cluster's; gone afterwards."""
    _skip_without_client_packages(cluster)
    image = _daemon_host_image(cluster)
    name = cluster.container("daemonhost")
    boot = tmp_path / "boot.sh"
    boot.write_text(_BOOT)
    boot.chmod(0o755)
    # --rm: the engine removes the container after `docker stop`, in the background; with the vfs storage driver
    # that deletes a whole copy of the image (about a minute), which no test needs to wait for but the next start.
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=300, check=False)
    wait_until(lambda: subprocess.run(["docker", "inspect", name], capture_output=True, timeout=60,
                                      check=False).returncode != 0, 300, f"the last {name} to be removed")
    _ok(subprocess.run([
        "docker", "run", "-d", "--rm", "--name", name, "--network", "host", "--cgroupns", "private",
        # systemd mounts (cgroup2, its services' sandboxes) and seccomp filters of its own
        "--cap-add", "SYS_ADMIN", "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
        "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp", "--stop-signal", "SIGRTMIN+3",
        "-v", f"{cluster.dir}:{cluster.dir}", "-v", f"{boot}:/slurmx-boot:ro",
        # the unit's PrivateTmp= hides /var/tmp, where the test cluster keeps its shared spool: the daemon's host
        # sees it where the shipped unit's ReadWritePaths= puts a spool
        "-v", f"{cluster.shared / 'spool'}:/srv/slurmx/spool",
        "-e", f"SLURMX_CLUSTER_DIR={cluster.dir}", "--entrypoint", "/slurmx-boot", image],
        capture_output=True, text=True, timeout=120, check=False))
    try:
        wait_until(lambda: _host(name, "systemctl", "is-system-running").stdout.strip() in ("running", "degraded"),
                   120, "systemd to finish booting")
        yield name
    finally:
        subprocess.run(["docker", "stop", "-t", "30", name], capture_output=True, timeout=90, check=False)


def _host(name: str, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "exec", name, *argv], capture_output=True, text=True, timeout=timeout,
                          check=False)


def _journal(name: str) -> str:
    return _host(name, "journalctl", "-u", "slurmxd", "--no-pager").stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.long_behaviour
def test_the_shipped_unit_runs_slurmxd_as_its_own_user_under_systemd_and_doctor_is_green(
        cluster: Cluster, site_path: Path, dist: Path, daemon_host: str, tag: str) -> None:
    # docs/install.md, "The daemon's host", step by step.
    _ok(_host(daemon_host, "python3", "-m", "venv", "--system-site-packages", "/opt/slurmx"))
    installed = _ok(_host(daemon_host, "/opt/slurmx/bin/pip", "install", "--no-index", "--find-links", str(dist),
                          "--disable-pip-version-check", f"{PROJECT['name']}[daemon]"))
    assert f"Successfully installed {PROJECT['name']}-{PROJECT['version']}\n" in installed, installed
    _ok(_host(daemon_host, "ln", "-s", "/opt/slurmx/bin/slurmx", "/usr/local/bin/slurmx"))
    _ok(_host(daemon_host, "useradd", "--system", "--uid", str(DAEMON_UID), "--home-dir", "/var/lib/slurmx",
              "--shell", "/usr/sbin/nologin", DAEMON_USER))
    site = yaml.safe_load(site_path.read_text())
    port = _free_port()
    site["transport"] = {"kind": "local"}
    site["submit"]["spool_dir"] = "/srv/slurmx/spool"
    site.setdefault("daemon", {})["metrics_port"] = port
    (dist / "site.yaml").write_text(yaml.safe_dump(site))
    _ok(_host(daemon_host, "install", "-D", "-m", "644", str(dist / "site.yaml"), "/etc/slurmx/site.yaml"))
    assert ": ok" in _ok(_host(daemon_host, "slurmx", "config", "check", "/etc/slurmx/site.yaml"))
    unit = REPO / "site-config" / "slurmxd.service"
    _ok(subprocess.run(["docker", "cp", str(unit), f"{daemon_host}:/etc/systemd/system/slurmxd.service"],
                       capture_output=True, text=True, timeout=60, check=False))
    # The one change to the shipped unit: this cluster knows the daemon's account as slurmxd, not slurmx.
    _ok(_host(daemon_host, "sh", "-c", "mkdir -p /etc/systemd/system/slurmxd.service.d && printf "
              f"'[Service]\\nUser={DAEMON_USER}\\nGroup={DAEMON_USER}\\n' "
              "> /etc/systemd/system/slurmxd.service.d/user.conf"))
    _ok(_host(daemon_host, "systemctl", "daemon-reload"))
    # Type=notify: this returns once slurmxd passed its start-up checks and finished its first cycle.
    started = _host(daemon_host, "systemctl", "enable", "--now", "slurmxd")
    assert started.returncode == 0, started.stderr + _journal(daemon_host)[-3000:]

    pid = _ok(_host(daemon_host, "systemctl", "show", "-p", "MainPID", "--value", "slurmxd")).strip()
    assert _ok(_host(daemon_host, "ps", "-o", "user=", "-p", pid)).strip() == DAEMON_USER
    assert _ok(_host(daemon_host, "stat", "-c", "%U %a", "/var/lib/slurmx/slurmxd.sqlite")).split() == \
        [DAEMON_USER, "600"]
    doctor = _host(daemon_host, "slurmx", "--site", "/etc/slurmx/site.yaml", "doctor")
    assert doctor.returncode == 0 and "✗" not in doctor.stdout, doctor.stdout + doctor.stderr
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
        assert json.loads(answer.read())["status"] == "ok"

    # It schedules: a managed group (every variant waiting under a lease) is released by this daemon and runs.
    spec = dist / "job.yaml"
    spec.write_text(f"name: {tag}\nvariants: [cpu, gpu]\ntime: 5m\n"
                    'command: echo "ran $SLURMX_VARIANT" > "$SLURMX_SPOOL_DIR/ran"\n')
    spec.chmod(0o644)
    users_cli = [sys.executable, "-m", "slurmx.cli", "--site", str(site_path)]
    submitted = json.loads(_ok(subprocess.run([*users_cli, "submit", "--json", "--mode", "managed", str(spec)],
                                              capture_output=True, text=True, timeout=300, check=False)))
    group = submitted["group"]

    def finished() -> dict[str, object] | None:
        [shown] = json.loads(_ok(subprocess.run([*users_cli, "status", "--json", group], capture_output=True,
                                                text=True, timeout=300, check=False)))
        return shown if shown["state"] in ("completed", "failed", "cancelled") else None

    shown = wait_until(finished, 120, f"slurmxd to run group {group}", every=2.0)
    assert shown["state"] == "completed", shown
    assert Path(submitted["spool"], "ran").read_text() in ("ran cpu\n", "ran gpu\n")
    explained = _ok(_host(daemon_host, "slurmx", "--site", "/etc/slurmx/site.yaml", "explain", group))
    assert "release" in explained, explained

    _ok(_host(daemon_host, "systemctl", "stop", "slurmxd"))
    assert _ok(_host(daemon_host, "systemctl", "show", "-p", "NRestarts", "--value", "slurmxd")).strip() == "0"
    assert "Traceback" not in _journal(daemon_host)
