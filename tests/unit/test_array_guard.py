"""The job-side guard of a task of a Slurm job array (templates/_base.sh.j2, issue 32).

Index i of the kind arrays tagged g is one group: a task's siblings are index i of the other kinds' arrays, named
`A_i`, and never the other indices of its own array or the others'. The rendered script runs under bash with fake
squeue, scontrol and scancel. Only an array's script (rendered with `array=True`) reads SLURM_ARRAY_*: a plain job
submitted from inside an array task inherits them (live, 24.11, `--export=ALL`) and keeps the plain guard.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from slurmx.submit.render import render_variant
from slurmx.submit.spec import parse_spec
from tests.unit.test_submit_properties import GID
from tests.unit.test_submit_properties import site as spool_site

BASH = shutil.which("bash")
_RECORDER = '#!/bin/sh\necho "$(basename "$0") $*" >> "{log}"\n'
# scancel as Slurm acts on it: a job cancelling itself is ended a moment later (slurmctld's cancel is asynchronous).
# The task names itself A_i: its SLURM_JOB_ID may be the array's job id, which names every task of the array.
_SCANCEL = _RECORDER + ('for id in "$@"; do case $id in "$SLURM_JOB_ID"|"${{SLURM_ARRAY_JOB_ID}}_$SLURM_ARRAY_TASK_ID")'
                        ' (sleep 0.5; kill -TERM "$PPID") & ;; esac; done\n'
                        'exit 0\n')
pytestmark = pytest.mark.skipif(BASH is None, reason="bash not installed")


def _run_task(tmp_path: Path, mode: str, squeue_out: str, *, array: str = "80", index: str = "3",
              my_start: str = "2026-01-01T00:00:05", spool: Path | None = None,
              as_array: bool = True, codes: list[int] | None = None) -> tuple[list[str], str]:
    """Run the cpu variant's script as task `array`_`index` (job id 91 since Slurm split it off): what the fakes
    were asked, and the payload's mark ("" when the task left without work). A task leaving names itself `A_i`."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = parse_spec({"name": "m", "command": f"echo ran > {tmp_path}/ran", "variants": ["cpu"]})
    script = render_variant(spec, spool_site(str(spool or tmp_path / "spool")), "cpu", GID, mode, "job.yaml",
                            array=as_array).script
    (tmp_path / "job.sh").write_text(script)
    fakes, log = tmp_path / "bin", tmp_path / "calls.log"
    fakes.mkdir()
    for name, fake in (("scontrol", _RECORDER), ("scancel", _SCANCEL)):
        (fakes / name).write_text(fake.format(log=log))
        (fakes / name).chmod(0o755)
    (fakes / "squeue").write_text(
        f'#!/bin/sh\necho "squeue $*" >> "{log}"\ncase "$*" in *-j*) echo \'{my_start}\'; exit 0;; esac\n'
        f"cat <<'EOF'\n{squeue_out.format(g=GID)}EOF\n")
    (fakes / "squeue").chmod(0o755)
    env = {"PATH": f"{fakes}:/usr/bin:/bin", "SLURM_JOB_ID": "91", "SLURM_ARRAY_JOB_ID": array,
           "SLURM_ARRAY_TASK_ID": index, "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    assert BASH is not None
    done = subprocess.run([BASH, str(tmp_path / "job.sh")], cwd=tmp_path, env=env, capture_output=True, timeout=60,
                          check=False)
    if codes is not None:
        codes.append(done.returncode)
    calls = log.read_text().splitlines() if log.exists() else []
    ran = tmp_path / "ran"
    return [c for c in calls if not c.startswith("squeue")], ran.read_text() if ran.exists() else ""


# squeue -r -t all -o '%i %T %S %k %F %K': every task on its own line, with its array and index
MANAGED = ("80_3 RUNNING 2026-01-01T00:00:05 slurmx:1:g={g},v=cpu 80 3\n"
           "80_4 PENDING N/A slurmx:1:g={g},v=cpu 80 4\n"
           "80_1 RUNNING 2026-01-01T00:00:01 slurmx:1:g={g},v=cpu 80 1\n"
           "95_2 RUNNING 2026-01-01T00:00:01 slurmx:1:g={g},v=gpu 95 2\n"
           "95_4 PENDING N/A slurmx:1:g={g},v=gpu 95 4\n"
           "95_3 PENDING N/A slurmx:1:g={g},v=gpu 95 3\n"
           "77_3 PENDING N/A slurmx:1:g=other,v=gpu 77 3\n")


def test_a_managed_task_cancels_only_its_own_index_of_the_other_kinds(tmp_path: Path) -> None:
    calls, ran = _run_task(tmp_path, "managed", MANAGED)
    assert calls == ["scontrol update JobId=95_3 MailType=NONE", "scancel 95_3"] and ran == "ran\n"


def test_a_managed_task_leaves_when_its_index_started_first_on_another_kind(tmp_path: Path) -> None:
    out = MANAGED.replace("95_3 PENDING N/A", "95_3 RUNNING 2026-01-01T00:00:02")
    calls, ran = _run_task(tmp_path, "managed", out)
    assert calls == ["scontrol update JobId=80_3 MailType=NONE", "scancel 80_3"] and ran == ""


def test_a_tie_goes_to_the_lower_array_job_id(tmp_path: Path) -> None:
    out = MANAGED.replace("95_3 PENDING N/A", "95_3 RUNNING 2026-01-01T00:00:05")
    calls, ran = _run_task(tmp_path / "low", "managed", out)
    assert ran == "ran\n" and calls == []  # array 80 < 95: this task works, the running sibling loses on its side
    calls, ran = _run_task(tmp_path / "high", "managed", out.replace(" 95 3\n", " 60 3\n"))
    assert ran == "" and calls == ["scontrol update JobId=80_3 MailType=NONE", "scancel 80_3"]


def test_a_completed_index_never_runs_again_but_another_completed_index_does_not_count(tmp_path: Path) -> None:
    done = MANAGED.replace("95_3 PENDING N/A", "95_3 COMPLETED 2026-01-01T00:00:00")
    assert _run_task(tmp_path / "done", "managed", done)[1] == ""
    other = MANAGED + "95_7 COMPLETED 2026-01-01T00:00:00 slurmx:1:g={g},v=gpu 95 7\n"
    assert _run_task(tmp_path / "other", "managed", other)[1] == "ran\n"


def test_a_race_task_races_its_own_index_and_cancels_that_index_alone(tmp_path: Path) -> None:
    # squeue -r -o '%i %k %K'
    out = ("80_3 slurmx:1:g={g},v=cpu 3\n80_4 slurmx:1:g={g},v=cpu 4\n95_3 slurmx:1:g={g},v=gpu 3\n"
           "95_4 slurmx:1:g={g},v=gpu 4\n77_3 slurmx:1:g=other,v=gpu 3\n")
    spool = tmp_path / "spool"
    calls, ran = _run_task(tmp_path / "three", "race", out, spool=spool)
    assert calls == ["scontrol update JobId=95_3 MailType=NONE", "scancel 95_3"] and ran == "ran\n"
    assert (spool / GID / "race-3" / "winner").read_text() == "80\n"
    # another index of the same array is not this index's sibling: it races in its own folder and wins there
    calls, ran = _run_task(tmp_path / "four", "race", out, index="4", spool=spool)
    assert ran == "ran\n" and calls == ["scontrol update JobId=95_4 MailType=NONE", "scancel 95_4"]


def test_a_race_task_loses_to_its_index_won_by_another_kinds_array(tmp_path: Path) -> None:
    race = tmp_path / "spool" / GID / "race-3"
    race.mkdir(parents=True)
    (race / "winner").write_text("95\n")
    calls, ran = _run_task(tmp_path, "race", "")
    assert ran == "" and calls == ["scontrol update JobId=80_3 MailType=NONE", "scancel 80_3"]


def test_a_plain_job_that_inherited_an_array_tasks_variables_keeps_the_plain_guard(tmp_path: Path) -> None:
    # squeue -o '%i %k' as the plain race guard reads it: jobs 92 and 93 are its siblings, whatever the index
    out = "91 slurmx:1:g={g},v=cpu\n92 slurmx:1:g={g},v=gpu\n93 slurmx:1:g={g},v=accel\n"
    calls, ran = _run_task(tmp_path, "race", out, as_array=False)
    assert ran == "ran\n" and calls == ["scontrol update JobId=92,93 MailType=NONE", "scancel 92 93"]
    assert (tmp_path / "spool" / GID / "race" / "winner").read_text() == "91\n"


def test_an_arrays_script_outside_a_job_array_stops_before_any_work(tmp_path: Path) -> None:
    calls, ran = _run_task(tmp_path, "managed", MANAGED, array="")
    assert ran == "" and calls == []


def test_the_payload_a_kind_s_tasks_share_is_executable_before_it_takes_its_name() -> None:
    """Every task of a kind's array writes the same payload file: a task renames its copy over the one another task
    is about to run, so the copy must carry its execute bit before the rename (live, 22.05: `payload-cpu:
    Permission denied` when chmod came after)."""
    spec = parse_spec({"name": "m", "command": "true", "variants": ["cpu"]})
    lines = render_variant(spec, spool_site("/spool"), "cpu", GID, "race", "job.yaml", array=True).script.splitlines()
    chmod = lines.index('chmod +x "$_slurmx_payload.tmp.$$"')
    rename = lines.index('mv -f "$_slurmx_payload.tmp.$$" "$_slurmx_payload"')
    assert chmod < rename and not any(line.startswith("chmod") and "tmp" not in line for line in lines[rename:])


def test_a_task_that_leaves_without_work_is_ended_by_its_cancel_not_by_its_own_exit(tmp_path: Path) -> None:
    """A script that exited 0 before slurmctld processed its own cancel would end COMPLETED (live, 22.05), and a
    group whose running variant failed would read as completed: the leaving task waits to be cancelled."""
    codes: list[int] = []
    out = MANAGED.replace("95_3 PENDING N/A", "95_3 RUNNING 2026-01-01T00:00:02")
    calls, ran = _run_task(tmp_path, "managed", out, codes=codes)
    assert ran == "" and calls[-1] == "scancel 80_3" and codes == [-signal.SIGTERM]
