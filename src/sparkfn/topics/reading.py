"""Reading a partition's committed messages: :func:`read_range`.

A segment is visible once the transaction that committed it (see
:mod:`sparkfn.topics.log`) has; what is read is ``READ_SCHEMA`` batches,
the stored columns with each row's topic, partition and offset.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from sqlalchemy import and_, bindparam, func, select

from sparkfn.store import schema
from sparkfn.store.store import Store
from sparkfn.topics import garbage, segments
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.message import READ_SCHEMA, STORED_SCHEMA, constant
from sparkfn.topics.prefetch import SegmentPrefetch

READ_BATCH_ROWS = 64 * 1024  # consecutive inline segments are joined up to this many rows


# read_range's index lookup, built once (building it was a third of its time). The
# segment holding `position` is the last one starting at or before it: an index lookup
# (base_offset + count alone would scan every earlier segment of the partition).
_SEG = schema.segments
_FIRST = (
    select(func.max(_SEG.c.base_offset))
    .where(
        and_(
            _SEG.c.topic_id == bindparam("topic"),
            _SEG.c.partition == bindparam("partition"),
            _SEG.c.base_offset <= bindparam("position"),
        )
    )
    .scalar_subquery()
)
_RANGE = (
    select(_SEG.c.base_offset, _SEG.c.count.label("n"), _SEG.c.location, _SEG.c.inline_data)
    .where(
        and_(
            _SEG.c.topic_id == bindparam("topic"),
            _SEG.c.partition == bindparam("partition"),
            _SEG.c.base_offset >= func.coalesce(_FIRST, -1),
            _SEG.c.base_offset + _SEG.c.count > bindparam("position"),
        )
    )
    .order_by(_SEG.c.base_offset)
    .limit(64)
)
_RANGE_TO = _RANGE.where(_SEG.c.base_offset < bindparam("end"))


def read_range(
    store: Store,
    topic: TopicInfo,
    partition: int,
    start: int,
    end: int | None = None,
    prefetch: SegmentPrefetch | None = None,
) -> Iterator[pa.RecordBatch]:
    """Yield the committed messages of ``[start, end)`` as ``READ_SCHEMA`` batches.

    Consecutive small (inline) segments are joined into batches of up to
    :data:`READ_BATCH_ROWS` rows: a producer sending at a steady rate
    commits a segment every few messages, and whoever reads pays per batch.
    A segment file ends a batch.
    Offsets below the partition's retained start are skipped (they expired).
    A segment file retired by compaction between lookup and open is looked
    up again, so a concurrent compaction never loses a message. ``prefetch``: index
    rows looked up and segments decoded ahead (:mod:`sparkfn.topics.prefetch`).
    """
    position = start
    pending: list[pa.Table] = []  # consecutive slices read, not yet yielded
    pending_rows = 0
    attempts = 0
    ahead = prefetch.rows(topic, partition, start, end) if prefetch and end is not None else None
    while end is None or position < end:
        found, ahead = ahead, None
        if found is None:
            query = _RANGE if end is None else _RANGE_TO
            with store.read() as conn:
                values = {"topic": topic.id, "partition": partition, "position": position}
                found = conn.execute(query, {**values, "end": end}).all()
        if not found:
            break
        for row in found:
            try:
                if prefetch is not None:
                    data = prefetch.decode(topic, partition, row)
                elif row.inline_data is not None:
                    data = segments.decode(row.inline_data)
                else:
                    data = segments.read_file(store.data_dir, row.location)
            except FileNotFoundError:
                if row.location is not None and garbage.restore_aside(store.path(row.location)):
                    break  # the orphan collector had it aside: committed, so it goes back
                attempts += 1
                if attempts > 5:
                    raise
                break  # the index changed under us: look the range up again
            attempts = 0  # only misses without progress in between count towards the limit
            if row.base_offset > position and pending:  # a gap (expired): offsets restart
                yield from _joined(pending, topic, partition, position - pending_rows)
                pending, pending_rows = [], 0
            position = max(position, row.base_offset)
            lo = position - row.base_offset
            hi = row.n if end is None else min(row.n, end - row.base_offset)
            if hi > lo:
                pending.append(data.slice(lo, hi - lo))
                pending_rows += hi - lo
            position = row.base_offset + hi
            if pending_rows >= READ_BATCH_ROWS or row.inline_data is None:
                yield from _joined(pending, topic, partition, position - pending_rows)
                pending, pending_rows = [], 0
            if end is not None and position >= end:
                break
    if pending:
        yield from _joined(pending, topic, partition, position - pending_rows)


def _joined(
    tables: list[pa.Table], topic: TopicInfo, partition: int, first: int
) -> Iterator[pa.RecordBatch]:
    """Consecutive slices, the first at offset ``first``, as ``READ_SCHEMA`` batches."""
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    yield _with_position(table, topic, partition, first)


_POSITION_FIELDS = [
    READ_SCHEMA.field("topic"),
    READ_SCHEMA.field("partition"),
    READ_SCHEMA.field("offset"),
]


def _with_position(table: pa.Table, topic: TopicInfo, partition: int, first: int) -> pa.RecordBatch:
    """``table`` (one chunk, or combined into one) and its topic, partition and offsets, as one
    batch made at once: three appended table columns and a combine cost about as much as the
    read of a small slice."""
    n = table.num_rows
    if any(column.num_chunks != 1 for column in table.columns):
        table = table.combine_chunks()
    columns = [column.chunk(0) for column in table.columns]
    columns += [
        constant(str(topic.name), pa.string(), n),
        constant(partition, pa.int32(), n),
        pa.array(np.arange(first, first + n, dtype=np.int64)),
    ]
    schema = table.schema
    read = READ_SCHEMA if schema.equals(STORED_SCHEMA) else pa.schema([*schema, *_POSITION_FIELDS])
    return pa.RecordBatch.from_arrays(columns, schema=read)
