"""`slurmx doctor`'s conformance probe: the fields slurmx's parsers read, checked against what Slurm writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmx.slurm import parse
from slurmx.slurm.conformance import _OPTIONAL, missing_fields, probe
from slurmx.slurm.transport import CommandResult
from slurmx.slurm.versions import TESTED

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
COMMANDS = {"squeue": ("squeue.json", "jobs", parse._SqueueJob), "nodes": ("nodes.json", "nodes", parse._NodeFields),
            "sacct": ("sacct.json", "jobs", parse._SacctFields)}


@pytest.mark.parametrize("version", TESTED)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_field_slurmx_reads_is_in_the_recorded_output_of_each_tested_release(version: str,
                                                                                   command: str) -> None:
    name, key, struct = COMMANDS[command]
    records = json.loads((FIXTURES / version / name).read_text())[key]
    assert missing_fields(records, struct, _OPTIONAL[command]) == []


class _Recorded:
    """Slurm's recorded answers (24.11) to the probe's commands, one of them with a field taken out."""

    def __init__(self, drop: str = "") -> None:
        self.drop = drop
        self.asked: list[list[str]] = []

    def run(self, argv: list[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
        self.asked.append(list(argv))
        name = {"squeue": "squeue.json", "scontrol": "nodes.json", "sacct": "sacct.json"}[argv[0]]
        data = json.loads((FIXTURES / "24.11" / name).read_text())
        for record in data.get("jobs") or data.get("nodes") or []:
            record.pop(self.drop, None)
        return CommandResult(tuple(argv), 0, json.dumps(data), "")


def test_the_probe_runs_slurmx_s_own_read_only_commands_and_names_a_field_no_record_carries() -> None:
    transport = _Recorded(drop="comment")
    findings = probe(transport, ("scontrol", "show", "nodes", "--json"))  # type: ignore[arg-type]
    assert [a[0] for a in transport.asked] == ["squeue", "scontrol", "sacct"]
    squeue, nodes, sacct = findings
    assert not squeue.ok and "no record carries comment: slurmx reads it as unset" in squeue.line
    assert nodes.ok and "fields slurmx reads are there (5 records)" in nodes.line
    assert not sacct.ok and "comment" in sacct.line
    assert probe(_Recorded(), ("scontrol", "show", "nodes", "--json"))[0].ok  # type: ignore[arg-type]
