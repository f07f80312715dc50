"""A task's input rows as Python lists, and the dead-letter message of a row."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from sparkfn.runtime.function.emit import Emitted
from sparkfn.topics.message import properties_list, properties_to_json

# Properties a dead-lettered message carries (Pulsar's names where it has them).
DLQ_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
DLQ_REAL_TOPIC = "REAL_TOPIC"
DLQ_EXCEPTION = "EXCEPTION"
DLQ_ATTEMPTS = "ATTEMPTS"


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

    def properties_json(self) -> list[str | None]:
        """Each row's properties as JSON object text (``None``: none), as outputs carry them."""
        array = self._batch.column(self._batch.schema.names.index("properties"))
        return properties_to_json(array).to_pylist()  # type: ignore[no-any-return]

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
