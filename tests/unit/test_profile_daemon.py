"""slurmxd's profiling stage over a fake Slurm: samples submitted as the user and read back, groups hidden until
profiled, history replacing sampling, restart without double submission, `slurmx explain` lines, submitter tags."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from slurmx.core.actions import Start
from slurmx.core.config import SiteConfig, parse_site_config
from slurmx.core.model import VariantState
from slurmx.core.resources import Resources
from slurmx.core.spool import group_spool, sample_script_path
from slurmx.core.tag import script_hash
from slurmx.daemon.explain import explain
from slurmx.daemon.loop import Daemon
from slurmx.daemon.profiling import ProfilingStage, RunAsUser
from slurmx.daemon.store import Store
from slurmx.policies.base import make_policy
from slurmx.slurm.adapter import CliSlurm
from slurmx.slurm.records import AccountingRecord, SlurmJob
from slurmx.slurm.transport import CommandResult, LocalTransport
from slurmx.submit.render import payload_hash
from slurmx.submit.spec import parse_spec
from slurmx.submit.submitter import plan_group
from tests.unit.test_daemon import FakeSlurm

STEPS = 10_000
# Samples of 2 variants within 3%: 0.03 / (1 + 3) of the steps per variant, as 25 + 50 (digest §2.6, C-sim 1:2).
SHORT, LONG = 25, 50
STEP_S = {"cpu": 0.1, "gpu": 0.02}
STARTUP_S = 2.0


def site(spool: Path, policy: str = "allox", **profile: object) -> SiteConfig:
    return parse_site_config({
        "cluster": {"name": "t"},
        "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"},
                      "gpu": {"partition": "gpu", "cpus": 1, "mem": "500M", "gres": "gpu:1"}},
        "policy": {"name": policy},
        "submit": {"spool_dir": str(spool)},
        "profile": {"sampling": {"qos": "slurmx-profile"}, **profile},
    })


def variant_job(job_id: int, gid: str, kind: str, tags: str, name: str = "train") -> SlurmJob:
    return SlurmJob(job_id=job_id, name=f"{name}@{kind}", user="alice", user_id=os.getuid(), state=VariantState.HELD,
                    state_text="PENDING", reason="JobHeldUser", partition=kind, qos="be",
                    comment=f"slurmx:g={gid},v={kind},c=be,e=600{tags}", nodes="",
                    request=Resources(1, 500, {"gpu": 1} if kind == "gpu" else {}), allocated=Resources(),
                    priority=1, nice=0, held=True, restart_count=0, time_limit_s=3600, submit_time=100,
                    start_time=None, end_time=None)


class ProfilingSlurm(FakeSlurm):
    """The daemon's fake Slurm, plus sbatch as a user (what the stage submits) and sacct."""

    def __init__(self, jobs: Iterable[SlurmJob], history: Sequence[AccountingRecord] = ()) -> None:
        super().__init__(jobs)
        self.history = list(history)
        self.submitted: list[tuple[str, tuple[str, ...]]] = []
        self.next_id = 500

    def submit_as(self, user: str, script: str, options: Sequence[str]) -> int:
        self.next_id += 1
        self.submitted.append((user, tuple(options)))
        comment = next(o.split("=", 1)[1] for o in options if o.startswith("--comment="))
        name = next(o.split("=", 1)[1] for o in options if o.startswith("--job-name="))
        self.table[self.next_id] = replace(variant_job(self.next_id, "x", "cpu", ""), name=name, comment=comment,
                                           state=VariantState.PENDING, held=False, qos="slurmx-profile")
        return self.next_id

    def accounting(self, job_ids: Iterable[int] | None = None, since: str = "now-1day") -> list[AccountingRecord]:
        return list(self.history)

    def finish_sample(self, job_id: int, spool: Path, gid: str) -> None:
        """The sample ran: its spool files as the profile template and the hooks leave them, then COMPLETED."""
        job = self.table[job_id]
        kind, steps = job.name.split("@")[1].split("~")[0], int(job.comment.rsplit("n=", 1)[1])
        folder = spool / gid
        folder.mkdir(exist_ok=True)
        seconds = STARTUP_S + steps * STEP_S[kind]
        (folder / f"profile-start-{job_id}").write_text("1000.0\n")
        (folder / f"profile-{job_id}.json").write_text(json.dumps({
            "steps": steps, "times": [0.0, (steps - 1) * STEP_S[kind]], "at_steps": [1, steps]}))
        (folder / f"progress-{job_id}.json").write_text(json.dumps({"step": steps, "time": 1000.0 + seconds}))
        self.table[job_id] = replace(job, state=VariantState.COMPLETED, start_time=200, end_time=210)


