"""One exception tree for everything that can go wrong talking to Slurm, most specific first.

Every error carries the command that failed, its exit code and Slurm's own message, and prints as one line
(`squeue --json: exit 1: slurm_load_jobs error: Unable to contact slurm controller`), so the CLI can show
it as-is without a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "InvalidJobError",
    "SlurmCommandError",
    "SlurmError",
    "SlurmParseError",
    "SlurmTimeout",
    "SlurmUnavailable",
    "TransportError",
    "command_text",
]


def command_text(argv: Sequence[str]) -> str:
    """A command as errors and warnings show it: its first four words (`sacct --jobs=...` can be long)."""
    return " ".join(argv[:4]) + (" ..." if len(argv) > 4 else "")


class SlurmError(Exception):
    """Base class: a Slurm command did not do what was asked."""

    def __init__(self, argv: Sequence[str], returncode: int | None, message: str) -> None:
        self.argv = tuple(argv)
        self.returncode = returncode
        self.message = " ".join(message.split())  # one line, whatever Slurm printed
        super().__init__(str(self))

    def __str__(self) -> str:
        code = f"exit {self.returncode}" if self.returncode is not None else "no exit code"
        return f"{command_text(self.argv)}: {code}: {self.message}"


class TransportError(SlurmError):
    """The command could not be run at all: no such binary, unknown SSH host key, container not running."""


class SlurmUnavailable(SlurmError):
    """slurmctld (or slurmdbd) did not answer; worth retrying with backoff."""


class SlurmTimeout(SlurmUnavailable):
    """The command did not finish within the transport's timeout."""


class SlurmCommandError(SlurmError):
    """Slurm answered and refused: bad option, permission denied, invalid request."""


class InvalidJobError(SlurmCommandError):
    """A job id Slurm does not know (finished and purged, or never existed)."""


class SlurmParseError(SlurmError):
    """Slurm's output was not what this version of slurmx can read."""
