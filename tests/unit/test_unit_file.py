"""The shipped systemd unit runs slurmxd unprivileged and sandboxed: systemd's own audit scores it 2.5 or lower,
systemd reads every line of it, and its watchdog leaves room for the loop's longest gap at the defaults."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slurmx.core.config import DaemonConfig
from slurmx.daemon.loop import CYCLE_LIMIT_INTERVALS, CYCLE_LIMIT_MIN_S, MAX_BACKOFF_S

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "site-config" / "slurmxd.service"
MAX_EXPOSURE = 2.5


def _settings() -> dict[str, list[str]]:
    """Each `Key=value` of the unit, every value of a repeated key, comments left out."""
    out: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def _systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        message = "systemd-analyze is missing: `make system-deps` installs it (Debian's systemd package)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def test_systemd_scores_the_unit_at_most_2_5() -> None:
    done = subprocess.run([_systemd_analyze(), "security", "--offline=yes", "--no-pager", str(UNIT)],
                          capture_output=True, text=True, timeout=60, check=False)
    match = re.search(r"Overall exposure level for slurmxd\.service: (\d+\.\d+)", done.stdout)
    assert match is not None, done.stdout[-2000:] + done.stderr
    assert float(match.group(1)) <= MAX_EXPOSURE, done.stdout
    assert "Unknown key" not in done.stderr and "Failed to parse" not in done.stderr, done.stderr


def test_systemd_reads_every_line() -> None:
    done = subprocess.run([_systemd_analyze(), "verify", str(UNIT)], capture_output=True, text=True, timeout=60,
                          check=False)
    # The one complaint allowed: slurmxd is not installed where the unit runs it, on this machine.
    problems = [line for line in done.stderr.splitlines()
                if line.strip() and "/opt/slurmx/bin/slurmxd is not executable" not in line]
    assert not problems, "\n".join(problems)


def test_unprivileged_notify_with_a_watchdog_and_private_files() -> None:
    unit = _settings()
    assert unit["User"] == ["slurmx"] and unit["Group"] == ["slurmx"]
    assert unit["CapabilityBoundingSet"] == [""] and unit["AmbientCapabilities"] == [""]
    assert unit["NoNewPrivileges"] == ["yes"] and unit["UMask"] == ["0077"]
    assert unit["Type"] == ["notify"] and unit["NotifyAccess"] == ["main"]
    assert unit["ExecStart"][0].startswith("/opt/slurmx/bin/slurmxd ")  # where docs/install.md puts it
    assert unit["StateDirectory"] == ["slurmx"] and unit["ProtectSystem"] == ["strict"]
    assert unit["MemoryDenyWriteExecute"] == ["yes"]
    assert "@system-service" in unit["SystemCallFilter"]


def test_the_watchdog_outlasts_the_loops_longest_gap_at_the_default_interval() -> None:
    """Between two WATCHDOG=1 the loop runs one cycle (at most its limit) and waits (at most the longer of the
    interval and the back-off cap); slurmxd widens a shorter watchdog itself, but the shipped one needs no help."""
    interval = float(DaemonConfig().interval_s)
    longest_gap = max(CYCLE_LIMIT_MIN_S, CYCLE_LIMIT_INTERVALS * interval) + max(interval, MAX_BACKOFF_S)
    assert float(_settings()["WatchdogSec"][0]) > longest_gap
    assert float(_settings()["TimeoutStartSec"][0]) > max(CYCLE_LIMIT_MIN_S, CYCLE_LIMIT_INTERVALS * interval)


def test_a_store_private_to_slurmxd_leaves_status_without_its_decisions_not_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The unit's StateDirectoryMode=0700 makes even a stat of the store fail for other users on that host."""
    from slurmx.cli import app
    from tests.unit.test_daemon import SITE

    site = SITE.model_copy(update={"daemon": SITE.daemon.model_copy(update={"state_dir": tmp_path})})
    (tmp_path / "slurmxd.sqlite").write_bytes(b"")
    real_exists = Path.exists

    def exists(self: Path, *args: object, **kwargs: object) -> bool:
        if self.parent == tmp_path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_exists(self)

    monkeypatch.setattr(Path, "exists", exists)
    assert app._open_store(site) is None
    assert app._daemon_decisions(site) == {}


_UNDER_MDWE = """
import ctypes, mmap, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(65, 1, 0, 0, 0) != 0:  # PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN (Linux 6.3)
    print("no PR_SET_MDWE"); sys.exit(3)
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    sys.exit("writable code still allowed")
except OSError:
    pass
assert ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda x: x + 1)(1) == 2
import numpy, scipy.optimize, paramiko, prometheus_client, msgspec, pydantic, jinja2, yaml
from pathlib import Path
from tests.unit.test_daemon_resilience import FailingSlurm, Ticks, _daemon
daemon = _daemon(Path(sys.argv[1]), FailingSlurm([None, None]))
daemon.run(Ticks(2))
assert daemon.cycles == 2
print("ok", scipy.optimize.linprog([1, 1], A_ub=[[-1, -1]], b_ub=[-1]).status)
"""


def test_the_daemon_runs_without_writable_code(tmp_path: Path) -> None:
    """The unit's MemoryDenyWriteExecute=yes, as the kernel's own per-process switch (PR_SET_MDWE), over the
    daemon's imports, a ctypes callback (libffi's static trampolines) and two cycles."""
    done = subprocess.run([sys.executable, "-c", _UNDER_MDWE, str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    if done.returncode == 3:
        pytest.skip("this kernel has no PR_SET_MDWE (Linux 6.3 or later)")
    assert done.returncode == 0 and done.stdout.endswith("ok 0\n"), done.stdout + done.stderr
