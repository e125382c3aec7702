"""The group tag codec: what `slurmx submit` writes, slurmxd reads back; old tags survive an upgrade."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmx.core import tag
from slurmx.daemon.lease import is_leased
from slurmx.daemon.observe import build_view
from slurmx.daemon.trust import sort_jobs
from slurmx.slurm.records import SlurmJob
from tests.unit.test_daemon import NODES, PARTITIONS, SITE, job, spool_owners

_NAME = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True)


@given(group=_NAME, kind=_NAME, job_class=st.sampled_from(["", "te", "be"]),
       grace=st.none() | st.integers(0, 10**9), estimate=st.none() | st.floats(1e-3, 1e9),
       steps=st.none() | st.integers(1, 10**12), payload=st.sampled_from(["", "3bc1bb306610"]),
       sample=st.sampled_from(["", "0123456789ab"]))
def test_round_trip(group: str, kind: str, job_class: str, grace: int | None, estimate: float | None,
                    steps: int | None, payload: str, sample: str) -> None:
    written = tag.GroupTag(group, kind, job_class, grace, estimate, steps, payload, sample)
    comment = tag.encode(written)
    assert comment.startswith("slurmx:1:")
    read = tag.decode(comment)
    assert read is not None
    assert read == tag.GroupTag(group, kind, job_class, grace, float(f"{estimate:.10g}") if estimate else None,
                                steps, payload, sample)


def test_old_tags_are_read_as_version_0() -> None:
    read = tag.decode("slurmx:g=train-0a1b2c,v=gpu,c=be,e=600,n=10,h=3bc1bb306610")
    assert read == tag.GroupTag("train-0a1b2c", "gpu", "be", None, 600.0, 10, "3bc1bb306610", "", version=0)


def test_foreign_comments_are_not_tags() -> None:
    assert tag.decode("") is None
    assert tag.decode("my own comment") is None
    assert tag.readable_fields("slurmxx") == {}


@pytest.mark.parametrize(("comment", "message"), [
    ("slurmx:2:g=a,v=cpu", "tag version 2 is newer"),
    ("slurmx:1:v=cpu", "without g=<group>"),
    ("slurmx:1:g=a", "without v=<kind>"),
    ("slurmx:1:g=a,v=cpu,c=vip", "class c='vip'"),
    ("slurmx:1:g=a,v=cpu,gr=-5", "gr='-5'; expected a whole number"),
    ("slurmx:1:g=a,v=cpu,e=nan", "e='nan'; expected a positive"),
    ("slurmx:", "without fields"),
])
def test_malformed_tags_are_refused_by_name(comment: str, message: str) -> None:
    with pytest.raises(tag.TagError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tag.decode(comment)


def test_a_comma_in_a_value_is_refused_when_writing() -> None:
    with pytest.raises(tag.TagError, match="comma"):
        tag.encode(tag.GroupTag("a,b", "cpu"))


@given(st.text(max_size=200))
def test_any_comment_decodes_or_is_refused(comment: str) -> None:
    """Never anything but a tag or a `TagError` (no IndexError, no ValueError from int())."""
    with contextlib.suppress(tag.TagError):
        tag.decode("slurmx:" + comment)


def _job(job_id: int, comment: str) -> SlurmJob:
    return replace(job(job_id, None), comment=comment)


def test_the_daemon_reads_the_jobs_own_grace_clamped_to_the_site_limit() -> None:
    limit = SITE.preemption.max_grace_s
    jobs = [_job(1, "slurmx:1:g=a,v=cpu,c=be,gr=600"), _job(2, f"slurmx:1:g=b,v=cpu,c=be,gr={limit * 10}"),
            _job(3, "slurmx:g=c,v=cpu,c=be")]
    trusted, rejected = sort_jobs(SITE, jobs, spool_owners(jobs))
    assert not rejected
    assert {g.group_id: g.grace_s for g in trusted} == {"a": 600, "b": limit, "c": None}


def test_an_unreadable_tag_sets_its_job_aside_by_name() -> None:
    trusted, rejected = sort_jobs(SITE, [_job(7, "slurmx:2:g=a,v=cpu"), _job(8, "slurmx:1:g=b,v=cpu")],
                                  spool_owners([_job(8, "slurmx:1:g=b,v=cpu")]))
    assert [g.group_id for g in trusted] == ["b"]
    assert rejected[0].job_ids == (7,) and "newer than this slurmx understands" in rejected[0].reason


def test_the_policy_sees_the_jobs_own_grace_and_the_site_default_otherwise() -> None:
    jobs = [_job(1, "slurmx:1:g=own,v=cpu,c=be,gr=600"), _job(2, "slurmx:g=old,v=cpu,c=be")]
    view = build_view(SITE, jobs, NODES, PARTITIONS, 1000.0, owner_of=spool_owners(jobs)).view
    assert view.groups["own"].grace_s == 600
    assert view.groups["old"].grace_s == SITE.preemption.grace_s


@pytest.mark.parametrize("value", ["²", "①", "1²", "٣", "9" * 19, "9" * 5000, "+5", "5.0", " 5", ""])
def test_numbers_only_in_ascii_digits_so_a_crafted_tag_costs_its_job_only(value: str) -> None:
    """`str.isdigit` accepts '²' and '①', which `int` refuses: such a tag once escaped trust and failed every cycle.
    Under the strict grammar the whole tag is unreadable: its job is set aside by name, the other group goes on."""
    assert tag.whole_number(value) is None
    with pytest.raises(tag.TagError, match=r"expected a whole number|longer than 1024"):
        tag.decode(f"slurmx:1:g=a,v=cpu,gr={value}")
    jobs = [_job(1, f"slurmx:1:g=a,v=cpu,c=be,gr={value},n={value}"), _job(2, "slurmx:1:g=b,v=cpu,c=be,gr=60")]
    trusted, rejected = sort_jobs(SITE, jobs, spool_owners(jobs))
    assert {g.group_id: g.grace_s for g in trusted} == {"b": 60}
    assert [r.job_ids for r in rejected] == [(1,)] and "unreadable group tag" in rejected[0].reason
    view = build_view(SITE, jobs, NODES, PARTITIONS, 1000.0, owner_of=spool_owners(jobs)).view  # and the view
    assert set(view.groups) == {"b"}


@given(st.text(max_size=40))
def test_sort_jobs_never_raises_on_any_comment(text: str) -> None:
    for comment in (f"slurmx:1:{text}", f"slurmx:1:g=a,v=cpu,gr={text}", f"slurmx:1:g=a,v=cpu,e={text}"):
        sort_jobs(SITE, [_job(1, comment)], spool_owners([_job(1, comment)]))


_VALUES = st.one_of(st.sampled_from(["te", "be", "600", "1e3", "1e999", "0", "0.0", "5.5", "a-b.c", "", " 1", "²",
                                     "9" * 19, "x" * 90]), st.text(max_size=12))


@given(st.lists(st.tuples(st.sampled_from(["g", "v", "c", "gr", "e", "n", "h", "p", "l", "b", "x", ""]), _VALUES),
                max_size=10), st.sampled_from(["slurmx:1:", "slurmx:", "slurmx:2:", "slurmx:1:g=a,v=cpu,"]))
def test_the_one_match_reading_is_the_long_readings(parts: list[tuple[str, str]], head: str) -> None:
    """`fields` reads the form `encode` writes with one match; on every comment it must answer as the long way."""
    comment = head + ",".join(f"{k}={v}" for k, v in parts)
    try:
        expected: dict[str, str] | str = tag._fields_in_any_order(comment)
    except tag.TagError as exc:
        expected = str(exc)
    try:
        got: dict[str, str] | str = tag.fields(comment)
    except tag.TagError as exc:
        got = str(exc)
    assert got == expected and (not isinstance(got, dict) or list(got) == list(expected))


@given(st.builds(tag.GroupTag, st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True), st.sampled_from(["cpu", "gpu"]),
                 st.sampled_from(["", "te", "be"]), st.none() | st.integers(0, 10**6),
                 st.none() | st.floats(1e-3, 1e12), st.none() | st.integers(1, 10**9),
                 st.sampled_from(["", "abc123"]), st.sampled_from(["", "def456"]), st.none() | st.integers(1, 10**5),
                 st.none() | st.integers(0, 10**12)))
def test_every_encoded_tag_takes_the_one_match_reading(group: tag.GroupTag) -> None:
    comment = tag.encode(group)
    assert tag._CANONICAL.fullmatch(comment) is not None
    assert tag.fields(comment) == tag._fields_in_any_order(comment)


def test_the_users_begin_rides_in_the_tag_and_is_bounded_by_the_submission() -> None:
    comment = tag.encode(tag.GroupTag("g1", "cpu", lease_s=600, begin=1_800_000_000))
    assert comment.endswith(",l=600,b=1800000000")
    read = tag.decode(comment)
    assert read is not None and read.begin == 1_800_000_000 and read.lease_s == 600
    assert tag.begin_floor(comment, 1_799_999_000) == 1_800_000_000
    # written by hand centuries ahead: read as at most a year after the job's submission
    far = tag.encode(tag.GroupTag("g1", "cpu", lease_s=600, begin=10**15))
    assert tag.begin_floor(far, 1_700_000_000) == 1_700_000_000 + tag.MAX_BEGIN_AHEAD_S
    assert tag.begin_floor(tag.encode(tag.GroupTag("g1", "cpu", lease_s=600)), 1_700_000_000) is None
    assert tag.begin_floor("slurmx:1:g=a,v=cpu,b=1.5", 1_700_000_000) is None  # unreadable: no floor, set aside


@given(st.lists(st.tuples(st.sampled_from(["g", "v", "c", "gr", "e", "n", "h", "p", "l", "b", "x", ""]), _VALUES),
                max_size=10), st.sampled_from(["slurmx:1:", "slurmx:", "slurmx:2:", "slurmx:1:g=a,v=cpu,", "x"]),
       st.none() | st.integers(0, 2 * 10**9))
def test_the_lease_and_begin_read_alone_answer_as_the_whole_tag(parts: list[tuple[str, str]], head: str,
                                                               submit: int | None) -> None:
    """`leased` and `begin_floor` read one field without building the tag's fields: the same answers as from them
    (the lease layer and the plugin must agree on which jobs are leased)."""
    comment = head + ",".join(f"{k}={v}" for k, v in parts)
    whole = tag.readable_fields(comment)
    assert tag.leased(comment) == ("l" in whole)
    begin = float(whole["b"]) if "b" in whole else None
    if begin is not None and submit:
        begin = min(begin, submit + tag.MAX_BEGIN_AHEAD_S)
    assert tag.begin_floor(comment, submit) == begin


@given(st.lists(st.tuples(st.sampled_from(["g", "v", "c", "gr", "e", "n", "h", "p", "l", "b", "x", ""]), _VALUES),
                max_size=10),
       st.sampled_from(["slurmx:1:", "slurmx:", "slurmx:2:", "slurmx:1:g=a,v=cpu,", "x", "slurmx:1:g=a,v=cpu}\n{"]),
       st.none() | st.integers(0, 2 * 10**9))
def test_a_jobs_tag_read_once_answers_as_the_comment_read_each_time(parts: list[tuple[str, str]], head: str,
                                                                    submit: int | None) -> None:
    """The lease layer, trust and the view read a job's tag from the record, parsed once (`SlurmJob.group_tag`):
    the same fields as `tag.fields`, the same refusal (asked twice: the second answer is the remembered one), the
    same lease and begin as the comment read afresh, whatever a user wrote in it (framing-like text included)."""
    comment = head + ",".join(f"{k}={v}" for k, v in parts)
    record = replace(job(1, "g"), comment=comment, submit_time=submit)
    for _ in range(2):
        try:
            whole = tag.fields(comment)
            keys = ("g", "v", "e", "gr", "l", "b")
            expected: tuple[str | None, ...] | str | None = tuple(whole.get(k) for k in keys) if whole else None
        except tag.TagError as exc:
            expected = str(exc)
        try:
            read = record.group_tag()
            got: tuple[str | None, ...] | str | None = None if read is None else tuple(read)
        except tag.TagError as exc:
            got = str(exc)
        assert got == expected
        readable = record.readable_group_tag()
        assert (None if readable is None else tuple(readable)) == (expected if isinstance(expected, tuple) else None)
        assert is_leased(record) == tag.leased(comment)
        assert tag.begin_floor_of(record.readable_group_tag(), submit) == tag.begin_floor(comment, submit)
