"""Helpers shared by the topic tests: stored rows, a topic's values, the sink's input schema."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import STORED_SCHEMA


def stored_table(values: list[bytes]) -> pa.Table:
    """``values`` as rows of a segment (no keys, properties or producer)."""
    n = len(values)
    return pa.Table.from_pydict(
        {
            "key": [None] * n,
            "value": values,
            "properties": [[]] * n,
            "event_time": [None] * n,
            "publish_time": [utc_now()] * n,
            "producer": [None] * n,
            "sequence_id": [None] * n,
        },
        schema=STORED_SCHEMA,
    )


def read_all(store: Store, topic: str) -> list[bytes]:
    """Every value of ``topic``, from its first message, in partition order."""
    consumer = Consumer(store, topic, initial_position="earliest")
    out: list[bytes] = []
    while batch := consumer.receive(max_messages=10_000):
        out.extend(m.value for m in batch if m.value is not None)
    return out


def value_schema() -> Any:
    """The Spark schema of a frame with a binary ``value`` only."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    return StructType([StructField("value", BinaryType())])
