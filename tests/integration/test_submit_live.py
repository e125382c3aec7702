"""`slurmx submit` on the real cluster: variants, modes, group commands, sbatch scripts, remote submit."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmx.core.config import load_site_config
from slurmx.core.model import VariantState
from slurmx.slurm import CliSlurm
from slurmx.submit.groups import GroupStatus, find_group
from slurmx.submit.spec import parse_spec
from slurmx.submit.submitter import submit_group

from .conftest import Cluster, spool_dir, wait_until

pytestmark = pytest.mark.integration


def cli(site_path: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`slurmx ARGS`; with `check`, a failure names its exit status and what it printed (a bare
    CalledProcessError hides the one line that says why)."""
    proc = subprocess.run([sys.executable, "-m", "slurmx.cli", "--site", str(site_path), *args],
                          capture_output=True, text=True, timeout=300, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"slurmx {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-3000:]}")
    return proc


def test_managed_group_is_three_leased_variants_and_cancel_leaves_none(site_path: Path, slurm: CliSlurm,
                                                                    tag: str) -> None:
    spec = tmp_spec(site_path, tag, "command: echo never-runs\nvariants: [cpu, gpu, accel]\n")
    out = cli(site_path, "submit", "--json", "--mode", "managed", str(spec)).stdout
    submitted = json.loads(out)
    assert set(submitted["variants"]) == {"cpu", "gpu", "accel"}
    jobs = {j.job_id: j for j in slurm.jobs(job_ids=submitted["variants"].values())}
    site = load_site_config(site_path)
    for kind, job_id in submitted["variants"].items():
        job = jobs[job_id]
        assert (job.state, job.held) == (VariantState.PENDING, False), (kind, job.state)  # a lease, no hold
        tags = dict(job.slurmx_tags)
        assert re.fullmatch(r"[0-9a-f]{12}", tags.pop("h")), job.slurmx_tags  # the payload hash history keys on
        assert tags.pop("gr") == str(site.preemption.grace_s)  # the job's own grace, for slurmxd
        assert tags.pop("l") == str(site.daemon.lease_s)  # waiting under a lease, not a hold
        assert job.begin_time is not None and job.begin_time > time.time() + site.daemon.lease_s - 120
        assert tags == {"g": submitted["group"], "v": kind, "c": "be"}
        assert job.partition == site.kind(kind).partition
        assert job.request.cpus == site.kind(kind).cpus
        assert job.request.gres == site.resources_for(kind).gres
        assert job.name == f"{tag}@{kind}"
    status = json.loads(cli(site_path, "status", "--json", submitted["group"]).stdout)[0]
    assert status["state"] == "pending" and status["running"] is None
    assert all("held" in v["why"] for v in status["variants"])
    cli(site_path, "cancel", submitted["group"])
    wait_until(lambda: all(j.state == VariantState.CANCELLED
                           for j in slurm.jobs(job_ids=submitted["variants"].values())), 60, "all cancelled")


def tmp_spec(site_path: Path, name: str, body: str) -> Path:
    path = site_path.parent / "shared" / f"{name}.yaml"
    path.write_text(f"name: {name}\n{body}")
    return path


def test_race_mode_runs_exactly_one_variant_per_group(site_path: Path, cluster: Cluster, slurm: CliSlurm,
                                                      tag: str) -> None:
    """20 groups at once on an idle cluster: each runs one variant's payload, the siblings end cancelled unrun."""
    site = load_site_config(site_path)
    spec = parse_spec({"name": tag, "variants": ["cpu", "gpu", "accel"], "time": "5m",
                       "command": 'echo "$SLURMX_VARIANT $SLURM_JOB_ID" >> "$SLURMX_SPOOL_DIR/ran"; sleep 3'})
    groups = [submit_group(spec, site, slurm, mode="race") for _ in range(20)]
    ids = [job_id for g in groups for job_id in g.job_ids()]

    def all_done() -> bool:
        return all(j.state.is_finished for j in slurm.jobs(job_ids=ids)) and len(slurm.jobs(job_ids=ids)) == len(ids)

    wait_until(all_done, 420, "every variant of 20 race groups to finish", every=3)
    states = {j.job_id: j.state for j in slurm.jobs(job_ids=ids)}
    for group in groups:
        ran = (Path(group.spool_dir) / "ran").read_text().split("\n")
        ran = [line for line in ran if line]
        assert len(ran) == 1, f"group {group.group_id}: payload ran {len(ran)} times: {ran}"
        winner_kind, winner_id = ran[0].split()
        by_kind = dict(group.variants)
        assert by_kind[winner_kind] == int(winner_id)
        assert states[int(winner_id)] == VariantState.COMPLETED
        for kind, job_id in group.variants:
            if job_id != int(winner_id):
                assert states[job_id] == VariantState.CANCELLED, (group.group_id, kind, states[job_id])


