"""The cadence of Slurm's schedulers read from `scontrol show config` (recorded on each version's test cluster,
whose slurm.conf sets bf_interval=5), and one-line errors for settings the model cannot read."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmx.policies.base import backfill_passes
from slurmx.policies.slurm_model import slurm_model
from slurmx.slurm.scheduler_config import ConfigValueError, backfill_settings, parse_show_config

FIXTURES = Path(__file__).parents[1] / "fixtures" / "slurm"
RECORDED = sorted(p.parent.name for p in FIXTURES.glob("*/show-config.txt"))


@pytest.mark.parametrize("version", RECORDED)
def test_the_test_clusters_cadence_is_read_with_slurms_defaults_for_the_rest(version: str) -> None:
    config = parse_show_config((FIXTURES / version / "show-config.txt").read_text(encoding="utf-8"))
    settings = backfill_settings(config)
    assert settings.backfill and settings.stated == ("bf_interval",)
    assert (settings.interval_s, settings.window_s, settings.resolution_s, settings.max_job_test) == (5, 86_400, 60,
                                                                                                   500)


def test_recorded_on_at_least_two_versions() -> None:
    assert len(RECORDED) >= 2


def test_the_site_settings_become_the_model_policy() -> None:
    settings = backfill_settings({"SchedulerType": "sched/backfill",
                                  "SchedulerParameters": "defer,bf_window=2880,bf_resolution=300,bf_max_job_test=1000,"
                                                         "bf_continue,bf_interval=60"})
    policy, params = slurm_model(settings)
    assert params == {"backfill": "easy", "cadence": "slurm", "backfill_interval_s": 60.0,
                      "backfill_window_s": 172_800.0, "backfill_resolution_s": 300.0, "backfill_depth": 1000}
    passes = backfill_passes(policy)
    assert passes is not None and passes.period_s == 60
    builtin, params = slurm_model(backfill_settings({"SchedulerType": "sched/builtin"}))
    assert params == {"backfill": "none"} and backfill_passes(builtin) is None


def test_no_parameters_at_all_are_slurms_defaults() -> None:
    settings = backfill_settings({"SchedulerParameters": "(null)"})
    assert (settings.interval_s, settings.window_s, settings.resolution_s, settings.max_job_test, settings.stated) == (
        30, 86_400, 60, 500, ())


@pytest.mark.parametrize(("config", "said"), [
    ({"SchedulerType": "sched/hold"}, "SchedulerType 'sched/hold'"),
    ({"SchedulerParameters": "bf_interval=-5"}, "bf_interval='-5'"),
    ({"SchedulerParameters": "bf_window=1e3"}, "bf_window='1e3'"),
    ({"SchedulerParameters": "bf_interval=0"}, "bf_interval=0"),
])
def test_settings_the_model_cannot_read_are_refused_in_one_line(config: dict[str, str], said: str) -> None:
    with pytest.raises(ConfigValueError) as refused:
        backfill_settings(config, "cfg.txt")
    assert said in str(refused.value) and str(refused.value).startswith("cfg.txt: ") and "\n" not in str(refused.value)


@given(st.text(max_size=300))
def test_any_text_is_read_or_refused_in_one_line(text: str) -> None:
    try:
        settings = backfill_settings(parse_show_config(text))
    except ConfigValueError as exc:
        assert "\n" not in str(exc)
    else:
        assert settings.interval_s >= 1 and settings.max_job_test >= 1
