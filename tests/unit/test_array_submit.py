"""`slurmx submit --array` as one Slurm job array per kind (issue 32, submit/array.py), and where it cannot be.

K kinds are K sbatch calls whatever the index count, `%N` on each, the scripts rendered with the array guard; a
managed spec with profiling samples keeps one group per index, where a throttle is refused in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmx.core.validation import ConfigError
from slurmx.submit.array import array_text, parse_array, split_throttle
from slurmx.submit.spec import parse_spec
from slurmx.submit.submitter import submit_groups
from tests.unit.test_submit_properties import site


class Sbatch:
    """What submit_groups asks of Slurm: the group folder, then one sbatch per call, each recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.folders: list[str] = []

    def make_private_folder(self, path: str, files: Mapping[str, str]) -> None:
        self.folders.append(path)

    def submit(self, script: str, options: list[str]) -> int:
        self.calls.append((script, list(options)))
        return 500 + len(self.calls)


def _submit(tmp_path: Path, mode: str, slurm_arrays: bool = True, **fields: object) -> tuple[Sbatch, list[object]]:
    slurm = Sbatch()
    spec = parse_spec({"name": "m", "command": "echo $SLURM_ARRAY_TASK_ID", "variants": ["cpu", "gpu"], **fields})
    the_site = site(str(tmp_path))
    groups = submit_groups(spec, the_site.model_copy(update={"daemon": the_site.daemon.model_copy(
        update={"socket": str(tmp_path / "none.sock")})}), slurm, mode=mode,  # type: ignore[arg-type]
        slurm_arrays=slurm_arrays)
    return slurm, list(groups)


@pytest.mark.parametrize("mode", ["managed", "race"])
def test_an_array_is_one_sbatch_per_kind_with_its_throttle_and_one_group(tmp_path: Path, mode: str) -> None:
    slurm, groups = _submit(tmp_path, mode, array="0-9%3")
    assert [options for _, options in slurm.calls] == [["--array=0-9%3"], ["--array=0-9%3"]]
    [group] = groups
    assert group.variants == (("cpu", 501), ("gpu", 502)) and len(slurm.folders) == 1  # type: ignore[attr-defined]
    for script, _ in slurm.calls:
        assert "squeue -h -r -u" in script  # the guard per index
        assert "SLURM_ARRAY_TASK_ID=" not in script  # Slurm sets it in each task, not the script
        assert f"g={group.group_id}," in script  # type: ignore[attr-defined]


def test_a_managed_array_with_profiling_samples_stays_one_group_per_index(tmp_path: Path) -> None:
    slurm, groups = _submit(tmp_path, "managed", array="0-2", work=100)
    assert len(groups) == 3 and not any(o for _, options in slurm.calls for o in options
                                        if o.startswith("--array"))
    with pytest.raises(ConfigError, match=r"a throttle \(%3\) needs one Slurm array per kind"):
        _submit(tmp_path / "t", "managed", array="0-2%3", work=100)


def test_a_caller_that_follows_each_group_by_id_gets_one_group_per_index(tmp_path: Path) -> None:
    slurm, groups = _submit(tmp_path, "race", slurm_arrays=False, array="0-2")  # --wait, submit_array()
    assert len(groups) == 3 and len(slurm.calls) == 6 and all(options == [] for _, options in slurm.calls)
    assert all("SLURM_ARRAY_TASK_ID=" in script for script, _ in slurm.calls)


@given(st.sets(st.integers(0, 200), min_size=1, max_size=40), st.integers(0, 50))
def test_array_text_lists_the_same_indices_and_throttle(indices: set[int], throttle: int) -> None:
    text = array_text(tuple(indices), throttle)
    assert sorted(parse_array(text)) == sorted(indices) and split_throttle(text)[1] == throttle
