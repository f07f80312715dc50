"""Appending a source's records to topics: encoding, routing, de-duplication.

Each call to :meth:`TopicAppender.append` appends its records with one
``Producer.send_columns`` (one store transaction) per target topic, or, under
``effectively_once``, per target topic and sequence scope (a record's
``source_partition``, e.g. one file), because de-duplication is per named
producer.

Effectively-once (Pulsar IO's scheme): a record with a ``sequence_id`` is
sent by the producer ``source:<fqn>:<source_partition>``; the store keeps
the highest sequence id appended per producer and partition, so a record
appended before a crash and read again after it is dropped. For that the
same record must land in the same partition every time: by its key, its
``partition``, else by ``sequence_id % partitions`` (never round robin).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from sparkfn.api.connector import Record
from sparkfn.api.errors import PayloadError
from sparkfn.config.connector import SourceConfig
from sparkfn.config.function import ProcessingGuarantee
from sparkfn.store.store import Store
from sparkfn.topics.append import MessageColumns
from sparkfn.topics.message import encode_value
from sparkfn.topics.producer import Producer

# Producers are cached per (topic, producer name); a file source names one
# producer per file, so the cache is bounded.
_MAX_PRODUCERS = 256
# The store's producer column is 256 characters long.
_MAX_PRODUCER_NAME = 256


class TopicAppender:
    """Turns records into messages and appends them atomically per topic."""

    def __init__(self, store: Store, config: SourceConfig, instance_id: int) -> None:
        self.store = store
        self.config = config
        self.instance_id = instance_id
        self.effectively_once = config.processing_guarantees is ProcessingGuarantee.EFFECTIVELY_ONCE
        self._producers: OrderedDict[tuple[str, str | None], Producer] = OrderedDict()
        # The output topic is looked up now: a missing one fails before open().
        self.producer(config.output, None)

    def producer(self, topic: str, name: str | None) -> Producer:
        """The cached producer for ``topic`` under ``name`` (``None``: no de-duplication)."""
        key = (topic, name)
        found = self._producers.get(key)
        if found is not None:
            self._producers.move_to_end(key)
            return found
        producer = Producer(self.store, topic, name=name)
        self._producers[key] = producer
        if len(self._producers) > _MAX_PRODUCERS:
            self._producers.popitem(last=False)
        return producer

    def append(self, records: Sequence[Record]) -> list[str | None]:
        """Append ``records``; their message ids in order (``None``: a duplicate dropped).

        Raises :class:`PayloadError` for a value that does not fit its topic,
        :class:`~sparkfn.api.errors.TopicNotFoundError` for a record
        redirected to a missing topic, and store errors as they come.
        """
        groups: dict[tuple[str, str | None], list[int]] = {}
        if not self.effectively_once and all(r.topic is None for r in records):
            groups[(self.config.output, None)] = list(range(len(records)))  # the usual batch
        else:
            for index, record in enumerate(records):
                groups.setdefault(self._route(record), []).append(index)
        ids: list[str | None] = [None] * len(records)
        for (topic, name), indexes in groups.items():
            producer = self.producer(topic, name)
            chosen = records if len(indexes) == len(records) else [records[i] for i in indexes]
            for index, message_id in zip(indexes, self._send(producer, chosen), strict=True):
                ids[index] = message_id
        return ids

    def _route(self, record: Record) -> tuple[str, str | None]:
        topic = record.topic or self.config.output
        if not self.effectively_once:
            return topic, None
        if record.sequence_id is None:
            msg = (
                f"source {self.config.fqn}: processing_guarantees effectively_once needs a "
                f"sequence_id on every record (a stable, increasing position); got {record!r:.200}"
            )
            raise PayloadError(msg)
        scope = record.source_partition
        if scope is None:
            scope = f"instance-{self.instance_id}"
        name = f"source:{self.config.fqn}:{scope}"
        if len(name) > _MAX_PRODUCER_NAME:
            digest = hashlib.sha256(scope.encode()).hexdigest()[:32]
            name = f"source:{self.config.fqn}:#{digest}"
        return topic, name

    def _send(self, producer: Producer, records: Sequence[Record]) -> list[str | None]:
        """Append ``records`` to the producer's topic in one transaction; their ids in order.

        The rows are built as columns, a list per field (:class:`MessageColumns`),
        without a message object per record: per record this costs a few list
        appends, and Arrow converts each column in one call.
        """
        if producer.topic.partitions == 1 and all(r.partition is None for r in records):
            # The usual topic: one partition, every row in it, in order.
            return producer.send_columns({0: _columns(records, producer)})[0]
        parts: dict[int, list[Record]] = {}
        rows: list[tuple[int, int]] = []  # each record's (partition, row there)
        for record in records:
            part = self._partition(producer, record)
            chunk = parts.setdefault(part, [])
            rows.append((part, len(chunk)))
            chunk.append(record)
        ids = producer.send_columns({p: _columns(c, producer) for p, c in parts.items()})
        return [ids[part][row] for part, row in rows]

    def _partition(self, producer: Producer, record: Record) -> int:
        partition = record.partition
        if partition is None and self.effectively_once and record.key is None:
            # Deterministic, so that a replayed record meets its own sequence.
            partition = (record.sequence_id or 0) % producer.topic.partitions
        return producer.partition_of(record.key, partition)


def _columns(records: Sequence[Record], producer: Producer) -> MessageColumns:
    """The records' fields as the rows of one partition's append."""
    values = [r.value for r in records]
    if not all(type(v) is bytes for v in values):
        values = [_encode(v, producer) for v in values]
    return MessageColumns(
        values,
        [r.key for r in records],
        [r.properties or None for r in records],  # a dict as it is: no list, no pairs
        [t * 1000 if type(t) is int else _micros(t) for t in (r.event_time for r in records)],
        [r.sequence_id for r in records],
    )


def _encode(value: Any, producer: Producer) -> bytes | None:
    """Bytes for the topic; text is checked by ``send_batch`` (UTF-8, JSON) in one place."""
    if value is None:
        return None
    kind = type(value)
    if kind is bytes:
        return value  # type: ignore[no-any-return]
    if kind is str or isinstance(value, str):
        return value.encode()  # type: ignore[no-any-return]
    if isinstance(value, (bytes, bytearray, memoryview)):  # noqa: UP038
        return bytes(value)
    topic = producer.topic
    return encode_value(value, topic.schema_type, topic=str(topic.name))


def _micros(ms: int | None) -> int | None:
    """An event time in ms since the epoch as the column holds it: microseconds."""
    if ms is None or type(ms) is int:
        return None if ms is None else ms * 1000
    return round(ms * 1000)
