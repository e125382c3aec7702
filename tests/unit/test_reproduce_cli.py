"""`slurmx reproduce`: the paper list, one-line errors, and the report a reproduction module returns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

import slurmx.cli.reproduce as reproduce_cli
import slurmx.reproduce as reproduce
from slurmx.cli.app import cli
from slurmx.cli.reproduce import render
from slurmx.reproduce import Claim, Reproduction, ResultTable, pct


def test_the_list_names_every_paper() -> None:
    result = CliRunner().invoke(cli, ["reproduce", "--list"])
    assert result.exit_code == 0
    assert [line.split()[0] for line in result.output.splitlines()] == list(reproduce.PAPERS)


def test_an_unknown_paper_is_one_line_naming_the_valid_ones() -> None:
    with pytest.raises(reproduce.UnknownPaper, match="unknown paper 'alox'; expected one of allox, fitgpp"):
        reproduce.load("alox")


def test_pct() -> None:
    assert pct(0.953) == "95.3%" and pct(-0.1804, 2) == "-18.04%"


def _report() -> Reproduction:
    return Reproduction(
        "demo", "Demo paper", conditions=["10 nodes"], assumptions=["arrivals are Poisson"],
        claims=[Claim("JCT reduction vs X", "95%", "91.0%", True, "ours >= 90%"),
                Claim("ordering A < B", "A < B", "B < A", False, "A < B")],
        tables=[ResultTable("raw", ("policy", "JCT"), (("A", "10"), ("B", "9")))])


def test_the_report_shows_conditions_assumptions_claims_and_failed_checks() -> None:
    console = Console(record=True, width=160)
    render(_report(), console)
    text = console.export_text()
    for piece in ("10 nodes", "arrivals are Poisson", "JCT reduction vs X", "95%", "91.0%", "ours >= 90%", "NO",
                  "1 of 2 checks failed"):
        assert piece in text


def test_strict_exits_1_on_a_failed_check_and_json_holds_the_whole_report(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(reproduce_cli, "run", lambda paper, options: _report())
    out = tmp_path / "r.json"
    result = CliRunner().invoke(cli, ["reproduce", "allox", "--quick", "--json", str(out), "--strict"])
    assert result.exit_code == 1
    document = json.loads(out.read_text())
    assert document["claims"][1]["holds"] is False and document["conditions"] == ["10 nodes"]
