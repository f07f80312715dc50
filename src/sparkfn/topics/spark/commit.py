"""Staging rows as segments and committing them once: the protocol of every sparkfn sink.

Executors *stage* segments (inline bytes in the commit message when small,
else a file nobody references yet); the driver makes them visible in one
store transaction (:func:`commit_staged`, which deletes the files of a
batch that did not commit). :func:`commit_batch_once` records ``(sink id,
batchId)`` in that transaction, so a batch Spark replays after a crash is skipped (the
plain topic sink); the function sink keys its commits on its subscription
instead (:mod:`sparkfn.topics.subscription`).
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable
from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Connection, and_, insert, select

from sparkfn.api.errors import ConfigError, PayloadError
from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.log import StagedSegment, key_partitions, stage
from sparkfn.topics.message import (
    PROPERTIES,
    STORED_SCHEMA,
    TIMESTAMP,
    SchemaType,
    check_values,
    properties_from_json,
)
from sparkfn.topics.segments import Codec

# Fault injection for crash tests: SIGKILL the driver's process group (the
# driver and its JVM) right after the sink's transaction for this batch id
# committed, before Spark records the batch. Spark runs ``commit`` in a Python
# runner process in a group of its own, so the test starts the driver as a
# session leader and the hook kills the group whose id is the session id.
KILL_AFTER_COMMIT_ENV = "SPARKFN_TEST_KILL_AFTER_SINK_COMMIT"


def kill_if_requested(batch_id: int) -> None:
    """The :data:`KILL_AFTER_COMMIT_ENV` fault hook; call right after a sink's commit."""
    if os.environ.get(KILL_AFTER_COMMIT_ENV) == str(batch_id):
        os.killpg(os.getsid(0), signal.SIGKILL)


# Fault injection for crash tests: in a Spark task, after the task staged its
# output and before it hands the staged batch to Spark, SIGKILL the driver's
# process group (driver and JVM: the staged files stay, never committed) and
# then the task's own Python worker, which Spark's daemon keeps in a group of
# its own. The task learns its micro-batch id from the local property Spark's
# MicroBatchExecution sets for every job of a batch.
KILL_AFTER_STAGE_ENV = "SPARKFN_TEST_KILL_AFTER_STAGE"
_BATCH_ID_PROPERTY = "streaming.sql.batchId"


def kill_after_stage_if_requested() -> None:
    """The :data:`KILL_AFTER_STAGE_ENV` fault hook; call in a task right after staging."""
    wanted = os.environ.get(KILL_AFTER_STAGE_ENV)
    if wanted is None:
        return
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is not None and context.getLocalProperty(_BATCH_ID_PROPERTY) == wanted:
        os.killpg(os.getsid(0), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)


def commit_batch_once(
    conn: Connection, sink_id: str, batch_id: int, apply: Callable[[Connection, str], None]
) -> bool:
    """In ``conn``'s transaction: ``apply(conn, commit_id)`` and record ``(sink_id, batch_id)``.

    Returns False, doing nothing, if the batch was committed before (Spark
    replays a batch it had not recorded when the driver died): the shared
    exactly-once mechanism of every sparkfn sink.
    """
    table = schema.sink_commits
    if batch_committed(conn, sink_id, batch_id):
        return False
    commit_id = uuid.uuid4().hex
    apply(conn, commit_id)
    conn.execute(
        insert(table).values(
            sink_id=sink_id, batch_id=batch_id, commit_id=commit_id, committed_at=utc_now()
        )
    )
    return True


def batch_committed(conn: Connection, sink_id: str, batch_id: int) -> bool:
    """Whether :func:`commit_batch_once` committed ``(sink_id, batch_id)``."""
    table = schema.sink_commits
    found = conn.execute(
        select(table.c.batch_id).where(
            and_(table.c.sink_id == sink_id, table.c.batch_id == batch_id)
        )
    ).first()
    return found is not None