def group_with_scripts(spool: Path, gid: str = "train-abc123", first_id: int = 11) -> list[SlurmJob]:
    """Two held variants whose `p=` tags name the sample scripts left in the spool."""
    jobs = []
    (spool / gid).mkdir(mode=0o700, exist_ok=True)  # as `slurmx submit` leaves it: the user's alone
    for offset, kind in enumerate(("cpu", "gpu")):
        text = f"#!/bin/bash\n# sample script of {gid} {kind}\n"
        Path(sample_script_path(site(spool), gid, kind)).write_text(text)
        jobs.append(variant_job(first_id + offset, gid, kind, f",n={STEPS},h=abc{kind},p={script_hash(text)}"))
    return jobs


def daemon(spool: Path, fake: ProfilingSlurm, store: Store, clock: list[float]) -> Daemon:
    cfg = site(spool)
    stage = ProfilingStage(cfg, fake, store, submit=fake.submit_as)  # type: ignore[arg-type]
    return Daemon(cfg, fake, store, make_policy("allox"), clock=lambda: clock[0],  # type: ignore[arg-type]
                  profiling=stage)


def samples_of(fake: ProfilingSlurm) -> list[str]:
    return [next(o for o in opts if o.startswith("--comment=")).removeprefix("--comment=") for _, opts in
            fake.submitted]


def test_group_is_hidden_until_sampled_then_gets_the_extrapolated_estimates(tmp_path: Path) -> None:
    fake = ProfilingSlurm(group_with_scripts(tmp_path))
    store = Store(tmp_path / "s.sqlite")
    clock = [1000.0]
    d = daemon(tmp_path, fake, store, clock)
    report = d.cycle()
    assert report.plan.of_type(Start) == ()  # profiling: the policy does not see the group
    assert samples_of(fake) == [f"slurmx-sample:g=train-abc123,v={k},s=0,n={SHORT}" for k in ("cpu", "gpu")]
    user, options = fake.submitted[0]
    assert user == "alice" and "--qos=slurmx-profile" in options and "--no-requeue" in options
    assert "--export=ALL,SLURMX_SAMPLE_STEPS=25" in options
    assert "  why waiting: profiling (2 sample(s) submitted); the policy sees the group once its samples are done" \
        in explain("train-abc123", store.history("train-abc123"))
    for job_id in (501, 502):
        fake.finish_sample(job_id, tmp_path, "train-abc123")
    clock[0] += 10
    d.cycle()
    assert samples_of(fake)[2:] == [f"slurmx-sample:g=train-abc123,v={k},s=1,n={LONG}" for k in ("cpu", "gpu")]
    for job_id in (503, 504):
        fake.finish_sample(job_id, tmp_path, "train-abc123")
    clock[0] += 10
    report = d.cycle()
    # a = the in-run step time, b = the samples' start-up: cpu 0.1 * 10000 + 2, gpu 0.02 * 10000 + 2.
    estimates = {r.kind: r for r in store.estimates("train-abc123")}
    assert estimates["cpu"].seconds == pytest.approx(1002.0) and estimates["cpu"].source == "sample"
    assert estimates["gpu"].seconds == pytest.approx(202.0) and estimates["gpu"].uncertainty == pytest.approx(0.11)
    assert [a.kind for a in report.plan.of_type(Start)] == ["gpu"]
    lines = explain("train-abc123", store.history("train-abc123"))
    assert "  estimate cpu: 1002s ±11% from sample (samples 25/50 steps, step time measured in the run: " \
           "0.1 s/step + 2s)" in lines
    assert any(line.startswith("  why this variant: start gpu") for line in lines)
    rows = store.samples("train-abc123")
    assert sorted((r.sample_id, r.state, r.job_id) for r in rows.values()) == [
        ("train-abc123.cpu.0", "done", 501), ("train-abc123.cpu.1", "done", 503),
        ("train-abc123.gpu.0", "done", 502), ("train-abc123.gpu.1", "done", 504)]


