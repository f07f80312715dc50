"""Retention and compaction of topic segments.

Both work on whole segments and change the index in one transaction per
partition; the files they replace are retired (see :mod:`garbage`), not
deleted, so a reader in the middle of a segment keeps reading.

* Retention deletes a partition's oldest segments while they are older than
  the topic's time limit (every message in them expired) or while the
  partition is over its size limit. It never deletes the newest segment
  for size, nor a message a subscription has not read yet (as in Pulsar,
  retention covers acknowledged messages; a subscription's backlog stays
  until it is read or the subscription is deleted), and advances
  ``start_offset`` past what it deleted.
* Compaction merges runs of consecutive small segments into one file, so
  many small appends do not leave many tiny files and index rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
from sqlalchemy import Connection, Row, and_, delete, func, select, update

from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store
from sparkfn.topics import garbage, segments
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.log import StagedSegment, stage

# Segments smaller than this are merged by compaction.
SMALL_SEGMENT_BYTES = 1024 * 1024
# A merged segment aims at about this size.
TARGET_SEGMENT_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class MaintenanceReport:
    """What one maintenance pass did."""

    segments_deleted: int = 0
    messages_expired: int = 0
    segments_merged: int = 0
    segments_written: int = 0


def apply_retention(
    store: Store,
    topic: TopicInfo,
    now: datetime | None = None,
    grace: timedelta = garbage.DEFAULT_GRACE,
) -> MaintenanceReport:
    """Delete expired or over-size segments of every partition of ``topic``."""
    if topic.retention_ms is None and topic.retention_bytes is None:
        return MaintenanceReport()
    now = now or utc_now()
    seg = schema.segments
    deleted = expired = 0
    for partition in range(topic.partitions):
        with store.write() as conn:
            store.lock_partitions(conn, topic.id, [partition])
            rows = conn.execute(
                select(
                    seg.c.id,
                    seg.c.base_offset,
                    seg.c.count.label("n"),
                    seg.c.size_bytes,
                    seg.c.location,
                    seg.c.max_publish_time,
                )
                .where(and_(seg.c.topic_id == topic.id, seg.c.partition == partition))
                .order_by(seg.c.base_offset)
            ).all()
            total = sum(r.size_bytes for r in rows)
            floor = _acknowledged(conn, topic, partition)
            doomed = []
            for index, row in enumerate(rows):
                if floor is not None and row.base_offset + row.n > floor:
                    break  # a subscription has not read all of it yet: its backlog stays
                too_old = topic.retention_ms is not None and _aware(
                    row.max_publish_time
                ) < now - timedelta(milliseconds=topic.retention_ms)
                too_big = (
                    topic.retention_bytes is not None
                    and total > topic.retention_bytes
                    and index < len(rows) - 1
                )
                if not (too_old or too_big):
                    break
                doomed.append(row)
                total -= row.size_bytes
            if not doomed:
                continue
            conn.execute(delete(seg).where(seg.c.id.in_([r.id for r in doomed])))
            last = doomed[-1]
            conn.execute(
                update(schema.partitions)
                .where(
                    and_(
                        schema.partitions.c.topic_id == topic.id,
                        schema.partitions.c.partition == partition,
                    )
                )
                .values(start_offset=last.base_offset + last.n)
            )
            garbage.retire_locations(conn, [r.location for r in doomed if r.location], grace)
            deleted += len(doomed)
            expired += sum(r.n for r in doomed)
    return MaintenanceReport(segments_deleted=deleted, messages_expired=expired)


def _acknowledged(conn: Connection, topic: TopicInfo, partition: int) -> int | None:
    """The offset every subscription of the partition has read up to (None: it has none).

    Cursors only move forward, so a value read while one moves is at worst
    too low: retention then keeps a segment a little longer.
    """
    cursors = schema.subscriptions
    floor: int | None = conn.execute(
        select(func.min(cursors.c.cursor)).where(
            and_(cursors.c.topic_id == topic.id, cursors.c.partition == partition)
        )
    ).scalar()
    return floor


def _aware(value: datetime) -> datetime:
    # SQLite hands back naive datetimes for timezone-aware columns.
    return value if value.tzinfo else value.replace(tzinfo=utc_now().tzinfo)


def compact(
    store: Store,
    topic: TopicInfo,
    small_bytes: int = SMALL_SEGMENT_BYTES,
    target_bytes: int = TARGET_SEGMENT_BYTES,
    grace: timedelta = garbage.DEFAULT_GRACE,
) -> MaintenanceReport:
    """Merge runs of consecutive small segments of each partition."""
    seg = schema.segments
    merged = written = 0
    for partition in range(topic.partitions):
        with store.read() as conn:
            rows = conn.execute(
                select(
                    seg.c.id,
                    seg.c.base_offset,
                    seg.c.count.label("n"),
                    seg.c.size_bytes,
                    seg.c.location,
                    seg.c.inline_data,
                )
                .where(
                    and_(
                        seg.c.topic_id == topic.id,
                        seg.c.partition == partition,
                        seg.c.size_bytes < small_bytes,
                    )
                )
                .order_by(seg.c.base_offset)
            ).all()
        for run in _runs(rows, target_bytes):
            if len(run) < 2:
                continue
            tables = [
                segments.decode(r.inline_data)
                if r.inline_data is not None
                else segments.read_file(store.data_dir, r.location)
                for r in run
            ]
            staged = stage(store, topic, partition, pa.concat_tables(tables))
            if _swap(store, topic, partition, run, staged, grace):
                merged += len(run)
                written += 1
            elif staged.location:
                store.path(staged.location).unlink(missing_ok=True)
    return MaintenanceReport(segments_merged=merged, segments_written=written)


def _runs(rows: Sequence[Row[Any]], target_bytes: int) -> list[list[Row[Any]]]:
    """Split small segments into runs of contiguous offsets of bounded size."""
    runs: list[list[Row[Any]]] = []
    for row in rows:
        current = runs[-1] if runs else None
        if (
            current
            and current[-1].base_offset + current[-1].n == row.base_offset
            and sum(r.size_bytes for r in current) + row.size_bytes <= target_bytes
        ):
            current.append(row)
        else:
            runs.append([row])
    return runs


def _swap(
    store: Store,
    topic: TopicInfo,
    partition: int,
    run: list[Row[Any]],
    staged: StagedSegment,
    grace: timedelta,
) -> bool:
    """Replace ``run`` by the merged segment, if retention did not touch it meanwhile."""
    seg = schema.segments
    ids = [r.id for r in run]
    with store.write() as conn:
        store.lock_partitions(conn, topic.id, [partition])
        still = conn.execute(select(seg.c.id).where(seg.c.id.in_(ids))).scalars().all()
        if len(still) != len(ids):
            return False
        conn.execute(delete(seg).where(seg.c.id.in_(ids)))
        conn.execute(
            seg.insert().values(
                topic_id=topic.id,
                partition=partition,
                base_offset=run[0].base_offset,
                count=staged.count,
                size_bytes=staged.size_bytes,
                location=staged.location,
                inline_data=staged.inline_data,
                max_publish_time=staged.max_publish_time,
                commit_id=f"compaction-{uuid.uuid4().hex}",
                created_at=utc_now(),
            )
        )
        garbage.retire_locations(conn, [r.location for r in run if r.location], grace)
    return True


def run_maintenance(store: Store, grace: timedelta = garbage.DEFAULT_GRACE) -> MaintenanceReport:
    """Retention, then compaction, on every topic, then garbage collection."""
    totals = MaintenanceReport()
    for topic in TopicAdmin(store).list():
        r = apply_retention(store, topic, grace=grace)
        c = compact(store, topic, grace=grace)
        totals = MaintenanceReport(
            totals.segments_deleted + r.segments_deleted,
            totals.messages_expired + r.messages_expired,
            totals.segments_merged + c.segments_merged,
            totals.segments_written + c.segments_written,
        )
    garbage.collect(store)
    garbage.collect_orphans(store)
    return totals
