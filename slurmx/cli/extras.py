"""Which extra of slurmx-hpc brings a missing optional module, so a lean install fails in one line, not a traceback.

The lean client (`pip install slurmx-hpc`, for login nodes) leaves out numpy and scipy, which only the simulator and
the daemon's policies use, and the daemon's metrics library; a command that needs one of them says which extra to
install instead of raising ImportError from deep inside its import chain.
"""

from __future__ import annotations

import importlib.util

__all__ = ["DISTRIBUTION", "missing_extra_message", "require_daemon_extra"]

DISTRIBUTION = "slurmx-hpc"

# top-level module -> the extra that installs it, for `slurmx` and for `slurmxd` (which always needs the daemon's)
_EXTRA_OF = {"numpy": "sim", "scipy": "sim", "prometheus_client": "daemon", "matplotlib": "plot",
             "pyslurm": "pyslurm"}


def require_daemon_extra() -> None:
    """Raise ModuleNotFoundError for the first module of the `daemon` extra that is missing, before any work.

    Policies import numpy when first asked to decide, minutes into a run; a daemon host without the extra should
    learn it at start-up.
    """
    for module in ("numpy", "scipy", "prometheus_client"):
        if importlib.util.find_spec(module) is None:
            raise ModuleNotFoundError(f"No module named {module!r}", name=module)


def missing_extra_message(exc: ModuleNotFoundError, prog: str) -> str | None:
    """The one line for a missing optional module, or None when `exc` is about some other module (a bug)."""
    module = (exc.name or "").split(".")[0]
    extra = _EXTRA_OF.get(module)
    if extra is None:
        return None
    if prog == "slurmxd" and extra == "sim":
        extra = "daemon"
    return (f"{prog}: this needs {module}, which this install of {DISTRIBUTION} leaves out: "
            f"pip install '{DISTRIBUTION}[{extra}]' (or '{DISTRIBUTION}[all]')")
