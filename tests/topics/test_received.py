"""``ReceivedMessage``: read lazily from its batch, it behaves as a plain frozen record.

A received message converts its fields from the batch's Arrow columns only
when asked; these tests pin down that it still looks, compares, copies and
pickles like the frozen dataclass it replaced, and that a message built by
hand keeps exactly the values it was given.
"""

from __future__ import annotations

import copy
import pickle
from datetime import UTC, datetime, timedelta, timezone

import pytest

from sparkfn.store.store import Store
from sparkfn.topics import reading
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message, ReceivedMessage, messages_from_table
from sparkfn.topics.producer import Producer

EVENT_TIME = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


@pytest.fixture
def read(store: Store) -> list[ReceivedMessage]:
    """Three messages read back from topic ``t``: one with every field, two bare."""
    TopicAdmin(store).create("t", partitions=1)
    producer = Producer(store, "t", name="p")
    producer.send(b"full", key="k", properties={"a": "1"}, event_time=EVENT_TIME, sequence_id=3)
    producer.send_batch([Message(b"bare"), Message(None)])
    return Consumer(store, "t", initial_position="earliest").receive()


def _by_hand(message: ReceivedMessage) -> ReceivedMessage:
    return ReceivedMessage(
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        key=message.key,
        value=message.value,
        properties=dict(message.properties),
        event_time=message.event_time,
        publish_time=message.publish_time,
        producer=message.producer,
        sequence_id=message.sequence_id,
    )


def test_fields_are_python_values(read: list[ReceivedMessage]) -> None:
    full, bare, empty = read
    assert (full.topic, full.partition, full.offset, full.message_id) == (
        "public/default/t",
        0,
        0,
        "0:0",
    )
    assert (full.key, full.value, full.properties) == ("k", b"full", {"a": "1"})
    assert full.event_time == EVENT_TIME and full.event_time.utcoffset() == timedelta(0)
    assert isinstance(full.publish_time, datetime) and full.publish_time.utcoffset() == timedelta(0)
    assert (full.producer, full.sequence_id) == ("p", 3)
    assert (bare.key, bare.properties, bare.event_time, bare.sequence_id) == (None, {}, None, None)
    assert (bare.producer, empty.value, empty.offset) == ("p", None, 2)


def test_a_message_equals_one_built_by_hand_from_its_fields(read: list[ReceivedMessage]) -> None:
    for message in read:
        assert message == _by_hand(message)
        assert repr(message) == repr(_by_hand(message))
    assert read[0] != read[1]
    assert read[0] != "not a message"


def test_repr_names_every_field_as_the_dataclass_did(read: list[ReceivedMessage]) -> None:
    shown = repr(read[1])
    assert shown.startswith("ReceivedMessage(topic='public/default/t', partition=0, offset=1, ")
    assert "key=None, value=b'bare', properties={}, event_time=None, publish_time=datetime" in shown
    assert shown.endswith("producer='p', sequence_id=None)")


def test_fields_are_read_only_and_there_is_no_room_for_more(read: list[ReceivedMessage]) -> None:
    message = read[0]
    with pytest.raises(AttributeError):
        message.value = b"changed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        message.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        hash(message)  # as a frozen dataclass with a dict field


def test_properties_is_the_same_dict_on_every_access(read: list[ReceivedMessage]) -> None:
    message = read[0]
    message.properties["b"] = "2"
    assert message.properties == {"a": "1", "b": "2"}
    assert read[1].properties is read[1].properties
    assert read[2].properties == {}  # another message of the batch has its own


def test_pickle_and_copy_carry_the_fields_only(read: list[ReceivedMessage]) -> None:
    for message in read:
        assert pickle.loads(pickle.dumps(message)) == message
        assert copy.copy(message) == message
        assert copy.deepcopy(message) == message


def test_match_by_position(read: list[ReceivedMessage]) -> None:
    match read[0]:
        case ReceivedMessage(topic, partition, offset, key):
            assert (topic, partition, offset, key) == ("public/default/t", 0, 0, "k")
        case _:
            pytest.fail("a ReceivedMessage should match by its fields' positions")


def test_a_message_built_by_hand_keeps_what_it_was_given() -> None:
    plus_two = timezone(timedelta(hours=2))
    naive = datetime(2024, 1, 1, 12, 0)
    props = {"x": "y"}
    message = ReceivedMessage(
        topic="t", partition=1, offset=5, key=None, value=b"v", properties=props,
        event_time=naive, publish_time=datetime(2024, 1, 1, tzinfo=plus_two),
        producer=None, sequence_id=None,
    )  # fmt: skip
    assert message.properties is props
    assert message.event_time is naive
    assert message.publish_time.tzinfo is plus_two
    assert message.message_id == "1:5"


def test_messages_from_a_table_read_the_position_columns(store: Store) -> None:
    info = TopicAdmin(store).create("t", partitions=2)
    Producer(store, "t").send_batch([Message(f"{i}".encode()) for i in range(6)], partition=1)
    [batch] = list(reading.read_range(store, info, 1, 2, 5))
    messages = messages_from_table(batch)
    assert [(m.partition, m.offset, m.value) for m in messages] == [
        (1, 2, b"2"),
        (1, 3, b"3"),
        (1, 4, b"4"),
    ]
