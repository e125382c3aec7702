"""Which Slurm versions slurmx reads, and how: every release from 22.05 on, each by the nearest known shape.

The releases slurmx is tested on are listed once, in `versions.txt` beside this module (the cluster script, the
Makefile and the integration runner read the same file with awk or the standard library); RELEASES is that table.

The parsers read both JSON shapes (22.05's openapi v0.0.38 with plain numbers; the data_parser output of later
releases with wrapped numbers and flag lists); what the version decides is the command for the nodes: `sinfo
--json` before 23.02, `scontrol show nodes --json` from it. Recorded fixtures cover every TESTED release. A
release between two known shapes is read as the older one (23.11 as 23.02, 25.05 as 24.11), one newer than the
newest as the newest; either comes with one warning (at start-up, in `slurmx doctor` and `config check`), since
only the TESTED releases were recorded. One older than 22.05 is refused: nothing older was ever read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from slurmx.slurm.errors import SlurmError

__all__ = ["DEFAULT", "OLDEST", "RELEASES", "SHAPES", "TABLE", "TESTED", "Release", "SlurmShape", "UnsupportedSlurm",
           "read_releases", "shape_for", "version_key"]

TABLE = Path(__file__).with_name("versions.txt")


class UnsupportedSlurm(SlurmError):
    """A Slurm release older than slurmx reads; one line naming the version and the fix."""

    def __init__(self, version: str) -> None:
        super().__init__(("scontrol", "--version"), None, f"Slurm {version} is older than {OLDEST}, the oldest "
                         f"release slurmx reads; upgrade Slurm to {OLDEST} or newer")

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class SlurmShape:
    since: str  # the first release with this shape
    nodes_argv: tuple[str, ...]


SHAPES = (SlurmShape("22.05", ("sinfo", "--json")),
          SlurmShape("23.02", ("scontrol", "show", "nodes", "--json")),
          SlurmShape("24.11", ("scontrol", "show", "nodes", "--json")),
          SlurmShape("26.05", ("scontrol", "show", "nodes", "--json")))
OLDEST = SHAPES[0].since


def version_key(version: str) -> tuple[int, int]:
    """'24.11' -> (24, 11): compared as numbers, never as text."""
    match = re.fullmatch(r"(\d+)\.(\d+)", version.strip())
    if match is None:
        raise ValueError(f"not a Slurm major.minor version: {version!r}")
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True, slots=True)
class Release:
    """One tested release: a line of versions.txt."""

    version: str
    suite: str  # the Debian suite of the cluster image
    port_base: int  # the docker cluster's
    native_port_base: int | None  # the native cluster's, None when there is none for this release
    roles: frozenset[str]  # "test" (`make test` runs it), "long" (its long_behaviour tests), "default"


def read_releases(text: str) -> tuple[Release, ...]:
    """The table's lines (blank and '#' lines skipped), oldest first; ValueError naming the line when one is bad."""
    found: list[Release] = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 5:
            raise ValueError(f"{TABLE.name}:{number}: expected 'release suite ports native roles', got {line!r}")
        version, suite, ports, native, roles = fields
        version_key(version)
        found.append(Release(version, suite, int(ports), None if native == "-" else int(native),
                             frozenset(r for r in roles.split(",") if r != "-")))
    if [version_key(r.version) for r in found] != sorted({version_key(r.version) for r in found}):
        raise ValueError(f"{TABLE.name}: releases must be listed once each, oldest first")
    return tuple(found)


RELEASES = read_releases(TABLE.read_text(encoding="utf-8"))
TESTED = tuple(r.version for r in RELEASES)  # versions with recorded output in tests/fixtures/slurm
DEFAULT = next(r.version for r in RELEASES if "default" in r.roles)


def shape_for(version: str) -> tuple[SlurmShape, str]:
    """(the nearest known shape at or below `version`, a warning or ''); raises UnsupportedSlurm below 22.05.

    The warning is '' only for a release in TESTED: one between them is read by a shape whose output was never
    recorded on it (warned, not refused: the shapes change rarely and the parsers skip what they cannot read),
    one beyond the newest by a shape that may have changed since."""
    key = version_key(version)
    if key < version_key(OLDEST):
        raise UnsupportedSlurm(version)
    shape = [s for s in SHAPES if version_key(s.since) <= key][-1]
    newest = SHAPES[-1].since
    consequence = ("if squeue or scontrol output changed, jobs or nodes it cannot read are left out with a warning; "
                   "`slurmx doctor` shows what it reads")
    if key > version_key(newest):
        return shape, (f"Slurm {version} is newer than any release slurmx knows (newest {newest}, tested "
                       f"{', '.join(TESTED)}); reading it as {newest}: {consequence}")
    if key not in {version_key(t) for t in TESTED}:
        return shape, (f"Slurm {version} lies between the releases slurmx is tested on ({', '.join(TESTED)}); "
                       f"reading it as {shape.since}: {consequence}")
    return shape, ""
