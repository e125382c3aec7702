"""Estimates the policies need: run times per variant (AlloX sampling, history, progress), CPU/memory sensitivity.

The daemon drives it through `slurmx.profile.profiler.Profiler`; the simulator's profiling model
(`slurmx.sim.profiling_model`) applies the same estimator to simulated samples.
"""
