#!/usr/bin/env python3
"""Benchmark: slurmxd reading 100,000 pending array indices (issue 32), against the same groups as plain jobs.

`ours`: two kind arrays (cpu, gpu) of 100,000 held indices each, as squeue shows them: TWO pending records whose
task strings list the indices (`0-99999`; no `%N`, which would keep all but N of them out of the view). Parsed
into one job per index (`slurm/array_tasks.py`), grouped into 100,000 index groups `g[i]` (`daemon/trust.py`, one
folder owner lookup) and built into the policy's view (`daemon/observe.py`). `baseline`: the same 100,000
groups submitted as today, one plain job per variant: 200,000 records in squeue's answer and one spool folder per
group. Both answers are built from the pending record recorded
on the live 24.11 cluster (tests/fixtures/slurm/24.11/squeue-arrays.json) and written to a file first.

Each case runs in a fresh Python process (peak RSS is the kernel's VmHWM of that process since exec); reported:
CPU (time.process_time) and wall time of parse, of trust + view, in total, and peak RSS, median of 3 processes.
Target: ours within the baseline's CPU and peak memory (what the daemon already holds for 100,000 groups).

Usage: python3 bench/array_cycle.py [--indices N]   (prints one JSON object on stdout)
"""

from __future__ import annotations

import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "slurm" / "24.11" / "squeue-arrays.json"
RUNS = 3
TAG = "slurmx:1:g={group},v={kind},c=be,h=0123456789ab"


def _template() -> tuple[dict[str, Any], dict[str, Any]]:
    data = json.loads(FIXTURE.read_text())
    record = next(j for j in data["jobs"] if j["array_job_id"]["number"] == 80 and j["array_task_string"])
    return data, record


def write_answer(path: Path, indices: int, mode: str) -> None:
    data, record = _template()
    record["user_id"] = os.getuid()  # the owner of the spool folders this benchmark makes
    jobs = []
    if mode == "ours":
        for n, kind in enumerate(("cpu", "gpu")):
            job = copy.deepcopy(record)
            job["job_id"] = job["array_job_id"]["number"] = 1000 + n
            job["array_task_string"] = f"0-{indices - 1}"  # no %N: every index in the view, the costly case
            job["array_max_tasks"]["number"] = 0
            job["comment"], job["partition"], job["name"] = TAG.format(group="sweep", kind=kind), kind, f"sweep@{kind}"
            jobs.append(job)
    else:
        plain = copy.deepcopy(record)
        plain["array_job_id"]["number"] = 0
        plain["array_max_tasks"]["number"] = 0
        plain["array_task_string"] = ""
        text = json.dumps(plain)
        for i in range(indices):
            for n, kind in enumerate(("cpu", "gpu")):
                job = json.loads(text)
                job["job_id"] = 1000 + 2 * i + n
                job["comment"], job["partition"] = TAG.format(group=f"sweep-{i}", kind=kind), kind
                job["name"] = f"sweep-{i}@{kind}"
                jobs.append(job)
    data["jobs"] = jobs
    path.write_text(json.dumps(data))


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(answer: Path, spool: Path, expected: int) -> dict[str, Any]:
    from slurmx.core.config import parse_site_config
    from slurmx.core.model import Node, Partition
    from slurmx.core.ownership import SpoolOwners
    from slurmx.core.resources import Resources
    from slurmx.daemon.observe import build_view
    from slurmx.slurm.parse import parse_jobs

    site = parse_site_config({
        "cluster": {"name": "b"},
        "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"},
                      "gpu": {"partition": "gpu", "cpus": 1, "mem": "500M", "gres": "gpu:1"}},
        "submit": {"spool_dir": str(spool)}})
    nodes = [Node("c1", ("cpu",), Resources(64, 256000), Resources(), "IDLE"),
             Node("g1", ("gpu",), Resources(64, 256000, {"gpu": 8}), Resources(), "IDLE")]
    partitions = [Partition("cpu", ("c1",), "cpu"), Partition("gpu", ("g1",), "gpu")]
    text = answer.read_bytes()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    jobs = parse_jobs(text)
    cpu1 = time.process_time()
    obs = build_view(site, jobs, nodes, partitions, 2e9, owner_of=SpoolOwners(str(spool)))
    cpu2, wall2 = time.process_time(), time.perf_counter()
    if len(obs.view.groups) != expected:
        raise SystemExit(f"the view holds {len(obs.view.groups)} groups, expected {expected}")
    return {"parse_cpu_s": cpu1 - cpu0, "view_cpu_s": cpu2 - cpu1, "cpu_s": cpu2 - cpu0,
            "wall_s": wall2 - wall0, "jobs": len(jobs), "peak_rss_mb": peak_rss_mb()}


def measure(mode: str, indices: int, folder: Path) -> dict[str, Any]:
    answer, spool = folder / f"{mode}.json", folder / f"spool-{mode}"
    write_answer(answer, indices, mode)
    spool.mkdir()
    for group in ["sweep"] if mode == "ours" else (f"sweep-{i}" for i in range(indices)):
        (spool / group).mkdir(mode=0o700)
    runs = []
    for _ in range(RUNS):
        out = subprocess.run([sys.executable, __file__, "--child", str(answer), str(spool), str(indices)],
                             capture_output=True, text=True, cwd=ROOT)
        if out.returncode != 0:
            raise SystemExit(f"{mode}: the measuring process failed: {out.stderr.strip()[-600:]}")
        runs.append(json.loads(out.stdout))
    result = {key: round(statistics.median(r[key] for r in runs), 3) for key in runs[0]}
    result["answer_mb"] = round(answer.stat().st_size / 1e6, 1)
    return result


def main() -> None:
    indices = int(sys.argv[sys.argv.index("--indices") + 1]) if "--indices" in sys.argv else 100_000
    with tempfile.TemporaryDirectory(prefix="slurmx-array-bench-") as tmp:
        ours = measure("ours", indices, Path(tmp))
        baseline = measure("baseline", indices, Path(tmp))
    print(json.dumps({
        "name": "array_cycle",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()[0]},
        "cases": [{
            "case": f"{indices:,} pending indices of 2 kind arrays (cpu, gpu): parse, trust and view",
            "ours": {"name": "2 array records, one job per index", **ours},
            "baseline": {"name": f"the same {indices:,} groups as 2 plain jobs each (today's --array)", **baseline},
            "target": "ours within the baseline's CPU and peak RSS"}]}, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(child(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))))
    else:
        main()
