"""Negative acks: a failed message delivered again after a delay, durably, then dead-lettered.

Pulsar's Python runtime negative-acks a message whose ``process`` raised; the
broker delivers it again after ``negativeAckRedeliveryDelayMs`` while the
messages behind it go on, and after ``maxMessageRetries`` redeliveries it
goes to the dead-letter topic. sparkfn commits a batch's cursor as one
position, so a message cannot wait in it; instead a failed message is
written, as an output of its batch (committed atomically with the batch's
cursor, so effectively-once holds), to the function's retry topic
(:attr:`~sparkfn.config.function.FunctionConfig.retry_topic`) with
:func:`retry_letter`'s properties. The function reads that topic too
(:mod:`sparkfn.runtime.group.retries` admits a message once its
``DELIVER_AT`` has come), and :func:`as_delivered` gives each such message
back as the original: its topic, message id, key, value, event time and own
properties, and its redelivery count (``context.get_message_redelivery_count()``).

A message whose ``RECONSUMETIMES`` reached ``max_message_retries`` and fails
again goes to the dead-letter topic with ``ATTEMPTS`` = its deliveries; with
``max_message_retries`` unset (Pulsar's default) it is delivered again without
end, as Pulsar's consumer without a dead-letter policy does. A message left
unacknowledged (``auto_ack`` false) under ``timeout_ms`` waits ``timeout_ms``
(Pulsar's ack timeout) there instead of the negative-ack delay.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.attempts import NotAcknowledgedError
from sparkfn.runtime.function.emit import Emitted
from sparkfn.runtime.function.rows import (
    DLQ_EXCEPTION,
    DLQ_ORIGIN_MESSAGE_ID,
    DLQ_REAL_TOPIC,
    InputRows,
    without_partition,
)
from sparkfn.topics.message import PROPERTIES, properties_list

if TYPE_CHECKING:
    from sparkfn.runtime.function.instance import FunctionInstance

# Pulsar's retry-letter properties, and the time the message is due again (ms since the epoch).
RECONSUMETIMES = "RECONSUMETIMES"
DELAY_TIME = "DELAY_TIME"
DELIVER_AT = "DELIVER_AT"
# What a retry letter adds to the message's own properties (taken off again at its redelivery).
_OURS = frozenset(
    {RECONSUMETIMES, DELAY_TIME, DELIVER_AT, DLQ_EXCEPTION, DLQ_REAL_TOPIC, DLQ_ORIGIN_MESSAGE_ID}
)
REDELIVERY_COLUMN = "redelivery"


def redeliveries(rows: InputRows, i: int) -> int:
    """How many times row ``i`` was delivered before this delivery (0: the first)."""
    try:
        found = rows.column(REDELIVERY_COLUMN)
    except ValueError:  # a batch of first deliveries has no such column
        return 0
    return int(found[i] or 0)


def fail_message(inst: FunctionInstance, rows: InputRows, i: int, exc: Exception) -> None:
    """Row ``i`` failed: negative-acked (written to the retry topic) while it has
    redeliveries left, else dead-lettered (:func:`dead_letter`)."""
    config = inst.config
    unacked = isinstance(exc, NotAcknowledgedError)
    if not inst.negative_acks or (unacked and config.max_message_retries is not None):
        dead_letter(inst, rows, i, exc)  # tried in place, attempts_in_place times
        return
    done = redeliveries(rows, i)
    if config.redelivers(done):
        # Left unacknowledged (its outputs kept): Pulsar's ack timeout, not the nack delay.
        kept = isinstance(exc, NotAcknowledgedError) and exc.kept
        delay = config.timeout_ms if kept else None
        inst.out.append(retry_letter(rows, i, config, exc, delay))
    else:
        dead_letter(inst, rows, i, exc, done + 1)


def dead_letter(
    inst: FunctionInstance, rows: InputRows, i: int, exc: Exception, tried: int = 0
) -> None:
    """Row ``i`` failed every attempt (``tried``, else ``attempts_in_place``): to the
    dead letter topic with its cause, unless the user chose to drop it."""
    dlq = inst.config.dead_letter_target
    if dlq is None:
        return
    inst.out.append(rows.dead_letter(i, dlq, exc, tried or inst.config.attempts_in_place))
    inst.stats.dead_lettered += 1


def retry_letter(
    rows: InputRows, i: int, config: FunctionConfig, exc: BaseException, delay: int | None = None
) -> Emitted:
    """Row ``i``, negative-acked after ``exc``, for the retry topic: its own properties,
    ``RECONSUMETIMES`` (its redeliveries, this one included), ``DELAY_TIME`` (``delay``, else
    the negative-ack delay), ``DELIVER_AT``, ``REAL_TOPIC``, ``ORIGIN_MESSAGE_ID``, ``EXCEPTION``."""
    if delay is None:
        delay = config.negative_ack_redelivery_delay_ms
    props = dict(rows.column("properties")[i] or [])
    props.update(
        {
            RECONSUMETIMES: str(redeliveries(rows, i) + 1),
            DELAY_TIME: str(delay),
            DELIVER_AT: str(int(time.time() * 1000) + delay),
            DLQ_REAL_TOPIC: rows.topic_name(i),
            DLQ_ORIGIN_MESSAGE_ID: rows.message_id(i),
            DLQ_EXCEPTION: f"{type(exc).__name__}: {exc}",
        }
    )
    return Emitted(
        "dead_letter",
        config.retry_topic,
        rows.values[i],
        rows.column("key")[i],
        props,
        rows.column("event_time")[i],
    )


def pairs(properties: list[tuple[str, str]] | str | None) -> list[tuple[str, str]]:
    """A message's properties as pairs, whether Arrow gave a map's pairs or JSON text."""
    if isinstance(properties, str):
        return properties_list(properties) or []
    return list(properties or ())


def deliver_at(properties: list[tuple[str, str]] | str | None) -> int:
    """When a retry-topic message is due (ms since the epoch); 0 without a time."""
    for key, value in pairs(properties):
        if key == DELIVER_AT:
            return int(value) if value.isdigit() else 0
    return 0


def as_delivered(batches: Iterator[pa.RecordBatch], retry_topic: str) -> Iterator[pa.RecordBatch]:
    """``batches`` with each message read from ``retry_topic`` given back as its original
    (topic, partition, offset, own properties) plus its ``redelivery`` count column."""
    for batch in batches:
        names = batch.schema.names
        if batch.num_rows == 0 or "topic" not in names:
            yield batch
            continue
        topic = batch.column(names.index("topic"))[0].as_py()
        yield _original(batch) if topic == retry_topic else batch


def _original(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch's retry letters as their originals; a message there that is no retry
    letter (written by hand) is given as it is, a message of the retry topic."""
    names = batch.schema.names
    props = batch.column(names.index("properties")).to_pylist()
    where = [batch.column(names.index(n)).to_pylist() for n in ("topic", "partition", "offset")]
    here = zip(*where, strict=True)
    topics, parts, offsets, own, counts = [], [], [], [], []
    for given, (topic, partition, position) in zip(props, here, strict=True):
        own_pairs = pairs(given)
        found = dict(own_pairs)
        real = without_partition(found.get(DLQ_REAL_TOPIC, "")).removeprefix("persistent://")
        part, _, offset = found.get(DLQ_ORIGIN_MESSAGE_ID, "").partition(":")
        if not (real and part.isdigit() and offset.isdigit()):
            real, part, offset = topic, str(partition), str(position)
        topics.append(real)
        parts.append(int(part))
        offsets.append(int(offset))
        count = found.get(RECONSUMETIMES, "")
        counts.append(int(count) if count.isdigit() else 0)
        kept = [(k, v) for k, v in own_pairs if k not in _OURS]
        own.append(kept or None)
    columns = {
        "topic": pa.array(topics, pa.string()),
        "partition": pa.array(parts, pa.int32()),
        "offset": pa.array(offsets, pa.int64()),
        "properties": pa.array(own, PROPERTIES),
    }
    arrays = [columns.get(n, batch.column(i)) for i, n in enumerate(names)]
    out = pa.RecordBatch.from_arrays(
        arrays,
        schema=pa.schema([_field(batch.schema.field(i), columns) for i in range(len(names))]),
    )
    return out.append_column(pa.field(REDELIVERY_COLUMN, pa.int32()), pa.array(counts, pa.int32()))


def _field(field: pa.Field, columns: dict[str, pa.Array]) -> pa.Field:
    found = columns.get(field.name)
    return field if found is None else pa.field(field.name, found.type)
