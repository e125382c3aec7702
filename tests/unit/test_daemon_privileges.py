"""Start-up privilege checks: each missing privilege is one line naming what is missing, the feature it
disables and the fix; a daemon with every privilege hears nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from slurmx.core.config import SiteConfig, parse_site_config
from slurmx.daemon.checks import operator_problem, run_checks
from slurmx.daemon.privileges import (
    CAP_DAC_OVERRIDE,
    CAP_NET_BIND_SERVICE,
    Privileges,
    effective_capabilities,
    local_privileges,
    privilege_warnings,
)
from slurmx.slurm.transport import CommandResult

ALL = (1 << 41) - 1
NONE = 0


def site(policy: str = "fifo", **daemon: Any) -> SiteConfig:
    return parse_site_config({"cluster": {"name": "t"},
                              "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"}},
                              "policy": {"name": policy}, "daemon": daemon})


def test_root_everywhere_has_every_privilege() -> None:
    assert privilege_warnings(site("allox", metrics_port=80), Privileges(ALL, "root", 0)) == []


def test_the_slurm_user_hears_one_line_per_missing_privilege() -> None:
    lines = privilege_warnings(site("allox", metrics_port=80), Privileges(NONE, "slurm", 64030))
    assert lines == [
        "no access to the users' group folders (slurmxd is not root and lacks CAP_DAC_OVERRIDE): preemptions and "
        "resizes are signalled without their intent files (jobs use their own grace period, not the daemon's "
        "deadline) and running jobs' progress files go unread; run slurmxd as root or give it CAP_DAC_OVERRIDE "
        "(docs/daemon.md, \"Permissions\": a systemd drop-in)",
        "daemon.metrics_port 80 is below 1024 and slurmxd lacks CAP_NET_BIND_SERVICE: the metrics and /healthz "
        "endpoint cannot listen; choose a port of 1024 or more, or run as root",
    ]
    assert all("\n" not in line for line in lines)


def test_each_line_goes_when_its_feature_is_off_or_its_privilege_granted() -> None:
    slurm = Privileges(NONE, "slurm", 64030)
    # FIFO does not profile by default, and a port of 1024 or more needs nothing.
    assert len(privilege_warnings(site("fifo", metrics_port=9810), slurm)) == 1
    caps = Privileges(1 << CAP_DAC_OVERRIDE | 1 << CAP_NET_BIND_SERVICE, "root", 0)
    assert privilege_warnings(site("allox", metrics_port=80), caps) == []
    lowered = Privileges(1 << CAP_DAC_OVERRIDE, "root", 0, first_unprivileged_port=0)
    assert privilege_warnings(site("allox", metrics_port=80), lowered) == []
    # Profiling asks nothing of the transport's user: users queue samples, the daemon (an operator) releases them.
    assert privilege_warnings(site("allox"), Privileges(ALL, "?", None)) == []
    assert privilege_warnings(site("allox"), Privileges(ALL, "slurmxd", 2100)) == []


def test_effective_capabilities_reads_proc_status() -> None:
    assert effective_capabilities("Name:\tx\nCapInh:\t0\nCapEff:\t000001ffffffffff\n") == (1 << 41) - 1
    assert effective_capabilities("CapEff:\t0000000000000400\n") == 1 << CAP_NET_BIND_SERVICE
    assert effective_capabilities("Name:\tx\n") is None
    assert effective_capabilities("CapEff:\tzz\n") is None


def test_local_privileges_keep_the_transport_user() -> None:
    found = local_privileges("alice", 1000)
    assert (found.remote_user, found.remote_uid) == ("alice", 1000)
    assert found.first_unprivileged_port >= 0


def test_the_operator_problem_names_the_features_and_the_fix() -> None:
    problem = operator_problem("alice", {"SlurmUser": "slurm(64030)"}, "None")
    assert problem == ("user 'alice' is not a Slurm operator (AdminLevel None): slurmxd could not hold, release, "
                       "update, requeue, signal or cancel other users' jobs, so it does not start; run `sacctmgr "
                       "modify user alice set adminlevel=operator`, or run slurmxd as root or slurm")


class CannedTransport:
    """Answers each command from a table keyed by its first words; anything else fails."""

    def __init__(self, answers: dict[tuple[str, ...], str]) -> None:
        self.answers = answers

    def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
        for key, text in self.answers.items():
            if tuple(argv[:len(key)]) == key:
                return CommandResult(tuple(argv), 0, text, "")
        return CommandResult(tuple(argv), 1, "", "not here")

    def describe(self) -> str:
        return "canned"


@pytest.mark.parametrize("uid", ["0", "64030", ""])
def test_run_checks_asks_the_transport_who_runs_slurms_commands(uid: str) -> None:
    transport = CannedTransport({("id", "-un"): "slurm\n", ("id", "-u"): f"{uid}\n",
                                 ("scontrol", "show", "config"): "SlurmUser = slurm(64030)\nJobRequeue = 1\n"
                                                                 "AuthInfo = cred_expire=10\n"})
    report = run_checks(site("allox"), transport)
    assert report.problem == ""  # the SlurmUser is an operator
    assert not any("runuser" in line or "not root" in line for line in report.privileges)


def test_run_checks_reports_a_non_operator_and_its_missing_privileges() -> None:
    transport = CannedTransport({("id", "-un"): "alice\n", ("id", "-u"): "1000\n",
                                 ("sacctmgr", "-n", "-P", "show", "user"): "None\n"})
    report = run_checks(site("allox", metrics_port=80), transport, Privileges(NONE, "alice", 1000))
    assert report.problem.startswith("user 'alice' is not a Slurm operator (AdminLevel None)")
    assert len(report.privileges) == 2


def test_an_operator_check_sacctmgr_cannot_answer_is_a_warning_not_a_refusal() -> None:
    transport = CannedTransport({("id", "-un"): "ops\n", ("id", "-u"): "1001\n"})  # sacctmgr fails: slurmdbd down
    report = run_checks(site(), transport, Privileges(ALL, "ops", 1001))
    assert report.problem == ""
    assert report.privileges == [
        "could not ask sacctmgr whether 'ops' is a Slurm operator (not here): starting anyway; if it is not, holds, "
        "releases, requeues, signals and cancels of other users' jobs fail; check with `sacctmgr show user ops "
        "format=adminlevel`"]
