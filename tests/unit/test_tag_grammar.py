"""One tag grammar, two readers: slurmx/core/tag.py and the site's job_submit.lua read every comment of one table
(tests/fixtures/tag_grammar.json) the same way, and agree on any other string hypothesis finds.

The plugin runs under the stand-in bindings of tests/unit/slurm_lua_standin.py, in every Lua Slurm may link.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.core import tag
from slurmx.core.model import VariantState
from slurmx.daemon.lease import lease_renewals
from slurmx.profile.sampling import SAMPLE_TAG
from tests.unit.slurm_lua_standin import LUA_VERSIONS, Guard
from tests.unit.test_daemon import job

_TABLE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "tag_grammar.json").read_text())["cases"]


def _expand(comment: str) -> str:
    return re.sub(r"\{(.+?)\*([0-9]+)\}", lambda m: m.group(1) * int(m.group(2)), comment)


CASES = [pytest.param(_expand(c["comment"]), c, id=c["note"] or c["comment"][:40]) for c in _TABLE]


def python_reading(comment: str) -> dict[str, bool]:
    try:
        valid = tag.decode(comment) is not None
    except tag.TagError:
        valid = False
    return {"valid": valid, "leased": tag.leased(comment), "sample": comment.startswith(SAMPLE_TAG)}


def test_the_table_covers_the_cases_the_issue_names() -> None:
    comments = {c["comment"] for c in _TABLE}
    for needed in ("slurmx:1:g=a,v=cpu,l= 600", "slurmx:1:g=a,v=cpu,l=600x", "slurmx:1:g=a,v=cpu,,l=600",
                   "slurmx:1:g=a,v=cpu,l=\u0663", "slurmx:1:g=a,v=cpu,l=", "slurmx:1:g=a,v=cpu,l=600,l=600",
                   "slurmx:1:g=a b,v=cpu", "slurmx:1:g=a,v=cpu,l={9*5000}", "slurmx:2:g=a,v=cpu,l=600"):
        assert needed in comments, needed
    assert {c["valid"] for c in _TABLE} == {True, False} and {c["leased"] for c in _TABLE} == {True, False}


@pytest.mark.parametrize(("comment", "case"), CASES)
def test_python_reads_the_table(comment: str, case: dict[str, Any]) -> None:
    assert python_reading(comment) == {k: case[k] for k in ("valid", "leased", "sample")}
    if comment.startswith(tag.PREFIX) and not case["valid"]:
        with pytest.raises(tag.TagError):
            tag.fields(comment)  # named, never half-read
        assert tag.readable_fields(comment) == {}


@pytest.fixture(scope="module", params=LUA_VERSIONS)
def guard(request: pytest.FixtureRequest) -> Guard:
    return Guard(request.param)


@pytest.mark.parametrize(("comment", "case"), CASES)
def test_the_plugin_reads_the_table(guard: Guard, comment: str, case: dict[str, Any]) -> None:
    reading = guard.read_tag(comment)
    assert {k: reading[k] for k in ("valid", "leased", "sample")} == {k: case[k] for k in ("valid", "leased",
                                                                                          "sample")}, reading["why"]
    assert reading["tagged"] == comment.startswith(tag.PREFIX)  # protected by the guard, readable or not


@pytest.fixture(scope="module")
def lua54() -> Guard:
    return Guard("lua54")


_PIECES = st.sampled_from(["slurmx:", "1:", "2:", "g=", "v=", "c=", "gr=", "e=", "n=", "h=", "p=", "l=", "x=",
                           ",", "=", " ", "a", "cpu", "te", "be", "600", "0", "1e5", "1.5", "-", ".", "\u0663",
                           "\u00b2", "\n", "e", "E", "+", "slurmx-sample:"])


@settings(max_examples=3000, deadline=None)
@given(pieces=st.lists(_PIECES, max_size=14), prefix=st.sampled_from(["slurmx:", "slurmx:1:", ""]))
def test_python_and_the_plugin_agree_on_any_comment(lua54: Guard, pieces: list[str], prefix: str) -> None:
    comment = prefix + "".join(pieces)
    reading = lua54.read_tag(comment)
    assert python_reading(comment) == {k: reading[k] for k in ("valid", "leased", "sample")}, (comment, reading)


@settings(max_examples=500, deadline=None)
@given(text=st.text(max_size=60))
def test_python_and_the_plugin_agree_on_any_text(lua54: Guard, text: str) -> None:
    for comment in (f"slurmx:1:g=a,v=cpu,l={text}", f"slurmx:1:g=a,v=cpu,e={text}", f"slurmx:1:{text}"):
        reading = lua54.read_tag(comment)
        assert python_reading(comment) == {k: reading[k] for k in ("valid", "leased", "sample")}, (comment, reading)


def test_the_daemons_lease_renewal_finds_a_lease_wherever_the_tag_puts_it() -> None:
    """The grammar leaves field order free: slurmxd's cheap pre-filter (daemon/lease.py) must not miss `l=` first."""
    waiting = replace(job(1, None), comment="slurmx:1:l=600,g=a,v=cpu", state=VariantState.PENDING, begin_time=None)
    assert tag.leased(waiting.comment)
    assert lease_renewals([waiting], now=1000.0, lease_s=600) == [1]


_NAME = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,30}", fullmatch=True)
_TAGS = st.builds(tag.GroupTag, _NAME, _NAME, st.sampled_from(["", "te", "be"]), st.none() | st.integers(0, 10**9),
                  st.none() | st.floats(1e-3, 1e12), st.none() | st.integers(1, 10**12), st.sampled_from(["", "ab12"]),
                  st.sampled_from(["", "0123456789ab"]), st.none() | st.integers(0, 10**6))


@settings(max_examples=300, deadline=None)
@given(written=_TAGS, data=st.data())
def test_a_space_anywhere_or_a_field_twice_makes_any_tag_unreadable_to_both(lua54: Guard, written: tag.GroupTag,
                                                                             data: st.DataObject) -> None:
    comment = tag.encode(written)
    assert python_reading(comment)["valid"] and lua54.read_tag(comment)["valid"]
    assert python_reading(comment)["leased"] is lua54.read_tag(comment)["leased"] is (written.lease_s is not None)
    at = data.draw(st.integers(len("slurmx:1:"), len(comment)))
    items = comment[len("slurmx:1:"):].split(",")
    for bad in (comment[:at] + data.draw(st.sampled_from([" ", "\t", "\u00a0"])) + comment[at:],
                comment + "," + data.draw(st.sampled_from(items))):
        assert not python_reading(bad)["valid"] and not lua54.read_tag(bad)["valid"], bad
