"""The JSON bodies of the worker's topic routes (keys in camelCase, as Pulsar's).

Requests: :class:`TopicSettings` (create), :class:`ProducerMessages`
(produce, Pulsar's REST producer body). Responses: Pulsar's
:class:`PartitionedTopicMetadata`, :class:`TopicStats` and
:class:`PartitionedTopicStats` (the fields sparkfn's topics have), Pulsar's
:class:`ProducerAcks`, and :class:`TopicMessage`, a message read back.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from sparkfn.topics.admin import MAX_PARTITIONS, PartitionStats, TopicInfo
from sparkfn.topics.message import ReceivedMessage, SchemaType
from sparkfn.worker.api.params import MAX_INT32, MAX_INT64

# Messages one produce request may carry: it is one atomic append, held in memory.
MAX_PRODUCE_MESSAGES = 10_000
# Subscription and producer names are stored in VARCHAR(256) columns.
MAX_NAME_LENGTH = 256
MAX_SEQUENCE_ID = MAX_INT64
MAX_RETENTION_MS = 2**53  # about 285,000 years


class ApiModel(BaseModel):
    """camelCase JSON, snake_case Python; unknown fields are an error, not ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class TopicSettings(ApiModel):
    """How a new topic checks its values and how long it keeps them."""

    schema_type: SchemaType = SchemaType.BYTES
    # An avro topic's Avro record schema (JSON object or its text); only for avro.
    avro_schema: dict[str, Any] | str | None = Field(default=None, alias="schema")
    # Bounded as a Python timedelta and the store's 64-bit column can hold them.
    retention_ms: int | None = Field(default=None, ge=1, le=MAX_RETENTION_MS)
    retention_bytes: int | None = Field(default=None, ge=1, le=MAX_INT64)


class PartitionedTopicSettings(TopicSettings):
    """:class:`TopicSettings` and a number of partitions."""

    partitions: int = Field(ge=1, le=MAX_PARTITIONS)


class PartitionedTopicMetadata(ApiModel):
    """Pulsar's ``PartitionedTopicMetadata``: a sparkfn topic always has 1 or more partitions."""

    partitions: int


class SubscriptionStats(ApiModel):
    """One subscription of a topic (or of one partition)."""

    msg_backlog: int  # messages retained after its cursor, not yet acknowledged


class PartitionTopicStats(ApiModel):
    """What one partition holds, with Pulsar's counter names where they apply."""

    partition: int
    start_offset: int
    end_offset: int
    msg_in_counter: int  # messages ever appended (the end offset)
    messages: int  # messages retained
    segments: int
    storage_size: int  # bytes
    subscriptions: dict[str, SubscriptionStats]


class TopicStats(ApiModel):
    """Pulsar's ``TopicStats`` for a sparkfn topic: settings, counters, subscriptions' backlog
    (and, as Pulsar's partitioned stats have it, ``metadata.partitions``)."""

    topic: str  # persistent://tenant/namespace/name
    schema_type: SchemaType
    metadata: PartitionedTopicMetadata
    retention_ms: int | None
    retention_bytes: int | None
    created_at: datetime
    msg_in_counter: int
    messages: int
    segments: int
    storage_size: int
    subscriptions: dict[str, SubscriptionStats]

    @classmethod
    def of(
        cls, info: TopicInfo, stats: list[PartitionStats], cursors: dict[str, dict[int, int]]
    ) -> TopicStats:
        """The stats of ``info`` from its partitions' stats and its subscriptions' cursors."""
        return cls(
            topic=persistent(info),
            schema_type=info.schema_type,
            metadata=PartitionedTopicMetadata(partitions=info.partitions),
            retention_ms=info.retention_ms,
            retention_bytes=info.retention_bytes,
            created_at=as_utc(info.created_at),
            msg_in_counter=sum(s.end_offset for s in stats),
            messages=sum(s.messages for s in stats),
            segments=sum(s.segments for s in stats),
            storage_size=sum(s.size_bytes for s in stats),
            subscriptions={
                name: SubscriptionStats(msg_backlog=sum(backlog(s, parts) for s in stats))
                for name, parts in cursors.items()
            },
        )


