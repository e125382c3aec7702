"""SRPT in the engine: free preemption, but no migration between kinds (a documented deviation).

The paper's SRPT moves a preempted job to whichever device frees first. Our engine, like slurmx on Slurm,
keeps only a started job's variant (its siblings are cancelled when it first starts), so a preempted job
waits for its own kind. The unit test of `Srpt` shows the migration the policy asks for (103.75); this one
shows what the engine makes of it (105), the number `docs/policies/allox.md` states.
"""

from __future__ import annotations

import pytest

from slurmx.core.resources import Resources
from slurmx.sim.config import parse_sim_config
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.runner import run_config


def _job(job_id: str, submit: float, gpu_s: float, cpu_s: float) -> SimJob:
    variants = {"gpu": SimVariant("gpu", Resources(1, 2048, {"gpu": 1}), gpu_s),
                "cpu": SimVariant("cpu", Resources(4, 2048), cpu_s)}
    return SimJob(job_id, job_id, submit, variants)


def test_a_preempted_job_resumes_on_the_kind_it_started_on() -> None:
    config = parse_sim_config({
        "cluster": {"partitions": [{"name": "gpu", "kind": "gpu", "nodes": 1, "cpus": 4, "mem": "8G", "gres": "gpu:1"},
                                   {"name": "cpu", "kind": "cpu", "nodes": 1, "cpus": 4, "mem": "8G"}]},
        "policy": {"name": "srpt"},
    }, "srpt engine test")
    jobs = [_job("long", 0.0, 100.0, 400.0), _job("short", 10.0, 5.0, 50.0)]
    records = {r.job_id: r for r in run_config(config, jobs).jobs}
    assert records["short"].finish == pytest.approx(15.0)  # it takes the GPU from the long job at 10
    assert records["long"].preemptions == 1
    assert records["long"].kind == "gpu"
    # with free migration the long job would run on the CPU during [10, 15) and end at 103.75; here it waits
    assert records["long"].finish == pytest.approx(105.0)
