"""The base of expected daemon failures, each ending as one line on stderr (the CLI catches `DaemonError`)."""

from __future__ import annotations

__all__ = ["CycleTimeout", "DaemonError"]


class DaemonError(Exception):
    """Start-up refused (not an operator, another daemon running, the state store unusable), or a cycle abandoned."""


class CycleTimeout(DaemonError):
    """A cycle ran past the watchdog's limit; raised inside it by the SIGALRM handler, caught by `Daemon.run`."""
