"""submitit's documented examples, run unchanged but for the import and the executor, on the local executor
(the same examples run live on the cluster and are compared with these: tests/integration/test_executor_live.py)."""

from __future__ import annotations

from pathlib import Path

from slurmx.executor import Executor
from tests.integration import executor_calls
from tests.integration.submitit_docs import EXPECTED, run_examples


def test_submitits_documented_examples_give_their_results_on_the_local_executor(tmp_path: Path) -> None:
    executor = Executor(tmp_path / "log_test", kind="local")  # was: submitit.AutoExecutor(folder="log_test")
    assert run_examples(executor, executor_calls) == EXPECTED