def test_restart_after_a_lost_sbatch_answer_adopts_the_job_instead_of_submitting_twice(tmp_path: Path) -> None:
    fake = ProfilingSlurm(group_with_scripts(tmp_path))
    store = Store(tmp_path / "s.sqlite")
    clock = [1000.0]
    daemon(tmp_path, fake, store, clock).cycle()
    assert len(fake.submitted) == 2
    # The daemon died between sbatch and recording the job id: the intent row is all the store has.
    row = store.samples()["train-abc123.cpu.0"]
    store.put_sample(replace(row, job_id=None, state="submitting"), 1000.0)
    clock[0] += 5
    again = daemon(tmp_path, fake, store, clock)
    again.cycle()
    assert len(fake.submitted) == 2, "a sample was submitted twice"
    assert store.samples()["train-abc123.cpu.0"].job_id == 501
    # A later life replays finished samples from the store and asks only for what is still missing.
    for job_id in (501, 502):
        fake.finish_sample(job_id, tmp_path, "train-abc123")
    clock[0] += 5
    again.cycle()
    third = daemon(tmp_path, fake, store, clock)
    clock[0] += 5
    third.cycle()
    assert samples_of(fake)[2:] == [f"slurmx-sample:g=train-abc123,v={k},s=1,n={LONG}" for k in ("cpu", "gpu")]


def test_a_sample_intent_with_no_job_in_squeue_is_submitted_once_more(tmp_path: Path) -> None:
    fake = ProfilingSlurm(group_with_scripts(tmp_path))
    store = Store(tmp_path / "s.sqlite")
    clock = [1000.0]
    daemon(tmp_path, fake, store, clock).cycle()
    del fake.table[501]  # sbatch never got through: the row says `submitting` and squeue has no such sample
    row = store.samples()["train-abc123.cpu.0"]
    store.put_sample(replace(row, job_id=None, state="submitting"), 1000.0)
    clock[0] += 5
    daemon(tmp_path, fake, store, clock).cycle()
    assert samples_of(fake) == [f"slurmx-sample:g=train-abc123,v={k},s=0,n={SHORT}" for k in ("cpu", "gpu", "cpu")]
    assert store.samples()["train-abc123.cpu.0"].job_id == 503


def accounting(kind: str, elapsed: int, steps: int, end: int) -> AccountingRecord:
    return AccountingRecord(job_id=90 + len(kind), name=f"train@{kind}", user="alice", state=VariantState.COMPLETED,
                            state_text="COMPLETED", partition=kind, qos="be", nodes="c1",
                            comment=f"slurmx:g=old-1,v={kind},c=be,n={steps},h=abc{kind}", request=Resources(1, 500),
                            allocated=Resources(1, 500), submit_time=end - elapsed - 5, start_time=end - elapsed,
                            end_time=end, elapsed_s=elapsed, exit_code=0, max_rss_mb=100, restart_count=0)


