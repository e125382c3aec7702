"""submitit's parameter names: each one means its slurmx key, lands in the sbatch script, or fails in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.core.validation import ConfigError
from slurmx.executor.aliases import ALIASES
from slurmx.executor.params import ExecutorParams
from slurmx.executor.payload import job_script

PARTITIONS = {"cpu": "cpu", "gpu": "gpu", "gpu-big": "gpu"}


def spec_of(**values: Any) -> Any:
    return ExecutorParams().updated(values, PARTITIONS).job_spec("f", "#!/bin/bash\ntrue")


def test_submitits_generic_and_slurm_names_mean_slurmx_keys() -> None:
    spec = spec_of(timeout_min=90, mem_gb=16, cpus_per_task=4, gpus_per_node=2, name="train", nodes=1,
                   tasks_per_node=1, slurm_signal_delay_s=60, slurm_partition="gpu")
    assert (spec.time_s, spec.mem_mb, spec.cpus, spec.gpus, spec.name) == (5400, 16384, 4, "2", "train")
    assert spec.grace_s == 60 and spec.variants == ("gpu", "gpu-big")  # the site's kinds on partition gpu
    assert spec_of(mem_gb=0.5).mem_mb == 512  # submitit: a fraction of a GB becomes MB
    assert spec_of(gpus_per_node=0).gpus is None  # submitit's default asks for no GPU
    assert spec_of(slurm_time=20, slurm_mem="2GB", slurm_job_name="n").time_s == 1200
    assert spec_of(slurm_mem_per_cpu="1G").mem_per_cpu_mb == 1024
    params = ExecutorParams().updated({"slurm_max_num_timeout": 7, "slurm_python": "python3",
                                       "slurm_setup": ["module load cuda"]}, PARTITIONS)
    assert (params.max_requeues, params.python, params.setup) == (7, "python3", ("module load cuda",))
    assert ExecutorParams().updated({"max_num_timeout": 2, "partition": "cpu"}, PARTITIONS).max_requeues == 2
    assert ExecutorParams().updated({"slurm_array_parallelism": 8}, PARTITIONS).array_parallelism == 8
    assert ExecutorParams().updated({"array_parallelism": 3}, PARTITIONS).array_parallelism == 3


def test_additional_parameters_become_sbatch_options_and_a_later_update_replaces_them() -> None:
    params = ExecutorParams().updated({"slurm_additional_parameters": {"mail_type": "END", "mail-user": "a@b"},
                                       "slurm_account": "proj"}, PARTITIONS)
    assert params.job_spec("f", "true").sbatch == ("--mail-type=END", "--mail-user=a@b", "--account=proj")
    params = params.updated({"slurm_additional_parameters": {"wckey": "w"}}, PARTITIONS)
    assert params.job_spec("f", "true").sbatch == ("--wckey=w", "--account=proj")
    # a name of the table inside the dict means what it means outside it
    assert spec_of(slurm_additional_parameters={"partition": "cpu", "time": 5}).variants == ("cpu",)


@pytest.mark.parametrize(("values", "said"), [
    ({"slurm_qos": "high"}, "slurm_qos has no meaning here: slurmx sets the QOS from class="),
    ({"slurm_comment": "x"}, "slurm_comment has no meaning here: the comment carries slurmx's group tag"),
    ({"nodes": 0}, "nodes"),
    ({"slurm_use_srun": True}, "slurm_use_srun=True has no meaning here: the call runs in the batch script"),
    ({"slurm_array_parallelism": -2}, "array_parallelism must be an integer >= 0"),
    ({"stderr_to_stdout": True}, "stderr_to_stdout=True has no meaning here: the call's stdout and stderr"),
    ({"slurm_gres": "gpu:2"}, "slurm_gres has no meaning here: ask for GPUs with gpus="),
    ({"slurm_partition": "debug"}, "slurm_partition='debug': no resource kind of the site runs on it "
                                   "\\(partitions: cpu, gpu\\)"),
    ({"slurm_additional_parameters": {"hold": True}}, "additional_parameters \\(--hold\\): .*set by slurmx"),
    ({"slurm_additional_parameters": "--x"}, "slurm_additional_parameters: expected a dict"),
    ({"slurm_timeout_min": 5}, "unknown key 'slurm_timeout_min'.*and submitit's names"),  # generic: no prefix
    ({"slurm_setup": "a\nb"}, "setup must be a list of shell lines"),
])
def test_a_name_without_a_meaning_here_fails_in_one_line_naming_it(values: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigError, match=said) as info:
        ExecutorParams().updated(values, PARTITIONS)
    assert all("\n" not in e for e in info.value.errors)


def test_a_value_slurmx_has_anyway_is_accepted_as_is() -> None:
    params = ExecutorParams().updated({"slurm_use_srun": False, "stderr_to_stdout": False}, PARTITIONS)
    assert params == ExecutorParams()


def test_a_local_executor_leaves_the_slurm_only_partition_unused() -> None:
    assert ExecutorParams().updated({"slurm_partition": "anything"}, None).job_spec("f", "true").variants is None


_NAMES = sorted({*ALIASES, *(f"slurm_{k}" for k, a in ALIASES.items() if not a.generic)})
_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), st.floats(allow_nan=True),
                    st.text(max_size=12), st.lists(st.text(max_size=6), max_size=3),
                    st.dictionaries(st.sampled_from(["mail_type", "time", "partition", "x-y", "hold"]),
                                    st.one_of(st.booleans(), st.integers(0, 99), st.text(max_size=6)), max_size=3))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(_NAMES), _VALUES, min_size=1, max_size=3))
def test_any_submitit_name_with_any_value_is_understood_or_refused_in_one_line(values: dict[str, Any]) -> None:
    try:
        params = ExecutorParams().updated(values, PARTITIONS)
    except ConfigError as exc:
        assert exc.errors and all("\n" not in e and e.startswith("update_parameters") for e in exc.errors)
    else:
        params.job_spec("f", "#!/bin/bash\ntrue")  # what was accepted makes a valid spec


def test_setup_lines_run_before_the_call_and_a_failing_one_does_not_stop_it(tmp_path: Path) -> None:
    script = job_script(sys.executable, 1, setup=("echo set up > \"$OUT\"", "false", "echo $UNSET_VAR >> \"$OUT\""))
    head = script.split("set -eu", 1)[0]
    assert "# setup" in head and "false" in head
    out = tmp_path / "out"
    # the setup runs; the call's own part then fails (no group folder): only the setup's effect is checked
    subprocess.run(["bash", "-c", script], env={"OUT": str(out), "PATH": "/usr/bin:/bin"}, check=False,
                   capture_output=True)
    assert out.read_text() == "set up\n\n"


def test_submitted_scripts_carry_what_the_submitit_names_asked_for(tmp_path: Path) -> None:
    from slurmx.executor import Executor
    from tests.unit.test_submitter import ok, site, slurm

    adapter, transport = slurm({("sbatch",): [ok("201\n")]})
    ex = Executor(tmp_path / "jobs", site=site(), adapter=adapter)
    ex.update_parameters(mode="race", python="python3", timeout_min=5, mem_gb=2, cpus_per_task=1,
                         slurm_partition="gpu", slurm_additional_parameters={"mail_type": "END"},
                         slurm_setup=["export FOO=1"])
    job = ex.submit(len, "abc")
    assert job.job_ids == [201]
    (script,) = [stdin or "" for _, stdin in transport.calls]
    for line in ("#SBATCH --time=00:05:00", "#SBATCH --mem=2048", "#SBATCH --partition=gpu",
                 "#SBATCH --mail-type=END", "export FOO=1"):
        assert line in script, line


def test_begin_is_the_spec_s_key_whether_given_bare_or_in_additional_parameters() -> None:
    for values in ({"begin": "now+1hour"}, {"slurm_additional_parameters": {"begin": "now+1hour"}}):
        assert ExecutorParams().updated(values, PARTITIONS).job_spec("f", "true").begin == "now+1hour"
