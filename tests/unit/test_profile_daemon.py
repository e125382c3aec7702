"""slurmxd's profiling stage over a fake Slurm: samples queued by `slurmx submit`, released and read back, forged
ones cancelled, groups hidden until profiled, history replacing sampling, restarts that never run a sample twice,
`slurmx explain` lines, submitter tags."""

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
from slurmx.core.tag import script_hash
from slurmx.daemon.explain import explain
from slurmx.daemon.loop import Daemon
from slurmx.daemon.profiling import ProfilingStage
from slurmx.daemon.profiling_samples import reported_timing
from slurmx.daemon.store import Store
from slurmx.policies.base import make_policy
from slurmx.slurm.errors import SlurmCommandError
from slurmx.slurm.recording import Released
from slurmx.slurm.records import AccountingRecord, SlurmJob
from slurmx.slurm.transport import CommandResult
from slurmx.submit.render import payload_hash
from slurmx.submit.samples import plan_samples, queue_samples
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
    """The daemon's fake Slurm, plus sacct and samples that run when released."""

    def __init__(self, jobs: Iterable[SlurmJob], history: Sequence[AccountingRecord] = ()) -> None:
        super().__init__(jobs)
        self.history = list(history)

    def accounting(self, job_ids: Iterable[int] | None = None, since: str = "now-1day") -> list[AccountingRecord]:
        return list(self.history)

    def released(self) -> list[str]:
        """The comments of the samples released so far, in order."""
        return [self.table[i].comment.split(",t=")[0] for verb, ids in self.calls if verb == "release"
                for i in ids if self.table[i].comment.startswith("slurmx-sample:")]

    def sample(self, kind: str, index: int) -> int:
        return next(j.job_id for j in self.table.values() if j.comment.startswith("slurmx-sample:")
                    and f",v={kind},s={index}," in j.comment)

    def finish_sample(self, job_id: int, spool: Path, gid: str, *, report: bool = True) -> None:
        """The sample ran: it appended its timing to its comment, as the profile template does (`report`), or
        left only its spool files, as an older job or one without python3 on its node would; then COMPLETED."""
        job = self.table[job_id]
        kind, steps = job.name.split("@")[1].split("~")[0], int(job.comment.split("n=", 1)[1].split(",")[0])
        seconds = STARTUP_S + steps * STEP_S[kind]
        comment = job.comment + (f",t={seconds:.6f},ps={STEP_S[kind]:.9g}" if report else "")
        if not report:
            folder = spool / gid
            folder.mkdir(exist_ok=True)
            (folder / f"profile-start-{job_id}").write_text("1000.0\n")
            (folder / f"profile-{job_id}.json").write_text(json.dumps({
                "steps": steps, "times": [0.0, (steps - 1) * STEP_S[kind]], "at_steps": [1, steps]}))
            (folder / f"progress-{job_id}.json").write_text(json.dumps({"step": steps, "time": 1000.0 + seconds}))
        self.table[job_id] = replace(job, comment=comment, state=VariantState.COMPLETED, start_time=200,
                                     end_time=210)


def queued(spool: Path, gid: str, first_id: int) -> list[SlurmJob]:
    """The held samples `slurmx submit` queues for a two-variant group of STEPS steps (its own plan)."""
    cfg = site(spool)
    spec = parse_spec({"name": "train", "command": "true", "work": STEPS, "time": "1h"})
    _, _, rendered = plan_group(spec, cfg, group_id=gid)
    jobs = []
    for i, (request, _script) in enumerate(plan_samples(spec, cfg, gid, rendered)):
        options = dict(o.split("=", 1) for o in request.sbatch_overrides() if "=" in o)
        jobs.append(replace(variant_job(first_id + i, gid, request.kind, ""), name=options["--job-name"],
                            comment=request.comment, qos=options["--qos"], time_limit_s=int(options["--time"]) * 60,
                            submit_time=900))
    return jobs


