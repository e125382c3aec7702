"""sbatch's `--signal=[{R|B}:]<sig>[@sig_time]`, delivered by the variant's job script beside slurmx's grace signal.

Slurm keeps one `--signal` per job, and a be-class variant's is slurmx's own (`B:<grace signal>@<grace>`, the
preemption protocol). So the user's signal is delivered by the job script itself: a timer sends it `sig_time`
seconds (default 60, as sbatch) before the job's end time, and on preemption the grace handling sends it first,
then does its own (docs/submit.md, "--signal"). `B:` sends it to the user's script alone (sbatch: the batch
shell); without `B:` to the user's script and every process it started (sbatch: the job steps).
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

__all__ = ["UserSignal", "grace_signal_clash", "parse_signal"]

_SIGNAL = re.compile(r"(?:([RB]{1,2}):)?(?:SIG)?([A-Z0-9]+)(?:@([0-9]{1,5}))?")
_UNCATCHABLE = {"KILL", "STOP"}


@dataclass(frozen=True, slots=True)
class UserSignal:
    name: str  # as bash's `trap` and `kill -s` take it: USR1
    seconds: int  # before the end time
    batch_only: bool  # `B:`

    def __str__(self) -> str:
        return f"{'B:' if self.batch_only else ''}{self.name}@{self.seconds}"


def parse_signal(value: str) -> UserSignal:
    """The user's `--signal` value; ValueError with the fix for what cannot be delivered as sbatch delivers it."""
    match = _SIGNAL.fullmatch(value.strip().upper())
    if match is None:
        raise ValueError("expected [B:]SIGNAL[@SECONDS], like B:USR1@60")
    flags, given, seconds = match[1] or "", match[2], match[3]
    if "R" in flags:
        raise ValueError("R: lets the job overlap a reservation, which needs Slurm to send the signal; slurmx sends "
                         "it from the job script (Slurm holds slurmx's grace signal): leave R: out")
    try:
        number = int(given) if given.isdigit() else int(signal.Signals[f"SIG{given}"])
        name = signal.Signals(number).name.removeprefix("SIG")
    except (KeyError, ValueError):
        raise ValueError(f"{given} is not a signal; name one like USR1, TERM or INT") from None
    if name in _UNCATCHABLE:
        raise ValueError(f"{name} cannot be caught, so no handler of yours would run; use USR1 or TERM")
    if seconds is not None and int(seconds) > 65535:
        raise ValueError("at most 65535 seconds before the end")
    return UserSignal(name, int(seconds) if seconds is not None else 60, "B" in flags)


def grace_signal_clash(name: str) -> str:
    """Why the user's signal cannot be the site's grace signal, and what to do instead."""
    return (f"{name} is slurmx's grace signal on this site (preemption.signal), which its hooks handle; give your "
            "handler another signal (e.g. USR1): slurmx sends it to your script on preemption too")
