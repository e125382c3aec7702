"""The base of expected daemon failures, each ending as one line on stderr (the CLI catches `DaemonError`)."""

from __future__ import annotations

__all__ = ["DaemonError"]


class DaemonError(Exception):
    """Start-up refused: not an operator, another daemon running, the state store unusable."""
