"""What a source's records become in its topic: every field, every route (issue 40).

The appender builds each append's columns straight from the records (no
message object per record); these pin down that every field lands as the
record gave it, on both store backends.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sparkfn.api.connector import Record
from sparkfn.api.errors import ConfigError, PayloadError
from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.appender import TopicAppender
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.log import partition_for_key
from sparkfn.topics.message import ReceivedMessage


def _appender(
    store: Store, partitions: int = 1, schema_type: str = "bytes", **fields: object
) -> TopicAppender:
    TopicAdmin(store).create("out", partitions=partitions, schema_type=schema_type)
    config = SourceConfig(name="src", source_type="generator", output="out", **fields)  # type: ignore[arg-type]
    return TopicAppender(store, config, 0)


def _read(store: Store, topic: str = "out") -> list[ReceivedMessage]:
    return Consumer(store, topic, initial_position="earliest").receive(max_messages=10_000)


def test_every_field_of_a_record_lands_as_given(store: Store) -> None:
    appender = _appender(store)
    records = [
        Record(b"raw", key="k", properties={"a": "1", "b": "2"}, event_time=1_700_000_000_123),
        Record("text"),
        Record(None, properties={}, event_time=None),
        Record(bytearray(b"ba"), event_time=1_700_000_000_500.4),  # type: ignore[arg-type]
    ]
    ids = appender.append(records)
    assert ids == ["0:0", "0:1", "0:2", "0:3"]
    got = _read(store)
    assert [m.value for m in got] == [b"raw", b"text", None, b"ba"]
    assert [m.key for m in got] == ["k", None, None, None]
    assert [m.properties for m in got] == [{"a": "1", "b": "2"}, {}, {}, {}]
    assert [m.event_time for m in got] == [
        datetime(2023, 11, 14, 22, 13, 20, 123_000, tzinfo=UTC),
        None,
        None,
        datetime(2023, 11, 14, 22, 13, 20, 500_400, tzinfo=UTC),
    ]


def test_records_are_routed_by_partition_then_key_then_in_turn(store: Store) -> None:
    appender = _appender(store, partitions=3)
    records = [Record(f"r{i}", key=f"key-{i}" if i % 2 else None) for i in range(9)]
    records.append(Record("pinned", key="key-1", partition=2))
    ids = appender.append(records)
    got = {m.value.decode(): m for m in _read(store) if m.value is not None}
    for record, message_id in zip(records, ids, strict=True):
        assert message_id is not None
        message = got[record.value]
        assert f"{message.partition}:{message.offset}" == message_id
        if record.partition is not None:
            assert message.partition == record.partition
        elif record.key is not None:
            assert message.partition == partition_for_key(record.key, 3)
    unkeyed = [got[r.value].partition for r in records if r.key is None]
    assert sorted(set(unkeyed)) == [0, 1, 2]  # round robin over the partitions


def test_a_value_the_topic_refuses_appends_nothing(store: Store) -> None:
    appender = _appender(store, schema_type="json")
    with pytest.raises(PayloadError, match="not valid json"):
        appender.append([Record(b'{"ok": 1}'), Record(b"{not json")])
    assert _read(store) == []
    with pytest.raises(ConfigError, match="between 0 and 0; got 5"):
        appender.append([Record(b"x", partition=5)])


def test_effectively_once_drops_what_was_appended_before_by_sequence(store: Store) -> None:
    appender = _appender(store, partitions=2, processing_guarantees="effectively_once")
    first = [Record(f"v{i}", sequence_id=i, source_partition="f") for i in range(4)]
    assert None not in appender.append(first)
    again = [Record(f"v{i}", sequence_id=i, source_partition="f") for i in range(2, 6)]
    ids = appender.append(again)
    assert ids[:2] == [None, None] and None not in ids[2:]
    assert sorted(m.value for m in _read(store) if m.value is not None) == [
        f"v{i}".encode() for i in range(6)
    ]
