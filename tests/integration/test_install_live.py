"""Issue 34's acceptance on the cluster's login node: the client wheel that `make dist` builds from a clean clone,
installed with pip into a fresh venv there, gives `slurmx submit` and `status` against the real cluster, and no
numpy or scipy.

The login node runs Debian's Python, for which the package index reachable here has no wheels of every dependency
(pydantic-core): the image carries slurmx-hpc's base dependencies as Debian packages (docker-slurm/Dockerfile) and
the venv sees them (`--system-site-packages`), as a site whose login nodes take Python libraries from the
distribution would install it. pip still resolves each requirement of the wheel against what is installed, offline
(`--no-index`): whatever it could not satisfy would fail the install, so the venv holds exactly slurmx-hpc on top of
the base dependencies, and numpy/scipy being absent shows that nothing of a login node needs them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
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
def login_venv(cluster: Cluster, tag: str) -> Iterator[str]:
    """A venv path on the login node's own disk, alice's, gone afterwards."""
    path = f"/tmp/{tag}-venv"
    yield path
    _login(cluster, "rm", "-rf", path)


# Its Slurm calls (submit, status) every release's suite makes; what is new here is the install, on the suite of
# the release that runs the long behaviour tests.
@pytest.mark.long_behaviour
def test_the_client_wheel_installs_on_the_login_node_and_submits_without_numpy_or_scipy(
        cluster: Cluster, wheel: Path, login_venv: str, tag: str) -> None:
    _skip_without_client_packages(cluster)
    dist = cluster.shared / f"{tag}-dist"  # the shared folder is at the same path inside the containers
    dist.mkdir(mode=0o755)
    shutil.copy(wheel, dist)
    (dist / wheel.name).chmod(0o644)
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
