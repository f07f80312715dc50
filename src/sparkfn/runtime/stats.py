"""Per-instance processing statistics, accumulated in a task and committed with it.

Names follow Pulsar's function metrics: received, processed successfully,
user and system exceptions, process latency, last invocation; plus
``dead_lettered``. User metrics from ``record_metric`` are summaries
(count, sum, min, max) per name.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field

from sparkfn.api.status import ExceptionInformation

LATEST_EXCEPTIONS_KEPT = 10


@dataclass
class ExceptionInfo:
    """One exception, as shown in status."""

    kind: str  # "user" or "system"
    type: str
    message: str
    traceback: str
    message_id: str | None
    timestamp_ms: int

    @classmethod
    def from_exception(cls, kind: str, exc: BaseException, message_id: str | None) -> ExceptionInfo:
        """Capture ``exc`` with its traceback."""
        return cls(
            kind=kind,
            type=type(exc).__name__,
            message=str(exc),
            traceback="".join(traceback.format_exception(exc)),
            message_id=message_id,
            timestamp_ms=int(time.time() * 1000),
        )

    def as_status(self) -> ExceptionInformation:
        """Pulsar's ``ExceptionInformation``, plus type, traceback and message id."""
        return ExceptionInformation(
            exception_string=f"{self.type}: {self.message}",
            timestamp_ms=self.timestamp_ms,
            type=self.type,
            message=self.message,
            traceback=self.traceback,
            message_id=self.message_id,
        )


@dataclass
class MetricSummary:
    """count, sum, min and max of a user metric's observations."""

    count: int = 0
    sum: float = 0.0
    min: float | None = None
    max: float | None = None

    def observe(self, value: float) -> None:
        """Add one observation."""
        self.count += 1
        self.sum += value
        self.min = value if self.min is None else min(self.min, value)
        self.max = value if self.max is None else max(self.max, value)

    def merge(self, other: MetricSummary) -> None:
        """Fold ``other`` into this summary."""
        self.count += other.count
        self.sum += other.sum
        if other.min is not None:
            self.min = other.min if self.min is None else min(self.min, other.min)
        if other.max is not None:
            self.max = other.max if self.max is None else max(self.max, other.max)


@dataclass
class InstanceStats:
    """What one instance did in one task (or, summed, over its life)."""

    received: int = 0
    processed_successfully: int = 0
    user_exceptions: int = 0
    system_exceptions: int = 0
    dead_lettered: int = 0
    latency_ms_sum: float = 0.0
    latency_count: int = 0
    last_invocation_ms: int | None = None
    user_metrics: dict[str, MetricSummary] = field(default_factory=dict)
    latest_exceptions: list[ExceptionInfo] = field(default_factory=list)

    def record_exception(self, info: ExceptionInfo) -> None:
        """Count an exception and keep it among the latest."""
        if info.kind == "user":
            self.user_exceptions += 1
        else:
            self.system_exceptions += 1
        self.latest_exceptions.append(info)
        del self.latest_exceptions[:-LATEST_EXCEPTIONS_KEPT]

    def record_metric(self, name: str, value: float) -> None:
        """Observe ``value`` for user metric ``name``."""
        self.user_metrics.setdefault(name, MetricSummary()).observe(value)

    def merge(self, other: InstanceStats) -> None:
        """Add ``other`` (a later task or batch) into these stats."""
        self.received += other.received
        self.processed_successfully += other.processed_successfully
        self.user_exceptions += other.user_exceptions
        self.system_exceptions += other.system_exceptions
        self.dead_lettered += other.dead_lettered
        self.latency_ms_sum += other.latency_ms_sum
        self.latency_count += other.latency_count
        if other.last_invocation_ms is not None:
            self.last_invocation_ms = max(self.last_invocation_ms or 0, other.last_invocation_ms)
        for name, summary in other.user_metrics.items():
            self.user_metrics.setdefault(name, MetricSummary()).merge(summary)
        self.latest_exceptions.extend(other.latest_exceptions)
        del self.latest_exceptions[:-LATEST_EXCEPTIONS_KEPT]

    @property
    def empty(self) -> bool:
        """Nothing happened."""
        return not (
            self.received or self.user_exceptions or self.system_exceptions or self.user_metrics
        )
