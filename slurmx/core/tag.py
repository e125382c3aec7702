"""The group tag: the `--comment` that marks a Slurm job as a slurmx variant, written and read in one place.

`slurmx submit` writes it, slurmxd, `slurmx preempt`, the profiler and `slurmx jobs` read it. It carries what the
daemon needs from the spec and cannot ask Slurm for: the group, the variant's kind, the class, the job's own grace
period, the runtime estimate, the work in steps and the payload and sample-script hashes.

Form (version 1):
`slurmx:1:g=<group>,v=<kind>,c=<te|be>[,gr=<s>][,e=<s>][,n=<steps>],h=<hash>[,p=<hash>][,l=<s>][,b=<epoch>]`.
`l=` marks a managed variant submitted under a lease (`--begin`, see `daemon/lease.py`): its start is slurmxd's
to give until the lease runs out, and Slurm's to give after. `b=` is the user's own `--begin` of a managed group
(Unix seconds): the begin time Slurm shows is the lease's, which slurmxd keeps moving, so the user's time rides in
the tag, which the site's plugin freezes at submission. `slurmx submit` writes it at most a year ahead
(`MAX_BEGIN_AHEAD_S`); slurmxd reads it as a floor (`begin_floor`): never starts the group, nor sets a begin
time, before it. A user who writes a later one by hand only delays their own group.
Tags written before versions existed (`slurmx:g=…,v=…`) are read as version 0 so groups already in the queue
survive an upgrade; a tag of a newer version is refused by name rather than half-read. The grammar is strict (see
`fields`) and the site's `job_submit.lua` reads it the same way. The comment is the user's to write at submission
(the plugin refuses any later change): every value is a hint, checked where it is used (trust comes from Slurm's
UserId and QOS, a grace from the tag is clamped to the site's limit).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from slurmx.core.interning import StringPool

__all__ = ["MAX_BEGIN_AHEAD_S", "MAX_LENGTH", "PREFIX", "VERSION", "GroupTag", "TagError", "TagRead", "begin_floor",
           "begin_floor_of", "decode", "encode", "fields", "leased", "read", "readable_fields", "script_hash",
           "whole_number"]

PREFIX = "slurmx:"
VERSION = 1
_V1 = f"{PREFIX}{VERSION}:"
MAX_BEGIN_AHEAD_S = 365 * 86400  # the latest `b=` slurmx submit writes, from the time of submission: a year


_WHOLE = re.compile(r"[0-9]{1,18}")


def whole_number(text: str | None) -> int | None:
    """`text` as a whole number of at most 18 ASCII digits, else None. Not `str.isdigit`: it accepts '²' and '①',
    which `int` then refuses, and a comment is anyone's to write."""
    return int(text) if text is not None and _WHOLE.fullmatch(text) else None


class TagError(ValueError):
    """A comment that starts like a slurmx tag but cannot be read as one."""


@dataclass(frozen=True, slots=True)
class GroupTag:
    """What one variant's tag says. `version` is the form it was read from (0: before versions)."""

    group_id: str
    kind: str
    job_class: str = ""  # "te" or "be"; "" when absent
    grace_s: int | None = None  # the job's own grace period (BE jobs)
    estimate_s: float | None = None
    steps: int | None = None
    payload_hash: str = ""
    sample_hash: str = ""
    lease_s: int | None = None  # managed under a lease of this many seconds; None: not leased
    begin: int | None = None  # the user's `--begin` of a managed group, Unix seconds; None: none asked
    version: int = VERSION