def test_unmodified_sbatch_script_submits_and_runs(site_path: Path, cluster: Cluster, slurm: CliSlurm,
                                                   tag: str) -> None:
    script = cluster.shared / f"{tag}.sh"
    marks = _marks(cluster, tag)
    script.write_text("#!/bin/bash\n#SBATCH --job-name=legacy\n#SBATCH --time=00:05:00 --mem=300M\n"
                      f"#SBATCH --partition=gpu --output={marks}/legacy-%j.log\n"
                      'echo "legacy script ran with: $1|$2" > "$SLURMX_SPOOL_DIR/legacy.out"\n')
    # --variants (slurmx's, on the command line) wins over the script's -p gpu, as command-line options do
    proc = cli(site_path, "submit", "--parsable", "--mode", "race", "--variants", "cpu,gpu", str(script),
               "one", "two words")
    gid = proc.stdout.strip()
    assert "--output" not in proc.stderr  # %j: each variant's own file, as written
    group = wait_until(lambda: (g := find_group(slurm, gid, spool_dir=spool_dir())) and g.finished and g, 180,
                       "the script to run")
    assert group.state.value == "completed"
    assert {v.kind for v in group.variants} == {"cpu", "gpu"}
    out = Path(load_site_config(site_path).submit.spool_dir) / gid / "legacy.out"
    assert out.read_text() == "legacy script ran with: one|two words\n"
    assert group.name == "legacy"


def _marks(cluster: Cluster, tag: str) -> Path:
    """A folder on shared storage the jobs (alice) can write into and the test can read."""
    marks = cluster.shared / f"{tag}-marks"
    marks.mkdir()
    marks.chmod(0o1777)
    return marks


def _ran(slurm: CliSlurm, gid: str, timeout: float = 180) -> tuple[str, int]:
    """(kind, job id) of the variant that ran the completed group."""
    def ended() -> GroupStatus | None:
        found = find_group(slurm, gid, spool_dir=spool_dir())
        return found if found is not None and found.finished else None

    group = wait_until(ended, timeout, f"group {gid} to end")
    assert group.state.value == "completed", group
    ran = [v for v in group.variants if v.state is VariantState.COMPLETED]
    assert len(ran) == 1, group.variants
    assert ran[0].job_id is not None
    return ran[0].kind, ran[0].job_id


def test_export_none_runs(site_path: Path, cluster: Cluster, slurm: CliSlurm, tag: str) -> None:
    """`#SBATCH --export=NONE` (issue 32): the job gets none of the submitting environment and still runs: the
    job script sets what it needs itself."""
    marks = _marks(cluster, tag)
    script = cluster.shared / f"{tag}-export.sh"
    script.write_text("#!/bin/bash\n#SBATCH --export=NONE --time=5\n"
                      f'echo "export=${{SLURM_EXPORT_ENV:-}} hooks=$(python3 -c "import slurmx.hooks; print(1)")" '
                      f'> {marks}/ran\n')
    gid = cli(site_path, "submit", "--parsable", "--mode", "race", "--variants", "cpu,gpu", str(script)).stdout.strip()
    _ran(slurm, gid)
    assert (marks / "ran").read_text() == "export=NONE hooks=1\n"


def test_output_patterns_give_each_variant_its_own_file(site_path: Path, cluster: Cluster, slurm: CliSlurm,
                                                         tag: str) -> None:
    """`-o` with %x and %j as written; an `-e` file the variants would share becomes one per variant, as the note
    printed at submission says."""
    marks = _marks(cluster, tag)
    script = cluster.shared / f"{tag}-out.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH -o {marks}/out-%x-%j.log -e {marks}/err.log --time=5\n"
                      'echo "hello from $SLURMX_VARIANT"; echo oops >&2\n')
    proc = cli(site_path, "submit", "--parsable", "--mode", "race", "--variants", "cpu,gpu", str(script))
    assert f"{marks}/err.cpu.log (cpu), {marks}/err.gpu.log (gpu)" in proc.stderr
    kind, job_id = _ran(slurm, proc.stdout.strip())
    out = marks / f"out-{tag}-out@{kind}-{job_id}.log"
    assert wait_until(lambda: out.exists() and "hello" in out.read_text() and out.read_text(), 30, str(out)) \
        == f"hello from {kind}\n"
    assert "oops" in (marks / f"err.{kind}.log").read_text()
    assert [p.name for p in marks.glob("out-*") if "hello" in p.read_text()] == [out.name]


