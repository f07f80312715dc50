"""The segments of many small ranges, looked up in one query and each decoded once.

A query group's task reads a range per member and input partition: with
two hundred members of a few messages each, :func:`~sparkfn.topics.reading.read_range`
paid an index query per range (most of a one-message slice's read) and
decoded a segment once per range that touched it (a member's range cut in
two for its two instances reads the same producer segment twice; members
subscribed to one topic read the same segments). :class:`SegmentPrefetch`
looks up the index rows of every small range of a task in one statement
when the task starts, and decodes a segment that more than one range reads
once, dropping it when its last range has read it.

Only ranges up to :data:`PREFETCH_ROWS` rows in all are fetched ahead, so
the inline bytes held at once stay within what one read batch holds
anyway; a large range is read as before, a query per 64 segments. What is
fetched ahead is what the range's own first query would have found: the
rows :func:`read_range` then reads are the same, and a segment file
retired meanwhile (compaction, retention) is looked up again from the
range's position exactly as before.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
from sqlalchemy import BigInteger, Integer, and_, bindparam, func, select, union_all

from sparkfn.store import schema
from sparkfn.store.store import Store
from sparkfn.topics import segments
from sparkfn.topics.admin import TopicInfo

# The rows of all ranges fetched ahead, at most: the inline bytes held at once stay
# within what one of read_range's batches (READ_BATCH_ROWS) holds.
PREFETCH_ROWS = 64 * 1024
# Ranges per statement (a power of two): within SQLite's 500 terms of a compound
# SELECT and far below every backend's limit on bound parameters.
RANGES_PER_QUERY = 256

# A range: (topic id, partition, start, end).
RangeKey = tuple[int, int, int, int]
# A segment: (topic id, partition, base offset).
SegmentKey = tuple[int, int, int]

_SEG = schema.segments


@functools.lru_cache(maxsize=16)
def _query(size: int) -> Any:
    """The index rows of ``size`` ranges (bound as ``i<n>, t<n>, p<n>, lo<n>, hi<n>``),
    each tagged with its position ``i``; built and compiled once per size.

    Per range, the rows :func:`~sparkfn.topics.reading.read_range`'s own lookup
    finds: from the last segment starting at or before its start, up to
    its end, in offset order.
    """
    types = {"i": Integer, "t": Integer, "p": Integer, "lo": BigInteger, "hi": BigInteger}
    # A UNION ALL of one-row SELECTs, not VALUES: SQLAlchemy caches its compiled form,
    # and compiling a VALUES of 256 rows anew took longer than the query.
    wanted = union_all(
        *(
            select(*(bindparam(f"{name}{n}", type_=t).label(name) for name, t in types.items()))
            for n in range(size)
        )
    ).cte("wanted")
    first_seg = _SEG.alias("first_seg")
    first = (
        select(func.max(first_seg.c.base_offset))
        .where(
            and_(
                first_seg.c.topic_id == wanted.c.t,
                first_seg.c.partition == wanted.c.p,
                first_seg.c.base_offset <= wanted.c.lo,
            )
        )
        .scalar_subquery()
    )
    return (
        select(
            wanted.c.i,
            _SEG.c.base_offset,
            _SEG.c.count.label("n"),
            _SEG.c.location,
            _SEG.c.inline_data,
        )
        .select_from(wanted)
        .join(
            _SEG,
            and_(
                _SEG.c.topic_id == wanted.c.t,
                _SEG.c.partition == wanted.c.p,
                _SEG.c.base_offset >= func.coalesce(first, -1),
                _SEG.c.base_offset < wanted.c.hi,
                _SEG.c.base_offset + _SEG.c.count > wanted.c.lo,
            ),
        )
        .order_by(wanted.c.i, _SEG.c.base_offset)
    )


def _bucket(count: int) -> int:
    """The statement size for ``count`` ranges: the next power of two (a few statements,
    each compiled once, instead of one per count)."""
    return min(RANGES_PER_QUERY, 1 << max(count - 1, 1).bit_length())


def _params(ranges: Sequence[RangeKey]) -> dict[str, int]:
    """The bound values of ``ranges``, padded to their bucket with ranges of no topic."""
    padded = [*ranges, *[(-1, -1, 0, 0)] * (_bucket(len(ranges)) - len(ranges))]
    out: dict[str, int] = {}
    for n, (topic_id, partition, lo, hi) in enumerate(padded):
        out.update({f"i{n}": n, f"t{n}": topic_id, f"p{n}": partition, f"lo{n}": lo, f"hi{n}": hi})
    return out


class SegmentPrefetch:
    """The index rows of a task's small ranges, and their shared segments decoded once.

    Made in the task, used by that task's thread only. ``ranges`` lists
    every range the task will read, once per read (the instances of a
    ``key_shared`` member each read all of its ranges). :meth:`rows` hands a
    range's rows to each of its reads; :meth:`decode` keeps a segment while a
    read that has not come yet will read it.
    """

    def __init__(self, store: Store, ranges: Iterable[tuple[TopicInfo, int, int, int]]) -> None:
        self.store = store
        self._rows: dict[RangeKey, list[Any]] = {}
        self._reads: dict[RangeKey, int] = {}  # reads of each fetched range still to come
        self._readers: dict[SegmentKey, int] = {}  # reads still to come of each segment
        self._decoded: dict[SegmentKey, pa.Table] = {}
        reads = Counter((t.id, p, lo, hi) for t, p, lo, hi in ranges if hi > lo)
        chosen: list[RangeKey] = []
        total = 0
        for key in sorted(reads, key=lambda r: r[3] - r[2]):  # the one-message ranges first
            total += key[3] - key[2]
            if total > PREFETCH_ROWS:
                break
            chosen.append(key)
        if sum(reads[key] for key in chosen) < 2:
            return  # one read: its own lookup is the same one query
        with store.read() as conn:
            for first in range(0, len(chosen), RANGES_PER_QUERY):
                part = chosen[first : first + RANGES_PER_QUERY]
                found: dict[RangeKey, list[Any]] = {key: [] for key in part}
                for row in conn.execute(_query(_bucket(len(part))), _params(part)):
                    found[part[row.i]].append(row)
                self._rows.update(found)
        for key, rows in self._rows.items():
            self._reads[key] = reads[key]
            for row in rows:
                segment = (key[0], key[1], row.base_offset)
                self._readers[segment] = self._readers.get(segment, 0) + reads[key]

    def rows(self, topic: TopicInfo, partition: int, start: int, end: int) -> Sequence[Any] | None:
        """The index rows of ``[start, end)`` fetched ahead, for one of its reads (None: not
        fetched, or every read of it counted in the constructor has had them)."""
        key = (topic.id, partition, start, end)
        left = self._reads.get(key, 0) - 1
        if left < 0:
            return None
        if left:
            self._reads[key] = left
            return self._rows[key]
        del self._reads[key]
        return self._rows.pop(key)

    def decode(self, topic: TopicInfo, partition: int, row: Any) -> pa.Table:
        """The segment of index row ``row``, decoded once for all the reads counted for it.

        Raises :class:`FileNotFoundError`, as :func:`~sparkfn.topics.reading.read_range`
        expects, when a segment file is gone.
        """
        key = (topic.id, partition, row.base_offset)
        table = self._decoded.get(key)
        if table is None:
            table = (
                segments.decode(row.inline_data)
                if row.inline_data is not None
                else segments.read_file(self.store.data_dir, row.location)
            )
        left = self._readers.get(key, 0) - 1
        if left > 0:
            self._readers[key] = left
            self._decoded[key] = table
        else:
            self._readers.pop(key, None)
            self._decoded.pop(key, None)
        return table