def commit_staged(
    store: Store, staged: list[StagedSegment], body: Callable[[Connection], bool]
) -> bool:
    """Run ``body`` in one write transaction; delete the ``staged`` files it did not make visible.

    ``body`` returns whether it committed the staged segments (False: a
    replay, which references none of them). The files go when nothing can
    reference them: ``body`` returned False, or raised, so the transaction
    rolled back before its COMMIT. When the COMMIT itself fails the outcome
    is unknown (a connection lost after the server committed): the files
    stay, since deleting them could break committed segments, and
    ``topics maintain`` removes them later if nothing references them.
    """
    reached_commit = False
    try:
        with store.write() as conn:
            visible = body(conn)
            reached_commit = True
    except BaseException:
        if not reached_commit:
            discard_staged(store, staged)
        raise
    if not visible:
        discard_staged(store, staged)
    return visible


def discard_staged(store: Store, staged: list[StagedSegment]) -> None:
    """Delete staged segment files; only for segments no committed row references."""
    for seg in staged:
        if seg.location:
            store.path(seg.location).unlink(missing_ok=True)


def _column(batch: pa.RecordBatch, name: str, type_: pa.DataType) -> pa.Array:
    index = batch.schema.get_field_index(name)
    if index < 0:
        return pa.nulls(batch.num_rows, type_)
    return _as(batch.column(index), type_)


def _as(column: pa.Array, type_: pa.DataType) -> pa.Array:
    """``column`` cast to ``type_``; as it is when it has that type already (a cast is a
    compute call even then, ~10 us: a staged batch made six, a group's slices hundreds)."""
    return column if column.type == type_ else column.cast(type_)


def _properties(batch: pa.RecordBatch) -> pa.Array:
    """``properties`` as a map: given as one, as JSON object text, or absent."""
    index = batch.schema.get_field_index("properties")
    if index < 0:
        return pa.nulls(batch.num_rows, PROPERTIES)
    column = batch.column(index)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        try:
            return properties_from_json(column.cast(pa.string()))
        except (ValueError, TypeError, AttributeError) as exc:
            msg = f"properties: a value is not a JSON object of strings: {exc}"
            raise PayloadError(msg) from exc
    return _as(column, PROPERTIES)


def to_stored_table(
    batch: pa.RecordBatch, topic: TopicInfo, now: datetime | None = None
) -> pa.Table:
    """``batch``'s rows as ``topic`` stores them, published at ``now`` (default: now)."""
    value = batch.column(batch.schema.get_field_index("value"))
    # A view, not a cast, where the layouts are the same (a cast is a compute call).
    if pa.types.is_string(value.type):
        value = value.view(pa.binary())
    elif pa.types.is_large_string(value.type):
        value = value.cast(pa.binary())
    elif topic.schema_type is SchemaType.STRING:
        try:
            if pa.types.is_binary(value.type):
                value.view(pa.string()).validate(full=True)  # full: checks the UTF-8
            else:
                value.cast(pa.string())
        except pa.ArrowInvalid as exc:
            msg = f"topic {topic.name} (schema string): a value is not valid UTF-8: {exc}"
            raise PayloadError(msg) from exc
    if topic.schema_type in (SchemaType.JSON, SchemaType.AVRO):
        check_values(
            value.to_pylist(),
            topic.schema_type,
            topic=str(topic.name),
            definition=topic.schema_definition,
        )
    n = batch.num_rows
    return pa.Table.from_arrays(
        [
            _column(batch, "key", pa.string()),
            _as(value, pa.binary()),
            _properties(batch),
            _column(batch, "event_time", TIMESTAMP),
            pa.repeat(pa.scalar(now or utc_now(), TIMESTAMP), n),
            _column(batch, "producer", pa.string()),
            _column(batch, "sequence_id", pa.int64()),
        ],
        schema=STORED_SCHEMA,
    )


def route_rows(batch: pa.RecordBatch, partitions: int, row_base: int) -> pa.Array:
    """Target partition per row: explicit ``partition``, else key hash, else spread."""
    n = batch.num_rows
    routed = pa.array(np.arange(row_base, row_base + n, dtype=np.int64) % partitions, pa.int32())
    keys = _column(batch, "key", pa.string())
    if keys.null_count < n:
        routed = pc.coalesce(key_partitions(keys, partitions), routed)
    explicit = _column(batch, "partition", pa.int32())
    if explicit.null_count < n:
        bad = pc.or_(pc.less(explicit, 0), pc.greater_equal(explicit, partitions))
        if pc.any(bad).as_py():
            first = pc.index(bad, True).as_py()
            msg = (
                f"row {row_base + first}: partition {explicit[first].as_py()} is out of range "
                f"0..{partitions - 1}"
            )
            raise ConfigError(msg)
        routed = pc.coalesce(explicit, routed)
    return routed