def group_with_samples(spool: Path, gid: str = "train-abc123", first_id: int = 11,
                       samples: bool = True) -> list[SlurmJob]:
    """Two held variants, and (`samples`) the four samples their submission queued, held, as jobs 501-504."""
    (spool / gid).mkdir(mode=0o700, exist_ok=True)  # as `slurmx submit` leaves it: the user's alone
    jobs = [variant_job(first_id + offset, gid, kind, f",n={STEPS},h=abc{kind}")
            for offset, kind in enumerate(("cpu", "gpu"))]
    return jobs + (queued(spool, gid, 501) if samples else [])


def daemon(spool: Path, fake: ProfilingSlurm, store: Store, clock: list[float]) -> Daemon:
    cfg = site(spool)
    stage = ProfilingStage(cfg, fake, store)  # type: ignore[arg-type]
    return Daemon(cfg, fake, store, make_policy("allox"), clock=lambda: clock[0],  # type: ignore[arg-type]
                  profiling=stage)


def short(kind: str) -> str:
    return f"slurmx-sample:g=train-abc123,v={kind},s=0,n={SHORT}"


def long(kind: str) -> str:
    return f"slurmx-sample:g=train-abc123,v={kind},s=1,n={LONG}"


@pytest.mark.parametrize("report", [True, False], ids=["timing-in-comment", "timing-in-spool"])
def test_group_is_hidden_until_sampled_then_gets_the_extrapolated_estimates(tmp_path: Path, report: bool) -> None:
    fake = ProfilingSlurm(group_with_samples(tmp_path))
    store = Store(tmp_path / "s.sqlite")
    clock = [1000.0]
    d = daemon(tmp_path, fake, store, clock)
    report_ = d.cycle()
    assert report_.plan.of_type(Start) == ()  # profiling: the policy does not see the group
    assert fake.released() == [short("cpu"), short("gpu")]
    assert fake.table[fake.sample("cpu", 1)].state is VariantState.HELD  # the long one waits its turn
    assert "  why waiting: profiling (2 sample(s) released); the policy sees the group once its samples are done" \
        in explain("train-abc123", store.history("train-abc123"))
    for kind in ("cpu", "gpu"):
        fake.finish_sample(fake.sample(kind, 0), tmp_path, "train-abc123", report=report)
    clock[0] += 10
    d.cycle()
    assert fake.released()[2:] == [long("cpu"), long("gpu")]
    for kind in ("cpu", "gpu"):
        fake.finish_sample(fake.sample(kind, 1), tmp_path, "train-abc123", report=report)
    clock[0] += 10
    report_ = d.cycle()
    # a = the in-run step time, b = the samples' start-up: cpu 0.1 * 10000 + 2, gpu 0.02 * 10000 + 2.
    estimates = {r.kind: r for r in store.estimates("train-abc123")}
    assert estimates["cpu"].seconds == pytest.approx(1002.0) and estimates["cpu"].source == "sample"
    assert estimates["gpu"].seconds == pytest.approx(202.0) and estimates["gpu"].uncertainty == pytest.approx(0.11)
    assert [a.kind for a in report_.plan.of_type(Start)] == ["gpu"]
    lines = explain("train-abc123", store.history("train-abc123"))
    assert "  estimate cpu: 1002s ±11% from sample (samples 25/50 steps, step time measured in the run: " \
           "0.1 s/step + 2s)" in lines
    assert any(line.startswith("  why this variant: start gpu") for line in lines)
    rows = store.samples("train-abc123")
    assert sorted((r.sample_id, r.state, r.job_id) for r in rows.values()) == [
        ("train-abc123.cpu.0", "done", 501), ("train-abc123.cpu.1", "done", 502),
        ("train-abc123.gpu.0", "done", 503), ("train-abc123.gpu.1", "done", 504)]
    assert not [c for c in fake.calls if c[0] == "cancel" and set(c[1]) & {501, 502, 503, 504}]


