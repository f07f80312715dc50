"""Source and sink connectors: the Pulsar IO shapes with KIP-419's lifecycle.

A **source** brings records in from outside and appends them to its output
topic. It runs outside Spark (a thread managed by the worker or ``sparkfn
sources localrun``)::

    class Lines(Source):
        def open(self, config, context):
            self.file = open(config["path"])
        def read(self):
            line = self.file.readline()
            return Record(value=line.rstrip("\\n")) if line else END_OF_STREAM
        def close(self):
            self.file.close()

``read()`` returns a :class:`Record`, a list of them, ``None`` (nothing now;
asked again shortly) or :data:`END_OF_STREAM` (a bounded source is done, which
is a drain). After records are durably appended sparkfn calls ``ack(record)``
for each and then ``commit()``. A :class:`PushSource` has no ``read``: its own
threads call ``context.emit(record)`` and report failure with
``notify_error(exc)``.

A **sink** writes a topic's messages somewhere else. It runs inside Spark on
executors: ``open`` once per object, ``write(record)`` per message, ``flush()``
at the end of every task; a record counts as written when its batch commits.

For both: ``close()`` is called exactly once per opened object, after every
other call has returned, however often or concurrently stop is requested,
and nothing is called after it. Exceptions raised by a connector are fatal
for its instance (unlike a function's ``process``), and so is
``context.fatal(exc)`` from any of its threads.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Record:
    """One record in or out of a connector.

    For sources, ``value`` is encoded per the output topic's schema type
    (``str``/``bytes``/JSON-able); ``topic`` may redirect a record to another
    topic. For sinks, ``value`` is decoded per the input topic's schema type
    and ``message_id`` is ``partition:offset`` of its topic.
    """

    value: Any
    key: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    event_time: int | None = None  # milliseconds since the epoch
    topic: str | None = None
    message_id: str | None = None
    partition: int | None = None


class _EndOfStream:
    """The type of :data:`END_OF_STREAM`."""

    _instance: _EndOfStream | None = None

    def __new__(cls) -> _EndOfStream:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "END_OF_STREAM"


END_OF_STREAM = _EndOfStream()
"""Returned by ``Source.read()`` when a bounded source has nothing more, ever."""


class ConnectorContext(ABC):
    """What a connector can ask about and do."""

    @abstractmethod
    def get_name(self) -> str:
        """The connector's name."""

    @abstractmethod
    def get_tenant(self) -> str:
        """The connector's tenant."""

    @abstractmethod
    def get_namespace(self) -> str:
        """The connector's namespace."""

    @abstractmethod
    def get_instance_id(self) -> int:
        """This instance's id, ``0 .. get_num_instances() - 1``."""

    @abstractmethod
    def get_num_instances(self) -> int:
        """How many instances the connector has."""

    @abstractmethod
    def get_logger(self) -> logging.Logger:
        """A logger named after the connector."""

    @abstractmethod
    def get_secret(self, secret_name: str) -> str | None:
        """A secret named in the connector's ``secrets``, or ``None``."""

    @abstractmethod
    def get_user_config_map(self) -> Mapping[str, Any]:
        """The connector's ``configs`` (also passed to ``open``)."""

    @abstractmethod
    def record_metric(self, metric_name: str, metric_value: float) -> None:
        """Add an observation to a user metric."""

    @abstractmethod
    def fatal(self, exc: BaseException) -> None:
        """Terminate this instance with ``exc`` (PIP-297). Callable from any thread."""


class SourceContext(ConnectorContext):
    """A source's context: where its records go."""

    @abstractmethod
    def get_output_topic(self) -> str:
        """The topic records are appended to (unless a record names another)."""

    @abstractmethod
    def emit(self, record: Record) -> None:
        """Hand a record to sparkfn (push sources; callable from any thread)."""


class SinkContext(ConnectorContext):
    """A sink's context."""

    @abstractmethod
    def get_input_topics(self) -> list[str]:
        """The topics the sink reads."""


class Source(ABC):
    """A pull source: sparkfn calls ``read()`` in a loop on one thread."""

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:  # noqa: B027
        """Called once before any ``read``."""

    @abstractmethod
    def read(self) -> Record | list[Record] | _EndOfStream | None:
        """The next record(s); ``None`` when there is nothing now; :data:`END_OF_STREAM` when done."""

    def ack(self, record: Record) -> None:  # noqa: B027
        """``record`` is durably appended to its topic."""

    def commit(self) -> None:  # noqa: B027
        """Everything returned so far is durably appended (called after each append)."""

    def close(self) -> None:  # noqa: B027
        """Called exactly once, after every other call has returned."""


class PushSource(Source):
    """A source whose own threads call ``context.emit(record)``.

    ``open`` starts the threads; sparkfn appends what they emit in batches.
    ``notify_error(exc)`` terminates the instance (a fatal error).
    """

    _context: SourceContext | None = None

    def bind(self, context: SourceContext) -> None:
        """Called by sparkfn before ``open``; makes :meth:`emit` and :meth:`notify_error` work."""
        self._context = context

    def emit(self, record: Record) -> None:
        """Hand a record to sparkfn (any thread)."""
        if self._context is None:
            msg = "PushSource.emit called before open()"
            raise RuntimeError(msg)
        self._context.emit(record)

    def notify_error(self, exc: BaseException) -> None:
        """Report that the source cannot go on; terminates the instance."""
        if self._context is None:
            raise exc
        self._context.fatal(exc)

    def read(self) -> Record | list[Record] | _EndOfStream | None:
        """Push sources are not read; records arrive through :meth:`emit`."""
        return None


class Sink(ABC):
    """A sink: ``write`` per message on Spark executors, ``flush`` per task."""

    def open(self, config: Mapping[str, Any], context: SinkContext) -> None:  # noqa: B027
        """Called once per object before any ``write``."""

    @abstractmethod
    def write(self, record: Record) -> None:
        """Write one record (may buffer until ``flush``)."""

    def flush(self) -> None:  # noqa: B027
        """Make everything written so far durable; called before the batch commits."""

    def close(self) -> None:  # noqa: B027
        """Called exactly once, after every other call has returned."""
