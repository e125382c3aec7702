"""One simulation run from a run config: the library call behind `slurmx sim run`, sweeps and reproductions.

Kept apart from the CLI so library code (sweeps, `slurmx reproduce`) runs a config without importing
click or rich, and without importing a command module that imports it back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from slurmx.policies.base import make_policy
from slurmx.sim import engine
from slurmx.sim.cluster import ModelCluster
from slurmx.sim.config import SimConfig, resolve_cluster
from slurmx.sim.jobs import SimJob
from slurmx.sim.metrics import SimResult
from slurmx.sim.sizing import SizedCluster
from slurmx.sim.stream import StreamedWorkload

__all__ = ["run_config", "run_streamed"]


def run_config(config: SimConfig, jobs: Sequence[SimJob],
               progress: Callable[[engine.Progress], None] | None = None,
               sized: SizedCluster | None = None, info: Mapping[str, str] | None = None) -> SimResult:
    """One run of `config` on `jobs`: the policy is built by name, exactly as the daemon builds it.

    A cluster sized from the trace (`cluster.from_trace`) may leave out jobs no node could hold; pass the
    `resolve_cluster` answer as `sized` when the caller already has it (and reports its assumptions); `info`:
    what the trace's loader read about it, for a cluster from the SWF header."""
    policy = make_policy(config.policy.name, config.policy.params)
    sized = sized or resolve_cluster(config, list(jobs), info)
    return engine.Engine(ModelCluster(sized.partitions), policy, sized.jobs, config.engine_options(), progress).run()


def run_streamed(config: SimConfig, streamed: StreamedWorkload,
                 progress: Callable[[engine.Progress], None] | None = None) -> SimResult:
    """`run_config` on a trace read as the run goes (`stream_workload`): the same run, holding only the jobs in
    the system; `streamed.workload()` then says what was read, skipped and assumed."""
    policy = make_policy(config.policy.name, config.policy.params)
    return engine.Engine(ModelCluster(streamed.partitions), policy, iter(streamed.jobs), config.engine_options(),
                         progress).run()
