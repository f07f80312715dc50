"""Status and stats of a function, sink or source, in Pulsar's JSON shapes.

``FunctionRun.status()`` and ``SinkRun.status()`` return a :class:`FunctionStatus`,
``stats()`` a :class:`FunctionStats`, and a source run's ``status()`` a
:class:`SourceStatus`. Attributes are snake_case; the JSON, which
``--json-status`` prints and the worker's REST API returns, has Pulsar's
camelCase keys::

    >>> status = run.status()
    >>> status.instances[0].status.num_successfully_processed
    30
    >>> status.model_dump(by_alias=True, mode="json")["instances"][0]["status"]["state"]
    'STOPPED'

The function shapes follow Pulsar's ``FunctionStatus`` and ``FunctionStatsImpl``
(class names included: :class:`FunctionInstanceStatusData` is Pulsar's
``FunctionInstanceStatusData``), extended with each instance's ``state``,
``deathException``, ``numFatalExceptions`` and ``numDeadLettered``, and the
run's ``state`` and ``unclosedObjects`` (user objects a stop could not close
in time). Every model is frozen: a status is a snapshot, read again for news.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator
from pydantic.alias_generators import to_camel

from sparkfn.api.lifecycle import DeathCause, RunState

__all__ = [
    "DeathException",
    "ExceptionInformation",
    "FunctionInstanceStats",
    "FunctionInstanceStatsData",
    "FunctionInstanceStatsDataBase",
    "FunctionInstanceStatus",
    "FunctionInstanceStatusData",
    "FunctionStats",
    "FunctionStatus",
    "SourceInstanceStats",
    "SourceInstanceStatus",
    "SourceStatus",
    "UserMetricSummary",
]


_FLAT_METRIC = re.compile(r"user_metric_(.+)_(sum|count|min|max)")


class _Shape(BaseModel):
    """JSON keys are the camelCase aliases; Python reads and builds by attribute name."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )


class ExceptionInformation(_Shape):
    """One of an instance's latest user or system exceptions.

    Pulsar's ``exceptionString`` and ``timestampMs``, plus the type, message,
    traceback and the id of the message that raised it.
    """

    exception_string: str  # "Type: message"
    timestamp_ms: int
    type: str
    message: str
    traceback: str
    message_id: str | None = None


class DeathException(_Shape):
    """Why an instance died (:class:`~sparkfn.api.lifecycle.DeathCause`), as status shows it."""

    type: str
    message: str
    traceback: str = ""
    origin: str = ""  # "fatal", "connector" or "failure"
    thread: str = ""

    @classmethod
    def of(cls, death: DeathCause | None) -> DeathException | None:
        """The shown form of ``death`` (``None`` for none)."""
        if death is None:
            return None
        return cls(
            type=death.type,
            message=death.message,
            traceback=death.traceback,
            origin=death.origin,
            thread=death.thread,
        )


# --- functions and sinks ----------------------------------------------------------------


class FunctionInstanceStatusData(_Shape):
    """One instance's status.

    Pulsar's fields, then ``numFatalExceptions``, ``numDeadLettered``,
    ``state`` and ``deathException``.
    """

    running: bool = False
    error: str = ""  # why it is in ERROR, else ""
    num_restarts: int = 0
    num_received: int = 0
    num_successfully_processed: int = 0
    num_user_exceptions: int = 0
    latest_user_exceptions: list[ExceptionInformation] = []
    num_system_exceptions: int = 0
    latest_system_exceptions: list[ExceptionInformation] = []
    num_fatal_exceptions: int = 0
    num_dead_lettered: int = 0
    average_latency: float = 0.0  # ms, over the successfully processed messages
    last_invocation_time: int = 0  # epoch ms; 0 before the first
    worker_id: str = ""
    state: RunState = RunState.CREATED
    death_exception: DeathException | None = None


class FunctionInstanceStatus(_Shape):
    """An instance id and its status."""

    instance_id: int
    status: FunctionInstanceStatusData


