"""Start-up checks: is the daemon's user a Slurm operator, what other privileges it lacks (`privileges`), and do
native Slurm settings fight the daemon?

The parsers are pure functions over the text `scontrol show config`, `scontrol show partition -o` and
`sacctmgr show qos` print, so they are tested on recorded output; `run_checks` is the thin part that asks Slurm.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from slurmx.core.config import SiteConfig
from slurmx.core.model import JobClass
from slurmx.daemon.errors import DaemonError
from slurmx.daemon.privileges import Privileges, local_privileges, privilege_warnings
from slurmx.slurm.scheduler_config import parse_show_config as parse_config
from slurmx.slurm.transport import Transport

__all__ = ["CheckReport", "NotOperator", "coexistence_warnings", "operator_problem", "parse_config", "run_checks"]

_OPERATOR_LEVELS = frozenset({"operator", "administrator", "admin"})


class NotOperator(DaemonError):
    """The daemon would run as a user Slurm will not let act on other users' jobs; one line naming the fix."""


def operator_problem(user: str, config: Mapping[str, str], admin_level: str) -> str:
    """'' when `user` may release, hold, requeue and reprioritise anyone's jobs; else what is missing."""
    slurm_user = config.get("SlurmUser", "root").split("(")[0]
    if user in ("root", slurm_user) or admin_level.strip().lower() in _OPERATOR_LEVELS:
        return ""
    return (f"user {user!r} is not a Slurm operator (AdminLevel {admin_level.strip() or 'None'}): slurmxd could not "
            "hold, release, update, requeue, signal or cancel other users' jobs, so it does not start; run "
            f"`sacctmgr modify user {user} set adminlevel=operator`, or run slurmxd as root or {slurm_user}")


def _partition_fields(line: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S*)", line))


def coexistence_warnings(site: SiteConfig, config: Mapping[str, str], partitions_text: str,
                         qos_rows: Iterable[tuple[str, str]]) -> list[str]:
    """Native settings that would fight the daemon on the partitions and QOS it manages (pure).

    `qos_rows`: (name, preempt list) from `sacctmgr -n -P show qos format=name,preempt`.
    """
    warnings: list[str] = []
    managed_parts = {kind.partition for kind in site.resources.values()}
    managed_qos = {site.qos_for(JobClass.TE), site.qos_for(JobClass.BE)}
    preempt_type = config.get("PreemptType", "preempt/none")
    if preempt_type not in ("preempt/none", ""):
        for name, preempts in qos_rows:
            if name in managed_qos and preempts.strip():
                warnings.append(f"QOS {name} may natively preempt {preempts} (PreemptType={preempt_type}): Slurm "
                                f"would preempt without the grace protocol; clear it: sacctmgr modify qos {name} "
                                "set preempt=''")
        if preempt_type == "preempt/partition_prio":
            tiers = {}
            for line in partitions_text.splitlines():
                fields = _partition_fields(line)
                if fields.get("PartitionName") in managed_parts:
                    tiers[fields["PartitionName"]] = fields.get("PriorityTier", "1")
            if len(set(tiers.values())) > 1:
                warnings.append(f"managed partitions have different PriorityTier ({tiers}) under "
                                "preempt/partition_prio: Slurm would preempt across them; give them one tier")
    if config.get("JobRequeue", "1") == "0":
        warnings.append("JobRequeue=0: preempted jobs must be requeueable; set JobRequeue=1 (or submit with "
                        "--requeue)")
    code = site.preemption.requeue_exit_code
    if str(code) not in _exit_codes(config.get("RequeueExit", "")):
        warnings.append(f"RequeueExit does not list {code}: a job that checkpoints at its grace signal and exits "
                        f"{code} is recorded as FAILED in accounting; set RequeueExit={code} in slurm.conf (Slurm then "
                        "requeues it itself and records the run as REQUEUED)")
    unguarded = lease_guard_problem(config)
    if unguarded:
        warnings.append(unguarded)
    delay = restart_delay_s(config)
    if delay > 60:
        warnings.append(f"a requeued job may start only {delay} s after its requeue (cred_expire); lower it with "
                        "AuthInfo=cred_expire=30 so preempted work resumes sooner")
    return warnings


