"""Unknown options get a "did you mean", and every option the docs show on a slurmx or slurmxd command line exists
(a flag the docs named, `--kinds`, did not)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from slurmx.cli import app
from slurmx.submit.directives import canonical_long_option, split_command_line

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "site-config" / "test-cluster.yaml"
DOCS = sorted([ROOT / "README.md", ROOT / "site-config" / "README.md", ROOT / "examples" / "README.md",
               *(ROOT / "docs").rglob("*.md")])


@pytest.mark.parametrize(("given", "meant"), [("--kinds", "--variants"), ("--variant", "--variants"),
                                              ("--dryrun", "--dry-run"), ("--parseable", "--parsable")])
def test_submit_names_the_option_a_typo_meant(given: str, meant: str, tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\ncommand: echo hi\n")
    result = CliRunner().invoke(app.cli, ["--site", str(SITE), "submit", given, "cpu", str(spec)])
    assert result.exit_code == 2
    assert f"no such option {given} (neither slurmx submit nor sbatch has it); did you mean {meant}?" in result.output


def test_an_sbatch_option_is_not_taken_for_a_typo(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\ncommand: echo hi\n")
    result = CliRunner().invoke(app.cli, ["--site", str(SITE), "submit", "--tiem=5", str(spec)])
    assert "did you mean" not in result.output and "sbatch has no option --tiem" in str(result.exception)


@pytest.mark.parametrize(("command", "argv", "meant"), [
    (app.cli, ["status", "--jsn", "g"], "--json"),
    (app.cli, ["sbumit"], "submit"),
    (app._daemon, ["--dry-rn"], "--dry-run"),
])
def test_other_commands_say_did_you_mean(command: click.Command, argv: list[str], meant: str) -> None:
    result = CliRunner().invoke(command, argv)
    assert result.exit_code == 2 and f"Did you mean '{meant}'?" in result.output, result.output


def _command_lines() -> list[tuple[str, str]]:
    """(doc file, command line) for every `slurmx ...`/`slurmxd ...` in a code span or a code block."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        spans = re.findall(r"`([^`\n]+)`", text)
        blocks = [line for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL) for line in block.splitlines()]
        for line in [*spans, *blocks]:
            line = line.split(" #")[0].strip().removeprefix("$ ")
            if re.match(r"slurmxd?\s+-", line) or re.match(r"slurmx\s+[a-z]", line):
                found.append((doc.relative_to(ROOT).as_posix(), line))
    return found


def _resolve(line: str) -> tuple[click.Command, list[str]] | None:
    """The click command a doc line runs and the words after its name, or None if it is not one to check."""
    try:
        words = shlex.split(line.replace("...", ""))
    except ValueError:
        return None
    command: click.Command = app._daemon if words[0] == "slurmxd" else app.cli
    rest = words[1:]
    while isinstance(command, click.Group):
        while rest and rest[0].startswith("-"):  # the group's own options (--site PATH)
            rest = rest[2:] if rest[0] in ("--site", "--container", "--host") else rest[1:]
        if not rest or rest[0].startswith(("<", "[")):
            return None
        sub = command.get_command(click.Context(command), rest[0])
        if sub is None:
            return None
        command, rest = sub, rest[1:]
    return command, rest


def test_every_option_the_docs_show_exists() -> None:
    wrong = []
    checked = 0
    for doc, line in _command_lines():
        resolved = _resolve(line)
        if resolved is None:
            continue
        command, rest = resolved
        own = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
        if command.name == "submit":  # words after the script are the script's own
            rest = split_command_line(rest)[0]
        for word in rest:
            if word in ("|", ">", "&&", ";"):
                break
            if not word.startswith("--") or word == "--":
                continue
            flag = word.partition("=")[0]
            if flag in own or (command.name == "submit" and canonical_long_option(flag[2:]) is not None):
                checked += 1
                continue
            wrong.append(f"{doc}: `{line}`: {flag}")
    assert not wrong, "options the docs show that do not exist:\n" + "\n".join(wrong)
    assert checked > 20