def script_hash(text: str) -> str:
    """The 12-hex-digit sha256 prefix tags carry for payloads and sample scripts."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def encode(tag: GroupTag) -> str:
    """The comment for `tag`, always in the current version."""
    parts = [f"g={tag.group_id}", f"v={tag.kind}"]
    if tag.job_class:
        parts.append(f"c={tag.job_class}")
    if tag.grace_s is not None:
        parts.append(f"gr={tag.grace_s}")
    if tag.estimate_s is not None:
        parts.append(f"e={tag.estimate_s:.10g}")
    if tag.steps is not None:
        parts.append(f"n={tag.steps}")
    if tag.payload_hash:
        parts.append(f"h={tag.payload_hash}")
    if tag.sample_hash:
        parts.append(f"p={tag.sample_hash}")
    if tag.lease_s is not None:
        parts.append(f"l={tag.lease_s}")
    if tag.begin is not None:
        parts.append(f"b={tag.begin}")
    for part in parts:
        if "," in part[part.index("=") + 1:]:
            raise TagError(f"tag value {part!r} holds a comma, which separates tags; use a plain name")
    comment = _V1 + ",".join(parts)
    fields(comment)  # what slurmx writes, it (and the site's plugin) can read back
    return comment


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,80}")
_SECONDS = re.compile(r"[0-9]{1,18}(?:\.[0-9]{1,18})?(?:[eE][+-]?[0-9]{1,3})?")
_FORMS: dict[str, tuple[re.Pattern[str], str]] = {
    "g": (_NAME, "a plain name"), "v": (_NAME, "a plain name"), "h": (_NAME, "a plain name"),
    "p": (_NAME, "a plain name"), "c": (re.compile("te|be"), "te or be"), "gr": (_WHOLE, "a whole number"),
    "n": (_WHOLE, "a whole number"), "l": (_WHOLE, "a whole number"), "b": (_WHOLE, "a whole number"),
    "e": (_SECONDS, "a positive number of seconds"),
}
MAX_LENGTH = 1024
_VERSION_HEAD = re.compile(r"([0-9]+):")
# The form `encode` writes, fields in its order: one match reads the tags slurmxd sees each cycle (every managed job's
# comment), instead of a split and a match per field. It accepts only what `_fields_in_any_order` accepts, with the
# same reading (a property test holds them equal); anything else goes the long way.
_N, _W, _S = _NAME.pattern, _WHOLE.pattern, _SECONDS.pattern
_CANONICAL = re.compile(
    rf"slurmx:1:g=(?P<g>{_N}),v=(?P<v>{_N})(?:,c=(?P<c>te|be))?(?:,gr=(?P<gr>{_W}))?(?:,e=(?P<e>{_S}))?"
    rf"(?:,n=(?P<n>{_W}))?(?:,h=(?P<h>{_N}))?(?:,p=(?P<p>{_N}))?(?:,l=(?P<l>{_W}))?(?:,b=(?P<b>{_W}))?")


def fields(comment: str) -> dict[str, str]:
    """The `key=value` fields of a slurmx tag ({} for a comment slurmx did not write); `TagError` names what is
    wrong with one that starts like a tag but breaks the grammar.

    The grammar is strict and shared with the site's `job_submit.lua` (tests/fixtures/tag_grammar.json holds the
    strings both are tested on): at most 1024 characters, keys from `g v c gr e n h p l b` each once, `g` and `v`
    present, values in ASCII of the key's form, no spaces, nothing empty. So `l= 600` is no lease anywhere, and
    the plugin and slurmxd agree on which jobs are leased. Lean on purpose: slurmxd reads every comment each cycle.
    """
    if not comment.startswith(PREFIX):
        return {}
    canonical = _canonical(comment)
    if canonical is not None:
        return {key: value for key, value in canonical.groupdict().items() if value is not None}
    return _fields_in_any_order(comment)


def _canonical(comment: str) -> re.Match[str] | None:
    """The one match of a tag in the form `encode` writes (its fields are its groups that matched), else None."""
    if len(comment) > MAX_LENGTH:
        return None
    canonical = _CANONICAL.fullmatch(comment)
    if canonical is None:
        return None
    estimate = canonical.group("e")
    return canonical if estimate is None or 0 < float(estimate) < math.inf else None


def _field(comment: str, key: str) -> str | None:
    """One field of a readable tag (None when absent or the tag is unreadable), read without building the fields:
    the lease layer asks every managed job's `l=` and `b=` each cycle, and trust reads the whole tag after it."""
    canonical = _canonical(comment)
    if canonical is not None:
        return canonical.group(key)
    return readable_fields(comment).get(key)


def _fields_in_any_order(comment: str) -> dict[str, str]:
    """`fields` the long way: any order of keys, and the error that names what breaks the grammar."""
    if len(comment) > MAX_LENGTH:
        raise TagError(f"slurmx tag longer than {MAX_LENGTH} characters")
    if comment.startswith(_V1):
        body = comment[len(_V1):]
    else:
        body = comment[len(PREFIX):]
        head = _VERSION_HEAD.match(body)
        if head is not None:
            number = head.group(1)
            if len(number) <= 18 and int(number) > VERSION:
                raise TagError(f"tag version {number} is newer than this slurmx understands (it reads versions 0 "
                               f"to {VERSION}); upgrade slurmx")
            raise TagError(f"slurmx tag version {number[:20]!r}; expected slurmx:{VERSION}:")
    if not body:
        raise TagError("slurmx tag without fields; expected g=<group>,v=<kind>")
    tags: dict[str, str] = {}
    for item in body.split(","):
        key, sep, value = item.partition("=")
        form = _FORMS.get(key)
        if not sep or form is None:
            raise TagError(f"slurmx tag field {item[:40]!r}; expected <key>=<value> with a key of "
                           f"{' '.join(_FORMS)}")
        if key in tags:
            raise TagError(f"slurmx tag gives {key}= twice")
        pattern, expected = form
        if not pattern.fullmatch(value) or (key == "e" and not 0 < float(value) < math.inf):
            what = "class " if key == "c" else ""
            raise TagError(f"slurmx tag {what}{key}={value[:40]!r}; expected {expected}")
        tags[key] = value
    for key, what in (("g", "g=<group>"), ("v", "v=<kind>")):
        if key not in tags:
            raise TagError(f"slurmx tag without {what}")
    return tags


