"""The partitioned log: appending segments, and where its partitions end.

Reading an offset range is :mod:`sparkfn.topics.reading`.

Appends go through :func:`commit_segments` inside a store write transaction:
it locks the partition rows, hands out offsets from ``next_offset``, inserts
the index rows and advances ``next_offset`` atomically. Readers see a segment
only once that transaction commits, so a crash never exposes half an append.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Connection, and_, bindparam, insert, select, update

from sparkfn.api.errors import ConfigError, StoreError, TopicNotFoundError
from sparkfn.store import schema, signals
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store
from sparkfn.topics import segments
from sparkfn.topics.admin import TopicInfo


def partition_for_key(key: str, partitions: int) -> int:
    """The partition a key maps to: stable across processes and runs."""
    return zlib.crc32(key.encode()) % partitions


def key_partitions(keys: pa.Array, partitions: int) -> pa.Array:
    """:func:`partition_for_key` of each key (null for a null key).

    Hashed once per distinct key: outputs repeat a few keys many times, and
    the hash is a Python call.
    """
    encoded = pc.dictionary_encode(keys)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    distinct = np.array(
        [partition_for_key(k, partitions) for k in encoded.dictionary.to_pylist()],
        dtype=np.int32,
    )
    return pa.DictionaryArray.from_arrays(encoded.indices, pa.array(distinct)).dictionary_decode()


@dataclass(frozen=True)
class StagedSegment:
    """A segment encoded but not yet visible: a file written, or bytes to inline."""

    partition: int
    count: int
    size_bytes: int
    max_publish_time: datetime
    location: str | None = None
    inline_data: bytes | None = None


def stage(
    store: Store,
    topic: TopicInfo,
    partition: int,
    table: pa.Table,
    compression: segments.Codec = "auto",
    max_publish: datetime | None = None,
    nbytes: int | None = None,
) -> StagedSegment:
    """Encode ``table`` as a segment: inline when small, else as a new file;
    ``compression`` as :data:`~sparkfn.topics.segments.Codec` says. ``max_publish``
    and ``nbytes``, if the caller knows them, are the latest of the table's publish
    times and its ``nbytes``."""
    if max_publish is None:
        max_publish = pc.max(table.column("publish_time")).as_py()
    if segments.fits_inline(table, nbytes):
        data = segments.encode(table, compression)
        if len(data) <= segments.INLINE_LIMIT:
            return StagedSegment(
                partition, table.num_rows, len(data), max_publish, inline_data=data
            )
    location = segments.new_location(topic.key, partition)
    with store.writing_files(f"segment file {location} of topic {topic.name}"):
        size = segments.write_table_file(store.data_dir, location, table, compression)
    return StagedSegment(partition, table.num_rows, size, max_publish, location=location)


def lock_for_append(
    store: Store, conn: Connection, topic: TopicInfo, partitions: Sequence[int]
) -> dict[int, tuple[int, int]]:
    """Lock ``partitions`` for an append; returns ``{partition: (start, next)}`` offsets.

    Raises :class:`TopicNotFoundError` when the topic was deleted since
    ``topic`` was looked up: its partition rows are gone with it.
    """
    offsets = store.lock_partitions(conn, topic.id, partitions)
    if len(offsets) < len(set(partitions)):
        msg = f"topic {topic.name} was deleted (it existed when the append began); nothing was appended"
        raise TopicNotFoundError(msg)
    return offsets


def commit_segments(
    store: Store,
    conn: Connection,
    topic: TopicInfo,
    staged: Sequence[StagedSegment],
    commit_id: str,
) -> dict[int, tuple[int, int]]:
    """Make staged segments visible; returns ``{partition: (first, next)}`` offsets.

    Must run inside ``store.write()``. Segments of one partition get
    consecutive offsets in the order given.
    """
    assigned = commit_segments_many(store, conn, [(topic, staged)], commit_id)
    return {partition: span for (_, partition), span in assigned.items()}


def commit_segments_many(
    store: Store,
    conn: Connection,
    staged: Sequence[tuple[TopicInfo, Sequence[StagedSegment]]],
    commit_id: str,
) -> dict[tuple[int, int], tuple[int, int]]:
    """:func:`commit_segments` of several topics in a few statements (a query group's commit).

    Returns ``{(topic id, partition): (first, next)}``. One lock of every
    partition written, in (topic id, partition) order; one update of their
    next offsets; one insert of every segment row.
    """
    by_key: dict[tuple[int, int], list[StagedSegment]] = {}
    topics: dict[int, TopicInfo] = {}
    for topic, segs in staged:
        topics[topic.id] = topic
        for seg in segs:
            if not 0 <= seg.partition < topic.partitions:
                msg = (
                    f"topic {topic.name} has {topic.partitions} partitions; "
                    f"got partition {seg.partition}"
                )
                raise ConfigError(msg)
            if seg.count:
                by_key.setdefault((topic.id, seg.partition), []).append(seg)
    if not by_key:
        return {}
    offsets = store.lock_partitions_many(conn, list(by_key))
    missing = sorted({topics[t].name for t, _ in by_key if (t, _) not in offsets})
    if missing:
        msg = f"topic {missing[0]} was deleted (it existed when the append began); nothing was appended"
        raise TopicNotFoundError(msg)
    for (topic_id, _), segs in by_key.items():  # after the lock, whose wait may be long
        for seg in segs:
            if seg.location:
                _keep_staged(store, topics[topic_id], seg.location)
    for topic_id in sorted({t for t, _ in by_key}):
        signals.hint_on_commit(conn, signals.topic_hint(topic_id))
    now = utc_now()
    rows: list[dict[str, object]] = []
    ends: list[dict[str, object]] = []
    assigned: dict[tuple[int, int], tuple[int, int]] = {}
    for (topic_id, partition), segs in sorted(by_key.items()):
        first = offset = offsets[(topic_id, partition)][1]
        for seg in segs:
            rows.append(
                {
                    "topic_id": topic_id,
                    "partition": partition,
                    "base_offset": offset,
                    "count": seg.count,
                    "size_bytes": seg.size_bytes,
                    "location": seg.location,
                    "inline_data": seg.inline_data,
                    "max_publish_time": seg.max_publish_time,
                    "commit_id": commit_id,
                    "created_at": now,
                }
            )
            offset += seg.count
        assigned[(topic_id, partition)] = (first, offset)
        ends.append({"t": topic_id, "p": partition, "n": offset})
    table = schema.partitions
    conn.execute(
        update(table)
        .where(and_(table.c.topic_id == bindparam("t"), table.c.partition == bindparam("p")))
        .values(next_offset=bindparam("n")),
        ends,
    )
    conn.execute(insert(schema.segments), rows)
    return assigned


def _keep_staged(store: Store, topic: TopicInfo, location: str) -> None:
    """Check a staged file is still there, and make it young again for the orphan collector.

    :func:`~sparkfn.topics.garbage.collect_orphans` deletes unreferenced
    files older than an hour: a batch that ran longer than that may find
    one of its files gone. Committing a row for it would lose its messages,
    so the commit fails instead (and the batch is retried); touched, the
    file is not an orphan candidate while its commit goes on.
    """
    try:
        os.utime(store.path(location))
    except FileNotFoundError:
        msg = (
            f"topic {topic.name}: the staged segment file {location} is gone before its commit "
            "(unreferenced for over an hour, so `topics maintain` may have collected it); "
            "nothing of it is committed, and a retried batch stages it again"
        )
        raise StoreError(msg) from None


def end_offsets(store: Store | Connection, topic: TopicInfo) -> dict[int, tuple[int, int]]:
    """``{partition: (start_offset, end_offset)}`` as committed now (or in ``conn``'s transaction)."""
    if isinstance(store, Store):
        with store.read() as conn:
            return end_offsets(conn, topic)
    table = schema.partitions
    rows = store.execute(
        select(table.c.partition, table.c.start_offset, table.c.next_offset).where(
            table.c.topic_id == topic.id
        )
    ).all()
    return {r.partition: (r.start_offset, r.next_offset) for r in rows}


def ends_of(conn: Connection, topic_ids: Iterable[int]) -> dict[tuple[int, int], int]:
    """``{(topic id, partition): end offset}`` of many topics in one query."""
    wanted = list(topic_ids)
    if not wanted:
        return {}
    table = schema.partitions
    rows = conn.execute(
        select(table.c.topic_id, table.c.partition, table.c.next_offset).where(
            table.c.topic_id.in_(wanted)
        )
    ).all()
    return {(r.topic_id, r.partition): r.next_offset for r in rows}


# Segments looked at to estimate the stored size of what follows an offset.
SIZE_SAMPLE = 256


def stored_sizes(conn: Connection, topic: TopicInfo, partition: int, start: int) -> tuple[int, int]:
    """``(bytes, records)`` stored in the next :data:`SIZE_SAMPLE` segments from ``start``.

    An estimate of what reading on from ``start`` costs, by index lookups
    only (summing over a whole partition would read every segment row).
    """
    seg = schema.segments
    mine = and_(seg.c.topic_id == topic.id, seg.c.partition == partition)
    rows = conn.execute(
        select(seg.c.size_bytes, seg.c.count.label("n"))
        .where(and_(mine, seg.c.base_offset >= start))
        .order_by(seg.c.base_offset)
        .limit(SIZE_SAMPLE)
    ).all()
    if not rows:  # only the segment holding `start` is left
        rows = conn.execute(
            select(seg.c.size_bytes, seg.c.count.label("n"))
            .where(and_(mine, seg.c.base_offset <= start))
            .order_by(seg.c.base_offset.desc())
            .limit(1)
        ).all()
    return sum(r.size_bytes for r in rows), sum(r.n for r in rows)


def mean_stored_size(
    conn: Connection, starts: Iterable[tuple[TopicInfo, int, int]]
) -> float | None:
    """The mean stored size of a record next in line in ``(topic, partition, start)``
    (:func:`stored_sizes` summed); ``None`` without any record."""
    size = count = 0
    for topic, partition, start in starts:
        more = stored_sizes(conn, topic, partition, start)
        size, count = size + more[0], count + more[1]
    return size / count if count else None
