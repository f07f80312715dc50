"""Producing messages to a topic.

>>> producer = Producer(store, "orders", name="checkout-1")
>>> producer.send({"id": 1}, key="alice", sequence_id=1)
'3:0'

A producer with a ``name`` gets de-duplication: a message whose
``sequence_id`` is not above the highest one already persisted for that
producer and partition is dropped (Pulsar's effectively-once producer).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa
from sqlalchemy import and_, insert, select, update

from sparkfn.api.errors import ConfigError
from sparkfn.config.names import TopicName
from sparkfn.store import schema
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.log import commit_segments, partition_for_key, stage
from sparkfn.topics.message import (
    STORED_SCHEMA,
    TIMESTAMP,
    Message,
    check_values,
    encode_value,
    utc_now,
)


class Producer:
    """Appends messages to one topic; each ``send_batch`` is one atomic append."""

    def __init__(self, store: Store, topic: str | TopicName, *, name: str | None = None) -> None:
        self.store = store
        self.topic: TopicInfo = TopicAdmin(store).get(topic)
        self.name = name
        self._round_robin = itertools.count()

    def send(
        self,
        value: Any,
        *,
        key: str | None = None,
        properties: dict[str, str] | None = None,
        event_time: datetime | None = None,
        sequence_id: int | None = None,
        partition: int | None = None,
    ) -> str | None:
        """Send one message; returns its id ``partition:offset`` or ``None`` if de-duplicated."""
        message = Message(
            value=self._encode(value),
            key=key,
            properties=properties or {},
            event_time=event_time,
            sequence_id=sequence_id,
        )
        return self.send_batch([message], partition=partition)[0]

    def encode(self, values: Iterable[Any]) -> list[Message]:
        """Wrap plain values as messages, validated against the topic schema."""
        return [Message(self._encode(v)) for v in values]

    def _encode(self, value: Any) -> bytes:
        topic = self.topic
        return encode_value(
            value, topic.schema_type, topic=str(topic.name), definition=topic.schema_definition
        )

    def _route(self, message: Message, partition: int | None) -> int:
        if partition is not None:
            return partition
        if message.partition is not None:
            self._check_partition(message.partition)
            return message.partition
        if message.key is not None:
            return partition_for_key(message.key, self.topic.partitions)
        return next(self._round_robin) % self.topic.partitions

    def send_batch(
        self, messages: Sequence[Message], *, partition: int | None = None
    ) -> list[str | None]:
        """Append ``messages`` atomically; returns ids in order (``None`` = duplicate dropped).

        ``partition`` sends them all there; otherwise each goes to its own
        ``Message.partition``, else by key, else round robin.
        """
        if partition is not None:
            self._check_partition(partition)
        # Messages may be built by hand, not through encode_value: the topic's
        # schema must hold for them too, or consumers fail to decode them.
        check_values(
            [m.value for m in messages],
            self.topic.schema_type,
            topic=str(self.topic.name),
            definition=self.topic.schema_definition,
        )
        routed: dict[int, list[tuple[int, Message]]] = {}
        for index, message in enumerate(messages):
            routed.setdefault(self._route(message, partition), []).append((index, message))
        ids: list[str | None] = [None] * len(messages)
        commit_id = uuid.uuid4().hex
        with self.store.write() as conn:
            if self.name is not None:
                # Lock first: de-duplication must see the sequence ids of every
                # append that committed before this one. (Without it, the lock
                # commit_segments takes is enough.)
                self.store.lock_partitions(conn, self.topic.id, list(routed))
                routed = self._deduplicate(conn, routed)
            staged = []
            order = []
            now = utc_now()
            for part, items in sorted(routed.items()):
                if not items:
                    continue
                staged.append(stage(self.store, self.topic, part, self._table(items, now)))
                order.append((part, items))
            assigned = commit_segments(self.store, conn, self.topic, staged, commit_id)
        for part, items in order:
            first = assigned[part][0]
            for offset, (index, _) in enumerate(items, start=first):
                ids[index] = f"{part}:{offset}"
        return ids

    def _check_partition(self, partition: int) -> None:
        if not 0 <= partition < self.topic.partitions:
            msg = (
                f"partition for topic {self.topic.name} must be between 0 and "
                f"{self.topic.partitions - 1}; got {partition}"
            )
            raise ConfigError(msg)

    def _deduplicate(
        self, conn: Any, routed: dict[int, list[tuple[int, Message]]]
    ) -> dict[int, list[tuple[int, Message]]]:
        table = schema.producer_sequences
        last = {
            r.partition: r.last_sequence_id
            for r in conn.execute(
                select(table.c.partition, table.c.last_sequence_id).where(
                    and_(
                        table.c.topic_id == self.topic.id,
                        table.c.producer == self.name,
                        table.c.partition.in_(list(routed)),
                    )
                )
            )
        }
        kept: dict[int, list[tuple[int, Message]]] = {}
        for part, items in routed.items():
            previous = last.get(part)
            high = previous
            keep = []
            for index, message in items:
                seq = message.sequence_id
                if seq is not None:
                    if high is not None and seq <= high:
                        continue
                    high = seq
                keep.append((index, message))
            kept[part] = keep
            if high is None or high == previous:
                continue
            values = {"last_sequence_id": high}
            if previous is None:
                conn.execute(
                    insert(table).values(
                        topic_id=self.topic.id, partition=part, producer=self.name, **values
                    )
                )
            else:
                conn.execute(
                    update(table)
                    .where(
                        and_(
                            table.c.topic_id == self.topic.id,
                            table.c.producer == self.name,
                            table.c.partition == part,
                        )
                    )
                    .values(**values)
                )
        return kept

    def _table(self, items: list[tuple[int, Message]], now: datetime) -> pa.Table:
        msgs = [m for _, m in items]
        return pa.Table.from_pydict(
            {
                "key": [m.key for m in msgs],
                "value": [m.value for m in msgs],
                "properties": [list(m.properties.items()) if m.properties else None for m in msgs],
                "event_time": [m.event_time for m in msgs],
                "publish_time": pa.repeat(pa.scalar(now, TIMESTAMP), len(msgs)),
                "producer": [self.name] * len(msgs),
                "sequence_id": [m.sequence_id for m in msgs],
            },
            schema=STORED_SCHEMA,
        )
