"""Window semantics as Pulsar's (issue 38, point 8), on the per-message engine.

The harness runs the window runner a Spark task runs (tests/worker/
test_pulsar_windows.py checks it on a worker): the event-time watermark is
the least across input topics and there is none until each has a message; a
late message without ``lateDataTopic`` is dropped, logged and counted; a
message at the watermark is on time; a time length slides by count.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.window import LATE_DROPPED_METRIC
from sparkfn.testing import FunctionHarness

FUNCS = Path(__file__).resolve().parents[1] / "funcs" / "windows.py"
EVENT_TIME = {"timestampExtractorClassName": "windows.ValueTime", "watermarkEmitIntervalMs": 1}


def _harness(window: dict[str, Any], inputs: list[str] | None = None) -> FunctionHarness:
    config = FunctionConfig.build(
        name="win",
        py=str(FUNCS),
        classname="windows.Joined",
        inputs=inputs or ["in"],
        output="out",
        window_config=window,
    )
    return FunctionHarness(config, input_schema="string", output_schema="string")


def test_the_watermark_is_the_least_across_topics_and_waits_for_each() -> None:
    harness = _harness({"windowLengthDurationMs": 10, **EVENT_TIME}, inputs=["a", "b"])
    # Topic a alone, far ahead: no watermark yet, so nothing fires and nothing is late.
    assert harness.send("25:a1", topic="a") == []
    assert harness.send("3:b1", topic="b") == []  # watermark min(25, 3) = 3: none due
    assert harness.send("12:b2", topic="b") == ["3:b1|10"]  # min(25, 12) = 12
    # 11 is behind the watermark (12), not behind topic a's 25: late, and dropped.
    assert harness.send("11:b3", topic="b") == []
    assert harness.send("31:b4", topic="b") == ["12:b2|20"]  # min(25, 31) = 25
    assert harness.send("40:a2", topic="a") == ["25:a1|30"]  # min(40, 31) = 31


def test_late_data_without_a_late_topic_is_dropped_logged_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    harness = _harness({"windowLengthDurationMs": 10, **EVENT_TIME})
    harness.send("15:x")
    assert harness.send("2:old") == []
    assert harness.send("4:older") == []
    assert [m for m in harness.messages if m.kind == "late"] == []
    assert harness.stats.user_metrics[LATE_DROPPED_METRIC].count == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([w for w in warnings if "1 late message(s) dropped" in w]) == 2, warnings


def test_a_message_at_the_watermark_is_on_time() -> None:
    harness = _harness({"windowLengthDurationMs": 10, **EVENT_TIME})
    assert harness.send("10:a") == ["10:a|10"]  # the watermark is 10: window (0, 10] fires
    # At the watermark: not late. Its window fired, so it joins the next one.
    assert harness.send("10:b") == []
    assert harness.stats.user_metrics.get(LATE_DROPPED_METRIC) is None
    assert harness.send("20:c") == ["10:b,20:c|20"]


def test_a_time_length_slides_by_count() -> None:
    harness = _harness({"windowLengthDurationMs": 10, "slidingIntervalCount": 2, **EVENT_TIME})
    assert harness.send("1:a") == []
    assert harness.send("4:b") == ["1:a,4:b|4"]
    assert harness.send("13:c") == []
    # Every second message, those of the last 10 ms before the last.
    assert harness.send("15:d") == ["13:c,15:d|15"]
