"""slurmx: one job, many resource variants, scheduled by policies from the literature, on a real Slurm.

Kept free of imports: `slurmx.hooks` runs inside job scripts next to a bare copy of this file.
`slurmx.submit(spec)` is the Python API (the `slurmx.submit` package is callable); `slurmx.Executor` runs functions.
"""

from typing import Any

__version__ = "0.2.0.dev0"  # pyproject.toml's version (a unit test keeps them equal); what the state store records


def __getattr__(name: str) -> Any:
    """Import `slurmx.submit` on first use, so `import slurmx; slurmx.submit(spec)` works and stays cheap."""
    import importlib

    if name == "submit":
        return importlib.import_module("slurmx.submit")
    if name in ("Executor", "Job"):
        return getattr(importlib.import_module("slurmx.executor"), name)
    raise AttributeError(f"module 'slurmx' has no attribute {name!r}")