def readable_fields(comment: str) -> dict[str, str]:
    """`fields`, with {} for a tag this slurmx cannot read: for listings and history, which skip such a job."""
    try:
        return fields(comment)
    except TagError:
        return {}


class TagRead(NamedTuple):
    """The fields of a tag slurmxd reads for every job each cycle (`read`), as the tag writes them. A tuple, not a
    dict: 200,000 of them live through a 100,000-group cycle."""

    group: str  # g=
    kind: str  # v=
    estimate: str | None  # e=, a positive finite number of seconds
    grace: str | None  # gr=
    lease: str | None  # l=
    begin: str | None  # b=


# One string object per distinct kind, estimate, grace and lease: a queue holds few, and each job's read would
# otherwise keep copies of its own.
_VALUES = StringPool()


_Text = TypeVar("_Text", str, str | None)


def _common(text: _Text) -> _Text:
    return None if text is None else _VALUES(text)


def read(comment: str) -> TagRead | None:
    """What slurmxd reads of a job's tag each cycle: the fields `fields` gives for `g v e gr l b`, None for a
    comment slurmx did not write; `TagError` as `fields` raises it."""
    if not comment.startswith(PREFIX):
        return None
    canonical = _canonical(comment)
    if canonical is not None:
        group, kind, estimate, grace, lease, begin = canonical.group("g", "v", "e", "gr", "l", "b")
    else:
        raw = _fields_in_any_order(comment)
        group, kind, estimate, grace, lease, begin = (raw["g"], raw["v"], raw.get("e"), raw.get("gr"), raw.get("l"),
                                                      raw.get("b"))
    return TagRead(group, _common(kind), _common(estimate), _common(grace), _common(lease), begin)


def leased(comment: str) -> bool:
    """Whether a job's tag says it waits under a lease (`l=`): slurmxd starts it, or the lease runs out.

    The one test for it: the daemon's lease handling, drain, `slurmx status` and the plugin (`job_submit.lua`,
    whose `slurmx_read_tag` reads the same grammar) must agree on which jobs are leased."""
    return "l=" in comment and _field(comment, "l") is not None


def decode(comment: str) -> GroupTag | None:
    """The tag of a job's comment, None when slurmx did not write it; `TagError` names what is wrong otherwise."""
    raw = fields(comment)
    if not raw:
        return None
    return GroupTag(raw["g"], raw["v"], raw.get("c", ""), grace_s=_count(raw, "gr"), estimate_s=_seconds(raw, "e"),
                    steps=_count(raw, "n"), payload_hash=raw.get("h", ""), sample_hash=raw.get("p", ""),
                    lease_s=_count(raw, "l"), begin=_count(raw, "b"),
                    version=VERSION if comment.startswith(_V1) else 0)


def begin_floor(comment: str, submit_time: float | None) -> float | None:
    """The user's `--begin` a job's tag carries (`b=`), None when it has none (or its tag cannot be read).

    Bounded as `slurmx submit` writes it: at most `MAX_BEGIN_AHEAD_S` after the job's submission (the comment is
    anyone's to write at submission, and a begin centuries ahead would pin a lease forever)."""
    if "b=" not in comment:
        return None
    return _floor(_field(comment, "b"), submit_time)


def begin_floor_of(tags: TagRead | None, submit_time: float | None) -> float | None:
    """`begin_floor` from a tag already read (`read`)."""
    return None if tags is None else _floor(tags.begin, submit_time)


def _floor(text: str | None, submit_time: float | None) -> float | None:
    if text is None:
        return None
    begin = float(text)
    return min(begin, submit_time + MAX_BEGIN_AHEAD_S) if submit_time else begin


def _count(raw: dict[str, str], key: str) -> int | None:
    text = raw.get(key)
    return None if text is None else int(text)  # `fields` checked its form


def _seconds(raw: dict[str, str], key: str) -> float | None:
    text = raw.get(key)
    return None if text is None else float(text)
