"""Memory and duration parsing: the spellings users, site files and Slurm itself produce."""

from __future__ import annotations

import pytest

from slurmx.core.units import UnitError, format_duration, format_mem, parse_duration, parse_mem


@pytest.mark.parametrize(
    ("text", "mb"),
    [
        ("32G", 32 * 1024),
        ("1500M", 1500),
        ("1500", 1500),
        ("1T", 1024 * 1024),
        ("0.5G", 512),
        ("2048K", 2),
        ("16GB", 16 * 1024),
        ("8g", 8 * 1024),
        (4000, 4000),
    ],
)
def test_parse_mem(text: str | int, mb: int) -> None:
    assert parse_mem(text) == mb


@pytest.mark.parametrize("bad", ["", "G", "12X", "-1G", "ten", True])
def test_parse_mem_rejects(bad: object) -> None:
    with pytest.raises(UnitError):
        parse_mem(bad)  # type: ignore[arg-type]


def test_parse_mem_error_names_input() -> None:
    with pytest.raises(UnitError, match="32Q"):
        parse_mem("32Q")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2-00:00:00", 2 * 86400),
        ("1-12", 86400 + 12 * 3600),
        ("1-00:30", 86400 + 30 * 60),
        ("01:00:00", 3600),
        ("90s", 90),
        ("5m", 300),
        ("2h", 7200),
        ("1d", 86400),
        ("30", 30 * 60),
        ("1:30", 90),
        ("1.5m", 90),
        (45, 45),
    ],
)
def test_parse_duration(text: str | int, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "soon", "5 weeks", "1:2:3:4", "UNLIMITED", "-5", -1])
def test_parse_duration_rejects(bad: str | int) -> None:
    with pytest.raises(UnitError):
        parse_duration(bad)


def test_unit_error_is_value_error() -> None:
    assert issubclass(UnitError, ValueError)


def test_format_round_trip() -> None:
    assert format_mem(32 * 1024) == "32G"
    assert format_mem(1500) == "1500M"
    assert format_duration(2 * 86400 + 90) == "2-00:01:30"
    assert format_duration(3600) == "01:00:00"
    for seconds in (0, 59, 3600, 86400 + 1, 5 * 86400 + 7261):
        assert parse_duration(format_duration(seconds)) == seconds