def test_user_signal_and_slurmx_checkpoint_both_run_on_preemption(site_path: Path, cluster: Cluster,
                                                                   slurm: CliSlurm, tag: str,
                                                                   cleanup: list[int]) -> None:
    """`#SBATCH --signal=B:USR1@30` and a preemption (issue 32): the user's USR1 handler runs, then slurmx's
    checkpoint; the job is requeued and its second run completes."""
    from slurmx.daemon.preemption import preempt_and_wait

    marks = _marks(cluster, tag)
    log = marks / "log"
    script = cluster.shared / f"{tag}-sig.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH --signal=B:USR1@30 --time=10\n"
        f"trap 'echo \"user-usr1 ${{SLURM_RESTART_COUNT:-0}}\" >> {log}' USR1\n"
        'source "$SLURMX_HOOK_SH"\n'
        f"slurmx_on_preempt bash -c 'echo \"slurmx-checkpoint ${{SLURM_RESTART_COUNT:-0}}\" >> {log}'\n"
        f'echo "start ${{SLURM_RESTART_COUNT:-0}}" >> {log}\n'
        f'if [ "${{SLURM_RESTART_COUNT:-0}}" -gt 0 ]; then echo done >> {log}; exit 0; fi\n'
        "for i in $(seq 120); do sleep 1 & wait $!; done\n")
    gid = cli(site_path, "submit", "--parsable", "--mode", "pick", "--pick", "cpu", str(script)).stdout.strip()
    group = find_group(slurm, gid, spool_dir=spool_dir())
    assert group is not None
    job_id = group.variants[0].job_id
    assert job_id is not None
    cleanup.append(job_id)
    wait_until(lambda: log.exists() and "start 0" in log.read_text(), 120, "the first run to start")
    site = load_site_config(site_path)
    outcome = preempt_and_wait(slurm, job_id, 20, signal=site.preemption.signal, spool_dir=f"{spool_dir()}/{gid}",
                               reason="integration test", requeue_exit_code=site.preemption.requeue_exit_code,
                               poll=0.5)
    assert outcome.error is None, outcome.line()
    wait_until(lambda: "done" in log.read_text(), 180, "the requeued run to complete")
    assert log.read_text().splitlines() == ["start 0", "user-usr1 0", "slurmx-checkpoint 0", "start 1", "done"]


def test_sbatch_resource_options_apply_per_kind(site_path: Path, cluster: Cluster, slurm: CliSlurm,
                                                tag: str) -> None:
    """docs/submit.md: --gpus runs only on the kinds with GPUs, --mem-per-cpu becomes their --mem, a bare --time
    is minutes; --wait returns when the group has ended."""
    script = cluster.shared / f"{tag}-gpus.sh"
    script.write_text("#!/bin/bash\n#SBATCH --gpus=1 --mem-per-cpu=150M -c 2 --time=5\ntrue\n")
    proc = cli(site_path, "submit", "--parsable", "--mode", "race", "--wait", str(script))
    gid = proc.stdout.strip()
    group = find_group(slurm, gid, spool_dir=spool_dir())
    assert group is not None and group.state.value == "completed"
    assert [v.kind for v in group.variants] == ["gpu"]
    job_id = group.variants[0].job_id
    record = wait_until(lambda: next(iter(slurm.accounting([job_id], since="now-1hour")), None), 60,
                        "sacct to record the job")
    assert (record.request.cpus, record.request.mem_mb) == (2, 300)


def test_wait_on_an_array_returns_when_every_index_ended_and_fails_naming_the_ones_that_failed(
        site_path: Path, cluster: Cluster, slurm: CliSlurm, tag: str) -> None:
    """`--wait --array`: one Slurm array per kind all the same; status 0 once every index completed, 1 naming the
    index that failed."""
    script = cluster.shared / f"{tag}-wait.sh"
    script.write_text("#!/bin/bash\n#SBATCH --time=5 --array=0-3\n[ \"$SLURM_ARRAY_TASK_ID\" != 2 ] || "
                      "[ \"${FAIL_TWO:-}\" != 1 ]\n")
    proc = cli(site_path, "submit", "--parsable", "--mode", "race", "--variants", "cpu,gpu", "--wait", str(script))
    gid = proc.stdout.strip()
    assert "[" not in gid and proc.stderr.strip().endswith(f"Array group {gid}: all 4 indices completed")
    failing = cli(site_path, "submit", "--parsable", "--mode", "race", "--variants", "cpu,gpu", "--wait",
                  "--export=ALL,FAIL_TWO=1", str(script), check=False)
    bad = failing.stdout.strip()
    assert failing.returncode == 1 and f"array group {bad}: 1 of 4 indices did not complete ({bad}[2] failed)" \
        in failing.stderr, failing.stderr