def test_sacct_history_replaces_sampling_and_explain_says_so(tmp_path: Path) -> None:
    # The same key ran before: cpu 500 s for 5000 steps -> 1000 s for 10000; gpu 100 s for 10000 steps.
    fake = ProfilingSlurm(group_with_scripts(tmp_path), [accounting("cpu", 500, 5000, 900),
                                                         accounting("gpu", 100, STEPS, 950)])
    store = Store(tmp_path / "s.sqlite")
    report = daemon(tmp_path, fake, store, [1000.0]).cycle()
    assert fake.submitted == []
    assert [a.kind for a in report.plan.of_type(Start)] == ["gpu"]
    assert {r.kind: (r.seconds, r.source) for r in store.estimates("train-abc123")} == {
        "cpu": (1000.0, "history"), "gpu": (100.0, "history")}
    lines = explain("train-abc123", store.history("train-abc123"))
    assert "  history replaces sampling for cpu: history: median of 1 run(s) of train@cpu, newest 100s ago" in lines
    assert "  estimate gpu: 100s ±5% from history (history: median of 1 run(s) of train@gpu, newest 50s ago)" \
        in lines


def test_a_sample_script_that_does_not_match_its_tag_is_never_submitted(tmp_path: Path) -> None:
    jobs = group_with_scripts(tmp_path)
    Path(sample_script_path(site(tmp_path), "train-abc123", "cpu")).write_text("#!/bin/bash\nrm -rf ~\n")
    fake = ProfilingSlurm(jobs)
    store = Store(tmp_path / "s.sqlite")
    daemon(tmp_path, fake, store, [1000.0]).cycle()
    assert samples_of(fake) == [f"slurmx-sample:g=train-abc123,v=gpu,s=0,n={SHORT}"]
    assert any("does not match p=" in e.detail for e in store.history("train-abc123"))


def test_a_failed_sample_leaves_the_declared_estimate_and_the_group_ready(tmp_path: Path) -> None:
    fake = ProfilingSlurm(group_with_scripts(tmp_path))
    store = Store(tmp_path / "s.sqlite")
    clock = [1000.0]
    d = daemon(tmp_path, fake, store, clock)
    d.cycle()
    fake.table[501] = replace(fake.table[501], state=VariantState.FAILED, state_text="FAILED")
    fake.finish_sample(502, tmp_path, "train-abc123")
    clock[0] += 5
    d.cycle()
    fake.finish_sample(503, tmp_path, "train-abc123")  # gpu's long sample
    clock[0] += 5
    report = d.cycle()
    assert {r.kind: r.source for r in store.estimates("train-abc123")} == {"cpu": "declared", "gpu": "sample"}
    assert report.plan.of_type(Start), "the group stays hidden after a failed sample"


def test_a_dry_run_submits_nothing_and_keeps_the_group_hidden(tmp_path: Path) -> None:
    fake = ProfilingSlurm(group_with_scripts(tmp_path))
    cfg = site(tmp_path)
    store = Store(tmp_path / "s.sqlite")
    stage = ProfilingStage(cfg, fake, store, dry_run=True, submit=fake.submit_as)  # type: ignore[arg-type]
    report = Daemon(cfg, fake, store, make_policy("allox"), dry_run=True, clock=lambda: 1000.0,  # type: ignore[arg-type]
                    profiling=stage).cycle()
    assert fake.submitted == [] and store.samples() == {} and report.plan.of_type(Start) == ()
    assert [row[4] for row in report.audit if row[3] == "profile"] == [
        f"would submit sample 0 of {k} ({SHORT} steps, QOS slurmx-profile)" for k in ("cpu", "gpu")]


def test_without_the_profiling_qos_samples_run_under_the_groups_own(tmp_path: Path) -> None:
    class Sacctmgr:
        def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
            assert list(argv) == ["sacctmgr", "-n", "-P", "show", "qos", "format=name"]
            return CommandResult(tuple(argv), 0, "normal\nte\nbe\n", "")

        def describe(self) -> str:
            return "sacctmgr"

    fake = ProfilingSlurm(group_with_scripts(tmp_path))
    fake.transport = Sacctmgr()  # type: ignore[attr-defined]
    daemon(tmp_path, fake, Store(tmp_path / "s.sqlite"), [1000.0]).cycle()
    assert [next(o for o in opts if o.startswith("--qos=")) for _, opts in fake.submitted] == ["--qos=be"] * 2


