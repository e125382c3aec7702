"""Unit tests: no Slurm, no cluster."""
