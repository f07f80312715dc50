"""The group reader's side of negative acks (:mod:`sparkfn.runtime.group.retries`), without Spark.

A retry topic's partition is admitted up to its first message not yet due;
what is due stays admitted; an idle reader is told to look again when the
next message is due, its quiet wait shortened to that time; a drain takes
everything. And a message read back from the retry topic is given to the
function as its original (:func:`sparkfn.runtime.function.redelivery.as_delivered`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.redelivery import (
    DELIVER_AT,
    RECONSUMETIMES,
    REDELIVERY_COLUMN,
    as_delivered,
)
from sparkfn.runtime.function.rows import DLQ_ORIGIN_MESSAGE_ID, DLQ_REAL_TOPIC
from sparkfn.runtime.group.retries import RetryAdmission
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.topics.reading import read_range
from sparkfn.topics.spark.planning import offset_key
from sparkfn.topics.spark.quiet import QuietWait
from waiting import until


def _config() -> FunctionConfig:
    return FunctionConfig.build(
        name="orders", py="examples/exclamation.py", inputs=["in"], max_message_retries=2
    )


def _letter(value: bytes, due_ms: int, original: str = "1:7") -> Message:
    return Message(
        value,
        key="k",
        properties={
            "origin": "web",
            RECONSUMETIMES: "1",
            DELIVER_AT: str(due_ms),
            DLQ_REAL_TOPIC: "persistent://public/default/in-partition-1",
            DLQ_ORIGIN_MESSAGE_ID: original,
        },
    )


def test_a_retry_topic_is_admitted_up_to_its_first_message_not_yet_due(
    sqlite_store: Store, tmp_path: Path
) -> None:
    config = _config()
    admin = TopicAdmin(sqlite_store)
    retry = admin.create(config.retry_topic)
    producer = Producer(sqlite_store, config.retry_topic)
    producer.send_batch([_letter(b"a", 1), _letter(b"b", 2)])  # due long ago
    producer.send_batch([_letter(b"c", int(time.time() * 1000) + 3000)])
    producer.send_batch([_letter(b"d", 3)])
    quiet = QuietWait(tmp_path, [], recheck=10.0, wait=5.0)
    admission = RetryAdmission(quiet)
    key = offset_key(retry, 0)
    assert RetryAdmission.names(config) == ["public/default/in", config.retry_topic]

    # Up to c, the first not due (d after it waits too: appended in commit order).
    capped = admission.cap(sqlite_store, config, [retry], {}, {key: 4}, draining=False)
    assert capped == {key: 2}
    assert not admission.due()
    assert 0 < quiet.wait <= 3.0  # the reader looks again when c is due
    # Once a and b are read, nothing is admitted until c is due.
    assert admission.cap(sqlite_store, config, [retry], {key: 2}, {key: 4}, False) == {}
    # A drain takes everything now.
    assert admission.cap(sqlite_store, config, [retry], {key: 2}, {key: 4}, True) == {key: 4}

    until(admission.due, "c to be due", 10)
    assert admission.cap(sqlite_store, config, [retry], {key: 2}, {key: 4}, False) == {key: 4}
    assert not admission.due()
    assert quiet.wait == 5.0  # given back: nothing waits


def test_a_redelivered_message_is_given_as_its_original(sqlite_store: Store) -> None:
    config = _config()
    admin = TopicAdmin(sqlite_store)
    retry = admin.create(config.retry_topic)
    producer = Producer(sqlite_store, config.retry_topic)
    producer.send_batch([_letter(b"a", 0), Message(b"by hand")])
    [batch] = list(read_range(sqlite_store, retry, 0, 0, 2))
    [delivered] = list(as_delivered(iter([batch]), config.retry_topic))
    row, other_row = delivered.to_pylist()
    assert (row["topic"], row["partition"], row["offset"]) == ("public/default/in", 1, 7)
    assert (row["value"], row["key"], row["properties"]) == (b"a", "k", [("origin", "web")])
    assert row[REDELIVERY_COLUMN] == 1
    # No retry letter (written there by hand): given as a message of the retry topic.
    assert (other_row["topic"], other_row["offset"], other_row[REDELIVERY_COLUMN]) == (
        config.retry_topic,
        1,
        0,
    )
    other = pa.RecordBatch.from_pylist([{"topic": "public/default/in", "value": b"x"}])
    assert list(as_delivered(iter([other]), config.retry_topic)) == [other]