def test_bad_spec_is_one_line_and_submits_nothing(site_path: Path, slurm: CliSlurm, tag: str) -> None:
    before = {j.job_id for j in slurm.jobs()}
    spec = tmp_spec(site_path, tag, "command: echo x\nvariants: [cpu, tpu]\n")
    proc = cli(site_path, "submit", str(spec), check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
    assert "tpu" in proc.stderr and "valid kinds: cpu, gpu, accel" in proc.stderr
    assert {j.job_id for j in slurm.jobs()} == before


def test_refused_variant_rolls_back_the_group(site_path: Path, slurm: CliSlurm, tag: str) -> None:
    """Slurm rejects the gpu variant (a GRES the cluster does not have): the cpu variant is cancelled."""
    spec = tmp_spec(site_path, tag, "command: echo x\nvariants: [cpu, gpu]\noverrides:\n  gpu: {gres: 'nosuch:1'}\n")
    proc = cli(site_path, "submit", "--mode", "managed", str(spec), check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "variant gpu" in proc.stderr and "cancelled the 1 variant(s) already submitted" in proc.stderr
    leftovers = [j for j in slurm.jobs() if j.name.startswith(f"{tag}@") and j.state.is_active]
    assert leftovers == []


def remote_site(cluster: Cluster, site_path: Path, tmp_path: Path, known_hosts: Path) -> Path:
    text = site_path.read_text().split("transport:")[0]
    text += (f"transport:\n  kind: ssh\n  host: 127.0.0.1\n  port: {cluster.ssh_port}\n  user: alice\n"
             f"  known_hosts: {known_hosts}\n  key_file: {cluster.dir / 'ssh' / 'id_ed25519'}\n")
    path = tmp_path / "remote-site.yaml"
    path.write_text(text)
    return path


def test_remote_submit_status_cancel_over_ssh(cluster: Cluster, site_path: Path, tmp_path: Path, tag: str,
                                              slurm: CliSlurm) -> None:
    remote = remote_site(cluster, site_path, tmp_path, cluster.dir / "ssh" / "known_hosts")
    spec = tmp_spec(site_path, tag, "command: echo remote\nvariants: [cpu, gpu]\n")
    gid = cli(remote, "submit", "--parsable", "--mode", "managed", str(spec)).stdout.strip()
    status = json.loads(cli(remote, "status", "--json", gid).stdout)[0]
    assert {v["kind"] for v in status["variants"]} == {"cpu", "gpu"} and status["user"] == "alice"
    mine = {g["group"]: g for g in json.loads(cli(remote, "groups", "--json").stdout)}  # alice's groups
    assert gid in mine and mine[gid]["user"] == "alice" and {g["user"] for g in mine.values()} == {"alice"}
    cli(remote, "cancel", gid)
    wait_until(lambda: (g := find_group(slurm, gid, spool_dir=spool_dir())) and g.state.value == "cancelled", 60,
               "remote cancel")


def test_remote_submit_refuses_unknown_host_key(cluster: Cluster, site_path: Path, tmp_path: Path,
                                                tag: str) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    remote = remote_site(cluster, site_path, tmp_path, empty)
    spec = tmp_spec(site_path, tag, "command: echo remote\n")
    proc = cli(remote, "submit", str(spec), check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "not in" in proc.stderr and "known_hosts" in proc.stderr


def test_python_api_submit_wait(site_path: Path, tag: str) -> None:
    import slurmx

    handle = slurmx.submit({"name": tag, "command": "echo api", "variants": ["cpu"]}, site_path, mode="race")
    final = handle.wait(timeout=120, poll=1)
    assert final.state.value == "completed"
    assert [v.kind for v in final.variants] == ["cpu"]


def test_sacct_export_dumps_a_finished_job_and_whatif_replays_the_dump(site_path: Path, slurm: CliSlurm, tag: str,
                                                                        tmp_path: Path) -> None:
    """docs/whatif.md's two steps on the live cluster: `sacct-export` writes the day's accounting (a job that just
    finished in it), and `whatif` replays that file against the cluster's own nodes."""
    job_id = slurm.submit("#!/bin/bash\necho done\n", [f"--job-name={tag}", "--partition=cpu", "--mem=100M",
                                                         "--output=/dev/null"])
    wait_until(lambda: next((r for r in slurm.accounting([job_id], since="now-10minutes")
                             if r.state is VariantState.COMPLETED and r.name == tag), None), 90, "its sacct record")
    day = 86400
    since, until = (time.strftime("%Y-%m-%d", time.gmtime(time.time() + d)) for d in (-day, day))
    dump = tmp_path / "accounting.txt"
    cli(site_path, "sacct-export", "--since", since, "--until", until, "--out", str(dump), "--pause", "0")
    rows = [line.split("|") for line in dump.read_text().splitlines()]
    assert rows[0][:2] == ["JobID", "JobName"] and [str(job_id), tag] in [row[:2] for row in rows[1:]]
    replay = cli(site_path, "whatif", "--sacct", str(dump), "--policy", "fifo")
    said = replay.stdout + replay.stderr
    assert re.search(r"accounting\.txt: [1-9][0-9]* jobs replayed on the nodes of ", said) and "Slurm (actual)" in said
