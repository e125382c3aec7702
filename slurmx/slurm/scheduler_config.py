"""Slurm's scheduler cadence as `scontrol show config` states it: the settings the simulator's model of Slurm reads.

`SchedulerType` says whether a backfill scheduler runs at all (`sched/backfill`) or only the main one
(`sched/builtin`); `SchedulerParameters` carries its cadence: `bf_interval` (seconds between passes),
`bf_window` (minutes a pass plans ahead), `bf_resolution` (seconds of its time grid) and `bf_max_job_test` (jobs a
pass looks at). What the site leaves unset is Slurm's default (slurm.conf(5), the same in 22.05 to 26.05).
Pure functions over the command's text, tested on recorded output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from slurmx.core.backfill_defaults import BF_INTERVAL_S, BF_MAX_JOB_TEST, BF_RESOLUTION_S, BF_WINDOW_S

__all__ = ["BackfillSettings", "ConfigValueError", "backfill_settings", "parse_show_config"]

_DEFAULTS = {"bf_interval": int(BF_INTERVAL_S), "bf_window": int(BF_WINDOW_S) // 60,
             "bf_resolution": int(BF_RESOLUTION_S), "bf_max_job_test": BF_MAX_JOB_TEST}


class ConfigValueError(ValueError):
    """A scheduler setting slurmx cannot read; one line naming it."""


@dataclass(frozen=True)
class BackfillSettings:
    """What Slurm's schedulers do, in the model's units: `backfill` False for `sched/builtin`."""

    backfill: bool
    interval_s: float
    window_s: float
    resolution_s: float
    max_job_test: int
    scheduler_type: str
    stated: tuple[str, ...]  # the bf_* settings the site set itself (the rest are Slurm's defaults)


def parse_show_config(text: str) -> dict[str, str]:
    """`scontrol show config` -> {Key: value} (`Key = value` lines; headers and blank lines skipped)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            found[key.strip()] = value.strip()
    return found


def backfill_settings(config: Mapping[str, str], source: str = "scontrol show config") -> BackfillSettings:
    """The cadence of the site's schedulers from `config` (`parse_show_config`'s answer)."""
    scheduler = config.get("SchedulerType", "sched/backfill").strip() or "sched/backfill"
    if scheduler not in ("sched/backfill", "sched/builtin"):
        raise ConfigValueError(f"{source}: SchedulerType {scheduler!r} is neither sched/backfill nor sched/builtin; "
                               "the model knows only those two")
    values = dict(_DEFAULTS)
    stated = []
    raw = config.get("SchedulerParameters", "")
    for item in ("" if raw in ("(null)", "(none)") else raw).split(","):
        name, _, value = item.strip().partition("=")
        if name not in _DEFAULTS:
            continue  # other settings (defer, bf_continue, ...) do not change the cadence the model keeps
        if not value.isascii() or not value.isdigit() or int(value) > 10**9:
            raise ConfigValueError(f"{source}: SchedulerParameters {name}={value!r} is not a whole number; fix "
                                   "the site's slurm.conf or give the saved config with the value corrected")
        values[name] = int(value)
        stated.append(name)
    if values["bf_interval"] < 1 or values["bf_window"] < 1 or values["bf_max_job_test"] < 1:
        zero = next(k for k in ("bf_interval", "bf_window", "bf_max_job_test") if values[k] < 1)
        raise ConfigValueError(f"{source}: SchedulerParameters {zero}=0 is not a cadence Slurm runs; it needs 1 or "
                               "more")
    return BackfillSettings(scheduler == "sched/backfill", float(values["bf_interval"]),
                            float(values["bf_window"] * 60), float(values["bf_resolution"]),
                            values["bf_max_job_test"], scheduler, tuple(stated))
