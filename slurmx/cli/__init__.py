"""slurmx's command lines: `slurmx` and `slurmxd` (the console scripts `slurmx.cli:main` and `slurmx.cli:daemon_main`).

Every module that parses arguments and prints lives here, so library packages (daemon, sim, reproduce ...) never
import a command line; the commands import the libraries, never the other way round. The group and the daemon's
command are in `app`; each other command has its module, imported by `commands` only when it runs.
This module imports nothing itself: a command module (`slurmx.cli.preempt`) loads without the whole front.
"""

from __future__ import annotations

__all__ = ["daemon_main", "main"]


def main() -> None:
    """The `slurmx` console script."""
    from slurmx.cli.app import main as run

    run()


def daemon_main() -> None:
    """The `slurmxd` console script."""
    from slurmx.cli.app import daemon_main as run

    run()