def test_a_lost_release_answer_is_released_again_and_a_restart_never_runs_a_sample_twice(tmp_path: Path) -> None:
    fake = ProfilingSlurm(group_with_samples(tmp_path))
    store = Store(tmp_path / "s.sqlite")
    clock = [1000.0]
    daemon(tmp_path, fake, store, clock).cycle()
    assert fake.released() == [short("cpu"), short("gpu")]
    # The release of cpu's short sample never reached slurmctld: it is still held, and the store has its row.
    fake.table[501] = replace(fake.table[501], state=VariantState.HELD, held=True)
    clock[0] += 5
    again = daemon(tmp_path, fake, store, clock)
    again.cycle()
    assert fake.released() == [short("cpu"), short("gpu"), short("cpu")]
    assert store.samples()["train-abc123.cpu.0"].job_id == 501
    # gpu's short sample, released by the first life, is pending, not held: the new life still samples gpu.
    assert not any("no samples queued" in e.detail for e in store.history("train-abc123"))
    # A later life replays finished samples from the store and releases only what is still missing.
    for kind in ("cpu", "gpu"):
        fake.finish_sample(fake.sample(kind, 0), tmp_path, "train-abc123")
    clock[0] += 5
    again.cycle()
    third = daemon(tmp_path, fake, store, clock)
    clock[0] += 5
    third.cycle()
    assert fake.released()[3:] == [long("cpu"), long("gpu")]


def accounting(kind: str, elapsed: int, steps: int, end: int) -> AccountingRecord:
    return AccountingRecord(job_id=90 + len(kind), name=f"train@{kind}", user="alice", state=VariantState.COMPLETED,
                            state_text="COMPLETED", partition=kind, qos="be", nodes="c1",
                            comment=f"slurmx:g=old-1,v={kind},c=be,n={steps},h=abc{kind}", request=Resources(1, 500),
                            allocated=Resources(1, 500), submit_time=end - elapsed - 5, start_time=end - elapsed,
                            end_time=end, elapsed_s=elapsed, exit_code=0, max_rss_mb=100, restart_count=0)


def test_sacct_history_replaces_sampling_and_explain_says_so(tmp_path: Path) -> None:
    # The same key ran before: cpu 500 s for 5000 steps -> 1000 s for 10000; gpu 100 s for 10000 steps.
    fake = ProfilingSlurm(group_with_samples(tmp_path), [accounting("cpu", 500, 5000, 900),
                                                         accounting("gpu", 100, STEPS, 950)])
    store = Store(tmp_path / "s.sqlite")
    report = daemon(tmp_path, fake, store, [1000.0]).cycle()
    assert fake.released() == []
    assert ("cancel", (501, 502, 503, 504)) in fake.calls  # the queued samples nothing will release
    assert [a.kind for a in report.plan.of_type(Start)] == ["gpu"]
    assert {r.kind: (r.seconds, r.source) for r in store.estimates("train-abc123")} == {
        "cpu": (1000.0, "history"), "gpu": (100.0, "history")}
    lines = explain("train-abc123", store.history("train-abc123"))
    assert "  history replaces sampling for cpu: history: median of 1 run(s) of train@cpu, newest 100s ago" in lines
    assert "  estimate gpu: 100s ±5% from history (history: median of 1 run(s) of train@gpu, newest 50s ago)" \
        in lines


def test_a_failed_sample_leaves_the_declared_estimate_and_the_group_ready(tmp_path: Path) -> None:
    fake = ProfilingSlurm(group_with_samples(tmp_path))
    store = Store(tmp_path / "s.sqlite")
    clock = [1000.0]
    d = daemon(tmp_path, fake, store, clock)
    d.cycle()
    fake.table[501] = replace(fake.table[501], state=VariantState.FAILED, state_text="FAILED")
    fake.finish_sample(503, tmp_path, "train-abc123")
    clock[0] += 5
    d.cycle()
    fake.finish_sample(504, tmp_path, "train-abc123")  # gpu's long sample
    clock[0] += 5
    report = d.cycle()
    assert {r.kind: r.source for r in store.estimates("train-abc123")} == {"cpu": "declared", "gpu": "sample"}
    assert report.plan.of_type(Start), "the group stays hidden after a failed sample"
    assert ("cancel", (502,)) in fake.calls  # cpu's long sample: not needed once cpu gave up sampling


