"""The one duration grammar, as configs and command-line options read it."""

from __future__ import annotations

from datetime import timedelta

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st

from sparkfn.api.errors import ConfigError
from sparkfn.cli import params
from sparkfn.config.durations import format_duration, parse_duration, parse_duration_seconds
from sparkfn.config.function import FunctionConfig
from sparkfn.config.policy import FailurePolicy


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("2s", 2),
        ("30m", 1800),
        ("12h", 43200),
        ("7d", 604800),
        ("2w", 1209600),
        ("1h30m", 5400),
        ("1h 30m", 5400),
        ("1m30s250ms", 90.25),
        (" 500 ms ", 0.5),
        ("7D", 604800),
        ("0s", 0),
    ],
)
def test_whole_numbers_with_units_are_summed(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)
    assert parse_duration(text, bare_seconds=True) == timedelta(seconds=seconds)


@pytest.mark.parametrize(("text", "seconds"), [("0.5", 0.5), ("2", 2), (" 10 ", 10), (".25", 0.25)])
def test_a_plain_number_is_seconds_only_where_asked(text: str, seconds: float) -> None:
    assert parse_duration(text, bare_seconds=True) == timedelta(seconds=seconds)
    with pytest.raises(ValueError, match="whole numbers with a unit"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["", " ", "7x", "d", "ms", "-1h", "1.5h", "1h30", "1e3", "2 s s"])
def test_anything_else_is_refused_quoting_the_text_and_the_grammar(text: str) -> None:
    with pytest.raises(
        ValueError, match=r"is not a duration; use .*\(ms, s, m, h, d, w\)"
    ) as caught:
        parse_duration(text, bare_seconds=True)
    assert repr(text) in str(caught.value)


@given(st.integers(min_value=0, max_value=10**13))
def test_whole_milliseconds_format_and_parse_back(ms: int) -> None:
    duration = timedelta(milliseconds=ms)
    assert parse_duration(format_duration(duration)) == duration


def test_format_picks_the_largest_whole_unit_up_to_days() -> None:
    shown = [format_duration(timedelta(seconds=s)) for s in (0.25, 90, 3600, 14 * 86400)]
    assert shown == ["250ms", "90s", "1h", "14d"]


def test_config_fields_take_numbers_and_durations_and_name_the_field() -> None:
    assert parse_duration_seconds(0.5, "batch_timeout") == 0.5
    assert parse_duration_seconds(3, "batch_timeout") == 3.0
    assert parse_duration_seconds("1m", "batch_timeout") == 60.0
    with pytest.raises(ValueError, match="batch_timeout must not be negative; got -1"):
        parse_duration_seconds(-1, "batch_timeout")
    with pytest.raises(ValueError, match="batch_timeout: 'True' is not a duration"):
        parse_duration_seconds(True, "batch_timeout")


def test_configs_read_every_spelling_the_cli_passes_through() -> None:
    for text, seconds in [("500ms", 0.5), ("0.5", 0.5), ("2s", 2.0)]:
        config = FunctionConfig.build(
            name="f", classname="m.f", inputs=["in"], trigger_interval=text
        )
        assert config.trigger_interval == seconds
    policy = FailurePolicy(restart_window="1h30m", backoff_initial="200ms")
    assert (policy.restart_window, policy.backoff_initial) == (5400.0, 0.2)
    with pytest.raises(ConfigError, match=r"trigger_interval.*'soon' is not a duration"):
        FunctionConfig.build(name="f", classname="m.f", inputs=["in"], trigger_interval="soon")


def test_the_cli_reads_the_same_grammar_but_wants_a_unit_and_a_positive_value() -> None:
    for text in ("45s", "1h30m", "7D", "500ms"):
        assert params.parse_duration(text) == parse_duration(text)
    for text, why in [("7", "whole numbers with a unit"), ("0s", "must be positive")]:
        with pytest.raises(typer.BadParameter, match=why):
            params.parse_duration(text)
    assert params.format_duration_ms(7 * 86_400_000) == "7d"
    assert params.format_duration_ms(None) == "-"
