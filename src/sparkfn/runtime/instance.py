"""One function instance inside a Python worker process: the per-message engine.

:class:`FunctionInstance` owns the user object and its
:class:`InstanceContext`. For each task it is given the input rows and a
view of committed state; it runs the function per message (or per batch),
with Pulsar's rules:

* a ``process`` call that raises leaves no trace: outputs, publishes and
  state changes since the message began are discarded;
* the message is tried ``1 + max_message_retries`` times, each failure
  counted as a user exception and kept among the latest exceptions;
* then it goes to the dead letter topic (with the error in its properties)
  or is dropped.

The same engine serves the Spark runtime and :mod:`sparkfn.testing`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from sparkfn.api.context import Context
from sparkfn.api.errors import FatalError
from sparkfn.api.lifecycle import DeathCause
from sparkfn.config.function import FunctionConfig
from sparkfn.config.names import TopicName
from sparkfn.runtime.loader import Serde, UserFunction, _load_serde
from sparkfn.runtime.stats import ExceptionInfo, InstanceStats
from sparkfn.state.buffer import StateBuffer, StateMutation, StateReader
from sparkfn.topics.message import (
    PROPERTIES,
    TIMESTAMP,
    SchemaType,
    properties_from_json,
    properties_list,
    properties_to_json,
)

SchemaLookup = Callable[[str], SchemaType]
_LOG = logging.getLogger("sparkfn.lifecycle")

# Properties a dead-lettered message carries (Pulsar's names where it has them).
DLQ_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
DLQ_REAL_TOPIC = "REAL_TOPIC"
DLQ_EXCEPTION = "EXCEPTION"
DLQ_ATTEMPTS = "ATTEMPTS"


@dataclass
class Emitted:
    """A message the function produced, for some topic, not yet committed."""

    kind: str  # "output", "publish", "dead_letter", "log"
    topic: str
    value: bytes | None
    key: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    event_time: datetime | None = None


EMIT_SCHEMA = pa.schema(
    [
        pa.field("kind", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("key", pa.string()),
        pa.field("value", pa.binary()),
        pa.field("properties", pa.string()),  # JSON object text, null for none
        pa.field("event_time", TIMESTAMP),
    ]
)


class EmitBuffer:
    """Messages for topics, as columns; a message's share can be cut off on failure.

    Per-record functions append one message at a time (Python lists); a
    vectorized function's output is added whole, as Arrow columns
    (:meth:`extend`), and is never turned into Python objects.
    """

    def __init__(self) -> None:
        self._chunks: list[pa.RecordBatch] = []  # earlier messages, in order
        self._chunk_rows = 0
        self.kind: list[str] = []
        self.topic: list[str] = []
        self.value: list[bytes | None] = []
        self.key: list[str | None] = []
        self.properties: list[str | None] = []
        self.event_time: list[datetime | None] = []

    def __len__(self) -> int:
        return self._chunk_rows + len(self.value)

    def append(self, item: Emitted) -> None:
        """Add one message."""
        self.kind.append(item.kind)
        self.topic.append(item.topic)
        self.value.append(item.value)
        self.key.append(item.key)
        self.properties.append(
            json.dumps(item.properties, separators=(",", ":")) if item.properties else None
        )
        self.event_time.append(item.event_time)

    def extend(
        self,
        kind: str,
        topic: str,
        values: pa.Array,
        keys: pa.Array | None = None,
        properties: pa.Array | None = None,
    ) -> None:
        """Add ``len(values)`` messages given as columns (binary values, string keys, map properties)."""
        n = len(values)
        if n == 0:
            return
        self._seal()
        self._add_chunk(
            pa.RecordBatch.from_arrays(
                [
                    pa.repeat(pa.scalar(kind, pa.string()), n),
                    pa.repeat(pa.scalar(topic, pa.string()), n),
                    keys if keys is not None else pa.nulls(n, pa.string()),
                    values,
                    properties_to_json(properties)
                    if properties is not None
                    else pa.nulls(n, pa.string()),
                    pa.nulls(n, TIMESTAMP),
                ],
                schema=EMIT_SCHEMA,
            )
        )

    def truncate(self, length: int) -> None:
        """Drop everything appended after ``length`` (a failed message's outputs)."""
        if length >= self._chunk_rows:
            for col in (
                self.kind,
                self.topic,
                self.value,
                self.key,
                self.properties,
                self.event_time,
            ):
                del col[length - self._chunk_rows :]
            return
        chunks, self._chunks, self._chunk_rows = self._chunks, [], 0
        for chunk in chunks:
            keep = min(chunk.num_rows, length - self._chunk_rows)
            if keep <= 0:
                break
            self._add_chunk(chunk.slice(0, keep))
        self.truncate(length)  # the lists: all of them go

    def to_batch(self) -> pa.RecordBatch:
        """Every buffered message, in order, as one batch of :data:`EMIT_SCHEMA`."""
        self._seal()
        if not self._chunks:
            return pa.RecordBatch.from_pylist([], schema=EMIT_SCHEMA)
        if len(self._chunks) > 1:
            self._chunks = [pa.concat_batches(self._chunks)]
        return self._chunks[0]

    def items(self) -> list[Emitted]:
        """The buffered messages as objects (tests and the harness)."""
        return [
            Emitted(
                row["kind"],
                row["topic"],
                row["value"],
                row["key"],
                json.loads(row["properties"]) if row["properties"] else {},
                row["event_time"],
            )
            for row in self.to_batch().to_pylist()
        ]

    def _add_chunk(self, chunk: pa.RecordBatch) -> None:
        self._chunks.append(chunk)
        self._chunk_rows += chunk.num_rows

    def _seal(self) -> None:
        """Move the appended messages into a chunk, so that order is kept."""
        if not self.value:
            return
        self._add_chunk(
            pa.RecordBatch.from_arrays(
                [
                    pa.array(self.kind, pa.string()),
                    pa.array(self.topic, pa.string()),
                    pa.array(self.key, pa.string()),
                    pa.array(self.value, pa.binary()),
                    pa.array(self.properties, pa.string()),
                    pa.array(self.event_time, TIMESTAMP),
                ],
                schema=EMIT_SCHEMA,
            )
        )
        for col in (self.kind, self.topic, self.value, self.key, self.properties, self.event_time):
            col.clear()


@dataclass
class TaskResult:
    """What one instance produced in one task; committed with the batch."""

    instance_id: int
    emitted: EmitBuffer
    mutations: list[StateMutation]
    stats: InstanceStats


class InputRows:
    """Columns of an input batch as Python lists, read once per batch."""

    def __init__(self, batch: pa.RecordBatch | pa.Table) -> None:
        self.n = batch.num_rows
        names = batch.schema.names
        self.values: list[bytes | None] = batch.column(names.index("value")).to_pylist()
        self._batch = batch
        self._cols: dict[str, list[Any]] = {}

    def column(self, name: str) -> list[Any]:
        """A column as a list, converted on first use (``properties`` as pairs, like a map's)."""
        col = self._cols.get(name)
        if col is None:
            array = self._batch.column(self._batch.schema.names.index(name))
            col = array.to_pylist()
            if name == "properties" and pa.types.is_string(array.type):
                col = [properties_list(text) for text in col]
            self._cols[name] = col
        return col


class _LogCapture(logging.Handler):
    """Turns a function's log records into messages for its log topic."""

    def __init__(self, instance: FunctionInstance) -> None:
        super().__init__(logging.INFO)
        self.instance = instance

    def emit(self, record: logging.LogRecord) -> None:
        inst = self.instance
        if inst.config.log_topic is None:
            return
        properties = {
            "level": record.levelname,
            "function": inst.config.fqfn,
            "instance_id": str(inst.instance_id),
        }
        message_id = inst.context.current_message_id()
        if message_id is not None:
            properties["message_id"] = message_id
        inst.emit_log(
            Emitted("log", inst.config.log_topic, self.format(record).encode(), None, properties)
        )


class InstanceContext(Context):
    """The Context of one instance; message methods refer to the current message."""

    def __init__(self, instance: FunctionInstance) -> None:
        self._inst = instance
        self._rows: InputRows | None = None
        self.index = -1
        cfg = instance.config
        # A logger of this context's own, not the registry's: two instances of
        # one name (two versions, two harnesses) must not share a log capture.
        self._logger = logging.Logger(
            f"sparkfn.function.{cfg.fqfn}.{instance.instance_id}", logging.INFO
        )
        self._logger.parent = logging.getLogger("sparkfn.function")
        self._logger.addHandler(_LogCapture(instance))

    def fatal(self, exc: BaseException, origin: str = "fatal") -> None:
        """Terminate this instance with ``exc`` (PIP-297); see :meth:`Context.fatal`.

        ``origin`` is stored with the death: ``"fatal"`` for ``context.fatal``,
        ``"connector"`` for an exception a connector raised.
        """
        self._inst.fatal(exc, origin)

    # internal: binding to the current message
    def bind(self, rows: InputRows | None, index: int) -> None:
        """Point message methods at row ``index`` of ``rows``."""
        self._rows = rows
        self.index = index

    def current_message_id(self) -> str | None:
        """``partition:offset`` of the current message, if any."""
        if self._rows is None or self.index < 0:
            return None
        return f"{self._rows.column('partition')[self.index]}:{self._rows.column('offset')[self.index]}"

    def _field(self, name: str) -> Any:
        if self._rows is None or self.index < 0:
            return None
        return self._rows.column(name)[self.index]

    # --- the current message -------------------------------------------
    def get_message_id(self) -> str:
        """The current message's id, ``partition:offset``."""
        return self.current_message_id() or ""

    def get_message_key(self) -> str | None:
        """The current message's key."""
        return self._field("key")  # type: ignore[no-any-return]

    def get_message_eventtime(self) -> int | None:
        """The current message's event time in ms since the epoch."""
        value = self._field("event_time")
        return None if value is None else int(value.timestamp() * 1000)

    def get_message_properties(self) -> dict[str, str]:
        """The current message's properties."""
        return dict(self._field("properties") or [])

    def get_current_message_topic_name(self) -> str:
        """``persistent://tenant/ns/topic`` of the current message."""
        topic = self._field("topic")
        return f"persistent://{topic}" if topic else ""

    def get_partition_key(self) -> str | None:
        """The current message's key."""
        return self.get_message_key()

    # --- the function ----------------------------------------------------
    def get_function_tenant(self) -> str:
        """The function's tenant."""
        return self._inst.config.tenant

    def get_function_namespace(self) -> str:
        """The function's namespace."""
        return self._inst.config.namespace

    def get_function_name(self) -> str:
        """The function's name."""
        return self._inst.config.name

    def get_function_id(self) -> str:
        """The function's FQFN."""
        return self._inst.config.fqfn

    def get_function_version(self) -> str:
        """The function's version."""
        return self._inst.version

    def get_instance_id(self) -> int:
        """This instance's id."""
        return self._inst.instance_id

    def get_num_instances(self) -> int:
        """The function's parallelism."""
        return self._inst.config.parallelism

    def get_input_topics(self) -> list[str]:
        """The input topics."""
        return list(self._inst.config.inputs)

    def get_output_topic(self) -> str | None:
        """The output topic."""
        return self._inst.config.output

    def get_logger(self) -> logging.Logger:
        """This instance's logger."""
        return self._logger

    # --- configuration -----------------------------------------------------
    def get_user_config_value(self, key: str) -> Any:
        """One ``user_config`` value or ``None``."""
        return self._inst.config.user_config.get(key)

    def get_user_config_map(self) -> Mapping[str, Any]:
        """The ``user_config`` mapping."""
        return dict(self._inst.config.user_config)

    def get_secret(self, secret_name: str) -> str | None:
        """Resolve a secret: ``env:VAR`` / ``VAR`` from the environment, ``file:PATH#key`` from a JSON/YAML file."""
        spec = self._inst.config.secrets.get(secret_name)
        if spec is None:
            return None
        return resolve_secret(spec)

    # --- output ------------------------------------------------------------
    def publish(
        self,
        topic_name: str,
        message: Any,
        serde_class_name: str | None = None,
        properties: Mapping[str, str] | None = None,
        compression_type: Any = None,
        callback: Any = None,
        message_conf: Mapping[str, Any] | None = None,
    ) -> None:
        """Publish to ``topic_name``; committed with the current message."""
        inst = self._inst
        topic = str(TopicName.parse(topic_name, field="publish topic"))
        conf = dict(message_conf or {})
        props = {**dict(conf.get("properties") or {}), **dict(properties or {})}
        event_ms = conf.get("event_timestamp")
        event_time = None if event_ms is None else datetime.fromtimestamp(event_ms / 1000, UTC)
        if serde_class_name and not serde_class_name.endswith("IdentitySerDe"):
            data = bytes(_load_serde(inst.config.fqfn, serde_class_name).serialize(message))
        else:
            data = inst.output_serde_for(topic).encode(message)
        inst.emit(Emitted("publish", topic, data, conf.get("partition_key"), props, event_time))
        if callable(callback):
            callback(None, None)

    def record_metric(self, metric_name: str, metric_value: float) -> None:
        """Observe a user metric value."""
        self._inst.pending_metrics.append((metric_name, float(metric_value)))

    def ack(self, msgid: Any, topic: str) -> None:
        """No-op: sparkfn acknowledges by batch commit."""

    # --- state -------------------------------------------------------------
    def incr_counter(self, key: str, amount: int) -> None:
        """Add to a counter."""
        self._inst.state.incr_counter(key, int(amount))

    def get_counter(self, key: str) -> int:
        """A counter's value."""
        return self._inst.state.get_counter(key)

    def del_counter(self, key: str) -> None:
        """Delete a counter."""
        self._inst.state.delete(key)

    def put_state(self, key: str, value: str | bytes) -> None:
        """Set a state value."""
        data = value.encode() if isinstance(value, str) else bytes(value)
        self._inst.state.put_state(key, data)

    def get_state(self, key: str) -> bytes | None:
        """A state value."""
        return self._inst.state.get_state(key)

    def del_state(self, key: str) -> None:
        """Delete a state value."""
        self._inst.state.delete(key)


def resolve_secret(spec: str) -> str | None:
    """``env:VAR`` or ``VAR`` → the environment; ``file:PATH#key`` → a key of a JSON/YAML file."""
    if spec.startswith("file:"):
        path, _, key = spec[5:].partition("#")
        import yaml

        data = yaml.safe_load(Path(path).read_text())
        if not key:
            return str(data)
        value = data.get(key) if isinstance(data, dict) else None
        return None if value is None else str(value)
    return os.environ.get(spec.removeprefix("env:"))


class FunctionInstance:
    """A user function object and its context, for one instance id, in one process."""

    def __init__(
        self,
        config: FunctionConfig,
        instance_id: int,
        user: UserFunction,
        schema_of: SchemaLookup,
        version: str = "1",
    ) -> None:
        self.config = config
        self.instance_id = instance_id
        self.user = user
        self.version = version
        self._schema_of = schema_of
        self._serdes: dict[str, Serde] = {}
        self.input_serdes: dict[str, Serde] = {}
        self.context = InstanceContext(self)
        self.state = StateBuffer(lambda key: _no_state(key))
        self.stats = InstanceStats()
        self.out = EmitBuffer()
        self._logs: list[Emitted] = []
        self.pending_metrics: list[tuple[str, float]] = []
        self.initialized = False
        # Lifecycle (DESIGN.md 2.3). Every call into the user object holds
        # ``lock``, so calls are never concurrent; after ``closed`` nothing is
        # called. ``interrupt`` is set by fatal() (any thread) or a cancel, and
        # the task raises it at the next batch boundary.
        self.lock = threading.RLock()
        self.epoch = 0  # the query epoch the object was created in
        self.object_id: int | None = None  # its row in function_objects
        self.store_key: tuple[str, str] | None = None  # (url, data dir) it was created for
        self.task_thread: int | None = None
        self.interrupt: BaseException | None = None
        self.on_fatal: Callable[[DeathCause], None] | None = None
        self.prepared = False
        self.shut_down = False
        self.closed = False

    # --- serdes ---------------------------------------------------------------
    def output_serde_for(self, topic: str) -> Serde:
        """The serde encoding values for ``topic``."""
        serde = self._serdes.get(topic)
        if serde is None:
            name = self.config.output_serde if topic == self.config.output else "auto"
            serde = self._serdes[topic] = Serde(
                name, self._schema_of(topic), topic, self.config.fqfn
            )
        return serde

    def input_serde_for(self, topic: str) -> Serde:
        """The serde decoding values from input ``topic``."""
        serde = self.input_serdes.get(topic)
        if serde is None:
            serde = self.input_serdes[topic] = Serde(
                self.config.input_serde, self._schema_of(topic), topic, self.config.fqfn
            )
        return serde

    # --- emission ---------------------------------------------------------------
    def emit(self, item: Emitted) -> None:
        """Buffer an output of the current message."""
        self.out.append(item)

    def emit_log(self, item: Emitted) -> None:
        """Buffer a log record; logs are kept even when the message fails."""
        self._logs.append(item)

    def take_output(self) -> EmitBuffer:
        """Hand over what was emitted so far (between messages only)."""
        out, self.out = self.out, EmitBuffer()
        for item in self._logs:
            out.append(item)
        self._logs = []
        return out

    # --- the task ------------------------------------------------------------------
    def begin_task(self, reader: StateReader) -> None:
        """Start a task: fresh buffers over committed state from ``reader``."""
        self.check_interrupt()
        if self.closed:
            msg = f"function {self.config.fqfn} instance {self.instance_id}: object is closed"
            raise RuntimeError(msg)
        self.task_thread = threading.get_ident()
        if not self.initialized:
            self.user.initialize(self.context)
            self.initialized = True
        self.state = StateBuffer(reader)
        self.stats = InstanceStats()
        self.out = EmitBuffer()
        self._logs = []

    def end_task(self) -> TaskResult:
        """Finish the task: everything to commit with the batch.

        An object with a ``sparkfn_end_task()`` method (the sink adapter:
        ``Sink.flush``) has it called first, still inside the task.
        """
        self.context.bind(None, -1)
        hook = self.user.hook("sparkfn_end_task")
        if hook is not None:
            self.pending_metrics.clear()
            hook()
            for name, metric in self.pending_metrics:
                self.stats.record_metric(name, metric)
            self.pending_metrics.clear()
        self.task_thread = None
        return TaskResult(self.instance_id, self.take_output(), self.state.drain(), self.stats)

    def process_rows(self, rows: InputRows) -> None:
        """Run the per-message function over every row.

        This is the hot path: one call per message, the result appended
        straight into the output columns, counters kept in locals. A message
        that raises has its outputs and state changes rolled back and goes to
        :meth:`_retry` (more attempts, then the dead letter topic).
        """
        user_call = self.user.call
        with_context = self.user.takes_context
        context = self.context
        output = self.config.output or ""
        out_serde = self.output_serde_for(output) if output else None
        fast_out = (
            out_serde is not None
            and out_serde.custom is None
            and out_serde.kind in ("string", "bytes")
        )
        topics = rows.column("topic")
        keys = rows.column("key")
        values = rows.values
        stats = self.stats
        state = self.state
        savepoint = state.savepoint
        pending = self.pending_metrics
        out = self.out
        out_kind, out_topic, out_value = out.kind, out.topic, out.value
        out_key, out_props, out_time = out.key, out.properties, out.event_time
        perf = time.perf_counter
        processed = 0
        latency = 0.0
        serde: Serde | None = None
        serde_topic = None
        fast_in = False
        context.bind(rows, -1)
        for i in range(rows.n):
            topic = topics[i]
            if topic != serde_topic:
                serde, serde_topic = self.input_serde_for(topic), topic
                fast_in = serde.custom is None and serde.kind == "string"
            context.index = i
            if savepoint:
                savepoint.clear()
            if pending:
                pending.clear()
            mark = len(out_value)
            started = perf()
            try:
                raw = values[i]
                value = raw.decode() if fast_in and raw is not None else serde.decode(raw)  # type: ignore[union-attr]
                result = user_call(value, context) if with_context else user_call(value)
                if result is not None and out_serde is not None:
                    out_value.append(
                        result.encode()
                        if fast_out and type(result) is str
                        else out_serde.encode(result)
                    )
                    out_kind.append("output")
                    out_topic.append(output)
                    out_key.append(keys[i])
                    out_props.append(None)
                    out_time.append(None)
            except Exception as exc:
                if isinstance(exc, FatalError):
                    raise
                state.rollback_message()
                out.truncate(mark)
                stats.record_exception(
                    ExceptionInfo.from_exception("user", exc, context.current_message_id())
                )
                self._retry(rows, i, serde, exc)  # type: ignore[arg-type]
                continue
            latency += perf() - started
            processed += 1
            if pending:
                for name, metric in pending:
                    stats.record_metric(name, metric)
        stats.received += rows.n
        stats.processed_successfully += processed
        stats.latency_ms_sum += latency * 1000
        stats.latency_count += processed
        stats.last_invocation_ms = int(time.time() * 1000)

    def _retry(self, rows: InputRows, i: int, serde: Serde, first: Exception) -> None:
        """Attempts 2 .. 1 + max_message_retries of a failed message, then dead-letter it."""
        attempts = 1 + self.config.max_message_retries
        output = self.config.output
        error = first
        for _ in range(2, attempts + 1):
            self.state.begin_message()
            self.pending_metrics.clear()
            mark = len(self.out)
            started = time.perf_counter()
            try:
                result = (
                    self.user.call(serde.decode(rows.values[i]), self.context)
                    if self.user.takes_context
                    else self.user.call(serde.decode(rows.values[i]))
                )
                if result is not None and output:
                    data = self.output_serde_for(output).encode(result)
                    self.out.append(Emitted("output", output, data, rows.column("key")[i]))
            except Exception as exc:
                if isinstance(exc, FatalError):
                    raise
                self.state.rollback_message()
                self.out.truncate(mark)
                self.stats.record_exception(
                    ExceptionInfo.from_exception("user", exc, self.context.current_message_id())
                )
                error = exc
                continue
            self.state.commit_message()
            self.stats.processed_successfully += 1
            self.stats.latency_ms_sum += (time.perf_counter() - started) * 1000
            self.stats.latency_count += 1
            for name, metric in self.pending_metrics:
                self.stats.record_metric(name, metric)
            return
        self._dead_letter(rows, i, error, attempts)

    def _dead_letter(self, rows: InputRows, i: int, exc: Exception, attempts: int) -> None:
        dlq = self.config.dead_letter_topic
        if dlq is None:
            return
        props = dict(rows.column("properties")[i] or [])
        props.update(
            {
                DLQ_ORIGIN_MESSAGE_ID: f"{rows.column('partition')[i]}:{rows.column('offset')[i]}",
                DLQ_REAL_TOPIC: f"persistent://{rows.column('topic')[i]}",
                DLQ_EXCEPTION: f"{type(exc).__name__}: {exc}",
                DLQ_ATTEMPTS: str(attempts),
            }
        )
        self.out.append(
            Emitted(
                "dead_letter",
                dlq,
                rows.values[i],
                rows.column("key")[i],
                props,
                rows.column("event_time")[i],
            )
        )
        self.stats.dead_lettered += 1

    def process_batch(self, batch: pa.RecordBatch) -> None:
        """Run a vectorized function over ``batch`` (one attempt per retry, whole batch)."""
        cfg = self.config
        attempts = 1 + cfg.max_message_retries
        stats = self.stats
        stats.received += batch.num_rows
        self.context.bind(None, -1)
        arg: Any = _decode_batch(batch, self)
        if self.user.batch_format == "pandas":
            arg = arg.to_pandas()
        for attempt in range(1, attempts + 1):
            self.state.begin_message()
            mark = len(self.out)
            self.pending_metrics.clear()
            started = time.perf_counter()
            try:
                call = self.user.call
                result = call(arg, self.context) if self.user.takes_context else call(arg)
                if result is not None and cfg.output:
                    _emit_batch_result(result, self)
            except Exception as exc:
                if isinstance(exc, FatalError):
                    raise
                self.state.rollback_message()
                self.out.truncate(mark)
                stats.record_exception(ExceptionInfo.from_exception("user", exc, None))
                if attempt == attempts:
                    rows = InputRows(batch)
                    for i in range(rows.n):
                        self._dead_letter(rows, i, exc, attempts)
                continue
            self.state.commit_message()
            for name, metric in self.pending_metrics:
                stats.record_metric(name, metric)
            stats.processed_successfully += batch.num_rows
            stats.latency_ms_sum += (time.perf_counter() - started) * 1000
            stats.latency_count += 1
            break
        stats.last_invocation_ms = int(time.time() * 1000)

    # --- lifecycle ---------------------------------------------------------------
    def check_interrupt(self) -> None:
        """Raise the fatal error (or cancel) recorded for this instance, if any."""
        if self.interrupt is not None:
            raise self.interrupt

    def fatal(self, exc: BaseException, origin: str = "fatal") -> None:
        """``context.fatal(exc)``: terminate the instance, from any thread (PIP-297).

        The first call records the death (through ``on_fatal``) and logs it at
        ERROR; the running task, if any, fails at once when called from its
        thread, else at its next batch boundary.
        """
        thread = threading.current_thread().name
        cause = DeathCause.from_exception(exc, origin, thread)
        error = FatalError(
            f"function {self.config.fqfn} instance {self.instance_id} terminated by "
            f"context.fatal in thread {thread!r}: {cause}"
        )
        if not isinstance(self.interrupt, FatalError):
            self.interrupt = error
            _LOG.error("%s", error, exc_info=(type(exc), exc, exc.__traceback__))
            if self.on_fatal is not None:
                self.on_fatal(cause)
        if threading.get_ident() == self.task_thread:
            raise error from exc

    def prepare_to_shutdown(self) -> None:
        """Call the object's ``prepare_to_shutdown()`` once; what it returns goes to the output."""
        if self.prepared or not self.initialized:
            return
        self.prepared = True
        hook = self.user.hook("prepare_to_shutdown")
        if hook is None:
            return
        self.context.bind(None, -1)
        result = hook()
        output = self.config.output
        if result is None or not output:
            return
        serde = self.output_serde_for(output)
        for value in result if isinstance(result, list | tuple) else [result]:
            if value is not None:
                self.out.append(Emitted("output", output, serde.encode(value), None))

    def finish(self, *, graceful: bool) -> list[Emitted]:
        """End the object: on graceful stops ``prepare_to_shutdown()`` (if the final
        batch did not reach it) and ``shutdown()``; then ``close()``, exactly once.

        Returns what ``prepare_to_shutdown()`` emitted here, for the caller to
        append. Holds the lock: never concurrent with a task.
        """
        with self.lock:
            if self.closed:
                return []
            try:
                if graceful and self.initialized:
                    self.out, self._logs = EmitBuffer(), []
                    self.prepare_to_shutdown()
                    emitted = self.take_output().items()
                    hook = self.user.hook("shutdown")
                    if hook is not None and not self.shut_down:
                        self.shut_down = True
                        hook()
                    return emitted
                return []
            finally:
                self.close()

    def close(self) -> None:
        """Close the user object: once, and only if it was initialized; nothing after it."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            if self.initialized:
                self.initialized = False
                self.user.close()


def _no_state(key: str) -> Any:
    from sparkfn.state.buffer import CommittedState

    return CommittedState(None, None)


def _decode_batch(batch: pa.RecordBatch, inst: FunctionInstance) -> pa.RecordBatch:
    """The batch a vectorized function sees: ``value`` as string for string/json topics."""
    names = batch.schema.names
    keep = [
        n
        for n in ("key", "value", "properties", "event_time", "topic", "partition", "offset")
        if n in names
    ]
    out = batch.select(keep)
    if "properties" in keep:  # the function sees a map, as on the topic
        index = keep.index("properties")
        out = out.set_column(index, "properties", properties_from_json(out.column(index)))
    topics = set(batch.column(names.index("topic")).to_pylist()) if batch.num_rows else set()
    kinds = {inst.input_serde_for(t).kind for t in topics}
    if kinds and kinds <= {"string", "json"}:
        out = out.set_column(
            keep.index("value"), "value", out.column(keep.index("value")).cast(pa.string())
        )
    return out


def _emit_batch_result(result: Any, inst: FunctionInstance) -> None:
    """Add a vectorized function's result to the instance's output, as columns when it can.

    Values already in a topic's bytes (strings and binary for ``string`` and
    ``bytes`` topics with sparkfn's serde) are cast, never converted to
    Python objects; anything else (JSON topics, custom serdes, other types) is
    encoded value by value, with the per-record errors.
    """
    fqfn = inst.config.fqfn
    if not isinstance(result, pa.RecordBatch | pa.Table):
        try:
            import pandas as pd

            if isinstance(result, pd.DataFrame):
                result = pa.Table.from_pandas(result, preserve_index=False)
        except ImportError:  # pragma: no cover - pandas is a dependency
            pass
    if not isinstance(result, pa.RecordBatch | pa.Table):
        msg = f"function {fqfn} (vectorized) returned a {type(result).__name__}; expected a pyarrow RecordBatch/Table or pandas DataFrame"
        raise TypeError(msg)
    names = result.schema.names
    if "value" not in names:
        msg = f"function {fqfn} (vectorized) returned a batch without a 'value' column (columns: {names})"
        raise TypeError(msg)
    output = inst.config.output
    if output is None:
        return
    serde = inst.output_serde_for(output)
    values = _combined(result.column("value"))
    keys = _combined(result.column("key")) if "key" in names else None
    props = _combined(result.column("properties")) if "properties" in names else None
    encoded = _encoded_column(values, serde)
    if (
        encoded is not None
        and (keys is None or pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type))
        and (props is None or props.type == PROPERTIES)
    ):
        inst.out.extend(
            "output",
            output,
            encoded,
            None if keys is None else keys.cast(pa.string()),
            props,
        )
        return
    n = len(values)
    key_list = keys.to_pylist() if keys is not None else [None] * n
    prop_list = props.to_pylist() if props is not None else [None] * n
    for v, k, p in zip(values.to_pylist(), key_list, prop_list, strict=True):
        inst.out.append(
            Emitted("output", output, None if v is None else serde.encode(v), k, dict(p or []))
        )


def _combined(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks()
    return column


def _encoded_column(values: pa.Array, serde: Serde) -> pa.Array | None:
    """``values`` as topic bytes, or None when they need the serde value by value."""
    if serde.custom is not None or serde.kind == "json":
        return None
    kind = values.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return values.cast(pa.binary())
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        if serde.kind == "string":
            try:
                values.cast(pa.string())  # validates UTF-8
            except pa.ArrowInvalid:
                return None  # the serde names the function, the topic and the value
        return values.cast(pa.binary())
    return None


def encode_json_safe(value: Any) -> str:
    """JSON for status payloads (datetimes as ISO strings)."""
    return json.dumps(value, default=str)