def test_a_dry_run_releases_nothing_and_keeps_the_group_hidden(tmp_path: Path) -> None:
    fake = ProfilingSlurm(group_with_samples(tmp_path))
    cfg = site(tmp_path)
    store = Store(tmp_path / "s.sqlite")
    report = Daemon(cfg, fake, store, make_policy("allox"), dry_run=True,  # type: ignore[arg-type]
                    clock=lambda: 1000.0).cycle()  # its own profiling stage, on the dry run's adapter and store
    assert fake.calls == [] and store.samples() == {} and report.plan.of_type(Start) == ()
    assert report.would == (Released((501,)), Released((503,)))  # recorded, not done
    assert [row[4] for row in report.audit if row[3] == "profile"] == [
        f"released sample 0 of {k} ({SHORT} steps, QOS slurmx-profile), job {j}"
        for k, j in (("cpu", 501), ("gpu", 503))]


def test_without_the_profiling_qos_samples_run_under_the_groups_own(tmp_path: Path) -> None:
    class Sacctmgr:
        def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
            assert list(argv) == ["sacctmgr", "-n", "-P", "show", "qos", "format=name"]
            return CommandResult(tuple(argv), 0, "normal\nte\nbe\n", "")

        def describe(self) -> str:
            return "sacctmgr"

    jobs = group_with_samples(tmp_path)
    fake = ProfilingSlurm([replace(j, qos="be") for j in jobs])  # `slurmx submit` fell back to the script's QOS
    fake.transport = Sacctmgr()  # type: ignore[attr-defined]
    daemon(tmp_path, fake, Store(tmp_path / "s.sqlite"), [1000.0]).cycle()
    assert fake.released() == [short("cpu"), short("gpu")]


def test_a_forged_sample_is_cancelled_never_released(tmp_path: Path) -> None:
    """The user made the sample jobs: one bigger than its variant, or longer than planned, must not start under
    the high-priority profiling QOS; nor may a sample for a group that is not in the queue linger."""
    jobs = group_with_samples(tmp_path)
    by_id = {j.job_id: j for j in jobs}
    by_id[501] = replace(by_id[501], request=Resources(32, 500))
    by_id[503] = replace(by_id[503], time_limit_s=86400)
    orphan = replace(by_id[504], job_id=600, comment="slurmx-sample:g=nogroup-1,v=gpu,s=0,n=5")
    fake = ProfilingSlurm([*by_id.values(), orphan])
    store = Store(tmp_path / "s.sqlite")
    clock = [1000.0]
    d = daemon(tmp_path, fake, store, clock)
    d.cycle()
    assert fake.released() == []
    cancelled = {i for verb, ids in fake.calls if verb == "cancel" for i in ids}
    assert {501, 503} <= cancelled and 600 in cancelled
    details = [e.detail for e in store.history("train-abc123")]
    assert any("job 501: request" in d and "not its variant's" in d for d in details), details
    assert any("job 503: time limit 86400s over the plan's 60s" in d for d in details), details
    assert {r.kind: r.source for r in store.estimates("train-abc123")} == {"cpu": "declared", "gpu": "declared"}


def test_a_group_without_queued_samples_is_not_sampled(tmp_path: Path) -> None:
    fake = ProfilingSlurm(group_with_samples(tmp_path, samples=False))
    store = Store(tmp_path / "s.sqlite")
    report = daemon(tmp_path, fake, store, [1000.0]).cycle()
    assert fake.calls[:1] != [("release", (501,))] and report.plan.of_type(Start)
    assert any(e.detail == "cpu: no samples queued with the group: not sampled (history or the declared estimate)"
               for e in store.history("train-abc123"))


def test_a_hostile_timing_in_the_comment_is_ignored() -> None:
    for text in ("t=nan", "t=inf", "t=-1", "t=1e400", "t=99999", "t=abc", "t=1,t=2"):
        assert reported_timing(f"slurmx-sample:g=g,v=cpu,s=0,n=5,{text}", 3660.0) == (None, None), text
    assert reported_timing("slurmx-sample:g=g,v=cpu,s=0,n=5,t=2.5,ps=0.1", 60.0) == (2.5, 0.1)


