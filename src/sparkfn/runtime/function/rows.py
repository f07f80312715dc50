"""A task's input rows as Python lists, and the dead-letter message of a row."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkfn.runtime.function.emit import Emitted
from sparkfn.topics.message import properties_list, properties_to_json

if TYPE_CHECKING:
    from sparkfn.runtime.function.serde import Serde

# Properties a dead-lettered message carries (Pulsar's names where it has them).
DLQ_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
DLQ_REAL_TOPIC = "REAL_TOPIC"
DLQ_EXCEPTION = "EXCEPTION"
DLQ_ATTEMPTS = "ATTEMPTS"
# The property ``trigger`` (sparkfn.worker.api.trigger) gives the value it sends. It
# stays on the input message (and its dead letter) only: the function does not
# see it, and an output of that message carries Pulsar's own correlation
# properties instead, as Pulsar's runtime puts on outputs, which the trigger finds.
TRIGGER_PROPERTY = "__sparkfn_trigger_id__"
INPUT_TOPIC_PROPERTY = "__pfn_input_topic__"
INPUT_MESSAGE_PROPERTY = "__pfn_input_msg_id__"


class InputRows:
    """Columns of an input batch as Python lists, read once per batch."""

    def __init__(self, batch: pa.RecordBatch | pa.Table) -> None:
        self.n = batch.num_rows
        self._batch = batch
        self._cols: dict[str, list[Any]] = {}

    @functools.cached_property
    def values(self) -> list[bytes | None]:
        """The values as bytes."""
        return self._batch.column(self._batch.schema.names.index("value")).to_pylist()  # type: ignore[no-any-return]

    def only_topic(self) -> str | None:
        """The topic of every row, when they all come from one (the usual case)."""
        topics = self._batch.column(self._batch.schema.names.index("topic"))
        if self.n == 0 or topics.null_count:
            return None
        first: str = topics[0].as_py()
        return first if pc.all(pc.equal(topics, first)).as_py() else None

    def strings(self) -> list[str | None] | None:
        """The values decoded as UTF-8 by Arrow, or None if one is not valid UTF-8."""
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

    def output_properties(self, forward: bool) -> list[str | None] | None:
        """The properties each row's output carries (JSON object text): the row's
        own with ``forward`` (else none), and for a triggered row, without
        :data:`TRIGGER_PROPERTY` but with Pulsar's ``__pfn_input_topic__`` and
        ``__pfn_input_msg_id__`` naming the row. ``None``: no row's carries any."""
        array = properties_to_json(self._batch.column(self._batch.schema.names.index("properties")))
        if not pc.any(pc.match_substring(array, TRIGGER_PROPERTY)).as_py():
            return array.to_pylist() if forward else None
        out: list[str | None] = []
        topics = self.column("topic")
        for i, text in enumerate(array.to_pylist()):
            if text is None or TRIGGER_PROPERTY not in text:
                out.append(text if forward else None)
                continue
            props = json.loads(text) if forward else {}
            props.pop(TRIGGER_PROPERTY, None)
            props[INPUT_TOPIC_PROPERTY] = f"persistent://{topics[i]}"
            props[INPUT_MESSAGE_PROPERTY] = self.message_id(i)
            out.append(json.dumps(props, separators=(",", ":")))
        return out

    def message_id(self, i: int) -> str:
        """Row ``i``'s message id, ``partition:offset``."""
        return f"{self.column('partition')[i]}:{self.column('offset')[i]}"

    def dead_letter(self, i: int, topic: str, exc: BaseException, attempts: int) -> Emitted:
        """Row ``i`` for the dead letter ``topic``, with the error in its properties."""
        props = dict(self.column("properties")[i] or [])
        props.update(
            {
                DLQ_ORIGIN_MESSAGE_ID: self.message_id(i),
                DLQ_REAL_TOPIC: f"persistent://{self.column('topic')[i]}",
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
