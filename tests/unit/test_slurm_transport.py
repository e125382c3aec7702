"""The local transport's read of a command's output (one buffer per stream, bytes kept) and the parsers fed bytes."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slurmx.slurm.errors import SlurmTimeout, TransportError
from slurmx.slurm.parse import parse_accounting, parse_jobs, parse_nodes
from slurmx.slurm.transport import LocalTransport
from slurmx.slurm.versions import TESTED

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def test_both_streams_are_read_whole_however_much_each_writes() -> None:
    # past a pipe's 64 KiB on both streams at once: a reader of one stream only would deadlock here
    script = "import sys; sys.stderr.write('e' * 300_000); sys.stdout.write('o' * 3_000_000); sys.stderr.write('!')"
    result = LocalTransport().run([sys.executable, "-c", script])
    assert result.returncode == 0
    assert result.data == b"o" * 3_000_000 and result.stderr == "e" * 300_000 + "!"


def test_a_command_that_does_not_answer_in_time_is_killed_and_said() -> None:
    began = time.monotonic()
    with pytest.raises(SlurmTimeout, match="no answer within"):
        LocalTransport().run([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert time.monotonic() - began < 10


def test_a_missing_command_is_one_clear_error() -> None:
    with pytest.raises(TransportError, match="command not found"):
        LocalTransport().run(["slurmx-no-such-command"])


def test_exit_code_and_stdout_bytes_are_kept() -> None:
    result = LocalTransport().run([sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'a\\xffb'); "
                                   "sys.exit(3)"])
    assert (result.returncode, result.data, result.stdout) == (3, b"a\xffb", "a\ufffdb")


@pytest.mark.parametrize("version", TESTED)
@pytest.mark.parametrize(("parse", "name"), [(parse_jobs, "squeue.json"), (parse_nodes, "nodes.json"),
                                             (parse_accounting, "sacct.json")])
def test_the_parsers_read_bytes_as_they_read_text(version: str, parse: Callable[[str | bytes], list[Any]],
                                                  name: str) -> None:
    path = FIXTURES / version / name
    from_bytes = parse(path.read_bytes())
    assert from_bytes and from_bytes == parse(path.read_text())
