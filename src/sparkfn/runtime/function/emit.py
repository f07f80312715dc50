"""The messages a function produced in a task, for topics, not yet committed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkfn.topics.message import PROPERTIES, TIMESTAMP

# A message's properties while buffered: its pairs, none, or (the per-record loop's
# outputs) the number of its input row, until resolve() takes that row's properties.
Properties = list[tuple[str, str]] | int | None


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
        pa.field("properties", PROPERTIES),  # null for none
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
        self.sealed = 0  # how many messages the chunks hold; the lists hold the later ones
        self.kind: list[str] = []
        self.topic: list[str] = []
        # bytes, or str of an output whose serde is UTF-8 (encoded when sealed, in Arrow)
        self.value: list[bytes | str | None] = []
        self.key: list[str | None] = []
        self.properties: list[Properties] = []
        self.event_time: list[datetime | None] = []

    def __len__(self) -> int:
        return self.sealed + len(self.value)

    def append(self, item: Emitted) -> None:
        """Add one message."""
        self.kind.append(item.kind)
        self.topic.append(item.topic)
        self.value.append(item.value)
        self.key.append(item.key)
        self.properties.append(list(item.properties.items()) if item.properties else None)
        self.event_time.append(item.event_time)

    def add(self, kind: str, topic: str, value: bytes | None, key: str | None) -> None:
        """Add one message without properties or event time (the per-record hot path)."""
        self.kind.append(kind)
        self.topic.append(topic)
        self.value.append(value)
        self.key.append(key)
        self.properties.append(None)
        self.event_time.append(None)

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
                    properties.cast(PROPERTIES)
                    if properties is not None
                    else pa.nulls(n, PROPERTIES),
                    pa.nulls(n, TIMESTAMP),
                ],
                schema=EMIT_SCHEMA,
            )
        )

    def resolve(self, origin: pa.Array) -> None:
        """Seal what is buffered, an output's properties given as its input row's number
        taken from ``origin`` (the batch's properties per row, a map column made by
        Arrow): a properties object made per output in Python cost more than the
        function call it came from, and JSON text more again at staging.
        """
        props = self.properties
        if not any(isinstance(p, int) for p in props):
            return
        others = [p for p in props if not isinstance(p, int)]
        picked = iter(range(len(origin), len(origin) + len(others)))
        index = np.fromiter(
            (p if isinstance(p, int) else next(picked) for p in props), np.int64, len(props)
        )
        pool = origin if not others else pa.concat_arrays([origin, pa.array(others, PROPERTIES)])
        self._seal(pool.take(pa.array(index)))

    def truncate(self, length: int) -> None:
        """Drop everything appended after ``length`` (a failed message's outputs)."""
        if length >= self.sealed:
            for col in self._columns():
                del col[length - self.sealed :]
            return
        chunks, self._chunks, self.sealed = self._chunks, [], 0
        for chunk in chunks:
            keep = min(chunk.num_rows, length - self.sealed)
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

    def by_topic(self) -> list[tuple[str, pa.RecordBatch]]:
        """Every buffered message, per topic, each topic's in order."""
        batch = self.to_batch()
        if batch.num_rows == 0:
            return []
        topics = batch.column("topic")
        names = pc.unique(topics)
        if len(names) == 1:
            return [(names[0].as_py(), batch)]
        return [(name, batch.filter(pc.equal(topics, name))) for name in names.to_pylist()]

    def items(self) -> list[Emitted]:
        """The buffered messages as objects (tests and the harness)."""
        return [
            Emitted(
                row["kind"],
                row["topic"],
                row["value"],
                row["key"],
                dict(row["properties"]) if row["properties"] else {},
                row["event_time"],
            )
            for row in self.to_batch().to_pylist()
        ]

    def _columns(self) -> tuple[list[Any], ...]:
        return (self.kind, self.topic, self.value, self.key, self.properties, self.event_time)

    def _add_chunk(self, chunk: pa.RecordBatch) -> None:
        self._chunks.append(chunk)
        self.sealed += chunk.num_rows

    def _seal(self, properties: pa.Array | None = None) -> None:
        """Move the appended messages into a chunk, so that order is kept
        (``properties``: their properties column, made already)."""
        if not self.value:
            return
        self._add_chunk(
            pa.RecordBatch.from_arrays(
                [
                    _column(self.kind, pa.string()),
                    _column(self.topic, pa.string()),
                    _column(self.key, pa.string()),
                    _binary_column(self.value),
                    properties if properties is not None else _properties(self.properties),
                    _column(self.event_time, TIMESTAMP),
                ],
                schema=EMIT_SCHEMA,
            )
        )
        for col in self._columns():
            col.clear()


def _properties(values: list[Properties]) -> pa.Array:
    """The buffered messages' properties as a map column (none resolved by row number)."""
    if values.count(None) == len(values):
        return pa.nulls(len(values), PROPERTIES)
    return pa.array(values, PROPERTIES)


def _column(values: list[Any], type_: pa.DataType) -> pa.Array:
    """``values`` as an Arrow array; one repeated value (the usual case of a
    kind, a topic, absent properties) without converting each."""
    first = values[0]
    if values.count(first) == len(values):  # compares by identity first: fast
        return pa.repeat(pa.scalar(first, type_), len(values))
    return pa.array(values, type_)


def _binary_column(values: list[bytes | str | None]) -> pa.Array:
    """Byte strings (``str``: UTF-8 encoded) as a binary array, converted by Arrow in one call.

    Arrow converts a list of byte strings three times as fast as joining
    them did, and encodes ``str`` in the same pass, so a per-record
    function's string outputs are never encoded one by one in Python.
    """
    return pa.array(values, pa.binary())
