"""The group tag: the `--comment` that marks a Slurm job as a slurmx variant, written and read in one place.

`slurmx submit` writes it, slurmxd, `slurmx preempt`, the profiler and `slurmx jobs` read it. It carries what the
daemon needs from the spec and cannot ask Slurm for: the group, the variant's kind, the class, the job's own grace
period, the runtime estimate, the work in steps and the payload and sample-script hashes.

Form (version 1): `slurmx:1:g=<group>,v=<kind>,c=<te|be>[,gr=<s>][,e=<s>][,n=<steps>],h=<hash>[,p=<hash>][,l=<s>]`.
`l=` marks a managed variant submitted under a lease (`--begin`, see `daemon/lease.py`): its start is slurmxd's
to give until the lease runs out, and Slurm's to give after.
Tags written before versions existed (`slurmx:g=…,v=…`) are read as version 0 so groups already in the queue
survive an upgrade; a tag of a newer version is refused by name rather than half-read. The comment is the user's
to write: every value is a hint, checked where it is used (trust comes from Slurm's UserId and QOS, a grace from
the tag is clamped to the site's limit).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass

__all__ = ["PREFIX", "VERSION", "GroupTag", "TagError", "decode", "encode", "fields", "leased", "readable_fields",
           "script_hash", "whole_number"]

PREFIX = "slurmx:"
VERSION = 1
_V1 = f"{PREFIX}{VERSION}:"


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
    for part in parts:
        if "," in part[part.index("=") + 1:]:
            raise TagError(f"tag value {part!r} holds a comma, which separates tags; use a plain name")
    return _V1 + ",".join(parts)


def fields(comment: str) -> dict[str, str]:
    """The raw `key=value` fields of a slurmx tag ({} for a comment slurmx did not write).

    Lean on purpose: slurmxd reads every job's comment every cycle. Raises `TagError` for a tag of a version this
    slurmx does not know.
    """
    if not comment.startswith(PREFIX):
        return {}
    if comment.startswith(_V1):
        body = comment[len(_V1):]
    else:
        body = comment[len(PREFIX):]
        head, sep, _ = body.partition(":")
        if sep and whole_number(head) is not None:
            raise TagError(f"tag version {head} is newer than this slurmx understands (it reads versions 0 to "
                           f"{VERSION}); upgrade slurmx")
    tags: dict[str, str] = {}
    for item in body.split(","):
        key, sep, value = item.partition("=")
        if sep:
            tags[key.strip()] = value.strip()
    return tags


def readable_fields(comment: str) -> dict[str, str]:
    """`fields`, with {} for a tag this slurmx cannot read: for listings and history, which skip such a job."""
    try:
        return fields(comment)
    except TagError:
        return {}


def leased(comment: str) -> bool:
    """Whether a job's tag says it waits under a lease (`l=`): slurmxd starts it, or the lease runs out.

    The one test for it: the daemon's lease handling, drain, `slurmx status` and the plugin (`job_submit.lua`,
    which looks for `,l=<digits>`) must agree on which jobs are leased."""
    return ",l=" in comment and "l" in readable_fields(comment)


def decode(comment: str) -> GroupTag | None:
    """The tag of a job's comment, None when slurmx did not write it; `TagError` names what is wrong otherwise."""
    raw = fields(comment)
    if not raw:
        if comment.startswith(PREFIX):
            raise TagError("slurmx tag without fields; expected g=<group>,v=<kind>")
        return None
    group_id, kind = raw.get("g", ""), raw.get("v", "")
    if not group_id or not kind:
        raise TagError(f"slurmx tag without {'g=<group>' if not group_id else 'v=<kind>'}")
    job_class = raw.get("c", "")
    if job_class not in ("", "te", "be"):
        raise TagError(f"slurmx tag class c={job_class!r}; expected te or be")
    return GroupTag(group_id, kind, job_class, grace_s=_count(raw, "gr"), estimate_s=_seconds(raw, "e"),
                    steps=_count(raw, "n"), payload_hash=raw.get("h", ""), sample_hash=raw.get("p", ""),
                    lease_s=_count(raw, "l"), version=VERSION if comment.startswith(_V1) else 0)


def _count(raw: dict[str, str], key: str) -> int | None:
    text = raw.get(key)
    if text is None:
        return None
    value = whole_number(text)
    if value is None:
        raise TagError(f"slurmx tag {key}={text!r}; expected a whole number")
    return value


def _seconds(raw: dict[str, str], key: str) -> float | None:
    text = raw.get(key)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise TagError(f"slurmx tag {key}={text!r}; expected seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise TagError(f"slurmx tag {key}={text!r}; expected a positive number of seconds")
    return value