class PartitionedTopicStats(TopicStats):
    """Pulsar's ``PartitionedTopicStats``: the topic's stats and each partition's."""

    partition_stats: dict[str, PartitionTopicStats] = Field(alias="partitions")

    @classmethod
    def of_partitions(
        cls, info: TopicInfo, stats: list[PartitionStats], cursors: dict[str, dict[int, int]]
    ) -> PartitionedTopicStats:
        """The stats of ``info``, each partition's keyed by Pulsar's ``<topic>-partition-<i>``."""
        whole = TopicStats.of(info, stats, cursors)
        return cls(
            **dict(whole),
            partitions={
                f"{persistent(info)}-partition-{s.partition}": PartitionTopicStats(
                    partition=s.partition,
                    start_offset=s.start_offset,
                    end_offset=s.end_offset,
                    msg_in_counter=s.end_offset,
                    messages=s.messages,
                    segments=s.segments,
                    storage_size=s.size_bytes,
                    subscriptions={
                        name: SubscriptionStats(msg_backlog=backlog(s, parts))
                        for name, parts in cursors.items()
                    },
                )
                for s in stats
            },
        )


class ResetCursorData(ApiModel):
    """Pulsar's ``ResetCursorData``: the message a cursor moves to. sparkfn's ids are
    ``partition:offset``: ``entryId`` is the offset, ``partitionIndex`` the partition
    (-1: the topic's only one); ``ledgerId`` and ``batchIndex`` are accepted, unused."""

    ledger_id: int = Field(default=0, ge=-1, le=MAX_INT64)
    entry_id: int = Field(ge=0, le=MAX_INT64)
    partition_index: int = Field(default=-1, ge=-1, le=MAX_INT32)
    batch_index: int = Field(default=-1, ge=-1, le=MAX_INT32)
    is_excluded: bool = False


class TopicMessage(ApiModel):
    """A message read back. ``value`` is decoded by the topic's schema (a ``bytes``
    topic's value as UTF-8 text, or null when it is not text; an avro record's
    bytes fields as base64); ``valueBase64`` is the stored bytes."""

    topic: str
    message_id: str  # partition:offset
    key: str | None
    value: Any
    value_base64: str | None
    properties: dict[str, str]
    event_time: datetime | None
    publish_time: datetime
    producer_name: str | None
    sequence_id: int | None

    @classmethod
    def of(cls, message: ReceivedMessage, info: TopicInfo) -> TopicMessage:
        """``message`` of topic ``info``, its value decoded."""
        raw = message.value
        value: Any = None
        if raw is not None:
            if info.schema_type is SchemaType.BYTES:
                try:
                    value = raw.decode()
                except UnicodeDecodeError:
                    value = None
            else:
                value = _jsonable(
                    message.as_json(info.schema_type, info.schema_definition)["value"]
                )
        return cls(
            topic=persistent(info),
            message_id=message.message_id,
            key=message.key,
            value=value,
            value_base64=None if raw is None else base64.b64encode(raw).decode(),
            properties=message.properties,
            event_time=None if message.event_time is None else as_utc(message.event_time),
            publish_time=as_utc(message.publish_time),
            producer_name=message.producer,
            sequence_id=message.sequence_id,
        )


class ProducerMessage(ApiModel):
    """One message of a produce request (Pulsar's ``ProducerMessage``).

    ``payload`` is encoded by the topic's schema: text for ``string`` and
    ``bytes`` topics (UTF-8); for ``json`` topics a string is the JSON
    document's text (Pulsar's rule) and any other JSON value the document
    itself; for ``avro`` topics an object that fits the topic's schema.
    ``null`` is a message without a value.
    """

    key: str | None = None
    payload: Any
    properties: dict[str, str] = Field(default_factory=dict)
    event_time: datetime | None = None
    sequence_id: int | None = Field(default=None, ge=0, le=MAX_SEQUENCE_ID)


class ProducerMessages(ApiModel):
    """A produce request (Pulsar's ``ProducerMessages``): appended atomically, or not at all."""

    producer_name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME_LENGTH)
    messages: list[ProducerMessage] = Field(max_length=MAX_PRODUCE_MESSAGES)


class ProducerAck(ApiModel):
    """What became of one message: its id, or null for a duplicate dropped by sequence id."""

    message_id: str | None
    error_code: int = 0
    error_msg: str | None = None


class ProducerAcks(ApiModel):
    """Pulsar's ``ProducerAcks``: one ack per message, in order."""

    message_publish_results: list[ProducerAck]
    schema_version: int = 0


def persistent(info: TopicInfo) -> str:
    """``persistent://tenant/namespace/name``, as Pulsar names topics."""
    return f"persistent://{info.name}"


def backlog(stats: PartitionStats, cursors: dict[int, int]) -> int:
    """Messages of a partition after a subscription's cursor (all retained ones without one)."""
    cursor = max(cursors.get(stats.partition, stats.start_offset), stats.start_offset)
    return max(0, stats.end_offset - cursor)


def as_utc(moment: datetime) -> datetime:
    """``moment`` with a UTC zone (SQLite hands back naive UTC datetimes)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _jsonable(value: Any) -> Any:
    """A decoded value with its bytes (an avro ``bytes`` or ``fixed`` field) as base64 text."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    return value
