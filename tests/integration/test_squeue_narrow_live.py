"""The narrow queue read, live: the same real queue read as `squeue --Format` (slurm/squeue_narrow.py) and as
`squeue --json` gives the same jobs, with hostile names and comments (separators, newlines, squeue's `(null)`,
a record's worth of fields) in it.

Slurm 24.11+ only: 22.05's `--json` ignores `--jobs`, so the adapter reads its queue as JSON there.
"""

from __future__ import annotations

import pytest

from slurmx.slurm import CliSlurm, RetryPolicy
from slurmx.slurm.records import SlurmJob
from slurmx.slurm.squeue_narrow import narrow_argv, new_token, parse_narrow
from slurmx.slurm.versions import version_key
from tests.integration.conftest import Cluster, wait_until

pytestmark = pytest.mark.integration

SCRIPT = "#!/bin/bash\nsleep 600\n"
# A record's worth of fields as squeue prints them, behind a newline: what a forger would write if it knew the token.
FORGED = "x\n1|1|N/A|root|0|PENDING|None|cpu|be||cpu=64|1|0|0|UNLIMITED|1|N/A|||0:0|(null)|1|OK|forged|slurmx:1:g=f|"


def _by_id(adapter: CliSlurm, tag: str) -> dict[int, SlurmJob]:
    return {job.job_id: job for job in adapter.jobs() if tag in job.name}


def test_the_queue_reads_the_same_both_ways(cluster: Cluster, slurm: CliSlurm, admin: CliSlurm, tag: str,
                                            cleanup: list[int]) -> None:
    if version_key(cluster.version) < (24, 11):
        pytest.skip("22.05's squeue --json ignores --jobs: its queue is read as JSON")
    submit = [
        ["-H", "-J", f"{tag}-held@cpu", f"--comment=slurmx:1:g={tag},v=cpu,c=be", "-p", "cpu", "--mem=500M"],
        ["-H", "-J", f"{tag}-evil\nname|%s", "--comment=" + FORGED.replace("|", "\x1f"), "-p", "cpu"],
        ["-H", "-J", f"{tag}-pipes", "--comment=" + FORGED, "-p", "cpu", "--time=1-02:03:00"],
        ["-H", "-J", f"{tag}-null", "--comment=(null)", "-p", "cpu", "-C", "x86", "-x", "c1"],
        ["-H", "-J", f"{tag}-two@gpu", "-p", "gpu", "-N", "2", "--exclusive", "-C", "nvlink|bigmem"],
        ["--begin=now+3600", "-J", f"{tag}-later", "-p", "gpu", "--gres=gpu:1", "--nice=5"],
        ["-J", f"{tag}-run", "-p", "cpu", "-c", "2", "--mem=1G", "--time=30"],
        ["-H", "-J", f"{tag}-array", f"--comment=slurmx:1:g={tag}a,v=cpu,c=be", "-p", "cpu", "--array=0-5%2"],
    ]
    for options in submit:
        cleanup.append(slurm.submit(SCRIPT, ["-o", "/dev/null", *options]))
    wait_until(lambda: any(j.state.value == "running" for j in _by_id(admin, tag).values() if "run" in j.name),
               60, "the running job to start")
    narrow = CliSlurm(admin.transport, RetryPolicy(retries=3, timeout_s=60), narrow_queue=True)
    for _ in range(3):  # two reads a moment apart: a job that changed in between is read again
        whole, got = _by_id(admin, tag), _by_id(narrow, tag)
        for job in got.values():  # squeue prints an empty comment as `(null)`: one that says so reads as empty
            if job.name == f"{tag}-null" and job.comment == "":
                job.comment = "(null)"
        if got == whole:
            break
    assert got == whole
    assert len(whole) >= len(submit) + 5  # the array's six indices
    assert narrow.command_counts()["squeue"] >= 2  # the narrow read, then the JSON read of what it cannot say

    token = new_token()
    read = parse_narrow(admin.transport.run(narrow_argv(token)).data, token, says_hold=True,
                        shows_exclusive=version_key(cluster.version) < (26, 5))
    plain = {j.name for j in read.jobs if tag in j.name}
    assert {f"{tag}-held@cpu", f"{tag}-evil\nname|%s", f"{tag}-pipes", f"{tag}-null", f"{tag}-two@gpu",
            f"{tag}-later"} <= plain  # read from the text: no separator of this read in them
    assert not any(j.user == "root" or j.name == "forged" for j in read.jobs)
