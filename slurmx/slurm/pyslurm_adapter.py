"""Optional adapter backed by pyslurm (the `pyslurm` extra) for reads, where the site has it.

Only job listing uses pyslurm's API; every other operation goes to the CLI adapter, so the two cannot
disagree on control semantics. Imported lazily by `adapter_from_config` only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from slurmx.slurm.adapter import CliSlurm
from slurmx.slurm.errors import TransportError

__all__ = ["PyslurmAdapter"]


class PyslurmAdapter:
    """CliSlurm with pyslurm available for callers that want raw records (`raw_jobs`)."""

    def __init__(self, fallback: CliSlurm) -> None:
        try:
            import pyslurm
        except ImportError:
            raise TransportError(["pyslurm"], None, "pyslurm is not installed; pip install 'slurmx-hpc[pyslurm]' "
                                 "or set transport.implementation: cli") from None
        self._pyslurm: Any = pyslurm
        self._cli = fallback

    def raw_jobs(self, job_ids: Iterable[int] | None = None) -> dict[int, Any]:
        jobs = self._pyslurm.Jobs.load()
        wanted = None if job_ids is None else {int(j) for j in job_ids}
        return {int(k): v for k, v in jobs.items() if wanted is None or int(k) in wanted}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cli, name)
