"""The site guard (site-config/job_submit.lua) is a whitelist: on a job with a slurmx tag its owner may make only
the change slurmx makes as that user (a sample appending what it measured), and no user may write a slurmx tag
after submission.

The plugin runs under the stand-in bindings of tests/unit/slurm_lua_standin.py: job_desc is built per Slurm release
from what `scontrol update` sends, so each field of each release's bindings is tried. Live on the real bindings:
tests/integration/test_security_live.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.slurm_lua_standin import LUA_VERSIONS, PLUGIN, RELEASES, Guard, exposed_members

BOB, ROOT, DAEMON = 2002, 0, 2100
LEASED = "slurmx:1:g=bob-0a1b2c,v=cpu,c=be,h=3bc1bb306610,l=1200"
RELEASED = "slurmx:1:g=bob-0a1b2c,v=gpu,c=be,h=3bc1bb306610"  # a race variant, or one slurmxd let go
SAMPLE = "slurmx-sample:g=bob-0a1b2c,v=cpu,s=0,n=100"
ALICE_TAG = "slurmx:1:g=alice-0a1b2c,v=cpu,c=be,h=3bc1bb306610,l=1200"
BROKEN = "slurmx:1:g=bob-0a1b2c,v=cpu,l= 600"  # unreadable, still guarded
# Members that are no change: slurmctld sets who asks and from where before the plugin runs (user_id, alloc_node);
# group_id is the submitter's, which no update changes.
WHO_ASKS = {"alloc_node", "user_id", "group_id"}


def changeable(release: str) -> dict[str, str]:
    return {m: kind for m, kind in exposed_members(release).items() if m not in WHO_ASKS}


@pytest.fixture(scope="module", params=LUA_VERSIONS)
def guard(request: pytest.FixtureRequest) -> Guard:
    return Guard(request.param)


@pytest.fixture(scope="module")
def lua54() -> Guard:
    return Guard("lua54")


# (the job's comment now, what the update sets (lua names, plain table), uid) -> allowed
MODIFY_TABLE: list[tuple[str | None, dict[str, Any], int, bool]] = [
    # a sample reports what it measured: appended, once, in the fields the hooks write
    (SAMPLE, {"comment": SAMPLE + ",t=12.500000,ps=0.125"}, BOB, True),
    (SAMPLE, {"comment": SAMPLE + ",t=12.5"}, BOB, True),
    (SAMPLE, {"comment": SAMPLE + ",w=4:57.3;2:38;1:19.4,k=3"}, BOB, True),
    (SAMPLE + ",t=12.5", {"comment": SAMPLE + ",t=12.5,t=1"}, BOB, False),  # a second report
    (SAMPLE, {"comment": SAMPLE + "0"}, BOB, False),  # n=100 -> n=1000
    (SAMPLE, {"comment": SAMPLE + ",n=1"}, BOB, False),  # its own fields stay
    (SAMPLE, {"comment": SAMPLE + ",g=alice-0a1b2c"}, BOB, False),
    (SAMPLE, {"comment": SAMPLE + ",x=1"}, BOB, False),
    (SAMPLE, {"comment": SAMPLE + ","}, BOB, False),
    (SAMPLE, {"comment": "slurmx-sample:g=alice-0a1b2c,v=cpu,s=0,n=100"}, BOB, False),
    (SAMPLE, {"comment": "mine now"}, BOB, False),
    (SAMPLE, {"comment": SAMPLE + ",t=1", "min_cpus": 4.0}, BOB, False),  # the append does not carry a change
    (SAMPLE, {"min_cpus": 4.0, "pn_min_memory": 7000.0}, BOB, False),  # grown to a whole node
    (SAMPLE, {"requeue": 1.0}, BOB, False),
    (SAMPLE, {"dependency": "afterok:1"}, BOB, False),
    (SAMPLE, {"priority": 4294967295.0}, BOB, False),  # scontrol release: INFINITE
    (SAMPLE, {"begin_time": 1.0}, BOB, False),
    (SAMPLE, {"qos": "normal"}, BOB, False),
    (SAMPLE, {"requeue": 1.0}, DAEMON, True),
    (SAMPLE, {"priority": 4294967295.0}, ROOT, True),
    # a leased or released variant: nothing at all
    (LEASED, {"req_nodes": "g1"}, BOB, False),
    (LEASED, {"partition": "gpu"}, BOB, False),
    (LEASED, {"min_cpus": 4.0}, BOB, False),
    (LEASED, {"begin_time": 1.0}, BOB, False),
    (LEASED, {"priority": 0.0}, BOB, False),
    (LEASED, {"comment": LEASED + ",t=1"}, BOB, False),
    (LEASED, {"comment": ALICE_TAG}, BOB, False),
    (LEASED, {"time_limit": 5.0}, BOB, False),
    (LEASED, {"nice": 2147483748.0}, BOB, False),
    (RELEASED, {"req_nodes": "g1"}, BOB, False),
    (RELEASED, {"exc_nodes": "g2"}, BOB, False),
    (RELEASED, {"tres_per_node": "gres/gpu:2"}, BOB, False),
    (RELEASED, {"partition": "cpu"}, BOB, False),
    (RELEASED, {"requeue": 1.0}, BOB, False),
    (BROKEN, {"begin_time": 1.0}, BOB, False),
    (LEASED, {"req_nodes": "g1", "begin_time": 1.0}, DAEMON, True),
    (LEASED, {"req_nodes": "g1"}, ROOT, True),
    (LEASED, {}, BOB, True),  # an update that changes nothing
    # the variant that runs silences the siblings it cancels (MailType=NONE is 0), nothing else of the mail
    (RELEASED, {"mail_type": 0.0}, BOB, True),
    (LEASED, {"mail_type": 0.0}, BOB, True),
    (LEASED, {"mail_type": 2.0}, BOB, False),  # END
    (LEASED, {"mail_type": 0.0, "begin_time": 1.0}, BOB, False),
    (LEASED, {"mail_user": "eve@example.org"}, BOB, False),
    # nobody writes a tag after submission, on any job
    (None, {"comment": ALICE_TAG}, BOB, False),
    ("my job", {"comment": ALICE_TAG}, BOB, False),
    ("my job", {"comment": "slurmx-sample:g=alice-0a1b2c,v=cpu,s=0,n=100"}, BOB, False),
    ("my job", {"comment": " slurmx:1:g=alice-0a1b2c,v=cpu"}, BOB, False),
    ("my job", {"comment": "SLURMX:1:g=alice-0a1b2c,v=cpu"}, BOB, False),
    ("my job", {"comment": ALICE_TAG}, DAEMON, True),
    # a job slurmx did not submit is its owner's
    ("my job", {"comment": "still mine, about slurmx"}, BOB, True),
    ("my job", {"min_cpus": 4.0, "req_nodes": "g1", "partition": "gpu", "priority": 0.0}, BOB, True),
    (None, {"dependency": "afterok:1", "requeue": 1.0}, BOB, True),
    ("my job", {"qos": "slurmx-profile"}, BOB, False),
    ("slurmxy", {"begin_time": 1.0}, BOB, True),
]


@pytest.mark.parametrize(("comment", "update", "uid", "allowed"), MODIFY_TABLE)
def test_slurm_job_modify(guard: Guard, comment: str | None, update: dict[str, Any], uid: int,
                          allowed: bool) -> None:
    outcome = guard.modify(update, {"job_id": 42.0, "comment": comment, "user_id": float(BOB)}, uid)
    assert outcome.allowed is allowed, (comment, update, outcome.user_lines)
    if allowed:
        assert outcome.user_lines == []
    else:  # one line, naming the job and a field it asked to change
        assert len(outcome.user_lines) == 1 and "\n" not in outcome.user_lines[0], outcome.user_lines
        line = outcome.user_lines[0]
        assert (line.startswith("slurmx: ") and "job 42" in line) or "QOS slurmx-profile" in line, line
        assert any(name.lower() in line.lower() for name in update), (line, update)


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("comment", [LEASED, RELEASED, SAMPLE, BROKEN])
def test_every_field_of_every_release_is_refused_by_name_on_a_tagged_job(lua54: Guard, release: str,
                                                                         comment: str) -> None:
    """Each member the release's bindings expose, set by an update, is refused with one line naming it; an
    update that sets nothing passes, so every unset value is read as unset (no false refusal)."""
    rec = {"job_id": 7.0, "comment": comment}
    assert lua54.modify(lua54.update(release), rec, BOB).allowed
    for member, kind in changeable(release).items():
        value: Any = "g1" if kind == "string" else 1
        if member == "comment":
            value = comment + ",n=1"  # neither an append the hooks make nor allowed on a variant
        outcome = lua54.modify(lua54.update(release, **{member: value}), rec, BOB)
        assert not outcome.allowed, (release, member)
        assert len(outcome.user_lines) == 1 and re.search(rf"its ({member}$|[^,]*\({member}\))",
                                                            outcome.user_lines[0]), (member, outcome)


@pytest.mark.parametrize("release", RELEASES)
def test_a_sample_reports_what_it_measured_on_every_release(guard: Guard, release: str) -> None:
    update = guard.update(release, comment=SAMPLE + ",t=12.500000,ps=0.125")
    assert guard.modify(update, {"job_id": 7.0, "comment": SAMPLE}, BOB).allowed


def test_a_field_the_plugin_does_not_know_is_refused_where_it_can_be_listed(lua54: Guard) -> None:
    """slurmctld's job_desc cannot be listed; a plain table (another caller, a newer binding) can."""
    outcome = lua54.modify({"brand_new_field": "x"}, {"job_id": 7.0, "comment": SAMPLE}, BOB)
    assert not outcome.allowed and "brand_new_field (a field this plugin does not know)" in outcome.user_lines[0]
    assert lua54.modify({"user_id": float(BOB), "alloc_node": "login"}, {"job_id": 7.0, "comment": SAMPLE},
                        BOB).allowed


