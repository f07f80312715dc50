"""Received messages, and the columns behind them.

Reading a topic yields Arrow batches at millions of messages a second;
building one Python object per message with every field converted costs
far more than that. So a received message is a row number into a
:class:`MessageRows`, and each column becomes a Python list only when a
message of the batch first asks for that field: a consumer that reads only
``value`` never pays for timestamps or properties. Timestamps stay integers
(microseconds) in the list and become a ``datetime`` when a message is
asked for one, which is several times cheaper than Arrow's conversion of a
whole column to timezone-aware datetimes.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa

from sparkfn.topics.schema_type import SchemaType, avro_schema

# What Arrow's own conversion of a "timestamp[us, tz=UTC]" column gives.
_UTC = ZoneInfo("UTC")
_EPOCH = datetime(1970, 1, 1, tzinfo=_UTC)
_MICROSECOND = timedelta(microseconds=1)


def _pylist(column: pa.Array | pa.ChunkedArray) -> list[Any]:
    if column.null_count == len(column):
        return [None] * len(column)
    return list(column.to_pylist())


def _micros(column: pa.Array | pa.ChunkedArray) -> list[int | None]:
    return _pylist(column.cast(pa.int64()))


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold off the cyclic garbage collector while many messages are made.

    Every 700 new objects start a collection, and the older generations'
    collections walk every object the process holds (pyarrow's, SQLAlchemy's,
    the messages made so far): for a receive of 100,000 messages they cost
    more than making the messages (about 1 us a message, against 0.4 us with
    the collector held off for the whole receive, its one collection
    afterwards included). Messages are not garbage, so there is nothing to
    collect meanwhile. The collector is turned on again only if it was on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class MessageRows:
    """Read messages (``READ_SCHEMA`` rows) whose columns are converted on first use.

    A received message keeps its batch's rows alive: holding on to one
    message of a batch holds the whole batch in memory.
    """

    def __init__(self, batch: pa.RecordBatch | pa.Table) -> None:
        self._batch = batch
        self.size: int = batch.num_rows

    @cached_property
    def topics(self) -> list[str]:
        """Each row's topic name."""
        return _pylist(self._batch.column("topic"))

    @cached_property
    def partitions(self) -> list[int]:
        """Each row's partition."""
        return _pylist(self._batch.column("partition"))

    @cached_property
    def offsets(self) -> list[int]:
        """Each row's offset."""
        return _pylist(self._batch.column("offset"))

    @cached_property
    def keys(self) -> list[str | None]:
        """Each row's key."""
        return _pylist(self._batch.column("key"))

    @cached_property
    def values(self) -> list[bytes | None]:
        """Each row's value."""
        return _pylist(self._batch.column("value"))

    @cached_property
    def properties(self) -> list[list[tuple[str, str]] | None]:
        """Each row's properties as Arrow gives a map: ``(key, value)`` pairs, or ``None``."""
        return _pylist(self._batch.column("properties"))

    @cached_property
    def producers(self) -> list[str | None]:
        """Each row's producer name."""
        return _pylist(self._batch.column("producer"))

    @cached_property
    def sequence_ids(self) -> list[int | None]:
        """Each row's sequence id."""
        return _pylist(self._batch.column("sequence_id"))

    @cached_property
    def _event_times(self) -> list[int | None]:
        return _micros(self._batch.column("event_time"))

    @cached_property
    def _publish_times(self) -> list[int | None]:
        return _micros(self._batch.column("publish_time"))

    def properties_at(self, row: int) -> dict[str, str]:
        """Row ``row``'s properties as a new dict."""
        return dict(self.properties[row] or ())

    def event_time_at(self, row: int) -> datetime | None:
        """Row ``row``'s event time (UTC), or ``None``."""
        return _time(self._event_times[row])

    def publish_time_at(self, row: int) -> datetime:
        """Row ``row``'s publish time (UTC)."""
        # Never null in a stored segment; a hand-made table gets its None back.
        return _time(self._publish_times[row])  # type: ignore[return-value]


def _time(micros: int | None) -> datetime | None:
    return None if micros is None else _EPOCH + micros * _MICROSECOND


class GivenRow(MessageRows):
    """One message's fields given as Python values and kept exactly as given."""

    def __init__(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        key: str | None,
        value: bytes | None,
        properties: dict[str, str],
        event_time: datetime | None,
        publish_time: datetime,
        producer: str | None,
        sequence_id: int | None,
    ) -> None:
        self.size = 1
        # Filled in advance, the cached properties never look for a batch.
        self.__dict__.update(
            topics=[topic],
            partitions=[partition],
            offsets=[offset],
            keys=[key],
            values=[value],
            producers=[producer],
            sequence_ids=[sequence_id],
        )
        self._fields = (properties, event_time, publish_time)

    def properties_at(self, row: int) -> dict[str, str]:
        """The properties as given (the same dict)."""
        return self._fields[0]

    def event_time_at(self, row: int) -> datetime | None:
        """The event time as given."""
        return self._fields[1]

    def publish_time_at(self, row: int) -> datetime:
        """The publish time as given."""
        return self._fields[2]