def test_profiling_is_off_for_fifo_and_fitgpp_unless_enabled(tmp_path: Path) -> None:
    fake = ProfilingSlurm([])
    store = Store(":memory:")
    assert Daemon(site(tmp_path, "fifo"), fake, store, make_policy("fifo")).profiling is None  # type: ignore[arg-type]
    assert Daemon(site(tmp_path, "allox"), fake, store, make_policy("allox")).profiling is not None  # type: ignore[arg-type]
    on = site(tmp_path, "fifo", enabled=True)
    assert Daemon(on, fake, store, make_policy("fifo")).profiling is not None  # type: ignore[arg-type]


def test_sample_submission_runs_as_the_user() -> None:
    seen: list[tuple[list[str], str | None]] = []

    class Recorder:
        def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
            seen.append((list(argv), stdin))
            return CommandResult(tuple(argv), 0, "", "")

        def describe(self) -> str:
            return "recorder"

    RunAsUser(Recorder(), "alice").run(["sbatch", "--parsable"], "#!/bin/bash\n")
    assert seen == [(["runuser", "-u", "alice", "--", "sbatch", "--parsable"], "#!/bin/bash\n")]


def test_submitter_tags_work_and_hashes_and_leaves_a_matching_sample_script(tmp_path: Path) -> None:
    cfg = site(tmp_path)
    spec = parse_spec({"name": "train", "command": "python3 run.py", "args": ["5"], "work": 1000})
    gid, _, rendered = plan_group(spec, cfg, group_id="train-abc123")
    samples = {Path(sample_script_path(cfg, gid, v.kind)).name: v.sample_script for v in rendered
               if v.sample_script is not None}
    CliSlurm(LocalTransport()).make_private_folder(group_spool(cfg, gid), samples)  # what submit_group runs
    written = [sample_script_path(cfg, gid, v.kind) for v in rendered if v.sample_script is not None]
    assert written == [sample_script_path(cfg, gid, k) for k in ("cpu", "gpu")]
    for variant, path in zip(rendered, written, strict=True):
        text = Path(path).read_text()
        comment = next(o for o in variant.options if o.startswith("--comment="))
        assert comment == (f"--comment=slurmx:1:g={gid},v={variant.kind},c=be,gr=120,n=1000,"
                           f"h={payload_hash(spec, variant.kind)},p={script_hash(text)},l=600")
        assert "export SLURMX_PROFILE_STEPS=1\n" in text and "#SBATCH --hold" not in text
    # Same payload and arguments, another group: the same history key; other arguments: another key.
    assert payload_hash(spec, "cpu") == payload_hash(parse_spec({"name": "x", "command": "python3 run.py",
                                                                 "args": ["5"]}), "cpu")
    assert payload_hash(spec, "cpu") != payload_hash(parse_spec({"name": "train", "command": "python3 run.py",
                                                                 "args": ["6"]}), "cpu")


def test_no_sample_script_without_work_or_outside_managed_mode(tmp_path: Path) -> None:
    cfg = site(tmp_path)
    _, _, rendered = plan_group(parse_spec({"name": "t", "command": "true"}), cfg)
    assert all(r.sample_script is None for r in rendered)
    _, _, rendered = plan_group(parse_spec({"name": "t", "command": "true", "work": 10}), cfg, mode="race")
    assert all(r.sample_script is None for r in rendered)


def test_a_bad_sampling_key_is_one_line_naming_the_valid_ones(tmp_path: Path) -> None:
    from slurmx.core.validation import ConfigError

    with pytest.raises(ConfigError) as caught:
        ProfilingStage(site(tmp_path, sampling={"overhead": 0.1}), ProfilingSlurm([]), Store(":memory:"))  # type: ignore[arg-type]
    assert str(caught.value).startswith("site profile.sampling: overhead: unknown key; valid keys: overhead_budget,")
