"""A read-only probe of the shapes slurmx reads from a live Slurm: does each field its parsers read appear?

The parsers declare the fields they read (`parse.py`: the msgspec structs behind squeue, the node listing and
sacct); a field a release stops writing is read as its default without an error, which is how a new release
would quietly change what slurmxd sees. `slurmx doctor` runs the same commands slurmx runs (read-only), and lists
per command the fields no record carries. Fields only some records carry (an array task's, a running job's) are
present as soon as one record has them; with no record at all the probe says it could not tell.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from slurmx.slurm import parse
from slurmx.slurm.errors import SlurmError
from slurmx.slurm.transport import Transport

__all__ = ["Finding", "missing_fields", "probe"]

# Fields a tested release leaves out of every record, which the parsers read from elsewhere there (recorded in
# tests/fixtures/slurm): 22.05's squeue has no `hold` (its job state says it) and its sacct no `restart_cnt`; from
# 24.11 the node state's flags are inside `state`.
_OPTIONAL = {"squeue": frozenset({"hold"}), "nodes": frozenset({"state_flags"}), "sacct": frozenset({"restart_cnt"})}


@dataclass(frozen=True)
class Finding:
    """One command's verdict: `ok`, and the line that says it (the fields missing, or why it could not tell)."""

    command: str
    ok: bool
    line: str


def missing_fields(records: Sequence[Any], struct: type[msgspec.Struct], optional: frozenset[str] = frozenset()) \
        -> list[str]:
    """The fields of `struct` that no record (a JSON object) carries, in declaration order, but `optional`."""
    present: set[str] = set()
    for record in records:
        if isinstance(record, dict):
            present.update(record)
    return [f.encode_name for f in msgspec.structs.fields(struct)
            if f.encode_name not in present and f.name not in optional]


def probe(transport: Transport, nodes_argv: Sequence[str], timeout: float = 60.0) -> list[Finding]:
    """Run squeue, the node listing (`nodes_argv`, the version's) and sacct as slurmx does, and say per command
    which fields slurmx reads are absent from every record."""
    commands = (("squeue", ["squeue", "--json", "--states=all"], "jobs", parse._SqueueJob),
                ("nodes", list(nodes_argv), "nodes", parse._NodeFields),
                ("sacct", ["sacct", "--json", "--allusers", "--starttime=now-7days"], "jobs", parse._SacctFields))
    findings = []
    for name, argv, key, struct in commands:
        shown = " ".join(argv)
        try:
            result = transport.run(argv, timeout=timeout)
        except SlurmError as exc:
            findings.append(Finding(shown, False, f"{shown}: {exc}"))
            continue
        if result.returncode != 0:
            said = " ".join(result.stderr.split())[:200] or f"exit {result.returncode}"
            findings.append(Finding(shown, False, f"{shown}: {said}"))
            continue
        try:
            records = json.loads(result.stdout).get(key) or []
        except (ValueError, AttributeError):
            findings.append(Finding(shown, False, f"{shown}: not a JSON object with {key!r}"))
            continue
        if not records:
            findings.append(Finding(shown, True, f"{shown}: no record to check its fields against (none in it now)"))
            continue
        missing = missing_fields(records, struct, _OPTIONAL[name])
        declared = len(msgspec.structs.fields(struct))
        findings.append(Finding(shown, not missing, f"{shown}: all {declared} fields slurmx reads are there "
                                f"({len(records)} records)" if not missing else
                                f"{shown}: no record carries {', '.join(missing)}: slurmx reads "
                                f"{'it' if len(missing) == 1 else 'them'} as unset (check this release's changes)"))
    return findings
