"""`slurmx submit` reads what an sbatch user writes as sbatch reads it (issue 19, "sbatch semantics").

Time limits: a bare number is minutes wherever a time limit is written (a spec's `time: 30`, `--time=30`,
`#SBATCH --time=30`, a site kind's `time`); grace periods and estimates stay durations whose bare YAML number is
seconds, as documented.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.core.config import SiteConfig, load_site_config, parse_site_config
from slurmx.core.units import ClockNumber, UnitError, parse_time_limit
from slurmx.core.validation import ConfigError
from slurmx.submit.entry import build_spec
from slurmx.submit.spec import load_spec, parse_spec


def site() -> SiteConfig:
    return parse_site_config({
        "cluster": {"name": "t"},
        "resources": {
            "cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"},
            "gpu": {"partition": "gpu", "cpus": 2, "mem": "500M", "gres": "gpu:1"},
            "accel": {"partition": "accel", "cpus": 1, "mem": "500M", "gres": "accel:1"},
        },
        "classes": {"te": {"qos": "short"}, "be": {"qos": "scavenger"}},
        "preemption": {"grace": "30s"},
    })


# ---------------------------------------------------------------------------------------------- time in minutes


@pytest.mark.parametrize(("value", "seconds"), [
    (30, 1800), (1.5, 90), ("30", 1800), ("90s", 90), ("5m", 300), ("2h", 7200), ("1:30", 90),
    ("1:30:00", 5400), ("2-00", 172800), (ClockNumber(5400, "1:30:00"), 5400), (ClockNumber(90, "1:30"), 90),
])
def test_a_time_limit_reads_a_bare_number_as_minutes(value: str | int | float, seconds: int) -> None:
    assert parse_time_limit(value) == seconds


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), 10**20, True, "soon", [30],
                                   ClockNumber(0, "1:2:3:4")])
def test_a_bad_time_limit_is_a_unit_error(value: object) -> None:
    with pytest.raises(UnitError):
        parse_time_limit(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(("line", "seconds"), [
    ("time: 30", 1800), ("time: '30'", 1800), ("time: 1:30:00", 5400), ("time: 1:30", 90), ("time: 45s", 45),
    ("time: 0.5", 30), ("time: 1-00:00:00", 86400),
])
def test_a_spec_s_time_means_what_sbatch_time_means(tmp_path: Path, line: str, seconds: int) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(f"name: j\ncommand: 'true'\n{line}\noverrides: {{gpu: {{{line}}}}}\n")
    spec = load_spec(path)
    assert spec.time_s == seconds and spec.overrides["gpu"].time_s == seconds


def test_grace_and_estimates_keep_their_seconds(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("name: j\ncommand: 'true'\ntime: 30\ngrace: 30\nestimates: {cpu: 600}\n")
    spec = load_spec(path)
    assert (spec.time_s, spec.grace_s, spec.estimates) == (1800, 30, {"cpu": 600})


def test_the_python_api_reads_time_as_minutes_too() -> None:
    assert parse_spec({"name": "j", "command": "true", "time": 30}).time_s == 1800


def test_the_command_line_a_directive_and_the_spec_agree(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --time=30\ntrue\n")
    yaml_spec = tmp_path / "job.yaml"
    yaml_spec.write_text("name: j\ncommand: 'true'\ntime: 30\n")
    from_directive = build_spec(str(script), [], [], site())[0].time_s
    from_cli = build_spec(str(script), ["--time=30"], [], site())[0].time_s
    from_yaml = build_spec(str(yaml_spec), [], [], site())[0].time_s
    assert from_directive == from_cli == from_yaml == 1800


def test_a_site_kind_s_time_is_minutes_and_grace_stays_seconds(tmp_path: Path) -> None:
    path = tmp_path / "site.yaml"
    path.write_text("cluster: {name: t}\nresources:\n  cpu: {partition: cpu, cpus: 1, mem: 1G, time: 90}\n"
                    "  gpu: {partition: gpu, cpus: 1, mem: 1G, time: 1:30:00}\npreemption: {grace: 30}\n")
    cfg = load_site_config(path)
    assert (cfg.kind("cpu").time_s, cfg.kind("gpu").time_s, cfg.preemption.grace_s) == (5400, 5400, 30)


@settings(max_examples=200, deadline=None, database=None)
@given(st.integers(1, 10**6))
def test_property_every_spelling_of_n_minutes_agrees(minutes: int) -> None:
    hours, mins = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    spellings: list[str | int] = [minutes, str(minutes), f"{minutes}m", f"{days}-{hours:02d}:{mins:02d}:00"]
    assert {parse_time_limit(s) for s in spellings} == {minutes * 60}
    assert parse_spec({"name": "j", "command": "true", "time": minutes}).time_s == minutes * 60


def test_a_config_error_is_raised_for_a_bad_time_in_a_spec() -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec({"name": "j", "command": "true", "time": -3}, "job.yaml")
    assert str(info.value) == "job.yaml: time: expected a finite, non-negative time limit, got -3"