# A partition's rows a stager holds before staging them as one segment: big
# segments read fast, and a task's memory stays bounded however large its batch.
STAGE_ROWS = 256 * 1024
STAGE_BYTES = 64 * 1024 * 1024


class PartitionStager:
    """Routes a topic's rows to its partitions and stages them as segments, in order.

    Rows go where :func:`route_rows` sends them. A partition's rows are held
    until :data:`STAGE_ROWS` rows or :data:`STAGE_BYTES` bytes are pending,
    or :meth:`finish`, then staged as one segment; the segments of a
    partition are listed in the order of their rows, which is the order
    :func:`~sparkfn.topics.log.commit_segments` gives them offsets in.
    """

    def __init__(self, store: Store, topic: TopicInfo, compression: Codec = "auto") -> None:
        self.store = store
        self.topic = topic
        self.compression = compression  # of the segments (sparkfn.topics.segments.Codec)
        self.staged: list[StagedSegment] = []
        self._row_base = 0  # rows added so far: where keyless rows' spreading goes on
        self._pending: dict[int, list[pa.Table]] = {}
        self._sizes: dict[int, tuple[int, int]] = {}  # partition -> (rows, bytes) pending
        self._latest: dict[int, datetime] = {}  # partition -> its pending rows' last publish time

    def add(self, batch: pa.RecordBatch) -> None:
        """Route and hold ``batch``'s rows (any columns :func:`to_stored_table` takes)."""
        if batch.num_rows == 0:
            return
        now = utc_now()
        table = to_stored_table(batch, self.topic, now)
        parts: list[tuple[int, pa.Table]]
        if self.topic.partitions == 1 and not _explicit_partitions(batch):
            parts = [(0, table)]  # the usual case, without routing each row
        else:
            routes = route_rows(batch, self.topic.partitions, self._row_base)
            parts = split_by_partition(table, routes)
        self._row_base += batch.num_rows
        for part, rows in parts:
            self._pending.setdefault(part, []).append(rows)
            self._latest[part] = now
            held, size = self._sizes.get(part, (0, 0))
            held, size = held + rows.num_rows, size + rows.nbytes
            self._sizes[part] = (held, size)
            if held >= STAGE_ROWS or size >= STAGE_BYTES:
                self._stage(part)

    def finish(self) -> list[StagedSegment]:
        """Stage what is held; every segment staged, in order."""
        for part in sorted(self._pending):
            self._stage(part)
        return self.staged

    def _stage(self, part: int) -> None:
        tables = self._pending.pop(part)
        _, size = self._sizes.pop(part)  # the tables' nbytes, counted as they came
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        latest = self._latest.pop(part)  # every row of an add is published at its time
        self.staged.append(
            stage(self.store, self.topic, part, table, self.compression, latest, size)
        )


def _explicit_partitions(batch: pa.RecordBatch) -> bool:
    """Whether a row of ``batch`` names its partition (:func:`route_rows` checks it)."""
    index = batch.schema.get_field_index("partition")
    return index >= 0 and bool(batch.column(index).null_count < batch.num_rows)


def split_by_partition(table: pa.Table, routes: pa.Array) -> list[tuple[int, pa.Table]]:
    """``table``'s rows per target partition (``routes``, one per row), each in row order."""
    counts = pc.value_counts(routes)
    if len(counts) == 1:
        return [(counts[0]["values"].as_py(), table)]
    # One stable sort and one take, instead of a filter over every row per partition.
    ordered = table.take(pc.sort_indices(routes))
    parts = sorted(
        zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True)
    )
    out: list[tuple[int, pa.Table]] = []
    first = 0
    for part, n in parts:
        out.append((part, ordered.slice(first, n)))
        first += n
    return out
