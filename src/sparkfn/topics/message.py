"""The message row and its Arrow schemas.

A stored message has ``key, value, properties, event_time, publish_time,
producer, sequence_id``; a message read back also carries ``topic``,
``partition`` and ``offset``, and its message id is ``partition:offset``
(:class:`ReceivedMessage`, defined in :mod:`sparkfn.topics.received` and
importable from here too).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkfn.api.errors import PayloadError
from sparkfn.api.records import Record, record_to_dict
from sparkfn.api.schemas import AvroSchema
from sparkfn.topics.received import ReceivedMessage as ReceivedMessage
from sparkfn.topics.received import messages_from_table as messages_from_table
from sparkfn.topics.schema_type import SchemaType as SchemaType
from sparkfn.topics.schema_type import avro_schema as avro_schema

TIMESTAMP = pa.timestamp("us", tz="UTC")
PROPERTIES = pa.map_(pa.string(), pa.string())


@functools.lru_cache(maxsize=8192)
def _scalar(value: Any, type_: pa.DataType) -> pa.Scalar:
    return pa.scalar(value, type_)


# Up to this many rows a column is read in Python rather than by an Arrow compute call:
# each such call costs tens of microseconds, more than a few rows' Python (a group's
# slices are mostly a few messages each).
FEW_ROWS = 64


def distinct(column: pa.Array) -> list[Any]:
    """``column``'s distinct values, in the order they first come."""
    if len(column) <= FEW_ROWS:
        return list(dict.fromkeys(column.to_pylist()))
    return pc.unique(column).to_pylist()  # type: ignore[no-any-return]


def constant(value: str | int | None, type_: pa.DataType, n: int) -> pa.Array:
    """``n`` times ``value`` (a topic name, a kind, a partition) as an Arrow array.

    The scalar is made once per value and type: making it cost four times the
    repeat, and a group's small slices make a few such columns each.
    """
    return pa.repeat(_scalar(value, type_), n)


STORED_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("value", pa.binary()),
        pa.field("properties", PROPERTIES),
        pa.field("event_time", TIMESTAMP),
        pa.field("publish_time", TIMESTAMP),
        pa.field("producer", pa.string()),
        pa.field("sequence_id", pa.int64()),
    ]
)

READ_SCHEMA = pa.schema(
    [
        *STORED_SCHEMA,
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
    ]
)

# The same columns as Spark SQL types, for the data source.
SPARK_READ_TYPES = {
    "key": "string",
    "value": "binary",
    "properties": "map<string,string>",
    "event_time": "timestamp",
    "publish_time": "timestamp",
    "producer": "string",
    "sequence_id": "bigint",
    "topic": "string",
    "partition": "int",
    "offset": "bigint",
}


