"""One atomic append of a producer's messages, column by column.

Messages to append are grouped by partition as they are routed: a
:class:`MessageColumns` per partition, one Python list per field, in send
order. :func:`append` turns each into one segment and makes them all visible
in one store transaction, de-duplicating a named producer's sequence ids
first. ``Producer.send_batch`` and the batches of ``Producer.send_async``
both end here, so they follow one set of rules.

Column lists rather than one object per message: Arrow builds each column
from a list in one call, which is what lets a producer append 100 k messages
a second.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa
from sqlalchemy import Connection, and_, insert, select, update

from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.log import StagedSegment, commit_segments, lock_for_append, stage
from sparkfn.topics.message import PROPERTIES, STORED_SCHEMA, TIMESTAMP

# A message's properties as a column takes them.
Properties = list[tuple[str, str]] | Mapping[str, str]


@dataclass
class MessageColumns:
    """One partition's messages to append, one list per field; row ``i`` is message ``i``.

    ``properties`` holds each message's pairs as Arrow's map type takes them
    (a list of ``(key, value)`` tuples, or a dict: no objects per pair), or
    ``None`` when it has none.
    ``event_times`` holds a ``datetime`` or microseconds since the epoch (an
    ``int``: no object per message) or ``None``; one list holds one kind.
    """

    values: list[bytes | None] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)
    properties: list[Properties | None] = field(default_factory=list)
    event_times: list[datetime | int | None] = field(default_factory=list)
    sequence_ids: list[int | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.values)

    def add(
        self,
        value: bytes | None,
        key: str | None,
        properties: Properties | None,
        event_time: datetime | int | None,
        sequence_id: int | None,
    ) -> None:
        """Append one message's fields as the next row."""
        self.values.append(value)
        self.keys.append(key)
        self.properties.append(properties)
        self.event_times.append(event_time)
        self.sequence_ids.append(sequence_id)

    def extend(self, other: MessageColumns) -> None:
        """Append ``other``'s rows after these."""
        self.values.extend(other.values)
        self.keys.extend(other.keys)
        self.properties.extend(other.properties)
        self.event_times.extend(other.event_times)
        self.sequence_ids.extend(other.sequence_ids)

    def only(self, keep: list[bool]) -> MessageColumns:
        """The rows whose ``keep`` is true, in order."""

        def kept(values: list[Any]) -> list[Any]:
            return [v for v, k in zip(values, keep, strict=True) if k]

        return MessageColumns(
            kept(self.values),
            kept(self.keys),
            kept(self.properties),
            kept(self.event_times),
            kept(self.sequence_ids),
        )

    def table(self, producer: str | None, publish_time: datetime) -> pa.Table:
        """The rows as a ``STORED_SCHEMA`` table."""
        n = len(self)
        return pa.Table.from_arrays(
            [
                _column(self.keys, pa.string()),
                pa.array(self.values, pa.binary()),
                _column(self.properties, PROPERTIES),
                _column(self.event_times, TIMESTAMP),
                pa.repeat(pa.scalar(publish_time, TIMESTAMP), n),
                pa.repeat(pa.scalar(producer, pa.string()), n),
                _column(self.sequence_ids, pa.int64()),
            ],
            schema=STORED_SCHEMA,
        )


def _column(values: Sequence[Any], type_: pa.DataType) -> pa.Array:
    # An absent field is the common case: a null column costs no Python loop.
    if values.count(None) == len(values):
        return pa.nulls(len(values), type_)
    return pa.array(values, type_)


def append(
    store: Store, topic: TopicInfo, producer: str | None, parts: dict[int, MessageColumns]
) -> dict[int, list[str | None]]:
    """Append ``parts`` atomically; per partition, its rows' ids (``None``: a dropped duplicate).

    A producer with a name has rows whose sequence id is not above the
    highest one stored for it and the partition dropped, and that highest id
    updated, in the same transaction as the append. Raises
    :class:`~sparkfn.api.errors.TopicNotFoundError` if the topic was deleted
    since it was looked up; nothing is appended then.
    """
    parts = {part: columns for part, columns in parts.items() if len(columns)}
    if not parts:
        return {}
    commit_id = uuid.uuid4().hex
    kept: dict[int, list[bool]] = {}
    if producer is None:
        # Nothing to decide under the lock: encode and write the segments
        # before taking it, so other writers wait only for the index rows.
        staged = _stage(store, topic, parts, producer)
        with store.write() as conn:
            assigned = commit_segments(store, conn, topic, staged, commit_id)
    else:
        with store.write() as conn:
            # Lock first: de-duplication must see the sequence ids of every
            # append that committed before this one.
            lock_for_append(store, conn, topic, list(parts))
            kept = _deduplicate(conn, topic, producer, parts)
            appended = {p: c.only(kept[p]) if p in kept else c for p, c in parts.items()}
            staged = _stage(store, topic, appended, producer)
            assigned = commit_segments(store, conn, topic, staged, commit_id)
    ids: dict[int, list[str | None]] = {}
    for part in parts:
        first, end = assigned.get(part, (0, 0))
        prefix = f"{part}:"
        appended_ids = [prefix + str(offset) for offset in range(first, end)]
        keep = kept.get(part)
        if keep is None:
            ids[part] = list[str | None](appended_ids)
        else:
            taken = iter(appended_ids)
            ids[part] = [next(taken) if k else None for k in keep]
    return ids


def _stage(
    store: Store, topic: TopicInfo, parts: dict[int, MessageColumns], producer: str | None
) -> list[StagedSegment]:
    now = utc_now()
    return [
        stage(store, topic, part, columns.table(producer, now))
        for part, columns in sorted(parts.items())
        if len(columns)
    ]


def _deduplicate(
    conn: Connection, topic: TopicInfo, producer: str, parts: dict[int, MessageColumns]
) -> dict[int, list[bool]]:
    """Per partition that has sequence ids, which rows to keep; the new highest ids stored."""
    with_ids = {p: c for p, c in parts.items() if c.sequence_ids.count(None) < len(c)}
    if not with_ids:
        return {}
    table = schema.producer_sequences
    last = {
        r.partition: r.last_sequence_id
        for r in conn.execute(
            select(table.c.partition, table.c.last_sequence_id).where(
                and_(
                    table.c.topic_id == topic.id,
                    table.c.producer == producer,
                    table.c.partition.in_(list(with_ids)),
                )
            )
        )
    }
    kept: dict[int, list[bool]] = {}
    for part, columns in with_ids.items():
        previous = last.get(part)
        high = previous
        keep = []
        for seq in columns.sequence_ids:
            if seq is not None:
                if high is not None and seq <= high:
                    keep.append(False)
                    continue
                high = seq
            keep.append(True)
        kept[part] = keep
        if high is None or high == previous:
            continue
        if previous is None:
            conn.execute(
                insert(table).values(
                    topic_id=topic.id, partition=part, producer=producer, last_sequence_id=high
                )
            )
        else:
            conn.execute(
                update(table)
                .where(
                    and_(
                        table.c.topic_id == topic.id,
                        table.c.producer == producer,
                        table.c.partition == part,
                    )
                )
                .values(last_sequence_id=high)
            )
    return kept
