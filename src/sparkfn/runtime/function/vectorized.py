"""Vectorized functions: the batch a function sees, and the encoding of what it returns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkfn.runtime.function.emit import EmitBuffer, Emitted
from sparkfn.runtime.function.serde import Serde
from sparkfn.topics.message import PROPERTIES, properties_from_json

_SEEN_COLUMNS = ("key", "value", "properties", "event_time", "topic", "partition", "offset")


def decode_batch(batch: pa.RecordBatch, serde_of: Callable[[str], Serde]) -> pa.RecordBatch:
    """The batch a vectorized function sees: ``value`` as string for string/json topics.

    ``serde_of`` gives the input serde of a topic.
    """
    names = batch.schema.names
    keep = [n for n in _SEEN_COLUMNS if n in names]
    out = batch.select(keep)
    if "properties" in keep:  # the function sees a map, as on the topic
        index = keep.index("properties")
        out = out.set_column(index, "properties", properties_from_json(out.column(index)))
    topics = set(pc.unique(batch.column(names.index("topic"))).to_pylist())
    kinds = {serde_of(t).kind for t in topics}
    if kinds and kinds <= {"string", "json"}:
        out = out.set_column(
            keep.index("value"), "value", out.column(keep.index("value")).cast(pa.string())
        )
    return out


def emit_batch_result(
    result: Any, fqfn: str, output: str | None, serde_of: Callable[[str], Serde], out: EmitBuffer
) -> None:
    """Add a vectorized function's result to ``out``, as columns when it can.

    Values already in a topic's bytes (strings and binary for ``string`` and
    ``bytes`` topics with sparkfn's serde) are cast, never converted to
    Python objects; anything else (JSON topics, custom serdes, other types) is
    encoded value by value, with the per-record errors. ``serde_of`` gives the
    output serde of a topic.
    """
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
    if output is None:
        return
    serde = serde_of(output)
    values = _combined(result.column("value"))
    keys = _combined(result.column("key")) if "key" in names else None
    props = _combined(result.column("properties")) if "properties" in names else None
    encoded = _encoded_column(values, serde)
    if (
        encoded is not None
        and (keys is None or pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type))
        and (props is None or props.type == PROPERTIES)
    ):
        out.extend(
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
        out.append(
            Emitted("output", output, None if v is None else serde.encode(v), k, dict(p or []))
        )


def _combined(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks()
    return column


def _encoded_column(values: pa.Array, serde: Serde) -> pa.Array | None:
    """``values`` as topic bytes, or None when they need the serde value by value."""
    if serde.kind in ("custom", "json", "avro"):
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
