"""The AlloX authors' own simulator input, `jobs_input_10_Google_m1.txt` (10 users x 1,000 jobs on Google-trace
arrivals), as the main experiment's workload.

The file is in `../shared/traces/allox_sim_inputs/` (copied unchanged from their repository; see `SOURCE` there).
Each job is four lines:

    # <n>
    1 <job id> 1 <arrival, units> queue<user>
    stage -1.0 <CPU cores> <CPU memory GB> <CPU time, units> <GPUs> <GPU memory GB> <GPU time, units> 1 <e_cpu> <e_gpu>
    0

`e_cpu` and `e_gpu` are the estimation errors their simulator drew (sd 0.1): the scheduler sees the time times
(1 + e), clamped to +-0.99 as our generator does. A GPU variant reserves one CPU core, as the generator's.
"""

from __future__ import annotations

import functools
from pathlib import Path

from slurmx.core.resources import Resources
from slurmx.reproduce import UnknownPaper
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.workloads.allox import AlloxParams

__all__ = ["AUTHORS_INPUT", "authors_jobs", "job_name"]

AUTHORS_INPUT = Path(__file__).resolve().parents[4] / "shared" / "traces" / "allox_sim_inputs" / \
    "jobs_input_10_Google_m1.txt"
_CLAMP = 0.99


def job_name(number: int) -> str:
    """Our id of their job `number`, zero-padded so that the policies' tie-break on the id (FCFS among jobs
    that arrive together) keeps the file's order, as their queues do ("allox-13" would sort before "allox-3")."""
    return f"allox-{number:05d}"


def _estimate(truth: float, error: float, with_errors: bool) -> float | None:
    return truth * (1.0 + max(-_CLAMP, min(_CLAMP, error))) if with_errors else None


@functools.cache
def authors_jobs(path: Path = AUTHORS_INPUT, with_errors: bool = True) -> tuple[SimJob, ...]:
    """The file's jobs in our workload's shape (`slurmx.sim.workloads.allox`); UnknownPaper naming the line when
    the file is missing or not in this format."""
    try:
        lines = path.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UnknownPaper(f"allox: cannot read the authors' input {path} ({exc}); it is in "
                           "../shared/traces/allox_sim_inputs/") from None
    params = AlloxParams()
    unit = params.time_unit_s
    gpu_request = Resources(params.gpu_job_cpus, round(params.gpu_mem_gb * 1024), {"gpu": 1})
    jobs: list[SimJob] = []
    number = 0
    while number < len(lines):
        if not lines[number].startswith("#"):
            number += 1
            continue
        try:
            head, stage = lines[number + 1].split(), lines[number + 2].split()
            job_id, arrival, user = int(head[1]), float(head[3]), head[4].removeprefix("queue")
            cores, mem_gb, cpu_time = float(stage[2]), float(stage[3]), float(stage[4])
            gpu_time, e_cpu, e_gpu = float(stage[7]), float(stage[9]), float(stage[10])
        except (IndexError, ValueError):
            raise UnknownPaper(f"allox: {path}:{number + 2}: not a job of the authors' input format") from None
        cpu_s, gpu_s = cpu_time * unit, gpu_time * unit
        cpu_request = Resources(int(cores), round(mem_gb * 1024))
        cpu = SimVariant("cpu", cpu_request, cpu_s, _estimate(cpu_s, e_cpu, with_errors))
        gpu = SimVariant("gpu", gpu_request, gpu_s, _estimate(gpu_s, e_gpu, with_errors))
        jobs.append(SimJob(job_id=job_name(job_id), user=f"user{user}", submit_time=arrival * unit,
                           variants={"cpu": cpu, "gpu": gpu},
                           meta={"speedup": cpu_s / gpu_s, "user_index": int(user)}))
        number += 4
    if not jobs:
        raise UnknownPaper(f"allox: {path} holds no job")
    return tuple(sorted(jobs, key=lambda j: (j.submit_time, int(j.job_id.split("-")[1]))))
