"""The FitGpp reproduction's figures: Fig. 3 (slowdown CDFs) and Figs. 4-7 (p95 slowdown along each sweep)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slurmx.reproduce.fitgpp.experiment import Results, Scale, experiment_points, pool

__all__ = ["NAMES", "plots"]

NAMES = {"fifo": "FIFO", "fitgpp": "FitGpp", "lrtp": "LRTP", "rand": "RAND"}


def plots(results: Results, scale: Scale, only: Sequence[str], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    if any(e in only for e in ("main", "intervals", "preempted")):
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for point in experiment_points("main", scale):
            pooled = pool(results, point)
            for ax, values in zip(axes, (pooled.te, pooled.be), strict=True):
                ordered = np.sort(values)
                ax.plot(ordered, np.arange(1, ordered.size + 1) / ordered.size, label=NAMES[point.policy])
        for ax, cls in zip(axes, ("TE", "BE"), strict=True):
            ax.set_xscale("log")
            ax.set_xlabel(f"{cls} slowdown")
            ax.set_ylabel("CDF")
            ax.legend()
        paths.append(_save(fig, out / "fitgpp-fig3-slowdown-cdf.png"))
    for experiment, name in (("s", "fig4-s"), ("P", "fig5-P"), ("te_share", "fig6-te-share"),
                             ("grace_scale", "fig7-grace-scale")):
        if experiment not in only:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        lines: dict[str, tuple[list[str], list[float], list[float]]] = {}
        for point in experiment_points(experiment, scale):
            pooled = pool(results, point)
            key = NAMES[point.policy] + (" " + point.label.split(" ", 2)[2] if point.label.count(" ") == 2 else "")
            xs, te, be = lines.setdefault(key, ([], [], []))
            xs.append(point.label.split(" s=")[0])
            te.append(pooled.pct("te", 95))
            be.append(pooled.pct("be", 95))
        for key, (xs, te, be) in lines.items():
            axes[0].plot(xs, te, "o-", label=key)
            axes[1].plot(xs, be, "o-", label=key)
        for ax, cls in zip(axes, ("TE", "BE"), strict=True):
            ax.set_ylabel(f"{cls} p95 slowdown")
            ax.legend()
        paths.append(_save(fig, out / f"fitgpp-{name}.png"))
    return paths


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
