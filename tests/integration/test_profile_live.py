"""The profiler on the real cluster: sample runs of a payload with known speeds, estimates vs the truth.

The test plays the daemon's part (plan -> sbatch -> poll -> observe), the few lines slurmxd needs to wire in.
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path

import pytest

from slurmx.core.config import load_site_config
from slurmx.core.spool import group_spool
from slurmx.profile.profiler import Profiler
from slurmx.profile.readings import sample_step_seconds, sample_wall_seconds
from slurmx.profile.sampling import GroupToProfile, SamplingParams, VariantToProfile
from slurmx.profile.sensitivity import SearchParams, cpu_search, refine_knee
from slurmx.slurm import CliSlurm
from slurmx.submit.render import render_variant
from slurmx.submit.spec import parse_spec

from .conftest import Cluster

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
# Every job's true run time on its fast variant: 3% of it is 36 s of samples. Each sample also pays ~2.5 s of
# launch and start-up on this cluster (sacct elapsed of a 1-step sample), 10 s for four: jobs much shorter than
# this cannot be profiled within 3% here.
GPU_TRUE_S = 1200.0


def payload(cluster: Cluster, tag: str) -> str:
    path = cluster.shared / f"{tag}-rate_payload.py"
    shutil.copy(REPO / "examples" / "rate_payload.py", path)
    return str(path)


@pytest.mark.long_behaviour
def test_samples_estimate_twenty_jobs_within_ten_percent_at_three_percent_overhead(
        site_path: Path, cluster: Cluster, slurm: CliSlurm, cleanup: list[int], tag: str) -> None:
    site = load_site_config(site_path)
    script = payload(cluster, tag)
    rng = random.Random(10)
    specs, groups, truth = {}, [], {}
    for i in range(20):
        gpu_rate = rng.uniform(30.0, 80.0)
        cpu_rate = gpu_rate / rng.uniform(1.5, 2.8)  # cut_factor 3: no CPU sample is cut
        steps = round(gpu_rate * GPU_TRUE_S)
        gid = f"{tag}-{i:02d}"
        specs[gid] = parse_spec({"name": tag, "variants": ["cpu", "gpu"], "time": "10m", "command":
                                 f"exec python3 {script} {steps} --rate cpu={cpu_rate:.4f} --rate gpu={gpu_rate:.4f}"})
        groups.append(GroupToProfile(gid, "alice", tag, "h", (
            VariantToProfile("cpu", site.resources_for("cpu"), steps),
            VariantToProfile("gpu", site.resources_for("gpu"), steps)), float(i)))
        truth[gid] = {"cpu": steps / float(f"{cpu_rate:.4f}"), "gpu": steps / float(f"{gpu_rate:.4f}")}
    # Budget 2% of steps, leaving 1% (12 s) for the four samples' launch and start-up as sacct counts them
    # (whole seconds); 12 samples at once (the cluster's 8 CPU and 4 GPU slots); the test
    # cluster has no profiling QOS, te has the high priority.
    profiler = Profiler(sampling=SamplingParams(qos="te", overhead_budget=0.02, zero_step_short=True,
                                                max_samples=12))
    running: dict[str, int] = {}
    scripts: dict[tuple[str, str], str] = {}
    elapsed_by_job: dict[int, str] = {}
    deadline = time.monotonic() + 240
    while not all(profiler.ready(g.group_id) for g in groups):
        assert time.monotonic() < deadline, f"samples not done: {sorted(running)}"
        for request in profiler.plan(groups, time.time()):
            # One sample script per group and kind (what the submitter can leave for the daemon); each sample's
            # step count rides in its sbatch overrides (SLURMX_SAMPLE_STEPS).
            key = (request.group_id, request.kind)
            if key not in scripts:
                if not any(g == request.group_id for g, _ in scripts):  # the group folder, as `slurmx submit` makes it
                    slurm.make_private_folder(group_spool(site, request.group_id), {})
                scripts[key] = render_variant(specs[request.group_id], site, request.kind, request.group_id,
                                              "pick", profile_steps=1).script
            job_id = slurm.submit(scripts[key], request.sbatch_overrides())
            cleanup.append(job_id)
            running[request.sample_id] = job_id
            elapsed_by_job[job_id] = request.sample_id
        states = {j.job_id: j for j in slurm.jobs(job_ids=list(running.values()))}
        for sample_id, job_id in list(running.items()):
            job = states.get(job_id)
            if job is None or not job.state.is_finished:
                continue
            group_id = sample_id.rsplit(".", 2)[0]
            seconds = sample_wall_seconds(group_spool(site, group_id), job_id)
            assert seconds is not None, f"sample {sample_id} (job {job_id}, {job.state_text}) left no timing"
            profiler.observe(sample_id, seconds,
                             step_seconds=sample_step_seconds(group_spool(site, group_id), job_id))
            del running[sample_id]
        starts = {s: float(states[j].start_time or time.time()) for s, j in running.items()
                  if j in states and states[j].start_time}
        assert profiler.to_cut(starts, time.time()) == []
        time.sleep(1.0)

    errors = []
    for g in groups:
        est = profiler.estimates(g.group_id)
        for kind in ("cpu", "gpu"):
            assert not est[kind].lower_bound
            errors.append(est[kind].seconds / truth[g.group_id][kind] - 1.0)
    worst = max(abs(e) for e in errors)
    mean_abs = sum(abs(e) for e in errors) / len(errors)
    print(f"estimation error over {len(errors)} variants: mean |e| {mean_abs:.2%}, worst {worst:.2%}")
    assert worst <= 0.10, sorted(errors)

    # What samples cost: their allocations (sacct, whole seconds) against the job's fast run.
    records = slurm.accounting(job_ids=list(elapsed_by_job), since="now-1hour")
    spent: dict[str, float] = {}
    for r in records:
        group_id = elapsed_by_job[r.job_id].rsplit(".", 2)[0]
        spent[group_id] = spent.get(group_id, 0.0) + r.elapsed_s
    assert len(records) == len(elapsed_by_job) == 80
    overheads = [spent[g.group_id] / min(truth[g.group_id].values()) for g in groups]
    print(f"overhead (sacct elapsed / fast run): mean {sum(overheads) / 20:.2%}, worst {max(overheads):.2%}")
    assert max(overheads) <= 0.03, overheads


@pytest.mark.long_behaviour
def test_cpu_knee_found_within_one_cpu(site_path: Path, cluster: Cluster, slurm: CliSlurm, cleanup: list[int],
                                       tag: str) -> None:
    """The Synergy search on a payload whose rate rises with CPUs up to 3 (the test nodes have 4)."""
    site = load_site_config(site_path)
    script = payload(cluster, tag)
    spec = parse_spec({"name": tag, "variants": ["cpu"], "time": "5m",
                       "command": f"exec python3 {script} 100000 --rate cpu=60 --knee 3"})
    steps = 120

    def measure(cpus: int) -> float:
        gid = f"{tag}-c{cpus}-{time.monotonic_ns()}"
        rendered = render_variant(spec, site, "cpu", gid, "pick", profile_steps=steps)
        slurm.make_private_folder(group_spool(site, gid), {})  # as `slurmx submit` makes it, before sbatch
        job_id = slurm.submit(rendered.script, [f"--cpus-per-task={cpus}", "--qos=te"])
        cleanup.append(job_id)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seconds = sample_wall_seconds(group_spool(site, gid), job_id)
            if seconds is not None:
                return steps / seconds
            time.sleep(0.5)
        raise AssertionError(f"knee sample at {cpus} CPUs (job {job_id}) left no timing")

    params = SearchParams(max_cpus=4)
    points, order = cpu_search(measure, params)  # 4, 4 (warm-up), 2, 1: the released search
    found = refine_knee(measure, points, order, params.saturation)  # and 3, between 2 and 4
    print(f"knee search: order {order}, throughputs { {c: round(w, 1) for c, w in points.items()} }, knee {found}")
    assert abs(found - 3) <= 1
