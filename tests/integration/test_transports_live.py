"""The SSH transport to the login node and the slurmx CLI over the docker-exec transport, for real."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmx.slurm import CliSlurm, SlurmTimeout, TransportError
from slurmx.slurm.transport import SshTransport

from .conftest import REPO, Cluster

pytestmark = pytest.mark.integration


def ssh(cluster: Cluster, known_hosts: Path | None = None) -> SshTransport:
    return SshTransport("127.0.0.1", cluster.ssh_port, "alice",
                        known_hosts=str(known_hosts or cluster.dir / "ssh" / "known_hosts"),
                        key_file=str(cluster.dir / "ssh" / "id_ed25519"))


def test_ssh_transport_runs_slurm_commands(cluster: Cluster) -> None:
    transport = ssh(cluster)
    try:
        slurm = CliSlurm(transport)
        assert slurm.version() == cluster.version
        assert sorted(n.name for n in slurm.nodes()) == ["a1", "c1", "c2", "g1", "g2"]
        job_id = slurm.submit("#!/bin/bash\nsleep 30\n", ["--hold", "--job-name=ssh-it", "--output=/dev/null"])
        assert [j.user for j in slurm.jobs(job_ids=[job_id])] == ["alice"]
        slurm.cancel([job_id])
    finally:
        transport.close()


def test_ssh_arguments_are_quoted_for_the_remote_shell(cluster: Cluster) -> None:
    transport = ssh(cluster)
    try:
        result = transport.run(["echo", "a b;", "$(id)", "'q'"])
        assert result.stdout == "a b; $(id) 'q'\n"
    finally:
        transport.close()


def test_ssh_commands_are_bounded_read_both_streams_and_never_wait_on_stdin(cluster: Cluster) -> None:
    transport = ssh(cluster)
    try:
        # 5 MB on stdout and 3 MB on stderr: more than a channel window on each, read as they come
        big = transport.run(["bash", "-c", "head -c 5000000 /dev/zero | tr '\\0' a; "
                                           "head -c 3000000 /dev/zero | tr '\\0' b >&2; exit 3"])
        assert (len(big.stdout), len(big.stderr), big.returncode) == (5_000_000, 3_000_000, 3)
        assert transport.run(["cat"], stdin="hello\n").stdout == "hello\n"
        assert transport.run(["cat"]).stdout == ""  # no stdin given: the remote side reads EOF at once
        started = time.monotonic()
        with pytest.raises(SlurmTimeout, match="no answer within 2 s"):
            transport.run(["sleep", "10"], timeout=2)
        assert time.monotonic() - started < 5
        assert transport.run(["echo", "after"]).stdout == "after\n"  # the connection still serves
        for _ in range(30):  # channels are closed by us, in this thread, every time (never by the collector)
            assert transport.run(["true"]).returncode == 0
    finally:
        transport.close()


def test_unknown_host_key_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(TransportError) as err:
        ssh(cluster, empty).run(["true"])
    assert "not in" in str(err.value) and "\n" not in str(err.value)


def test_cli_lists_nodes_with_gres_through_docker_exec(cluster: Cluster) -> None:
    proc = subprocess.run([sys.executable, "-m", "slurmx.cli", "--site", str(REPO / "site-config/test-cluster.yaml"),
                           "--container", cluster.container("login"), "nodes", "--json"],
                          capture_output=True, text=True, timeout=120, check=True)
    nodes = {n["name"]: n for n in json.loads(proc.stdout)}
    assert sorted(nodes) == ["a1", "c1", "c2", "g1", "g2"]
    assert nodes["g1"]["capacity"]["gres/gpu"] == 2
    assert nodes["a1"]["capacity"]["gres/accel"] == 1


def test_cli_failing_slurm_command_is_one_line(cluster: Cluster) -> None:
    proc = subprocess.run([sys.executable, "-m", "slurmx.cli", "--site", str(REPO / "site-config/test-cluster.yaml"),
                           "--container", "slurmx-no-such-container", "nodes"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "No such container" in proc.stderr