def _exit_codes(text: str) -> set[str]:
    """`RequeueExit`'s codes: a comma list of numbers and ranges (`99,100-102`); `(null)` is none."""
    codes: set[str] = set()
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        if low.isascii() and low.isdigit() and (not high or (high.isascii() and high.isdigit())):
            codes |= {str(n) for n in range(int(low), int(high or low) + 1)} if int(high or low) - int(low) < 256 \
                else {low}
    return codes


def lease_guard_problem(config: Mapping[str, str]) -> str:
    """'' when slurmctld runs a job_submit/lua plugin (site-config/job_submit.lua keeps leases the daemon's);
    else what a user can do without it and the fix."""
    if "lua" in [p.strip() for p in config.get("JobSubmitPlugins", "").split(",")]:
        return ""
    return ("JobSubmitPlugins has no lua: users can move the begin time of their own waiting managed variants and "
            "start one the policy did not choose (each group still runs once); install site-config/job_submit.lua "
            "and set JobSubmitPlugins=lua in slurm.conf")


def restart_delay_s(config: Mapping[str, str]) -> int:
    """How long Slurm keeps a requeued batch job from starting again: cred_expire + 1 s (default 121)."""
    expire = re.search(r"cred_expire=(\d+)", config.get("AuthInfo", ""))
    return int(expire.group(1)) + 1 if expire else 121


def _run(transport: Transport, argv: list[str]) -> str:
    result = transport.run(argv, timeout=30.0)
    return result.stdout if result.returncode == 0 else ""


@dataclass(frozen=True, slots=True)
class CheckReport:
    problem: str  # '' or why the daemon must not start (not an operator)
    privileges: list[str]  # a missing privilege per line, each disabling one feature
    coexistence: list[str]  # native Slurm settings that fight the daemon
    restart_delay_s: int  # Slurm's wait after a requeue (cred_expire + 1)


def run_checks(site: SiteConfig, transport: Transport, privileges: Privileges | None = None) -> CheckReport:
    """Ask Slurm over the daemon's own transport; `privileges` None: this process's and the transport user's."""
    user = _run(transport, ["id", "-un"]).strip() or "?"
    uid = _run(transport, ["id", "-u"]).strip()
    if privileges is None:
        privileges = local_privileges(user, int(uid) if uid.isascii() and uid.isdigit() else None)
    config = parse_config(_run(transport, ["scontrol", "show", "config"]))
    asked = transport.run(["sacctmgr", "-n", "-P", "show", "user", user, "format=adminlevel"], timeout=30.0)
    level = asked.stdout.strip() if asked.returncode == 0 else ""
    problem = operator_problem(user, config, level.splitlines()[0] if level else "")
    unknown: list[str] = []
    if problem and asked.returncode != 0:  # slurmdbd down at boot: not knowing is no reason to stay down
        why = " ".join((asked.stderr.strip() or f"exit {asked.returncode}").splitlines()[:1])[:200]
        problem, unknown = "", [f"could not ask sacctmgr whether {user!r} is a Slurm operator ({why}): starting "
                                "anyway; if it is not, holds, releases, requeues, signals and cancels of other "
                                f"users' jobs fail; check with `sacctmgr show user {user} format=adminlevel`"]
    partitions = _run(transport, ["scontrol", "show", "partition", "-o"])
    qos_text = _run(transport, ["sacctmgr", "-n", "-P", "show", "qos", "format=name,preempt"])
    qos = [(name, preempt) for name, _, preempt in (line.partition("|") for line in qos_text.splitlines() if line)]
    return CheckReport(problem, unknown + privilege_warnings(site, privileges),
                       coexistence_warnings(site, config, partitions, qos), restart_delay_s(config))
