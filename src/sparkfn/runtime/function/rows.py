"""A task's input rows as Python lists, and the dead-letter message of a row."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkfn.runtime.function.emit import Emitted
from sparkfn.topics.message import (
    FEW_ROWS,
    PROPERTIES,
    properties_from_json,
    properties_list,
    properties_to_json,
)

if TYPE_CHECKING:
    from sparkfn.runtime.function.serde import Serde

# Properties a dead-lettered message carries (Pulsar's names where it has them).
DLQ_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
DLQ_REAL_TOPIC = "REAL_TOPIC"
DLQ_EXCEPTION = "EXCEPTION"
DLQ_ATTEMPTS = "ATTEMPTS"
# The property ``trigger`` (sparkfn.worker.api.trigger) gives the value it sends. It
# stays on the input message (and its dead letter) only: the function does not
# see it; the output of that message carries Pulsar's correlation properties
# below, as every output does, and the trigger finds it by them.
TRIGGER_PROPERTY = "__sparkfn_trigger_id__"
# What Pulsar's Python runtime puts on every output of ``process``: the input's
# topic (``persistent://``, ``-partition-N`` for a partitioned topic) and message id.
INPUT_TOPIC_PROPERTY = "__pfn_input_topic__"
INPUT_MESSAGE_PROPERTY = "__pfn_input_msg_id__"
_PARTITION_SUFFIX = re.compile(r"-partition-\d+$")

# Up to this many rows a batch's per-row columns are made in Python (message.FEW_ROWS:
# 200 one-message slices took 37 ms a batch by Arrow, 8 ms so).
SMALL_BATCH = FEW_ROWS

Partitioned = Callable[[str, int], bool]
"""Whether a message of ``(topic, partition)`` is of a partitioned topic."""


def by_index(topic: str, partition: int) -> bool:
    """The :data:`Partitioned` that knows no partition count: a partition past 0 is one."""
    return partition > 0


def pulsar_topic_name(topic: str, partition: int, partitioned: bool) -> str:
    """``topic`` as Pulsar names a message's topic: ``persistent://t/ns/topic``, and
    ``-partition-N`` after it when the topic is partitioned (more than one partition)."""
    suffix = f"-partition-{partition}" if partitioned else ""
    return f"persistent://{topic}{suffix}"


def without_partition(name: str) -> str:
    """A Pulsar topic name without its ``-partition-N``."""
    return _PARTITION_SUFFIX.sub("", name)


class InputRows:
    """Columns of an input batch as Python lists, read once per batch.

    ``partitioned`` tells which topics are partitioned, for Pulsar's names of
    them (:meth:`topic_name`); the function instance gives the store's counts.
    """

    def __init__(
        self, batch: pa.RecordBatch | pa.Table, partitioned: Partitioned = by_index
    ) -> None:
        self.n = batch.num_rows
        self._batch = batch
        self._cols: dict[str, list[Any]] = {}
        self.partitioned = partitioned

    @functools.cached_property
    def values(self) -> list[bytes | None]:
        """The values as bytes."""
        return self._batch.column(self._batch.schema.names.index("value")).to_pylist()  # type: ignore[no-any-return]

    def only_topic(self) -> str | None:
        """The topic of every row, when they all come from one (the usual case)."""
        topics = self._batch.column(self._batch.schema.names.index("topic"))
        if self.n == 0 or topics.null_count:
            return None
        if self.n <= SMALL_BATCH:
            names = self.column("topic")
            return names[0] if names.count(names[0]) == self.n else None
        first: str = topics[0].as_py()
        return first if pc.all(pc.equal(topics, first)).as_py() else None

    def strings(self) -> list[str | None] | None:
        """The values decoded as UTF-8 by Arrow, or None if one is not valid UTF-8."""
        if self.n <= SMALL_BATCH:
            try:
                return [None if v is None else v.decode() for v in self.values]
            except UnicodeDecodeError:
                return None
        try:
            array = self._batch.column(self._batch.schema.names.index("value")).cast(pa.string())
        except pa.ArrowInvalid:
            return None
        return array.to_pylist()  # type: ignore[no-any-return]

    def arguments(
        self, serde_for: Callable[[str], Serde]
    ) -> tuple[Sequence[Any], Sequence[str | None]]:
        """The values and topics :func:`~.attempts.attempt_each` decodes from.

        Rows of one topic whose serde is plain UTF-8 are decoded by Arrow in
        one call and given to the function as they are (topic ``None``); a
        value that is not UTF-8 leaves the batch to be decoded message by
        message, where it fails alone.
        """
        topic = self.only_topic()
        if topic is not None:
            serde = serde_for(topic)
            if serde.custom is None and serde.kind == "string":
                strings = self.strings()
                if strings is not None:
                    return strings, [None] * self.n
        return self.values, self.column("topic")

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

    def properties_json(self) -> list[str | None]:
        """Each row's properties as JSON object text (``None``: none)."""
        array = self._batch.column(self._batch.schema.names.index("properties"))
        return properties_to_json(array).to_pylist()  # type: ignore[no-any-return]

    def topic_name(self, i: int) -> str:
        """Row ``i``'s topic as Pulsar names it (:func:`pulsar_topic_name`); ``""``: none."""
        topic = self.column("topic")[i]
        if not topic:
            return ""
        partition = self.column("partition")[i]
        return pulsar_topic_name(topic, partition, self.partitioned(topic, partition))

    def _origin(self) -> tuple[pa.Array, pa.Array]:
        """Each row's Pulsar topic name and message id (``partition:offset``), by Arrow
        (in Python for a small batch)."""
        if self.n <= SMALL_BATCH:
            return self._small_origin()
        names = self._batch.schema.names
        topics = self._batch.column(names.index("topic"))
        partitions = self._batch.column(names.index("partition"))
        offsets = self._batch.column(names.index("offset"))
        if isinstance(topics, pa.ChunkedArray):
            topics, partitions, offsets = (
                c.combine_chunks() for c in (topics, partitions, offsets)
            )
        parts = partitions.cast(pa.string())
        # Partitioned rows: a partition past 0, or a topic of more than one partition.
        mask = pc.greater(partitions, 0)
        for topic in pc.unique(topics.fill_null("")).to_pylist():
            if topic and self.partitioned(topic, 0):
                mask = pc.or_(mask, pc.equal(topics, topic))
        suffix = pc.if_else(
            mask, pc.binary_join_element_wise("-partition-", parts, ""), pa.scalar("", pa.string())
        )
        name = pc.binary_join_element_wise("persistent://", topics.fill_null(""), suffix, "")
        return name, pc.binary_join_element_wise(parts, offsets.cast(pa.string()), ":")

    def _small_origin(self) -> tuple[pa.Array, pa.Array]:
        """:meth:`_origin` in Python, row by row (a null partition or offset: a null id)."""
        names, ids = self._small_origin_lists()
        return pa.array(names, pa.string()), pa.array(ids, pa.string())

    def _small_origin_lists(self) -> tuple[list[str | None], list[str | None]]:
        """:meth:`_small_origin` as Python lists."""
        topics, parts, offsets = (self.column(c) for c in ("topic", "partition", "offset"))
        names: list[str | None] = []
        ids: list[str | None] = []
        for topic, part, offset in zip(topics, parts, offsets, strict=True):
            if part is None:
                names.append(None)
                ids.append(None)
                continue
            topic = topic or ""
            names.append(
                pulsar_topic_name(
                    topic, part, part > 0 or bool(topic) and self.partitioned(topic, 0)
                )
            )
            ids.append(None if offset is None else f"{part}:{offset}")
        return names, ids

    def origin_properties(self) -> pa.Array:
        """Each row's ``__pfn_input_topic__`` and ``__pfn_input_msg_id__`` as JSON object
        text, made by Arrow (no Python per row)."""
        name, message = self._origin()
        return pc.binary_join_element_wise(
            f'{{"{INPUT_TOPIC_PROPERTY}":"', name, f'","{INPUT_MESSAGE_PROPERTY}":"', message,
            '"}', "",
        )  # fmt: skip

    def output_properties_map(self, forward: bool) -> pa.Array:
        """:meth:`output_properties` as a map column; with no own properties to forward
        (the usual case) made by Arrow from the origin alone, never as JSON text."""
        own = self._batch.column(self._batch.schema.names.index("properties"))
        if forward and own.null_count < self.n:
            if isinstance(own, pa.ChunkedArray):
                own = own.combine_chunks()
            # A map column: its offsets say whether any row has a property at all.
            if not pa.types.is_map(own.type) or own.offsets[-1] != own.offsets[0]:
                return properties_from_json(self.output_properties(forward))
        n = self.n
        if n <= SMALL_BATCH:  # from Python lists, never made into arrays and back
            pairs = zip(*self._small_origin_lists(), strict=True)
            return pa.array(
                [[(INPUT_TOPIC_PROPERTY, t), (INPUT_MESSAGE_PROPERTY, m)] for t, m in pairs],
                PROPERTIES,
            )
        name, message = self._origin()
        keys = pa.array([INPUT_TOPIC_PROPERTY, INPUT_MESSAGE_PROPERTY]).take(
            pa.array(np.tile(np.arange(2), n))
        )
        items = pa.concat_arrays([name, message]).take(
            pa.array(np.stack([np.arange(n), np.arange(n) + n], axis=1).ravel())
        )
        offsets = pa.array(np.arange(0, 2 * n + 1, 2, dtype=np.int32))
        return pa.MapArray.from_arrays(offsets, keys, items, type=PROPERTIES)

    def output_properties(self, forward: bool) -> pa.Array:
        """The properties each row's output carries (JSON object text), as Pulsar's
        runtime sets them: ``__pfn_input_topic__`` and ``__pfn_input_msg_id__``
        naming the row (:meth:`origin_properties`); with ``forward``, after the
        row's own (without :data:`TRIGGER_PROPERTY`)."""
        origin = self.origin_properties()
        if not forward:
            return origin
        own = properties_to_json(self._batch.column(self._batch.schema.names.index("properties")))
        if own.null_count == self.n:
            return origin
        if not pc.any(pc.match_substring(own, '"__')).as_py():
            # Two JSON objects as one: the row's own, then the origin's.
            joined = pc.binary_join_element_wise(
                pc.utf8_slice_codeunits(own, 0, -1), ",", pc.utf8_slice_codeunits(origin, 1), ""
            )
            empty = pc.fill_null(pc.equal(own, "{}"), True)
            return pc.if_else(empty, origin, joined)
        out: list[str] = []
        for text, mark in zip(own.to_pylist(), origin.to_pylist(), strict=True):
            props = json.loads(text) if text else {}
            props.pop(TRIGGER_PROPERTY, None)
            props.update(json.loads(mark))
            out.append(json.dumps(props, separators=(",", ":")))
        return pa.array(out, pa.string())

    def message_id(self, i: int) -> str:
        """Row ``i``'s message id, ``partition:offset``."""
        return f"{self.column('partition')[i]}:{self.column('offset')[i]}"

    def dead_letter(self, i: int, topic: str, exc: BaseException, attempts: int) -> Emitted:
        """Row ``i`` for the dead letter ``topic``, with the error in its properties."""
        props = dict(self.column("properties")[i] or [])
        props.update(
            {
                DLQ_ORIGIN_MESSAGE_ID: self.message_id(i),
                DLQ_REAL_TOPIC: self.topic_name(i),
                DLQ_EXCEPTION: f"{type(exc).__name__}: {exc}",
                DLQ_ATTEMPTS: str(attempts),
            }
        )
        return Emitted(
            "dead_letter",
            topic,
            self.values[i],
            self.column("key")[i],
            props,
            self.column("event_time")[i],
        )
