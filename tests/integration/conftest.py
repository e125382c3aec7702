"""Integration fixtures: a real dockerized Slurm cluster, brought up once per session or reused.

The Slurm version comes from SLURMX_TEST_SLURM (default: the version table's, slurmx/slurm/versions.txt); `make test`
runs this suite once per version.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from slurmx.slurm import CliSlurm, RetryPolicy
from slurmx.slurm.adapter import FolderTaken
from slurmx.slurm.transport import DockerExecTransport
from slurmx.slurm.versions import DEFAULT, RELEASES

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "docker-slurm" / "cluster"
ROOT = Path(os.environ.get("SLURMX_CLUSTER_ROOT", "/var/tmp/slurmx-cluster"))
PORT_BASE = {r.version: r.port_base for r in RELEASES}

T = TypeVar("T")

# `make test` runs the suites of two releases side by side; the long behaviour tests (marked long_behaviour: their
# Slurm calls other tests make on every release) are shared between them so neither suite is the long pole. The
# release marked "long" in slurmx/slurm/versions.txt runs them all but these modules, another release runs these
# (tests/run-integration sets SLURMX_LONG_PART: long, other, none or all; unset, every test runs).
LONG_ON_OTHER = frozenset({
    "test_cycle_live.py", "test_daemon_accel_live.py", "test_daemon_crash.py", "test_daemon_mlfs_live.py",
    "test_daemon_resize.py", "test_executor_live.py", "test_preemption_live.py",
    "test_profile_live.py", "test_shadow_live.py",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    part = os.environ.get("SLURMX_LONG_PART", "all")
    if part == "all":
        return
    if part not in ("long", "other", "none"):
        raise pytest.UsageError(f"SLURMX_LONG_PART={part!r}: expected long, other, none or all")
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        if item.get_closest_marker("long_behaviour") is None:
            keep.append(item)
            continue
        on_other = item.path.name in LONG_ON_OTHER
        mine = (part == "long" and not on_other) or (part == "other" and on_other)
        (keep if mine else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@dataclass(frozen=True)
class Cluster:
    version: str

    @property
    def tag(self) -> str:
        return self.version.replace(".", "")

    def container(self, role: str) -> str:
        return f"slurmx-{self.tag}-{role}"

    @property
    def dir(self) -> Path:
        return ROOT / self.version

    @property
    def shared(self) -> Path:
        return self.dir / "shared"

    @property
    def ssh_port(self) -> int:
        return PORT_BASE[self.version] + 22


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    version = os.environ.get("SLURMX_TEST_SLURM", DEFAULT)
    proc = subprocess.run([str(CLUSTER), "up", "--slurm", version], capture_output=True, text=True,
                          timeout=3600, check=False)
    if proc.returncode != 0:
        pytest.fail(f"cluster up --slurm {version} failed:\n{proc.stderr[-3000:]}")
    return Cluster(version)


@pytest.fixture(scope="session")
def slurm(cluster: Cluster) -> CliSlurm:
    """The adapter as an ordinary user (alice) on the login node, through `docker exec`."""
    return CliSlurm(DockerExecTransport(cluster.container("login"), "alice"),
                    RetryPolicy(retries=3, backoff_s=1.0, timeout_s=60))


@pytest.fixture(scope="session")
def admin(cluster: Cluster) -> CliSlurm:
    """The adapter as root (Slurm's operator here): what slurmxd runs as; needed for Priority updates."""
    return CliSlurm(DockerExecTransport(cluster.container("login"), "root"),
                    RetryPolicy(retries=3, backoff_s=1.0, timeout_s=60))


@pytest.fixture
def tag() -> str:
    """A name unique to one test, so jobs of different tests never meet."""
    return "it" + uuid.uuid4().hex[:8]


@pytest.fixture
def cleanup(slurm: CliSlurm, admin: CliSlurm) -> Iterator[list[int]]:
    """Jobs a test appends here are cancelled afterwards, whatever happened."""
    ids: list[int] = []
    yield ids
    if ids:
        admin.cancel(ids)


def spool_dir() -> str:
    """The spool root of the cluster under test (`cluster up` writes it into site.yaml as `submit.spool_dir`)."""
    return str(ROOT / os.environ.get("SLURMX_TEST_SLURM", DEFAULT) / "shared" / "spool")


def make_group_folder(slurm: CliSlurm, group_id: str) -> None:
    """The group folder, made as the adapter's user, as `slurmx submit` makes it before its first sbatch: the group is
    that user's (slurmx/core/ownership.py). One that exists already stays whose it is (another user cannot take
    it: a forgery test submits under someone else's group id)."""
    with contextlib.suppress(FolderTaken):
        slurm.make_private_folder(f"{spool_dir()}/{group_id}", {})


def wait_until(probe: Callable[[], T | None], timeout: float, what: str, every: float = 1.0) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


@pytest.fixture(scope="session")
def site_path(cluster: Cluster) -> Path:
    """The slurmx site config `cluster up` wrote for this cluster (docker exec transport as alice)."""
    return cluster.dir / "site.yaml"