class ReceivedMessage:
    """A message read back from a topic; its fields are read-only attributes.

    ``topic``, ``partition``, ``offset``, ``key``, ``value``, ``properties``,
    ``event_time``, ``publish_time``, ``producer``, ``sequence_id``; two
    messages are equal when all their fields are.

    >>> [message] = consumer.receive(max_messages=1)
    >>> message.message_id, message.value
    ('0:41', b'hello')

    A message read from a topic is a row of the batch it was read in
    (:class:`MessageRows`), its fields converted when first asked for: that
    is what lets a consumer receive a million messages a second. Keeping one
    message keeps its batch in memory.
    """

    __slots__ = ("_properties", "_row", "_rows")
    # Its fields, in the order the constructor takes them.
    __match_args__ = (
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        "properties",
        "event_time",
        "publish_time",
        "producer",
        "sequence_id",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: str | None,
        value: bytes | None,
        properties: dict[str, str],
        event_time: datetime | None,
        publish_time: datetime,
        producer: str | None,
        sequence_id: int | None,
    ) -> None:
        self._rows: MessageRows = GivenRow(
            topic=topic,
            partition=partition,
            offset=offset,
            key=key,
            value=value,
            properties=properties,
            event_time=event_time,
            publish_time=publish_time,
            producer=producer,
            sequence_id=sequence_id,
        )
        self._row = 0

    @classmethod
    def of_rows(cls, rows: MessageRows) -> list[ReceivedMessage]:
        """One message per row of ``rows``, in order; nothing is converted yet."""
        new = object.__new__
        out = []
        for row in range(rows.size):
            message = new(cls)
            # Made without __init__, which takes every field as a value: two
            # slot writes are the whole per-message cost of a receive.
            message._rows = rows  # noqa: SLF001
            message._row = row  # noqa: SLF001
            out.append(message)
        return out

    @property
    def topic(self) -> str:
        """The topic's full name, ``tenant/namespace/name``."""
        return self._rows.topics[self._row]

    @property
    def partition(self) -> int:
        """The partition the message is in."""
        return self._rows.partitions[self._row]

    @property
    def offset(self) -> int:
        """The message's offset in its partition."""
        return self._rows.offsets[self._row]

    @property
    def key(self) -> str | None:
        """The key it was produced with."""
        return self._rows.keys[self._row]

    @property
    def value(self) -> bytes | None:
        """The stored value (bytes as the topic's schema type encodes them)."""
        return self._rows.values[self._row]

    @property
    def properties(self) -> dict[str, str]:
        """The message's properties (the same dict on every access)."""
        try:
            return self._properties
        except AttributeError:
            self._properties: dict[str, str] = self._rows.properties_at(self._row)
            return self._properties

    @property
    def event_time(self) -> datetime | None:
        """The event time its producer gave, in UTC."""
        return self._rows.event_time_at(self._row)

    @property
    def publish_time(self) -> datetime:
        """When it was appended, in UTC."""
        return self._rows.publish_time_at(self._row)

    @property
    def producer(self) -> str | None:
        """The name of the producer that sent it, if it had one."""
        return self._rows.producers[self._row]

    @property
    def sequence_id(self) -> int | None:
        """The sequence id its producer gave."""
        return self._rows.sequence_ids[self._row]

    @property
    def message_id(self) -> str:
        """``partition:offset``, the message's identity within its topic."""
        return f"{self.partition}:{self.offset}"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _fields(self) == _fields(other)

    def __hash__(self) -> int:
        # As a frozen dataclass's: over every field (so a TypeError: properties is a dict).
        return hash(_fields(self))

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{n}={v!r}" for n, v in zip(ReceivedMessage.__match_args__, _fields(self), strict=True)
        )
        return f"{type(self).__qualname__}({shown})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled alone, not with the batch it was read in.
        return (type(self), _fields(self))

    def as_json(self, schema_type: SchemaType, definition: str | None = None) -> dict[str, Any]:
        """A JSON-friendly dict; the value decoded per the topic schema (and an
        ``avro`` topic's ``definition``: without it, the value is shown in hex).

        A ``bytes`` value is shown as its text when it is valid UTF-8, as
        Pulsar's consumer prints it, else in hex; ``value_encoding`` says
        which (``text`` or ``hex``; absent on other topics).
        """
        value: Any = self.value
        encoding: str | None = None
        if self.value is not None:
            if schema_type is SchemaType.AVRO and definition is not None:
                value = avro_schema(definition).decode(self.value)
            elif schema_type is SchemaType.JSON:
                value = json.loads(self.value)
            elif schema_type is SchemaType.STRING:
                value = self.value.decode()
            else:
                try:
                    value, encoding = self.value.decode("utf-8"), "text"
                except UnicodeDecodeError:
                    value, encoding = self.value.hex(), "hex"
        shown = {
            "topic": self.topic,
            "message_id": self.message_id,
            "key": self.key,
            "value": value,
            "properties": self.properties,
            "event_time": self.event_time.isoformat() if self.event_time else None,
            "publish_time": self.publish_time.isoformat(),
            "producer": self.producer,
            "sequence_id": self.sequence_id,
        }
        if encoding is not None:
            shown["value_encoding"] = encoding
        return shown


def _fields(message: Any) -> tuple[Any, ...]:
    return tuple(getattr(message, name) for name in ReceivedMessage.__match_args__)


def messages_from_table(table: pa.Table | pa.RecordBatch) -> list[ReceivedMessage]:
    """Read rows (``READ_SCHEMA``) as :class:`ReceivedMessage` objects, converted lazily."""
    return ReceivedMessage.of_rows(MessageRows(table))