def test_queue_samples_holds_every_sample_and_falls_back_to_the_scripts_qos() -> None:
    calls: list[list[str]] = []

    class NoProfileQos:
        def submit(self, script: str, options: Sequence[str]) -> int:
            calls.append(list(options))
            if any(o.startswith("--qos=") for o in options):
                raise SlurmCommandError(["sbatch", *options], 1, "sbatch: error: Invalid qos specification")
            return 700 + len(calls)

    cfg = site(Path("/tmp"))
    spec = parse_spec({"name": "train", "command": "true", "work": STEPS, "time": "1h"})
    gid, _, rendered = plan_group(spec, cfg, group_id="train-abc123")
    result = queue_samples(NoProfileQos(), plan_samples(spec, cfg, gid, rendered))  # type: ignore[arg-type]
    assert result.note == "" and len(result.job_ids) == 4
    assert all("--hold" in options for options in calls)
    assert [o for o in calls[0] if o.startswith("--comment=")] == [f"--comment={short('cpu')}"]
    assert not any(o.startswith("--qos=") for options in calls[2:] for o in options)


def test_profiling_is_off_for_fifo_and_fitgpp_unless_enabled(tmp_path: Path) -> None:
    fake = ProfilingSlurm([])
    store = Store(":memory:")
    assert Daemon(site(tmp_path, "fifo"), fake, store, make_policy("fifo")).profiling is None  # type: ignore[arg-type]
    assert Daemon(site(tmp_path, "allox"), fake, store, make_policy("allox")).profiling is not None  # type: ignore[arg-type]
    on = site(tmp_path, "fifo", enabled=True)
    assert Daemon(on, fake, store, make_policy("fifo")).profiling is not None  # type: ignore[arg-type]


def test_submitter_tags_work_and_hashes_and_plans_the_daemons_samples(tmp_path: Path) -> None:
    cfg = site(tmp_path)
    spec = parse_spec({"name": "train", "command": "python3 run.py", "args": ["5"], "work": 1000})
    gid, _, rendered = plan_group(spec, cfg, group_id="train-abc123")
    for variant in rendered:
        assert variant.sample_script is not None
        comment = next(o for o in variant.options if o.startswith("--comment="))
        assert comment == (f"--comment=slurmx:1:g={gid},v={variant.kind},c=be,gr=120,n=1000,"
                           f"h={payload_hash(spec, variant.kind)},p={script_hash(variant.sample_script)},l=600")
        assert "export SLURMX_PROFILE_STEPS=1\n" in variant.sample_script
        assert "python3 -m slurmx.hooks.sample" in variant.sample_script
    # 1000 steps over 2 variants within 3%: 7.5 steps per variant, as 2 + 4.
    assert [(r.kind, r.index, r.steps) for r, _ in plan_samples(spec, cfg, gid, rendered)] == [
        ("cpu", 0, 2), ("cpu", 1, 4), ("gpu", 0, 2), ("gpu", 1, 4)]
    assert plan_samples(spec, site(tmp_path, "fifo"), gid, rendered) == []  # FIFO reads no estimates
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


def test_a_group_still_being_submitted_is_registered_once_it_settles(tmp_path: Path) -> None:
    """sbatch queues a group's samples and variants one by one: a daemon that caught the gpu variant's samples
    but not yet the variant itself must neither plan for one variant nor cancel gpu's samples as unneeded."""
    jobs = [replace(j, submit_time=998) for j in group_with_samples(tmp_path) if j.job_id != 12]  # no gpu variant yet
    fake = ProfilingSlurm(jobs)
    store = Store(tmp_path / "s.sqlite")
    clock = [1000.0]
    d = daemon(tmp_path, fake, store, clock)
    report = d.cycle()
    assert fake.calls == [] and report.plan.of_type(Start) == ()  # hidden, not registered, nothing cancelled
    fake.table[12] = replace(variant_job(12, "train-abc123", "gpu", f",n={STEPS},h=abcgpu"), submit_time=999)
    clock[0] += 6
    d.cycle()
    assert fake.released() == [short("cpu"), short("gpu")]


