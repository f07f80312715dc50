"""Pulsar's ``windowConfig``: which messages make a window and when it fires.

Field names are Pulsar's (``windowLengthCount``, ``maxLagMs``, ...), in
camelCase or snake_case; ``dropLateData`` is sparkfn's own. What each means
at run time: :mod:`sparkfn.runtime.function.window` and docs/functions.md
("Window functions").

>>> WindowConfig(windowLengthCount=3).sliding_count
3
>>> WindowConfig(window_length_duration_ms=1000, sliding_interval_duration_ms=500).kind
'time'
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from sparkfn.api.errors import ConfigError
from sparkfn.config.names import TopicName
from sparkfn.config.pulsar_fields import CLASS_NAME

# Pulsar's defaults for event time (WindowConfigUtils).
DEFAULT_WATERMARK_EMIT_INTERVAL_MS = 1000
DEFAULT_MAX_LAG_MS = 0
_WINDOW_GUARANTEES = ("atleast_once", "atmost_once", "at_least_once", "at_most_once")


def _whole(value: Any, field: str) -> Any:
    """A whole number given as one, or as its text (a CLI flag's); bools and fractions refused."""
    if isinstance(value, bool):
        msg = f"{field} must be a whole number (got {value!r})"
        raise ValueError(msg)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class WindowConfig(BaseModel):
    """A function's windows: their length and slide in messages or milliseconds,
    and, for event time, the timestamp extractor, watermark and lateness."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    window_length_count: int | None = Field(default=None, ge=1, le=10_000_000)
    window_length_duration_ms: int | None = Field(default=None, ge=1)
    sliding_interval_count: int | None = Field(default=None, ge=1, le=10_000_000)
    sliding_interval_duration_ms: int | None = Field(default=None, ge=1)
    late_data_topic: str | None = None
    # sparkfn's own, from when late messages went to {name}-late by default: late
    # messages are dropped (logged and counted), as they are without lateDataTopic.
    drop_late_data: bool = False
    max_lag_ms: int | None = Field(default=None, ge=0)
    watermark_emit_interval_ms: int | None = Field(default=None, ge=1)
    timestamp_extractor_class_name: str | None = None
    actual_window_function_class_name: str | None = None
    processing_guarantees: str | None = None

    @field_validator(
        "window_length_count",
        "window_length_duration_ms",
        "sliding_interval_count",
        "sliding_interval_duration_ms",
        "max_lag_ms",
        "watermark_emit_interval_ms",
        mode="before",
    )
    @classmethod
    def _numbers(cls, value: Any, info: Any) -> Any:
        return _whole(value, to_camel(info.field_name))

    @field_validator("late_data_topic")
    @classmethod
    def _topic(cls, value: str | None) -> str | None:
        if not value:
            return None
        try:
            return str(TopicName.parse(value, field="lateDataTopic"))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("timestamp_extractor_class_name", "actual_window_function_class_name")
    @classmethod
    def _class_name(cls, value: str | None, info: Any) -> str | None:
        if not value:
            return None
        if not CLASS_NAME.match(value):
            msg = f"{to_camel(info.field_name)} {value!r} is not a module.Class name"
            raise ValueError(msg)
        return value

    @field_validator("processing_guarantees", mode="before")
    @classmethod
    def _guarantee(cls, value: Any) -> Any:
        if value is None:
            return None
        text = str(value).strip().lower()
        if text not in _WINDOW_GUARANTEES:
            msg = (
                f"processingGuarantees {value!r} is not one of Pulsar's window guarantees "
                "(ATLEAST_ONCE, ATMOST_ONCE)"
            )
            raise ValueError(msg)
        return text.replace("atleast", "at_least").replace("atmost", "at_most")

    @model_validator(mode="after")
    def _check(self) -> WindowConfig:
        count, duration = self.window_length_count, self.window_length_duration_ms
        if count is None and duration is None:
            msg = "windowConfig needs windowLengthCount or windowLengthDurationMs; got neither"
            raise ValueError(msg)
        if count is not None and duration is not None:
            msg = "windowLengthCount and windowLengthDurationMs are both set; set one"
            raise ValueError(msg)
        if count is not None:
            if self.sliding_interval_duration_ms is not None:
                msg = (
                    "slidingIntervalDurationMs slides a time window; this one is counted "
                    "(windowLengthCount): use slidingIntervalCount"
                )
                raise ValueError(msg)
            if self.sliding_interval_count is not None and self.sliding_interval_count > count:
                msg = (
                    f"slidingIntervalCount {self.sliding_interval_count} is more than "
                    f"windowLengthCount {count}: messages between windows would be in none"
                )
                raise ValueError(msg)
            if self.timestamp_extractor_class_name is not None:
                msg = (
                    "timestampExtractorClassName gives event time to time windows; this one "
                    "is counted (windowLengthCount)"
                )
                raise ValueError(msg)
        if duration is not None:
            # slidingIntervalCount with it: the last duration's messages, every N messages.
            if self.sliding_interval_count and self.sliding_interval_duration_ms:
                msg = "slidingIntervalCount and slidingIntervalDurationMs are both set; set one"
                raise ValueError(msg)
            slide = self.sliding_interval_duration_ms
            if slide is not None and slide > duration:
                msg = (
                    f"slidingIntervalDurationMs {slide} is more than windowLengthDurationMs "
                    f"{duration}: messages between windows would be in none"
                )
                raise ValueError(msg)
        if not self.event_time:
            for name, value in (
                ("lateDataTopic", self.late_data_topic),
                ("dropLateData", self.drop_late_data or None),
                ("maxLagMs", self.max_lag_ms),
                ("watermarkEmitIntervalMs", self.watermark_emit_interval_ms),
            ):
                if value is not None:
                    msg = (
                        f"{name} applies to event time, which needs "
                        "timestampExtractorClassName (a time window's messages are "
                        "otherwise timed as they are processed, and never late)"
                    )
                    raise ValueError(msg)
        if self.late_data_topic and self.drop_late_data:
            msg = f"dropLateData contradicts lateDataTopic {self.late_data_topic}; choose one"
            raise ValueError(msg)
        return self

    @property
    def kind(self) -> Literal["count", "time"]:
        """``count``: windows of messages; ``time``: of milliseconds."""
        return "count" if self.window_length_count is not None else "time"

    @property
    def counted_slide(self) -> bool:
        """A time window slid by count (``windowLengthDurationMs`` with
        ``slidingIntervalCount``): it fires every that many messages."""
        return self.kind == "time" and self.sliding_interval_count is not None

    @property
    def event_time(self) -> bool:
        """Whether messages are timed by their own timestamps (else as they are processed)."""
        return self.timestamp_extractor_class_name is not None

    @property
    def length(self) -> int:
        """The window's length, in messages or milliseconds."""
        return self.window_length_count or self.window_length_duration_ms or 0

    @property
    def sliding_count(self) -> int:
        """Messages between two counted windows (tumbling: the length)."""
        return self.sliding_interval_count or self.window_length_count or 0

    @property
    def slide(self) -> int:
        """The slide, in messages or milliseconds (tumbling: the length)."""
        if self.kind == "count":
            return self.sliding_count
        return self.sliding_interval_duration_ms or self.window_length_duration_ms or 0

    @property
    def max_lag(self) -> int:
        """How far (ms) the watermark trails the latest timestamp seen (Pulsar's maxLagMs)."""
        return DEFAULT_MAX_LAG_MS if self.max_lag_ms is None else self.max_lag_ms

    @property
    def watermark_interval(self) -> int:
        """The least time (ms) between two watermark advances."""
        given = self.watermark_emit_interval_ms
        return DEFAULT_WATERMARK_EMIT_INTERVAL_MS if given is None else given

    @property
    def ticks_ms(self) -> int | None:
        """How often the function's windows must be looked at without input (processing
        time windows fire on the clock); ``None``: only when messages arrive."""
        if self.kind == "time" and not self.event_time and not self.counted_slide:
            return self.slide
        return None

    def check_for(
        self,
        *,
        inputs: list[str],
        classname: str | None,
        processing_guarantees: str,
        late_data_target: str | None,
    ) -> None:
        """Whether this window agrees with its function's fields; ``ValueError`` naming both.

        Called by :class:`~sparkfn.config.function.FunctionConfig`'s own check:
        a late-data topic that is an input would loop, and a class name or
        guarantee given in both places must be the same.
        """
        late = late_data_target
        if late is not None and late in inputs:
            msg = f"windowConfig.lateDataTopic {late} is an input of the function; that would loop"
            raise ValueError(msg)
        actual = self.actual_window_function_class_name
        if actual is not None and classname is not None and actual != classname:
            msg = (
                f"windowConfig.actualWindowFunctionClassName {actual!r} differs from "
                f"classname {classname!r}; give one"
            )
            raise ValueError(msg)
        given = self.processing_guarantees
        if given is not None and given != processing_guarantees:
            msg = (
                f"windowConfig.processingGuarantees {given} differs from the function's "
                f"processing_guarantees {processing_guarantees}; give one"
            )
            raise ValueError(msg)
