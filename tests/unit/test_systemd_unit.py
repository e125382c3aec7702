"""site-config/slurmxd.service: starts on a login node (no slurmctld dependency), restarts within limits, and
keeps its hardening; its paths agree with the daemon's defaults and its command line with slurmxd's options."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from slurmx.core.config import DaemonConfig

UNIT = Path(__file__).resolve().parents[2] / "site-config" / "slurmxd.service"


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """systemd's ini dialect: [Section], Key=value, '#'/';' comments, a key may repeat (values accumulate)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        if not sep or current is None or not re.fullmatch(r"[A-Za-z]+", key.strip()):
            raise ValueError(f"{UNIT.name}:{number}: not a Key=value line in a section: {raw!r}")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


@pytest.fixture(scope="module")
def unit() -> dict[str, dict[str, list[str]]]:
    return parse_unit(UNIT.read_text())


def one(unit: dict[str, dict[str, list[str]]], section: str, key: str) -> str:
    values = unit[section].get(key, [])
    assert len(values) == 1, f"[{section}] {key}: expected once, found {values}"
    return values[0]


def test_a_login_node_without_slurmctld_can_start_it(unit: dict[str, dict[str, list[str]]]) -> None:
    ordering = " ".join(unit["Unit"].get("After", []) + unit["Unit"].get("Requires", [])
                        + unit["Unit"].get("BindsTo", [])).split()
    assert "slurmctld.service" not in ordering
    assert "network-online.target" in ordering and "network-online.target" in one(unit, "Unit", "Wants").split()


def test_restarts_are_on_failure_and_limited(unit: dict[str, dict[str, list[str]]]) -> None:
    assert one(unit, "Service", "Restart") == "on-failure"
    assert int(one(unit, "Unit", "StartLimitIntervalSec")) > 0 and int(one(unit, "Unit", "StartLimitBurst")) > 0
    assert "StartLimitIntervalSec" not in unit["Service"]  # ignored there by current systemd


def test_hardening_keys(unit: dict[str, dict[str, list[str]]]) -> None:
    service = unit["Service"]
    for key in ("NoNewPrivileges", "PrivateTmp", "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs",
                "ProtectControlGroups", "LockPersonality", "RestrictRealtime", "RestrictSUIDSGID"):
        assert one(unit, "Service", key) == "yes", key
    assert one(unit, "Service", "ProtectSystem") == "strict"
    assert one(unit, "Service", "ProtectHome") in ("yes", "read-only", "tmpfs")
    assert set(one(unit, "Service", "RestrictAddressFamilies").split()) == {"AF_UNIX", "AF_INET", "AF_INET6"}
    assert re.fullmatch(r"\d+[KMGT]?", one(unit, "Service", "MemoryMax"))
    assert "-/etc/default/slurmxd" in service["EnvironmentFile"]


def test_the_state_dir_is_writable_under_protect_system_strict(unit: dict[str, dict[str, list[str]]]) -> None:
    """systemd makes `StateDirectory=` (under /var/lib) writable whatever `ProtectSystem=` says."""
    state_dir = DaemonConfig().state_dir
    assert Path("/var/lib") / one(unit, "Service", "StateDirectory") == state_dir


def test_no_documentation_path_that_is_never_installed(unit: dict[str, dict[str, list[str]]]) -> None:
    for value in unit["Unit"].get("Documentation", []):
        assert not any(uri.startswith("file:") for uri in value.split()), value


def test_exec_start_uses_options_slurmxd_has(unit: dict[str, dict[str, list[str]]]) -> None:
    from slurmx.cli.app import _daemon

    argv = shlex.split(one(unit, "Service", "ExecStart"))
    assert Path(argv[0]).name == "slurmxd"
    known = {opt for param in _daemon.params for opt in param.opts}
    assert {a for a in argv[1:] if a.startswith("-")} <= known
    assert "--site" in argv


def test_the_parser_refuses_a_line_outside_the_dialect() -> None:
    with pytest.raises(ValueError, match="not a Key=value line"):
        parse_unit("[Service]\nthis is not a setting\n")
