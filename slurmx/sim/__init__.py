"""Discrete-event simulator that runs the daemon's very policies on synthetic and real workloads."""
