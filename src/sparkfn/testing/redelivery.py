"""The harness's negative acks: a retry letter delivered again, as the runtime delivers it."""

from __future__ import annotations

import pyarrow as pa

from sparkfn.runtime.function.emit import Emitted
from sparkfn.runtime.function.redelivery import as_delivered
from sparkfn.store.clock import utc_now
from sparkfn.topics.message import READ_SCHEMA


def redelivered(retries: list[Emitted], retry_topic: str) -> pa.RecordBatch:
    """The negative-acked messages ``retries`` (written to ``retry_topic``) as the runtime
    delivers them again: as their originals, with their redelivery counts."""
    rows = [
        {
            "key": item.key,
            "value": item.value,
            "properties": list(item.properties.items()),
            "event_time": item.event_time,
            "publish_time": utc_now(),
            "producer": "harness",
            "sequence_id": None,
            "topic": item.topic,
            "partition": 0,
            "offset": n,
        }
        for n, item in enumerate(retries)
    ]
    batch = pa.RecordBatch.from_pylist(rows, schema=READ_SCHEMA)
    return next(as_delivered(iter([batch]), retry_topic)) if rows else batch