def properties_to_json(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A properties column (map) as JSON object text, null where a message has none.

    Spark moves a string column between Python and the JVM several times
    faster than a ``map<string,string>`` one, even an all-null one, so the
    function runtime ships properties this way between its Python stages.
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    n = len(column)
    if pa.types.is_string(column.type):
        return column
    offsets = column.offsets
    if column.null_count == n or offsets[n].as_py() == offsets[0].as_py():
        return pa.nulls(n, pa.string())  # no message has a property: no Python loop
    return pa.array(
        [json.dumps(dict(p), separators=(",", ":")) if p else None for p in column.to_pylist()],
        pa.string(),
    )


def properties_from_json(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The inverse of :func:`properties_to_json`: a ``map<string,string>`` column."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    n = len(column)
    if column.type == PROPERTIES:
        return column
    if column.null_count == n:
        return pa.nulls(n, PROPERTIES)
    fast = _flat_properties(column)
    if fast is not None:
        return fast
    return pa.array([properties_list(text) for text in column.to_pylist()], PROPERTIES)


def _flat_properties(column: pa.Array) -> pa.Array | None:
    """:func:`properties_from_json` by Arrow and numpy, without a Python call per row,
    when every text is a flat object of strings, as sparkfn writes them, without a
    backslash (every output of a function carries Pulsar's two origin properties);
    ``None`` otherwise.

    Without a backslash every ``"`` in such a text delimits a string, so split at
    ``"`` an object of ``m`` pairs is ``{``, then per pair its key, ``:``, its value
    and ``,`` (``}`` after the last): ``4m + 1`` parts. Any other text (spaces
    between the parts, a value that is not a string) falls back to ``json``.
    """
    texts = column.fill_null("{}")
    if pc.any(pc.match_substring(texts, "\\")).as_py():
        return None
    split = pc.split_pattern(texts, '"')
    parts = pc.list_flatten(split)
    starts = np.asarray(split.offsets)[:-1].astype(np.int64)
    sizes = np.asarray(pc.list_value_length(split)).astype(np.int64)
    if ((sizes - 1) % 4).any():
        return None
    pairs = (sizes - 1) // 4
    total = int(pairs.sum())
    row = np.repeat(np.arange(len(sizes)), pairs)
    nth = np.arange(total) - np.repeat(np.cumsum(pairs) - pairs, pairs)
    base = starts[row] + 4 * nth  # each pair's opening part: "{" or ","
    last = nth == pairs[row] - 1
    firsts = parts.take(pa.array(starts))
    expected = np.where(pairs == 0, "{}", "{")
    if not pc.all(pc.equal(firsts, pa.array(expected))).as_py():
        return None
    colons = parts.take(pa.array(base + 2))
    closes = parts.take(pa.array(base + 4))
    if total and not (
        pc.all(pc.equal(colons, ":")).as_py()
        and pc.all(pc.equal(closes, pa.array(np.where(last, "}", ",")))).as_py()
    ):
        return None
    offsets = np.concatenate([[0], np.cumsum(pairs)]).astype(np.int32)
    return pa.MapArray.from_arrays(
        pa.array(offsets),
        parts.take(pa.array(base + 1)),
        parts.take(pa.array(base + 3)),
        type=PROPERTIES,
        mask=pc.is_null(column),
    )


def properties_list(text: str | None) -> list[tuple[str, str]] | None:
    """One message's JSON properties as ``map`` values come out of Arrow: pairs."""
    return None if text is None else list(json.loads(text).items())


def encode_value(
    value: Any, schema_type: SchemaType, *, topic: str, definition: str | None = None
) -> bytes:
    """Turn a Python value into the stored bytes for a topic of ``schema_type``.

    ``definition`` is an ``avro`` topic's schema, which encodes a dict or a
    :class:`~sparkfn.api.records.Record`. Raises :class:`PayloadError` naming
    the topic and what was found.
    """
    if schema_type is SchemaType.AVRO:
        return _encode_avro(value, topic, definition)
    if isinstance(value, Record) and schema_type is SchemaType.JSON:
        value = record_to_dict(value, enums_by_name=False)
    if schema_type is SchemaType.JSON:
        if isinstance(value, bytes | bytearray):
            check_values([bytes(value)], schema_type, topic=topic)
            return bytes(value)
        if isinstance(value, str):
            return encode_value(value.encode(), schema_type, topic=topic)
        try:
            return json.dumps(value, separators=(",", ":")).encode()
        except (TypeError, ValueError) as exc:
            msg = f"topic {topic} (schema json): value {value!r} is not JSON-serialisable: {exc}"
            raise PayloadError(msg) from exc
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        if schema_type is SchemaType.STRING:
            check_values([data], schema_type, topic=topic)
        return data
    msg = (
        f"topic {topic} (schema {schema_type.value}): value must be str or bytes; "
        f"got a {type(value).__name__}: {value!r:.80}"
    )
    raise PayloadError(msg)


def _encode_avro(value: Any, topic: str, definition: str | None) -> bytes:
    if isinstance(value, bytes | bytearray):
        check_values([bytes(value)], SchemaType.AVRO, topic=topic, definition=definition)
        return bytes(value)
    if definition is None:
        msg = f"topic {topic} (schema avro) has no schema definition to encode a value with"
        raise PayloadError(msg)
    try:
        return avro_schema(definition).encode(value)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        msg = f"topic {topic} (schema avro): value {value!r:.80} does not fit the topic's schema: {type(exc).__name__}: {exc}"
        raise PayloadError(msg) from exc


def check_values(
    values: list[bytes | None],
    schema_type: SchemaType,
    *,
    topic: str,
    definition: str | None = None,
) -> None:
    """Validate stored values against the topic schema; raise on the first bad one.

    An ``avro`` value must decode with ``definition`` and be nothing more.
    """
    if schema_type is SchemaType.BYTES:
        return
    if schema_type is SchemaType.AVRO:
        if definition is not None:
            _check_avro(values, topic, avro_schema(definition))
        return
    for index, data in enumerate(values):
        if data is None:
            continue
        try:
            decoded = data.decode("utf-8")
            if schema_type is SchemaType.JSON:
                json.loads(decoded)
        except (UnicodeDecodeError, ValueError) as exc:
            msg = (
                f"topic {topic} (schema {schema_type.value}): message {index} value "
                f"{data[:60]!r} is not valid {schema_type.value}: {exc}"
            )
            raise PayloadError(msg) from exc


def _check_avro(values: list[bytes | None], topic: str, schema: AvroSchema) -> None:
    for index, data in enumerate(values):
        if data is None:
            continue
        try:
            schema.validate(data)
        except ValueError as exc:
            msg = f"topic {topic} (schema avro): message {index} value {data[:60]!r} is not valid avro for the topic's schema: {exc}"
            raise PayloadError(msg) from exc


@dataclass
class Message:
    """One message to produce. ``value`` must already be bytes (see :func:`encode_value`).

    ``partition`` pins the message to a partition; without it the producer
    routes by key, else round robin.
    """

    value: bytes | None
    key: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    event_time: datetime | None = None
    sequence_id: int | None = None
    partition: int | None = None
