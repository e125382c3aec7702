"""`--begin` in managed mode and mail: the user's time rides in the tag; only the variant that runs mails."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmx.core import tag
from slurmx.core.model import VariantState
from slurmx.core.validation import ConfigError
from slurmx.daemon.loop import Daemon
from slurmx.daemon.store import Store
from slurmx.policies.base import make_policy
from slurmx.slurm.adapter import JobUpdate
from slurmx.slurm.errors import SlurmCommandError
from slurmx.submit.begin import begin_at
from slurmx.submit.render import render_with_sample, variant_options
from slurmx.submit.spec import parse_spec
from tests.unit.test_lease import NOW as LEASE_NOW
from tests.unit.test_lease import BeginTimeSlurm, job
from tests.unit.test_lease import site as lease_site
from tests.unit.test_sbatch_options import site

# 2026-11-28 10:30:15 UTC, a Saturday
NOW = 1795861815.0


@pytest.fixture()
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _utc(text: str) -> float:
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


@pytest.mark.parametrize(("value", "expected"), [
    ("now", "2026-11-28T10:30:15"), ("now+90", "2026-11-28T10:31:45"), ("now+2hours", "2026-11-28T12:30:15"),
    ("now+1d", "2026-11-29T10:30:15"), ("now+1week", "2026-12-05T10:30:15"), ("NOW+5minutes", "2026-11-28T10:35:15"),
    ("16:00", "2026-11-28T16:00:00"), ("10:30", "2026-11-29T10:30:00"), ("09:00", "2026-11-29T09:00:00"),
    ("4:15:30PM", "2026-11-28T16:15:30"), ("12:00AM", "2026-11-29T00:00:00"), ("noon", "2026-11-28T12:00:00"),
    ("elevenses", "2026-11-28T11:00:00"), ("teatime", "2026-11-28T16:00:00"), ("midnight", "2026-11-29T00:00:00"),
    ("today", "2026-11-28T00:00:00"), ("tomorrow", "2026-11-29T00:00:00"),
    ("2026-12-01", "2026-12-01T00:00:00"), ("2026-12-01T08:00", "2026-12-01T08:00:00"),
    ("2027-01-02T08:00:05", "2027-01-02T08:00:05"), ("120126", "2026-12-01T00:00:00"),
    ("12/01", "2026-12-01T00:00:00"), ("01/15", "2027-01-15T00:00:00"), ("11/28", "2027-11-28T00:00:00"),
    ("12/01/27", "2027-12-01T00:00:00"),
])
def test_begin_is_read_as_slurms_parse_time_reads_it(utc: None, value: str, expected: str) -> None:
    assert begin_at(value, NOW) == _utc(expected)


@given(count=st.integers(0, 10**6), unit=st.sampled_from([("", 1), ("s", 1), ("m", 60), ("minutes", 60),
                                                          ("h", 3600), ("day", 86400), ("w", 604800)]))
def test_a_relative_begin_is_now_plus_its_seconds(count: int, unit: tuple[str, int]) -> None:
    assert begin_at(f"now+{count}{unit[0]}", NOW) == NOW + count * unit[1]


def test_a_date_that_does_not_exist_is_refused_in_one_line(utc: None) -> None:
    with pytest.raises(ValueError, match="no such time: 2026-13-01"):
        begin_at("2026-13-01", NOW)


def _options(spec: dict[str, object], mode: str = "managed", sample: bool = False) -> tuple[str, ...]:
    return variant_options(parse_spec({"name": "j", "command": "true", **spec}), site(), "cpu", "g-1", mode,
                           "job.sh", sample=sample)


def _tag(options: tuple[str, ...]) -> tag.GroupTag:
    comment = next(o for o in options if o.startswith("--comment="))
    read = tag.decode(comment.removeprefix("--comment="))
    assert read is not None
    return read


def test_a_managed_begin_rides_in_the_tag_and_holds_until_the_later_of_lease_and_begin() -> None:
    before = time.time()
    options = _options({"begin": "now+2hours"})
    after = time.time()
    read = _tag(options)
    assert read.lease_s == 600 and read.begin is not None
    assert int(before) + 7200 <= read.begin <= after + 7200
    assert [o for o in options if o.startswith("--begin")] == ["--begin=now+7200"]
    soon = _options({"begin": "now+60"})  # before the lease ends: the lease's begin, the tag still holds 60 s
    assert [o for o in soon if o.startswith("--begin")] == ["--begin=now+600"]
    assert _tag(soon).begin is not None and _tag(soon).begin <= after + 61  # type: ignore[operator]


def test_a_managed_begin_already_past_is_the_lease_alone() -> None:
    options = _options({"begin": "now"})
    assert _tag(options).begin is None and [o for o in options if o.startswith("--begin")] == ["--begin=now+600"]


def test_a_managed_begin_more_than_a_year_ahead_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        _options({"begin": "now+400days"})
    assert str(info.value) == ("job.sh: --begin=now+400days is more than a year ahead; give a time within 365 days, "
                               "or submit nearer to it")
    assert _tag(_options({"begin": "now+364days"})).begin is not None


def test_race_and_pick_keep_the_users_begin_and_no_tag_floor() -> None:
    for mode in ("race", "pick"):
        options = _options({"begin": "16:00"}, mode)
        assert [o for o in options if o.startswith("--begin")] == ["--begin=16:00"] and _tag(options).begin is None


MAIL = ["--mail-type=END,FAIL", "--mail-user=alice@example.org"]


@pytest.mark.parametrize("mode", ["managed", "race", "pick"])
def test_every_variant_carries_the_users_mail_options(mode: str) -> None:
    assert [o for o in _options({"sbatch": MAIL}, mode) if o.startswith("--mail")] == MAIL


def test_a_profiling_sample_never_mails_nor_waits_for_the_users_begin() -> None:
    assert not [o for o in _options({"sbatch": [*MAIL, "--account=p"], "begin": "now+1hour"}, "pick", sample=True)
                if o.startswith(("--mail", "--begin"))]
    spec = parse_spec({"name": "j", "command": "true", "work": 10, "begin": "now+1hour",
                       "sbatch": ["--mail-t=END", "--mail-user=alice@example.org"]})
    rendered = render_with_sample(spec, site(), "cpu", "g-1", "managed", "job.sh")
    assert rendered.sample_script is not None
    sample_lines = [line for line in rendered.sample_script.splitlines() if line.startswith("#SBATCH")]
    assert sample_lines and not [line for line in sample_lines if "--mail" in line or "--begin" in line]
    assert "#SBATCH --mail-t=END" in rendered.script.splitlines()


# ------------------------------------------------------------------ slurmxd silences the siblings it cancels

def _daemon_after_one_runs(tmp_path: Path, fail_update: bool = False) -> BeginTimeSlurm:
    fake = BeginTimeSlurm([job(1, "a", state=VariantState.RUNNING, begin=LEASE_NOW - 60), job(2, "a", "gpu"),
                           job(3, "b"), job(4, "b", "gpu", state=VariantState.RUNNING, begin=LEASE_NOW - 60)])
    if fail_update:
        def refuse(job_ids: Iterable[int], change: JobUpdate) -> None:
            fake.calls.append((" ".join(change.assignments()), tuple(job_ids)))
            raise SlurmCommandError(["scontrol", "update"], 1, "Invalid job id specified")
        fake.update = refuse  # type: ignore[method-assign]
    daemon = Daemon(lease_site(tmp_path), fake, Store(":memory:"), make_policy("fifo", {}),  # type: ignore[arg-type]
                    clock=lambda: fake.now)
    daemon.cycle()
    return fake


def test_slurmxd_sets_mail_type_none_on_the_siblings_it_cancels_in_one_update(tmp_path: Path) -> None:
    fake = _daemon_after_one_runs(tmp_path)
    silenced = [ids for verb, ids in fake.calls if verb == "MailType=NONE"]
    cancelled = [ids for verb, ids in fake.calls if verb == "cancel"]
    assert silenced == [(2, 3)] and cancelled == [(2, 3)]  # one update for all, the running ones untouched
    assert fake.calls.index(("MailType=NONE", (2, 3))) < fake.calls.index(("cancel", (2, 3)))


def test_a_failed_mail_update_never_keeps_the_siblings_from_being_cancelled(tmp_path: Path) -> None:
    fake = _daemon_after_one_runs(tmp_path, fail_update=True)
    assert ("MailType=NONE", (2, 3)) in fake.calls and ("cancel", (2, 3)) in fake.calls


# ------------------------------------------------------------------ the job side silences before it cancels

BASH = shutil.which("bash")
_RECORDER = '#!/bin/sh\necho "$(basename "$0") $*" >> "{log}"\n'
# scancel as Slurm acts on it: a job cancelling itself is ended a moment later (slurmctld's cancel is asynchronous).
_SCANCEL = _RECORDER + ('for id in "$@"; do [ "$id" = "$SLURM_JOB_ID" ] && (sleep 0.5; kill -TERM "$PPID") & done\n'
                        'exit 0\n')


def _run_variant(tmp_path: Path, mode: str, squeue_out: str, my_start: str = "") -> list[str]:
    """Run the cpu variant's rendered script (job 11) with fake squeue, scontrol and scancel; what they were
    asked. `squeue -j` answers `my_start`, any other squeue `squeue_out`."""
    from tests.unit.test_submit_properties import GID
    from tests.unit.test_submit_properties import site as spool_site

    spec = parse_spec({"name": "m", "command": "true", "variants": ["cpu"], "sbatch": MAIL})
    script = render_with_sample(spec, spool_site(str(tmp_path / "spool")), "cpu", GID, mode, "job.yaml").script
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "job.sh").write_text(script)
    fakes, log = tmp_path / "bin", tmp_path / "calls.log"
    fakes.mkdir()
    for name, fake in (("scontrol", _RECORDER), ("scancel", _SCANCEL)):
        (fakes / name).write_text(fake.format(log=log))
        (fakes / name).chmod(0o755)
    (fakes / "squeue").write_text(f"#!/bin/sh\ncase \"$*\" in *-j*) echo '{my_start}'; exit 0;; esac\n"
                                  f"cat <<'EOF'\n{squeue_out.format(g=GID)}EOF\n")
    (fakes / "squeue").chmod(0o755)
    env = {"PATH": f"{fakes}:/usr/bin:/bin", "SLURM_JOB_ID": "11", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    assert BASH is not None
    subprocess.run([BASH, str(tmp_path / "job.sh")], cwd=tmp_path, env=env, capture_output=True, timeout=60,
                   check=False)
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_the_race_winner_silences_its_siblings_in_one_update_then_cancels_them(tmp_path: Path) -> None:
    calls = _run_variant(tmp_path, "race", "11 slurmx:1:g={g},v=cpu\n12 slurmx:1:g={g},v=gpu\n"
                                           "13 slurmx:1:g={g},v=accel\n14 slurmx:1:g=other,v=cpu\n")
    assert calls == ["scontrol update JobId=12,13 MailType=NONE", "scancel 12 13"]


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_a_managed_variant_that_loses_silences_itself_and_a_winner_its_waiting_siblings(tmp_path: Path) -> None:
    # squeue -t all -o '%i %T %S %k': job 10 started first, so job 11 leaves without work
    lost = _run_variant(tmp_path / "lost", "managed", "10 RUNNING 2026-01-01T00:00:01 slurmx:1:g={g},v=gpu\n",
                        my_start="2026-01-01T00:00:05")
    assert lost == ["scontrol update JobId=11 MailType=NONE", "scancel 11"]
    won = _run_variant(tmp_path / "won", "managed", "12 PENDING N/A slurmx:1:g={g},v=gpu\n"
                       "13 PENDING N/A slurmx-sample:g={g},v=gpu,s=0\n", my_start="2026-01-01T00:00:01")
    assert won == ["scontrol update JobId=12,13 MailType=NONE", "scancel 12 13"]


def test_status_says_a_managed_variant_waits_for_its_begin_then_for_slurmxd(tmp_path: Path) -> None:
    from dataclasses import replace as copy

    from slurmx.submit.groups import _WAIT_REASONS, _from_jobs
    from tests.unit.test_profile_daemon import variant_job
    from tests.unit.test_submitter import _LocalFolders

    now = time.time()
    waiting = {"state": VariantState.PENDING, "held": False, "reason": "BeginTime", "submit_time": int(now),
               "begin_time": int(now + 3600)}
    ahead = copy(variant_job(51, "g-3", "cpu", f",l=600,b={int(now + 3600)}"), **waiting)  # type: ignore[arg-type]
    passed = copy(variant_job(52, "g-3", "gpu", f",l=600,b={int(now - 5)}"), **waiting)  # type: ignore[arg-type]
    (tmp_path / "g-3").mkdir()
    [group] = _from_jobs([ahead, passed], _LocalFolders(), str(tmp_path))  # type: ignore[arg-type]
    reasons = {v.kind: _WAIT_REASONS[v.reason] for v in group.variants}
    assert reasons["cpu"].startswith("held until its --begin")
    assert reasons["gpu"].startswith("held: waiting for slurmxd")
