"""The ``sparkfn`` Spark data source: topics as a streaming source and sink.

Reading::

    spark.readStream.format("sparkfn")
        .option("topic", "public/default/in")          # or "topics": "a,b"
        .option("startingOffsets", "earliest")         # or "latest" (default)
        .option("maxRecordsPerBatch", 10000)           # admission control
        .load()

Rows have the columns of :data:`READ_SCHEMA` (``key, value, properties,
event_time, publish_time, producer, sequence_id, topic, partition, offset``).
Offsets are ``{"<topic>#<partition>": next_offset}``. ``Trigger.AvailableNow``
is supported: the source freezes the end offsets when the query starts.
``propertiesAs`` ``json`` gives ``properties`` as JSON object text instead of
a map (null when a message has none): Spark converts a string column several
times faster, which the function runtime uses between its Python stages.

Writing::

    df.writeStream.format("sparkfn")
        .option("topic", "public/default/out")
        .option("checkpointLocation", "/path")         # also the sink's identity
        .start()

The frame needs a ``value`` column (binary or string) and may have ``key``,
``properties`` (a string map, or JSON object text), ``event_time``,
``partition``, ``producer`` and ``sequence_id``. Rows with a ``partition`` go there, rows with a key go to
the key's hash partition, the rest are spread evenly.

Exactly-once: executors *stage* segments (inline bytes in the commit message
when small, else a file nobody references yet); the driver's ``commit``
makes them visible in one store transaction that also records
``(sink id, batchId)``. A batch Spark replays after a crash finds its id
recorded and is skipped, so each batch lands once.

Every option is read on the driver; executors get resolved values.

Supervised queries (functions and sinks) pass ``controlId`` (the function's
name): the reader then follows the run's record in the store (see
:mod:`sparkfn.runtime.control`) at every trigger: a drain caps input at its
target offsets, a suspend admits nothing more, and both end with one
end-of-stream batch whose rows are markers (``offset == -1``, one per live
instance; the offset key ``__final__`` counts them); dead or shut-down
instances get no input, their share goes to the live ones; and no batch
starts while a death waits for the supervisor.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType
from sqlalchemy import Connection, and_, insert, select, update

from sparkfn.api.errors import ConfigError, PayloadError
from sparkfn.config.settings import Settings
from sparkfn.store import schema
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.log import (
    StagedSegment,
    commit_segments,
    end_offsets,
    partition_for_key,
    read_range,
    stage,
)
from sparkfn.topics.message import (
    PROPERTIES,
    READ_SCHEMA,
    SPARK_READ_TYPES,
    STORED_SCHEMA,
    TIMESTAMP,
    SchemaType,
    check_values,
    properties_from_json,
    properties_to_json,
    utc_now,
)

DEFAULT_MAX_RECORDS_PER_TASK = 200_000
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


def _options(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def _positive_int(opts: dict[str, str], name: str, default: int | None) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        msg = f"sparkfn data source option {name} must be a positive integer; got {raw!r}"
        raise ConfigError(msg)
    return value


def _offset_key(topic: TopicInfo, partition: int) -> str:
    return f"{topic.name}#{partition}"


ASSIGNMENTS = ("shared", "failover", "key_shared")


@dataclass(frozen=True)
class TopicRange(InputPartition):
    """One Spark task's share: ``[start, end)`` of one topic partition.

    ``instance`` is the function instance the range belongs to (``shared``,
    ``failover``); ``None`` means per row, by key hash (``key_shared``).
    """

    topic: TopicInfo
    partition: int
    start: int
    end: int
    instance: int | None = None
    instances: tuple[int, ...] | None = None  # the live instances


FINAL_KEY = "__final__"  # offsets: end-of-stream batches planned so far


def current_ends(store: Store, topics: list[str]) -> dict[str, int]:
    """The committed end offsets of ``topics`` now, keyed as the reader keys them."""
    admin = TopicAdmin(store)
    out = {}
    for name in topics:
        topic = admin.get(name)
        for part, (_, end) in end_offsets(store, topic).items():
            out[_offset_key(topic, part)] = end
    return out


@dataclass(frozen=True)
class FinalMarker(InputPartition):
    """The end-of-stream batch's task for one instance: one marker row."""

    instance: int


class SparkfnStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reads topics; called on the driver except :meth:`read` (executors)."""

    def __init__(self, opts: dict[str, str]) -> None:
        settings = Settings.resolve(opts.get("datadir"), opts.get("storeurl"))
        self.store_url = settings.store_url
        self.data_dir = str(settings.data_dir)
        names = opts.get("topics") or opts.get("topic")
        if not names:
            msg = "sparkfn data source: option 'topic' (or 'topics') is required for reading"
            raise ConfigError(msg)
        admin = TopicAdmin(self._store())
        self.topics = [admin.get(n.strip()) for n in names.split(",") if n.strip()]
        self.starting = opts.get("startingoffsets", "latest")
        if self.starting not in ("earliest", "latest"):
            msg = f"sparkfn data source option startingOffsets must be earliest or latest; got {self.starting!r}"
            raise ConfigError(msg)
        self.max_records = _positive_int(opts, "maxRecordsPerBatch", None)
        self.max_per_task = _positive_int(opts, "maxRecordsPerTask", DEFAULT_MAX_RECORDS_PER_TASK)
        self.instances = _positive_int(opts, "instances", None)
        self.assignment = opts.get("assignment", "shared")
        if self.assignment not in ASSIGNMENTS:
            msg = f"sparkfn data source option assignment must be one of {', '.join(ASSIGNMENTS)}; got {self.assignment!r}"
            raise ConfigError(msg)
        # at_most_once: a batch planned again with the same end is a replay; drop it.
        self.claim_id = opts.get("claimid")
        # Producing only the columns the query uses saves their conversion in
        # the JVM, which costs more than reading them.
        columns = read_columns(opts)
        self.columns = None if len(columns) == len(_SPARK_TYPES) else columns
        self.properties_json = _properties_as_json(opts) and "properties" in columns
        self.target: dict[str, int] | None = None
        self.control_id = opts.get("controlid")

    def _control(self) -> Any:
        if self.control_id is None:
            return None
        from sparkfn.runtime.control import read_control  # noqa: PLC0415 - avoids a cycle

        return read_control(self._store(), self.control_id)

    def _live(self, control: Any) -> list[int] | None:
        n = self.instances
        if n is None:
            return None
        return control.live(n) if control is not None else list(range(n))

    def _store(self) -> Store:
        return Store.cached(self.store_url, self.data_dir)

    def _bounds(self) -> dict[str, tuple[int, int]]:
        store = self._store()
        out = {}
        for topic in self.topics:
            for part, bounds in end_offsets(store, topic).items():
                out[_offset_key(topic, part)] = bounds
        return out

    def initialOffset(self) -> dict[str, int]:
        """Called once on the driver when a query starts with no checkpoint."""
        index = 0 if self.starting == "earliest" else 1
        return {key: bounds[index] for key, bounds in self._bounds().items()}

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze the end at what is committed now (``Trigger.AvailableNow``)."""
        self.target = {key: end for key, (_, end) in self._bounds().items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxRecordsPerBatch`` when set, else everything available."""
        if self.max_records is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.max_records)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        """The end of the next batch: what is available, capped by ``limit`` and the run's control."""
        control = self._control()
        data = {k: v for k, v in start.items() if k != FINAL_KEY}
        finals = start.get(FINAL_KEY, 0)
        available = (
            self.target
            if self.target is not None
            else {k: e for k, (_, e) in self._bounds().items()}
        )
        if control is not None:
            live = self._live(control)
            if live is not None and not live:
                return start  # every instance is down: admit nothing
            if any(r.dead and not r.handled for r in control.instances.values()):
                return start  # a death waits for the supervisor: no new batch
            mode = control.stop_mode
            if mode == "cancel" or (mode and control.final_seq <= finals):
                return start
            if mode == "suspend":
                return {**start, FINAL_KEY: control.final_seq}
            if mode == "drain":
                target = control.drain_target or {}
                available = {k: min(available.get(k, 0), target.get(k, 0)) for k in available}
                if all(data.get(k, 0) >= end for k, end in available.items()):
                    return {**start, FINAL_KEY: control.final_seq}
        end = {
            key: max(data.get(key, 0), available.get(key, 0)) for key in set(data) | set(available)
        }
        if isinstance(limit, ReadMaxRows):
            end = _cap(data, end, limit.max_rows)
        if FINAL_KEY in start:
            end[FINAL_KEY] = finals
        return end

    def reportLatestOffset(self) -> dict[str, int]:
        """What is committed now, for Spark's progress reports."""
        return {k: e for k, (_, e) in self._bounds().items()}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        """Split the batch into tasks, each tagged with the instance it belongs to.

        Without ``instances``: tasks of at most ``maxRecordsPerTask`` records.
        ``shared``: ranges are cut so every instance gets a share and dealt
        round-robin. ``failover``: one task per topic partition, owned by
        instance ``partition index % instances``. ``key_shared``: the
        instance is chosen per row by key hash in :meth:`read`.
        """
        if self.claim_id is not None and start != end and self._is_replay(end):
            return []
        control = self._control()
        live = self._live(control)
        if end.get(FINAL_KEY, 0) > start.get(FINAL_KEY, 0):
            # A final batch replayed by a later run (its stop is over) is empty.
            current = (
                control is not None
                and control.stop_mode in ("drain", "suspend")
                and control.final_seq == end[FINAL_KEY]
            )
            return [FinalMarker(i) for i in (live or [0])] if current else []
        spans = []
        for topic in self.topics:
            for part in range(topic.partitions):
                key = _offset_key(topic, part)
                lo, hi = start.get(key, 0), end.get(key, 0)
                if hi > lo:
                    spans.append((topic, part, lo, hi))
        total = sum(hi - lo for _, _, lo, hi in spans)
        n = len(live) if live is not None else None
        step = self.max_per_task or max(total, 1)
        if n and self.assignment == "shared":
            step = max(1, min(step, -(-total // n)))
        ranges: list[InputPartition] = []
        owners = tuple(live) if live is not None else None
        for topic, part, lo, hi in spans:
            if owners and self.assignment == "failover":
                owner = owners[self._partition_index(topic, part) % len(owners)]
                ranges.append(TopicRange(topic, part, lo, hi, owner, owners))
                continue
            for first in range(lo, hi, step):
                ranges.append(TopicRange(topic, part, first, min(hi, first + step), None, owners))
        if owners and self.assignment == "shared":
            ranges = [
                replace(r, instance=owners[i % len(owners)])
                for i, r in enumerate(ranges)
                if isinstance(r, TopicRange)
            ]
        return ranges

    def _partition_index(self, topic: TopicInfo, partition: int) -> int:
        index = 0
        for t in self.topics:
            if t.id == topic.id:
                return index + partition
            index += t.partitions
        return partition

    def _is_replay(self, end: dict[str, int]) -> bool:
        """Record ``end`` as claimed; True if it was claimed already (a replay)."""
        table = schema.source_claims
        encoded = json.dumps(end, sort_keys=True)
        with self._store().write() as conn:
            row = conn.execute(
                select(table.c.end_offsets).where(table.c.sink_id == self.claim_id)
            ).first()
            if row is not None and row.end_offsets == encoded:
                return True
            values = {"end_offsets": encoded, "claimed_at": utc_now()}
            if row is None:
                conn.execute(insert(table).values(sink_id=self.claim_id, **values))
            else:
                conn.execute(update(table).where(table.c.sink_id == self.claim_id).values(**values))
        return False

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Runs on an executor: yield the range as Arrow batches."""
        if isinstance(partition, FinalMarker):
            yield self._marker(partition.instance)
            return
        if not isinstance(partition, TopicRange):
            msg = f"sparkfn reader got a foreign partition {partition!r}"
            raise TypeError(msg)
        store = Store.cached(self.store_url, self.data_dir)
        batches = read_range(
            store, partition.topic, partition.partition, partition.start, partition.end
        )
        for batch in batches:
            out = self._shaped(batch if self.columns is None else batch.select(self.columns))
            if partition.instances is None:
                yield out
            else:
                yield out.append_column(INSTANCE_FIELD, _instances_for(batch, partition))

    def _marker(self, instance: int) -> pa.RecordBatch:
        names = self.columns or list(_SPARK_TYPES)
        fields = [READ_SCHEMA.field(name) for name in names]
        row: dict[str, Any] = dict.fromkeys(names)
        row.update({"offset": -1, "partition": -1})
        batch = self._shaped(pa.RecordBatch.from_pylist([row], schema=pa.schema(fields)))
        return batch.append_column(INSTANCE_FIELD, pa.array([instance], pa.int32()))

    def _shaped(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not self.properties_json:
            return batch
        index = batch.schema.get_field_index("properties")
        return batch.set_column(index, "properties", properties_to_json(batch.column(index)))

    def commit(self, end: dict[str, int]) -> None:
        """Spark finished everything up to ``end``; nothing to release."""


INSTANCE_FIELD = pa.field("instance_id", pa.int32())


def _instances_for(batch: pa.RecordBatch, partition: TopicRange) -> pa.Array:
    if partition.instance is not None:
        return pa.repeat(pa.scalar(partition.instance, pa.int32()), batch.num_rows)
    owners = partition.instances or (0,)
    n = len(owners)
    keys = batch.column("key").to_pylist()
    offsets = batch.column("offset").to_pylist()
    return pa.array(
        [
            owners[partition_for_key(k, n) if k is not None else o % n]
            for k, o in zip(keys, offsets, strict=True)
        ],
        pa.int32(),
    )


_SPARK_TYPES = SPARK_READ_TYPES


def read_columns(opts: dict[str, str]) -> list[str]:
    """The message columns to produce: option ``columns`` (comma list) or all."""
    raw = opts.get("columns")
    if not raw:
        return list(_SPARK_TYPES)
    names = [c.strip() for c in raw.split(",") if c.strip()]
    unknown = [c for c in names if c not in _SPARK_TYPES]
    if unknown:
        msg = f"sparkfn data source option columns: unknown {unknown}; choose from {list(_SPARK_TYPES)}"
        raise ConfigError(msg)
    return names


def _properties_as_json(opts: dict[str, str]) -> bool:
    shape = opts.get("propertiesas", "map").strip().lower()
    if shape not in ("map", "json"):
        msg = f"sparkfn data source option propertiesAs must be map or json; got {shape!r}"
        raise ConfigError(msg)
    return shape == "json"


def read_schema(opts: dict[str, str]) -> str:
    """The Spark DDL schema of the read rows for these options."""
    # A bad propertiesAs is reported when the query starts, with the other options.
    as_json = opts.get("propertiesas", "").strip().lower() == "json"
    fields = [
        f"{name} {'string' if name == 'properties' and as_json else _SPARK_TYPES[name]}"
        for name in read_columns(opts)
    ]
    if "instances" in opts:
        fields.append("instance_id int")
    return ", ".join(fields)


def _cap(start: dict[str, int], end: dict[str, int], budget: int) -> dict[str, int]:
    """Share ``budget`` records fairly over the partitions that have data."""
    want = {k: end[k] - start.get(k, 0) for k in end if end[k] > start.get(k, 0)}
    grant = dict.fromkeys(want, 0)
    remaining = budget
    while remaining > 0 and want:
        share = max(1, remaining // len(want))
        for key in sorted(want):
            take = min(share, want[key], remaining)
            grant[key] += take
            want[key] -= take
            remaining -= take
            if remaining == 0:
                break
        want = {k: v for k, v in want.items() if v > 0}
    return {k: start.get(k, 0) + grant.get(k, 0) for k in end}


@dataclass
class StagedBatch(WriterCommitMessage):
    """What one writer task staged, sent to the driver's commit."""

    segments: list[StagedSegment]


class SparkfnStreamWriter(DataSourceStreamArrowWriter):
    """Writes a topic exactly once per micro-batch (see the module docstring)."""

    def __init__(self, opts: dict[str, str], schema_: StructType) -> None:
        settings = Settings.resolve(opts.get("datadir"), opts.get("storeurl"))
        self.store_url = settings.store_url
        self.data_dir = str(settings.data_dir)
        name = opts.get("topic")
        if not name:
            msg = "sparkfn data source: option 'topic' is required for writing"
            raise ConfigError(msg)
        self.topic = TopicAdmin(Store.cached(self.store_url, self.data_dir)).get(name)
        sink_id = opts.get("sinkid") or opts.get("checkpointlocation")
        if not sink_id:
            msg = (
                f"sparkfn sink for topic {self.topic.name}: set option 'checkpointLocation' "
                "(or 'sinkId'); it identifies the sink's committed batches"
            )
            raise ConfigError(msg)
        self.sink_id: str = sink_id
        fields = set(schema_.fieldNames())
        if "value" not in fields:
            msg = f"sparkfn sink for topic {self.topic.name}: the frame needs a 'value' column; has {sorted(fields)}"
            raise ConfigError(msg)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedBatch:
        """Runs on an executor: route rows to partitions and stage segments."""
        store = Store.cached(self.store_url, self.data_dir)
        parts: dict[int, list[pa.Table]] = {}
        row_base = 0
        for batch in iterator:
            if batch.num_rows == 0:
                continue
            table = to_stored_table(batch, self.topic)
            routes = route_rows(batch, self.topic.partitions, row_base)
            row_base += batch.num_rows
            for part in sorted(set(routes.to_pylist())):
                parts.setdefault(part, []).append(table.filter(pc.equal(routes, part)))
        staged = [
            stage(store, self.topic, p, pa.concat_tables(ts)) for p, ts in sorted(parts.items())
        ]
        return StagedBatch(staged)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Driver: make the batch visible once; a replayed ``batchId`` is skipped."""
        store = Store.cached(self.store_url, self.data_dir)
        staged = staged_segments(messages)

        def apply(conn: Connection, commit_id: str) -> None:
            commit_segments(store, conn, self.topic, staged, commit_id)

        if not commit_batch_once(store, self.sink_id, batchId, apply):
            discard_staged(store, staged)
        kill_if_requested(batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Driver: a task failed; delete what the others staged."""
        store = Store.cached(self.store_url, self.data_dir)
        discard_staged(store, staged_segments(messages))


def commit_batch_once(
    store: Store, sink_id: str, batch_id: int, apply: Callable[[Connection, str], None]
) -> bool:
    """Run ``apply(conn, commit_id)`` and record ``(sink_id, batch_id)`` in one transaction.

    Returns False, doing nothing, if the batch was committed before (Spark
    replays a batch it had not recorded when the driver died): the shared
    exactly-once mechanism of every sparkfn sink.
    """
    table = schema.sink_commits
    with store.write() as conn:
        done = conn.execute(
            select(table.c.batch_id).where(
                and_(table.c.sink_id == sink_id, table.c.batch_id == batch_id)
            )
        ).first()
        if done is not None:
            return False
        commit_id = uuid.uuid4().hex
        apply(conn, commit_id)
        conn.execute(
            insert(table).values(
                sink_id=sink_id, batch_id=batch_id, commit_id=commit_id, committed_at=utc_now()
            )
        )
    return True


def staged_segments(messages: list[WriterCommitMessage | None]) -> list[StagedSegment]:
    return [seg for m in messages if isinstance(m, StagedBatch) for seg in m.segments]


def discard_staged(store: Store, staged: list[StagedSegment]) -> None:
    for seg in staged:
        if seg.location:
            store.path(seg.location).unlink(missing_ok=True)


def _column(batch: pa.RecordBatch, name: str, type_: pa.DataType) -> pa.Array:
    index = batch.schema.get_field_index(name)
    if index < 0:
        return pa.nulls(batch.num_rows, type_)
    return batch.column(index).cast(type_)


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
    return column.cast(PROPERTIES)


def to_stored_table(batch: pa.RecordBatch, topic: TopicInfo) -> pa.Table:
    value = batch.column(batch.schema.get_field_index("value"))
    if pa.types.is_string(value.type) or pa.types.is_large_string(value.type):
        value = value.cast(pa.binary())
    elif topic.schema_type is SchemaType.STRING:
        try:
            value.cast(pa.string())
        except pa.ArrowInvalid as exc:
            msg = f"topic {topic.name} (schema string): a value is not valid UTF-8: {exc}"
            raise PayloadError(msg) from exc
    if topic.schema_type is SchemaType.JSON:
        check_values(value.to_pylist(), topic.schema_type, topic=str(topic.name))
    n = batch.num_rows
    return pa.Table.from_arrays(
        [
            _column(batch, "key", pa.string()),
            value.cast(pa.binary()),
            _properties(batch),
            _column(batch, "event_time", TIMESTAMP),
            pa.repeat(pa.scalar(utc_now(), TIMESTAMP), n),
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
        hashed = pa.array(
            [None if k is None else partition_for_key(k, partitions) for k in keys.to_pylist()],
            pa.int32(),
        )
        routed = pc.coalesce(hashed, routed)
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


class SparkfnDataSource(DataSource):
    """``format("sparkfn")``: sparkfn topics for Structured Streaming."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "sparkfn"

    def schema(self) -> str:
        """Called once on the driver: the message row schema (+ ``instance_id`` with ``instances``)."""
        return read_schema(_options(self.options))

    def streamReader(self, schema: StructType) -> SparkfnStreamReader:  # noqa: N802
        """Called once on the driver per query start."""
        return SparkfnStreamReader(_options(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> SparkfnStreamWriter:  # noqa: N802
        """Called once on the driver per query start."""
        return SparkfnStreamWriter(_options(self.options), schema)


def spark_options(store: Store) -> dict[str, Any]:
    """The options that point the data source at ``store``."""
    return {"storeUrl": store.url, "dataDir": str(store.data_dir)}
