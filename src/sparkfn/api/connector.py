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
    topic; ``partition`` picks the topic partition (default: by key, else
    round robin). A source that can name each record's position gives
    ``sequence_id`` (increasing within ``source_partition``, stable across
    restarts, e.g. a line number within a file): with ``effectively_once``
    sparkfn then drops a record appended before, as Pulsar IO does with a
    record's partition id and sequence.

    For sinks, ``value`` is decoded per the input topic's schema type,
    ``topic`` is the input topic and ``message_id`` is ``partition:offset``
    within it.

    >>> Record({"id": 1}, key="alice", properties={"origin": "web"})
    """

    value: Any
    key: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    event_time: int | None = None  # milliseconds since the epoch
    topic: str | None = None
    message_id: str | None = None
    partition: int | None = None
    sequence_id: int | None = None
    source_partition: str | None = None


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

    def get_state(self, key: str) -> bytes | None:
        """A value the source stored with :meth:`put_state` (Pulsar's ``getState``), or ``None``."""
        msg = f"{type(self).__name__} keeps no source state"
        raise NotImplementedError(msg)

    def put_state(self, key: str, value: str | bytes) -> None:
        """Store ``value`` under ``key`` durably, in the store, before returning (``putState``)."""
        msg = f"{type(self).__name__} keeps no source state"
        raise NotImplementedError(msg)


class SinkContext(ConnectorContext):
    """A sink's context."""

    @abstractmethod
    def get_input_topics(self) -> list[str]:
        """The topics the sink reads."""


class Source(ABC):
    """A pull source: sparkfn calls ``read()`` in a loop on one thread.

    Who calls what: every method below is called by sparkfn's source runner
    on the instance's own thread (``source-<tenant/namespace/name>-<id>``),
    one call at a time, never concurrently. The order is ``open`` once, then
    ``read`` repeatedly, with ``ack`` for each appended record and ``commit``
    after each append; on drain or suspend ``prepare_to_shutdown`` and
    ``shutdown`` (:class:`~sparkfn.api.lifecycle.GracefulShutdown` sources
    only), then ``close`` once. After an exception from any method, or a
    ``context.fatal``, only ``close`` follows.

    >>> class Numbers(Source):
    ...     def open(self, config, context):
    ...         self.n, self.stop = 0, int(config["count"])
    ...     def read(self):
    ...         if self.n == self.stop:
    ...             return END_OF_STREAM
    ...         self.n += 1
    ...         return Record(str(self.n), sequence_id=self.n)
    """

    def open(self, config: Mapping[str, Any], context: SourceContext) -> None:  # noqa: B027
        """Called once, before any other method, with the source's ``configs``.

        If it raises, the instance dies; ``close()`` is still called (once),
        so release what ``open`` acquired there too.
        """

    @abstractmethod
    def read(self) -> Record | list[Record] | _EndOfStream | None:
        """The next record(s); ``None`` when there is nothing now; :data:`END_OF_STREAM` when done.

        Called in a loop until the instance stops; after ``None`` sparkfn
        waits ``poll_interval`` (less if a stop arrives). A ``read()`` that
        blocks delays every stop, and ``close()``, until it returns: block
        for a bounded time and return ``None``.
        """

    def ack(self, record: Record) -> None:  # noqa: B027
        """``record`` (as returned by ``read``) is durably appended to its topic.

        Called once per record, in read order, after the store transaction
        that appended it committed (before it, under ``at_most_once``).
        Records read but not acked when the instance ends were not appended.
        """

    def commit(self) -> None:  # noqa: B027
        """Everything acked so far is durably appended: a good time to save progress.

        Called once after each append transaction and its ``ack`` calls.
        """

    def close(self) -> None:  # noqa: B027
        """Release everything. Called exactly once per opened source, however it ends.

        Every other call has returned before it starts, and nothing is called
        after it, however many stop requests arrive and from whichever
        threads (KIP-419). Only a call that never returns prevents it.
        """


class PushSource(Source):
    """A source whose own threads call ``emit(record)``.

    ``open`` starts the threads; sparkfn appends what they emit in batches of
    at most ``batch_size``, at least every ``batch_timeout``. ``emit`` may be
    called from any thread and blocks while ten batches wait (back-pressure).
    Records emitted until ``shutdown()`` returns (or, without
    :class:`~sparkfn.api.lifecycle.GracefulShutdown`, until the stop) are
    appended on drain and suspend; later ones are dropped. ``notify_error(exc)``
    terminates the instance (a fatal error) promptly. ``close()`` should stop
    the threads (and join them): it is the last call.

    >>> class Ticks(PushSource):
    ...     def open(self, config, context):
    ...         self.done = threading.Event()
    ...         self.thread = threading.Thread(target=self.run)
    ...         self.thread.start()
    ...     def run(self):
    ...         while not self.done.wait(1.0):
    ...             self.emit(Record(str(time.time())))
    ...     def close(self):
    ...         self.done.set()
    ...         self.thread.join()
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
        """Report that the source cannot go on; terminates the instance (any thread)."""
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
