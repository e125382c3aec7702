"""Slurm's defaults for its backfill scheduler (slurm.conf(5), the same in 22.05 to 26.05), in seconds: what
`scontrol show config` leaves unset and what FIFO's `cadence: slurm` falls back on. A module of its own so the
simulator reads them without importing the Slurm adapter's package."""

from __future__ import annotations

__all__ = ["BF_INTERVAL_S", "BF_MAX_JOB_TEST", "BF_RESOLUTION_S", "BF_WINDOW_S"]

BF_INTERVAL_S = 30.0
BF_WINDOW_S = 86_400.0  # bf_window=1440 (minutes)
BF_RESOLUTION_S = 60.0
BF_MAX_JOB_TEST = 500