@settings(max_examples=300, deadline=None)
@given(member=st.sampled_from(sorted(changeable("26.05"))), number=st.integers(0, 2**32 - 1),
       text=st.text(min_size=0, max_size=20))
def test_no_value_of_any_field_slips_through(lua54: Guard, member: str, number: int, text: str) -> None:
    """Any value other than an update's own "unset" one is a change, whatever the field."""
    kind = changeable("26.05")[member]
    value: Any = text if kind == "string" else number
    update = lua54.update("26.05", **{member: value})
    outcome = lua54.modify(update, {"job_id": 7.0, "comment": LEASED}, BOB)
    unset = lua54.update("26.05")[member] == update[member]
    silenced = member == "mail_type" and value == 0  # MailType=NONE: allowed (USER_MAY)
    assert outcome.allowed is (unset or silenced), (member, value, outcome)


def test_submission_keeps_the_profiling_qos_for_held_samples(guard: Guard) -> None:
    qos = "slurmx-profile"
    assert guard.submit({"qos": qos, "priority": 0.0, "comment": SAMPLE}, BOB).allowed
    assert not guard.submit({"qos": qos, "priority": 0.0, "comment": "mine"}, BOB).allowed
    assert not guard.submit({"qos": qos, "comment": SAMPLE}, BOB).allowed  # not held
    assert guard.submit({"qos": "normal", "comment": ALICE_TAG}, BOB).allowed  # a tag is written at submission
    assert guard.submit({"qos": qos, "comment": "mine"}, DAEMON).allowed


def test_the_plugin_loads_as_slurm_loads_it() -> None:
    """One chunk that returns slurm.SUCCESS and defines the two entry points (Slurm refuses a script without)."""
    guard = Guard("lua54", PLUGIN.read_text())
    assert guard.g.slurm_job_submit is not None and guard.g.slurm_job_modify is not None