class FunctionStatus(_Shape):
    """A function's (or a sink's) status: its state and each instance's."""

    name: str  # the FQFN
    state: RunState = RunState.CREATED
    num_instances: int
    num_running: int = 0
    num_restarts: int = 0
    unclosed_objects: list[str] = []  # user objects a stop could not close in time
    instances: list[FunctionInstanceStatus] = []


class UserMetricSummary(_Shape):
    """A user metric (``context.record_metric``) over its observations."""

    count: int = 0
    sum: float = 0.0
    min: float | None = None
    max: float | None = None


class FunctionInstanceStatsDataBase(_Shape):
    """The counters Pulsar keeps both in total and over the last minute."""

    received_total: int = 0
    processed_successfully_total: int = 0
    system_exceptions_total: int = 0
    user_exceptions_total: int = 0
    avg_process_latency: float = 0.0  # ms


class FunctionInstanceStatsData(FunctionInstanceStatsDataBase):
    """Lifetime stats, with the last minute's under ``1min`` (``one_min`` in Python)."""

    dead_lettered_total: int = 0
    # An explicit alias: "1min" is not a name, and the camelCase of none.
    one_min: FunctionInstanceStatsDataBase = Field(
        default_factory=FunctionInstanceStatsDataBase,
        validation_alias="1min",
        serialization_alias="1min",
    )
    last_invocation: int = 0  # epoch ms; 0 before the first
    # In JSON, Pulsar's flat map of doubles: user_metric_<name>_sum and _count (and
    # sparkfn's _min and _max); in Python, a summary per name. Both shapes are read.
    user_metrics: dict[str, UserMetricSummary] = {}

    @field_validator("user_metrics", mode="before")
    @classmethod
    def _from_flat(cls, value: Any) -> Any:
        if not isinstance(value, dict) or not value:
            return value
        if not all(isinstance(v, int | float) or v is None for v in value.values()):
            return value  # {name: summary}: as it is
        found: dict[str, dict[str, Any]] = {}
        for key, number in value.items():
            matched = _FLAT_METRIC.fullmatch(str(key))
            if matched is None:
                msg = f"userMetrics key {key!r} is not user_metric_<name>_sum|count|min|max"
                raise ValueError(msg)
            name, part = matched.groups()
            found.setdefault(name, {})[part] = int(number) if part == "count" else number
        return found

    @field_serializer("user_metrics", when_used="json")
    def _to_flat(self, metrics: dict[str, UserMetricSummary]) -> dict[str, float]:
        flat: dict[str, float] = {}
        for name, summary in sorted(metrics.items()):
            flat[f"user_metric_{name}_sum"] = summary.sum
            flat[f"user_metric_{name}_count"] = float(summary.count)
            if summary.min is not None:
                flat[f"user_metric_{name}_min"] = summary.min
            if summary.max is not None:
                flat[f"user_metric_{name}_max"] = summary.max
        return flat


class FunctionInstanceStats(_Shape):
    """An instance id and its stats."""

    instance_id: int
    metrics: FunctionInstanceStatsData


class FunctionStats(FunctionInstanceStatsData):
    """A function's (or a sink's) stats: every instance's summed, then each instance's."""

    instances: list[FunctionInstanceStats] = []


# --- sources ----------------------------------------------------------------------------


class SourceInstanceStats(_Shape):
    """What a source instance did so far (``SourceStats``' counters)."""

    received: int = 0  # records read or emitted
    appended: int = 0  # records the store appended
    deduplicated: int = 0  # dropped as appended before (effectively_once)
    acked: int = 0  # ack() calls that returned
    commits: int = 0  # commit() calls that returned
    errors: int = 0  # exceptions from the source or fatal()
    dropped: int = 0  # emitted after the instance stopped taking records


class SourceInstanceStatus(_Shape):
    """One source instance: its state, counters, death and restarts."""

    instance_id: int
    state: RunState = RunState.CREATED
    stats: SourceInstanceStats = SourceInstanceStats()
    death_exception: DeathException | None = None
    num_restarts: int = 0


class SourceStatus(_Shape):
    """A source's status: its state, each instance's, and the objects a stop left open."""

    name: str  # the source's fully qualified name
    state: RunState = RunState.CREATED
    instances: list[SourceInstanceStatus] = []
    unclosed_objects: list[str] = []
