"""The what-if plot: the wait CDF of each policy beside Slurm's own, the one picture an admin asks for first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from slurmx.sim.report import pyplot
from slurmx.sim.whatif_stats import JobTimes

__all__ = ["write_wait_cdf"]


def write_wait_cdf(actual: Sequence[JobTimes], runs: Mapping[str, Sequence[JobTimes]], directory: str | Path,
                   title: str) -> Path:
    """`wait_cdf.png` in `directory`: one step curve per side; waits of 0 s stay visible (symlog axis)."""
    plt = pyplot()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, times in (("Slurm (actual)", actual), *runs.items()):
        waits = np.sort(np.asarray([t.wait for t in times], dtype=np.float64))
        if waits.size:
            actual_side = label == "Slurm (actual)"
            ax.step(waits, np.arange(1, waits.size + 1) / waits.size, where="post", label=f"{label} ({waits.size})",
                    color="black" if actual_side else None, linewidth=2.0 if actual_side else 1.5)
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("wait: first start - submit (s)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{title}\nwait CDF per policy vs Slurm", fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    path = out / "wait_cdf.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