def test_synergy_groups_get_their_sensitivity_search_released_read_and_kept(tmp_path: Path) -> None:
    """The one search sample `slurmx submit` queues on Synergy's kind: checked, released, its `w=` points read into
    the store and the view; a restarted daemon reads them from the store instead of searching again."""
    cfg = site(tmp_path, "synergy", sampling={"qos": "slurmx-profile", "search_cpus": 4})
    spec = parse_spec({"name": "train", "command": "true", "work": STEPS, "time": "1h"})
    gid = "train-abc123"
    _, _, rendered = plan_group(spec, cfg, group_id=gid)
    planned = plan_samples(spec, cfg, gid, rendered)
    search = [r for r, _ in planned if r.search_cpus]
    assert [(r.kind, r.index, r.search_cpus, r.search_step) for r in search] == [("gpu", 2, 4, 1)]
    assert "sensitivity" in next(script for r, script in planned if r.search_cpus)  # the search template
    jobs = group_with_samples(tmp_path, samples=False)
    options = dict(o.split("=", 1) for o in search[0].sbatch_overrides() if "=" in o)
    jobs.append(replace(variant_job(600, gid, "gpu", ""), comment=search[0].comment, qos="slurmx-profile",
                        time_limit_s=int(options["--time"]) * 60, request=Resources(4, 500, {"gpu": 1}),
                        submit_time=900))
    fake = ProfilingSlurm(jobs)
    store = Store(tmp_path / "s.sqlite")
    clock = [1000.0]

    def stage() -> ProfilingStage:
        return ProfilingStage(cfg, fake, store)  # type: ignore[arg-type]

    first = stage()
    d = Daemon(cfg, fake, store, make_policy("synergy"), clock=lambda: clock[0],  # type: ignore[arg-type]
               profiling=first)
    d.cycle()
    assert ("release", (600,)) in fake.calls
    fake.table[600] = replace(fake.table[600], state=VariantState.COMPLETED,
                              comment=search[0].comment + ",w=4:60;3:59;2:40;1:20,k=3")
    clock[0] += 5
    d.cycle()
    assert first.searches.rates(gid) == ((1, 20.0), (2, 40.0), (3, 59.0), (4, 60.0))
    assert any(e.detail == "sensitivity of gpu (steps/s by CPUs): 4:60;3:59;2:40;1:20; knee 3 CPUs"
               for e in store.history(gid))
    again = stage()
    Daemon(cfg, fake, store, make_policy("synergy"), clock=lambda: clock[0],  # type: ignore[arg-type]
           profiling=again).cycle()
    assert again.searches.rates(gid) == first.searches.rates(gid)
    assert [c for c in fake.calls if c[0] == "release" and 600 in c[1]] == [("release", (600,))]  # searched once


def test_a_forged_search_sample_is_cancelled_and_the_group_treated_as_insensitive(tmp_path: Path) -> None:
    cfg = site(tmp_path, "synergy", sampling={"qos": "slurmx-profile", "search_cpus": 4})
    gid = "train-abc123"
    jobs = group_with_samples(tmp_path, samples=False)
    jobs.append(replace(variant_job(600, gid, "gpu", ""), comment=f"slurmx-sample:g={gid},v=gpu,s=2,n=50",
                        qos="slurmx-profile", time_limit_s=600, request=Resources(32, 500, {"gpu": 8}),
                        submit_time=900))
    fake = ProfilingSlurm(jobs)
    store = Store(tmp_path / "s.sqlite")
    Daemon(cfg, fake, store, make_policy("synergy"), clock=lambda: 1000.0,  # type: ignore[arg-type]
           profiling=ProfilingStage(cfg, fake, store)).cycle()  # type: ignore[arg-type]
    assert ("cancel", (600,)) in fake.calls and not any(c == ("release", (600,)) for c in fake.calls)
    assert any("cancelled queued sensitivity sample, job 600: request" in e.detail for e in store.history(gid))
