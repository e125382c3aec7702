"""A managed group with the user's `--begin` (`b=` in its tag): slurmxd never starts it, nor sets a begin time,
before that time; the leases run as usual around it. Over the fake Slurm of test_lease.py; live in
tests/integration/test_begin_mail_live.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.core.model import VariantState
from slurmx.daemon.drain import drain
from slurmx.daemon.lease import begin_after
from slurmx.daemon.loop import Daemon
from slurmx.daemon.store import Store
from slurmx.policies.base import make_policy
from slurmx.slurm.records import SlurmJob
from tests.unit.test_lease import LEASE, NOW, BeginTimeSlurm, job, leased, site


def later(j: SlurmJob, at: float) -> SlurmJob:
    """`j` submitted with the user's --begin at `at`: in its tag, and as the begin time Slurm first shows (the later
    of the lease and the user's time, as `slurmx submit` asks)."""
    return replace(j, comment=f"{j.comment},b={int(at)}", begin_time=int(max(at, NOW + LEASE)))


def _started_at(fake: BeginTimeSlurm, ids: set[int]) -> list[tuple[float, str]]:
    return [(fake.now, verb) for verb, got in fake.calls if set(got) & ids and verb.startswith("StartTime")]


def test_the_daemon_starts_a_group_only_once_the_users_begin_has_passed(tmp_path: Path) -> None:
    begin = NOW + 1000
    fake = BeginTimeSlurm([later(job(1, "a"), begin), later(job(2, "a", "gpu"), begin), job(3, "b")])
    daemon = Daemon(site(tmp_path), fake, Store(":memory:"), make_policy("fifo", {}), clock=lambda: fake.now,  # type: ignore[arg-type]
                    restart_delay_s=11)
    sets: list[tuple[float, str, tuple[int, ...]]] = []
    while fake.now < begin + 120:
        fake.calls.clear()
        daemon.cycle()
        obs = daemon.backend.obs
        assert obs is not None and (("a" in obs.view.groups) is (fake.now >= begin) or fake.now > begin + 60)
        sets += [(fake.now, verb, ids) for verb, ids in fake.calls if verb.startswith("StartTime") and
                 set(ids) & {1, 2}]
        for job_id in (1, 2):  # every begin time slurmxd ever sets is at the user's time or later
            assert fake.table[job_id].begin_time is not None and fake.table[job_id].begin_time >= begin  # type: ignore[operator]
        fake.now += 50
    starts = [(at, ids) for at, verb, ids in sets if verb == "StartTime=now"]
    assert starts and starts[0][0] >= begin and starts[0][1] in ((1,), (2,)), sets  # one variant, at its time


def test_a_renewal_never_sets_a_begin_before_the_users_time() -> None:
    begin = NOW + 5000
    # a begin time someone moved earlier (slurmxd down, a site without the plugin): taken back to the user's time
    fake = BeginTimeSlurm([replace(later(job(1, "a"), begin), begin_time=int(NOW + 100)), job(2, "b", begin=NOW)])
    slurm = leased(fake)
    assert sorted(slurm.renew(slurm.jobs(), NOW)) == [1, 2]
    assert sorted(fake.calls) == [("StartTime=now+5000", (1,)), (f"StartTime=now+{LEASE}", (2,))]
    assert fake.table[1].begin_time == begin


def test_hold_release_and_drain_keep_to_the_users_begin(tmp_path: Path) -> None:
    begin = NOW + 2000
    fake = BeginTimeSlurm([later(job(1, "a"), begin)])
    slurm = leased(fake)
    slurm.jobs()
    slurm.hold([1])
    slurm.release([1])
    assert fake.calls == [("StartTime=now+2000", (1,)), ("StartTime=now+2001", (1,))]
    fake.now = begin + 1
    fake.calls.clear()
    slurm.jobs()
    slurm.release([1])
    slurm.hold([1])
    assert fake.calls == [("StartTime=now", (1,)), (f"StartTime=now+{LEASE}", (1,))]  # past it: the lease alone
    fake.calls.clear()
    assert drain(tmp_path, fake, now=NOW) == [1]  # type: ignore[arg-type]
    assert fake.calls == [("StartTime=now+2000", (1,))]


@settings(max_examples=200)
@given(wait=st.floats(-1e6, 1e8, allow_nan=False))
def test_begin_after_is_never_earlier(wait: float) -> None:
    text = begin_after(wait)
    seconds = 0 if text == "now" else int(text.removeprefix("now+"))
    assert seconds >= wait - 1e-3 and seconds <= max(wait, 0) + 1


def test_a_tag_without_the_users_begin_is_renewed_as_before() -> None:
    fake = BeginTimeSlurm([job(1, "a", begin=NOW + 10)])
    slurm = leased(fake)
    assert slurm.renew(slurm.jobs(), NOW) == [1] and fake.calls == [(f"StartTime=now+{LEASE}", (1,))]
    assert fake.table[1].state is VariantState.PENDING
