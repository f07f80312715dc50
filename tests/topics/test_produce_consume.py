"""Producing and consuming: positions, subscriptions, partitioning, schemas, de-duplication."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from sparkfn.api.errors import ConfigError, PayloadError
from sparkfn.store.store import Store
from sparkfn.topics import log, reading
from sparkfn.topics.admin import TopicAdmin, TopicInfo
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message, ReceivedMessage, SchemaType, messages_from_table
from sparkfn.topics.producer import Producer


def _create(
    store: Store, name: str = "t", partitions: int = 1, schema_type: str = "bytes"
) -> TopicInfo:
    return TopicAdmin(store).create(name, partitions=partitions, schema_type=schema_type)


def _read_all(store: Store, name: str = "t") -> list[ReceivedMessage]:
    return Consumer(store, name, initial_position="earliest").receive(max_messages=1_000_000)


def _ids(messages: list[ReceivedMessage]) -> list[str]:
    return [m.message_id for m in messages]


# --- producing ------------------------------------------------------------------------


def test_send_round_trips_every_field(store: Store) -> None:
    _create(store, "acme/ns/t", partitions=2)
    event_time = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    before = datetime.now(UTC)
    producer = Producer(store, "persistent://acme/ns/t", name="prod-1")
    message_id = producer.send(
        b"\x00\xffraw",
        key="k",
        properties={"a": "1", "b": ""},
        event_time=event_time,
        sequence_id=41,
        partition=1,
    )
    after = datetime.now(UTC)
    assert message_id == "1:0"
    [got] = _read_all(store, "acme/ns/t")
    assert got.message_id == "1:0"
    assert (got.topic, got.partition, got.offset) == ("acme/ns/t", 1, 0)
    assert (got.key, got.value) == ("k", b"\x00\xffraw")
    assert got.properties == {"a": "1", "b": ""}
    assert got.event_time == event_time
    assert before - timedelta(milliseconds=1) <= got.publish_time <= after
    assert (got.producer, got.sequence_id) == ("prod-1", 41)


def test_optional_fields_default_to_none(store: Store) -> None:
    _create(store)
    Producer(store, "t").send_batch([Message(None), Message(b"")])
    first, second = _read_all(store)
    assert (first.value, second.value) == (None, b"")
    for m in (first, second):
        assert (m.key, m.event_time, m.producer, m.sequence_id) == (None, None, None, None)
        assert m.properties == {}


def test_send_batch_is_one_append_with_contiguous_offsets(store: Store) -> None:
    info = _create(store, partitions=2)
    producer = Producer(store, "t")
    ids = producer.send_batch([Message(f"v{i}".encode()) for i in range(5)], partition=1)
    assert ids == [f"1:{i}" for i in range(5)]
    ids = producer.send_batch([Message(f"w{i}".encode()) for i in range(3)], partition=1)
    assert ids == ["1:5", "1:6", "1:7"]
    stats = TopicAdmin(store).stats("t")
    assert [(s.end_offset, s.segments) for s in stats] == [(0, 0), (8, 2)]
    values = [
        m.value for b in reading.read_range(store, info, 1, 0) for m in messages_from_table(b)
    ]
    assert values == [b"v0", b"v1", b"v2", b"v3", b"v4", b"w0", b"w1", b"w2"]


def test_empty_batch_appends_nothing(store: Store) -> None:
    _create(store)
    assert Producer(store, "t").send_batch([]) == []
    assert TopicAdmin(store).stats("t")[0].segments == 0


def test_producer_encode_validates_against_the_schema(store: Store) -> None:
    _create(store, schema_type="json")
    producer = Producer(store, "t")
    messages = producer.encode([{"a": 1}, [1, 2], "3"])
    assert [m.value for m in messages] == [b'{"a":1}', b"[1,2]", b"3"]
    with pytest.raises(PayloadError, match="topic public/default/t"):
        producer.encode([{"a": 1}, {1, 2}])


# --- consuming from a position ----------------------------------------------------------


@pytest.fixture
def ten(store: Store) -> TopicInfo:
    """Topic ``t``: 10 messages in partition 0, 4 in partition 1."""
    info = _create(store, partitions=2)
    producer = Producer(store, "t")
    producer.send_batch([Message(f"a{i}".encode()) for i in range(10)], partition=0)
    producer.send_batch([Message(f"b{i}".encode()) for i in range(4)], partition=1)
    return info


def test_earliest_reads_everything(store: Store, ten: TopicInfo) -> None:
    got = Consumer(store, "t", initial_position="earliest").receive()
    assert _ids(got) == [f"0:{i}" for i in range(10)] + [f"1:{i}" for i in range(4)]
    assert [m.value for m in got[:2]] == [b"a0", b"a1"]


def test_latest_reads_only_new_messages(store: Store, ten: TopicInfo) -> None:
    consumer = Consumer(store, "t")  # latest is the default
    assert consumer.receive() == []
    Producer(store, "t").send(b"new", partition=1)
    got = consumer.receive()
    assert [(m.message_id, m.value) for m in got] == [("1:4", b"new")]
    assert consumer.receive() == []


def test_explicit_offsets(store: Store, ten: TopicInfo) -> None:
    consumer = Consumer(store, "t", initial_position="latest", start_offsets={0: 7})
    assert _ids(consumer.receive()) == ["0:7", "0:8", "0:9"]
    consumer = Consumer(store, "t", initial_position="earliest", start_offsets={1: 3})
    assert _ids(consumer.receive()) == [f"0:{i}" for i in range(10)] + ["1:3"]
    consumer = Consumer(store, "t", initial_position="earliest", start_offsets={0: 10, 1: 99})
    assert consumer.receive() == []
    Producer(store, "t").send(b"x", partition=0)
    assert _ids(consumer.receive()) == ["0:10"]


def test_explicit_offset_of_an_unknown_partition_is_rejected(store: Store, ten: TopicInfo) -> None:
    with pytest.raises(ConfigError, match="topic public/default/t has no partition 2"):
        Consumer(store, "t", start_offsets={2: 0})


def test_bad_initial_position_is_rejected(store: Store, ten: TopicInfo) -> None:
    with pytest.raises(
        ConfigError, match="initial_position must be 'earliest' or 'latest'; got 'first'"
    ):
        Consumer(store, "t", initial_position="first")  # type: ignore[arg-type]


def test_receive_respects_max_messages(store: Store, ten: TopicInfo) -> None:
    consumer = Consumer(store, "t", initial_position="earliest")
    seen: list[str] = []
    while batch := consumer.receive(max_messages=3):
        assert len(batch) <= 3
        seen.extend(_ids(batch))
    assert seen == [f"0:{i}" for i in range(10)] + [f"1:{i}" for i in range(4)]


def test_receive_waits_up_to_the_timeout(store: Store, ten: TopicInfo) -> None:
    consumer = Consumer(store, "t")
    started = time.monotonic()
    assert consumer.receive(timeout=0.3) == []
    assert time.monotonic() - started >= 0.3

    timer = threading.Timer(0.2, lambda: Producer(store, "t").send(b"late", partition=0))
    timer.start()
    try:
        started = time.monotonic()
        got = consumer.receive(timeout=120)
        waited = time.monotonic() - started
    finally:
        timer.join(10)
    assert [m.value for m in got] == [b"late"]
    # It returned when the message came, not at the end of the timeout.
    assert waited < 60, f"receive returned only after {waited:.1f}s"


# --- durable subscriptions ----------------------------------------------------------------


def test_subscription_cursor_survives_a_new_consumer(store: Store, ten: TopicInfo) -> None:
    first = Consumer(store, "t", subscription="audit", initial_position="earliest")
    got = first.receive(max_messages=6)
    assert _ids(got) == [f"0:{i}" for i in range(6)]
    first.acknowledge()

    # initial_position only applies to a new subscription.
    second = Consumer(store, "t", subscription="audit", initial_position="latest")
    assert second.positions == {0: 6, 1: 0}
    assert _ids(second.receive()) == [f"0:{i}" for i in range(6, 10)] + [f"1:{i}" for i in range(4)]
    # Not acknowledged: a third consumer resumes where the second was acknowledged (never).
    third = Consumer(store, "t", subscription="audit")
    assert third.positions == {0: 6, 1: 0}
    third.receive()
    third.acknowledge()
    assert Consumer(store, "t", subscription="audit", initial_position="earliest").receive() == []

    Producer(store, "t").send(b"more", partition=1)
    assert _ids(Consumer(store, "t", subscription="audit").receive()) == ["1:4"]


def test_subscriptions_are_independent(store: Store, ten: TopicInfo) -> None:
    a = Consumer(store, "t", subscription="a", initial_position="earliest")
    a.receive()
    a.acknowledge()
    b = Consumer(store, "t", subscription="b", initial_position="earliest")
    assert len(b.receive()) == 14
    assert Consumer(store, "t", subscription="a").receive() == []


def test_new_latest_subscription_starts_at_the_end(store: Store, ten: TopicInfo) -> None:
    Consumer(store, "t", subscription="s", initial_position="latest")
    Producer(store, "t").send(b"after", partition=0)
    got = Consumer(store, "t", subscription="s", initial_position="earliest").receive()
    assert [(m.message_id, m.value) for m in got] == [("0:10", b"after")]


def test_acknowledge_needs_a_subscription(store: Store, ten: TopicInfo) -> None:
    with pytest.raises(ConfigError, match="acknowledge needs a consumer with a subscription name"):
        Consumer(store, "t").acknowledge()


# --- partitioning ---------------------------------------------------------------------------


def test_partition_for_key_is_crc32_and_stable() -> None:
    # Fixed values: a change here re-routes every existing key.
    assert [log.partition_for_key(k, 4) for k in ["alice", "bob", "carol", "dave", ""]] == [
        3,
        0,
        3,
        0,
        0,
    ]
    assert log.partition_for_key("alice", 3) == 2
    assert log.partition_for_key("anything", 1) == 0


def test_same_key_goes_to_the_same_partition(store: Store) -> None:
    _create(store, partitions=4)
    keys = [f"user-{i}" for i in range(40)]
    first = Producer(store, "t")
    placed: dict[str, set[int]] = {k: set() for k in keys}
    for round_ in range(3):
        producer = first if round_ < 2 else Producer(store, "t")  # a new producer too
        ids = producer.send_batch([Message(k.encode(), key=k) for k in keys])
        for key, message_id in zip(keys, ids, strict=True):
            assert message_id is not None
            placed[key].add(int(message_id.split(":")[0]))
        assert producer.send(b"one", key=keys[0]).startswith(f"{min(placed[keys[0]])}:")  # type: ignore[union-attr]
    for key, partitions in placed.items():
        assert partitions == {log.partition_for_key(key, 4)}, key
    assert len({p for ps in placed.values() for p in ps}) > 1, "40 keys all hashed to one partition"

    # Per key, messages are read back in the order they were sent.
    by_key: dict[str, list[int]] = {}
    for m in _read_all(store):
        if m.key is not None:
            by_key.setdefault(m.key, []).append(m.offset)
            assert m.partition == log.partition_for_key(m.key, 4)
    assert all(offsets == sorted(offsets) for offsets in by_key.values())


def test_messages_without_key_are_spread_round_robin(store: Store) -> None:
    _create(store, partitions=3)
    ids = Producer(store, "t").send_batch([Message(b"x") for _ in range(9)])
    assert Counter(i.split(":")[0] for i in ids if i) == {"0": 3, "1": 3, "2": 3}


def test_explicit_partition_wins_over_key(store: Store) -> None:
    _create(store, partitions=4)
    producer = Producer(store, "t")
    assert producer.send(b"v", key="alice", partition=1) == "1:0"
    assert producer.send_batch([Message(b"v", key="alice")], partition=2) == ["2:0"]


def test_partition_out_of_range_is_rejected(store: Store) -> None:
    _create(store, partitions=3)
    producer = Producer(store, "t")
    for partition in [-1, 3, 100]:
        expected = f"partition for topic public/default/t must be between 0 and 2; got {partition}"
        with pytest.raises(ConfigError) as caught:
            producer.send(b"v", partition=partition)
        assert str(caught.value) == expected
        with pytest.raises(ConfigError) as caught:
            producer.send_batch([Message(b"v")], partition=partition)
        assert str(caught.value) == expected
    assert _read_all(store) == []


# --- schemas ----------------------------------------------------------------------------------

VALID: list[tuple[str, object, bytes]] = [
    ("bytes", b"\x00\xff", b"\x00\xff"),
    ("bytes", bytearray(b"ba"), b"ba"),
    ("bytes", memoryview(b"mv"), b"mv"),
    ("bytes", "text", b"text"),
    ("string", "héllo", "héllo".encode()),
    ("string", "héllo".encode(), "héllo".encode()),
    ("json", {"a": [1, 2.5, None, True]}, b'{"a":[1,2.5,null,true]}'),
    ("json", [1, "x"], b'[1,"x"]'),
    ("json", 7, b"7"),
    ("json", None, b"null"),
    ("json", '{"raw": "text"}', b'{"raw": "text"}'),
    ("json", b'"bytes"', b'"bytes"'),
]

INVALID: list[tuple[str, object, str]] = [
    ("bytes", 42, "value must be str or bytes; got a int: 42"),
    ("bytes", {"a": 1}, "value must be str or bytes; got a dict"),
    ("string", b"\xff\xfe", "is not valid string"),
    ("string", 3.5, "value must be str or bytes; got a float"),
    ("json", "{not json", "is not valid json"),
    ("json", b"\xff", "is not valid json"),
    ("json", {1, 2}, "is not JSON-serialisable"),
    ("json", object(), "is not JSON-serialisable"),
]


def test_valid_values_are_stored(store: Store) -> None:
    for i, (kind, value, stored) in enumerate(VALID):
        _create(store, f"t{i}", schema_type=kind)
        Producer(store, f"t{i}").send(value)
        [got] = _read_all(store, f"t{i}")
        assert got.value == stored, (kind, value)
        decoded = got.as_json(SchemaType(kind))["value"]
        if kind == "json":
            assert decoded == json.loads(stored)
        elif kind == "string":
            assert decoded == stored.decode()
        else:  # bytes: its UTF-8 text when it is some, as Pulsar's consumer prints it
            try:
                assert decoded == stored.decode("utf-8"), (kind, value)
            except UnicodeDecodeError:
                assert decoded == stored.hex(), (kind, value)


def test_invalid_values_raise_payload_error_naming_the_topic(store: Store) -> None:
    for kind in ("bytes", "string", "json"):
        _create(store, f"acme/ns/{kind}", schema_type=kind)
    for kind, value, fragment in INVALID:
        with pytest.raises(PayloadError) as caught:
            Producer(store, f"acme/ns/{kind}").send(value)
        message = str(caught.value)
        assert message.startswith(f"topic acme/ns/{kind} (schema {kind}): "), message
        assert fragment in message, message
        assert isinstance(caught.value, ValueError)
        assert caught.value.reason == "invalid_payload"
    for kind in ("bytes", "string", "json"):
        assert _read_all(store, f"acme/ns/{kind}") == []


def test_send_batch_validates_raw_messages(store: Store) -> None:
    for kind, bad in [("string", b"ok\xffno"), ("json", b"{]"), ("json", b"\xff")]:
        _create(store, "typed", schema_type=kind)
        good = b'"fine"' if kind == "json" else b"fine"
        with pytest.raises(PayloadError) as caught:
            Producer(store, "typed").send_batch([Message(good), Message(bad), Message(good)])
        message = str(caught.value)
        assert message.startswith(f"topic public/default/typed (schema {kind}): message 1 value")
        assert _read_all(store, "typed") == []  # the whole batch was refused
        TopicAdmin(store).delete("typed")


def test_none_values_pass_every_schema(store: Store) -> None:
    for kind in ("bytes", "string", "json"):
        _create(store, kind, schema_type=kind)
        assert Producer(store, kind).send_batch([Message(None)]) == ["0:0"]


# --- de-duplication ---------------------------------------------------------------------------


def test_duplicate_sequence_ids_are_dropped(store: Store) -> None:
    _create(store)
    producer = Producer(store, "t", name="p")
    assert producer.send(b"1", sequence_id=1) == "0:0"
    assert producer.send(b"1 again", sequence_id=1) is None
    assert producer.send(b"0", sequence_id=0) is None
    assert producer.send(b"5", sequence_id=5) == "0:1"  # gaps are fine
    assert producer.send(b"3", sequence_id=3) is None
    assert [m.value for m in _read_all(store)] == [b"1", b"5"]


def test_duplicates_are_dropped_across_producer_instances(store: Store, store_url: str) -> None:
    _create(store)
    Producer(store, "t", name="p").send_batch([Message(b"a", sequence_id=i) for i in range(10)])
    other_store = Store.open(store_url, store.data_dir)  # as if another process
    try:
        again = Producer(other_store, "t", name="p")
        ids = again.send_batch([Message(b"b", sequence_id=i) for i in range(5, 15)])
    finally:
        other_store.close()
    assert ids == [None] * 5 + [f"0:{i}" for i in range(10, 15)]
    got = _read_all(store)
    assert [m.sequence_id for m in got] == list(range(15))
    assert [m.value for m in got] == [b"a"] * 10 + [b"b"] * 5


def test_duplicates_within_one_batch_are_dropped(store: Store) -> None:
    _create(store)
    producer = Producer(store, "t", name="p")
    ids = producer.send_batch(
        [
            Message(b"s1", sequence_id=1),
            Message(b"s1 dup", sequence_id=1),
            Message(b"s3", sequence_id=3),
            Message(b"s2 late", sequence_id=2),
            Message(b"no seq"),
            Message(b"s4", sequence_id=4),
        ]
    )
    assert ids == ["0:0", None, "0:1", None, "0:2", "0:3"]  # no holes in the offsets
    assert [m.value for m in _read_all(store)] == [b"s1", b"s3", b"no seq", b"s4"]


def test_a_batch_of_only_duplicates_appends_nothing(store: Store) -> None:
    _create(store)
    producer = Producer(store, "t", name="p")
    producer.send(b"x", sequence_id=10)
    assert producer.send_batch([Message(b"y", sequence_id=s) for s in (3, 10, 7)]) == [None] * 3
    assert TopicAdmin(store).stats("t")[0].end_offset == 1


def test_different_producers_with_the_same_sequence_are_kept(store: Store) -> None:
    _create(store)
    assert Producer(store, "t", name="p1").send(b"p1", sequence_id=1) == "0:0"
    assert Producer(store, "t", name="p2").send(b"p2", sequence_id=1) == "0:1"
    assert [(m.producer, m.sequence_id) for m in _read_all(store)] == [("p1", 1), ("p2", 1)]


def test_messages_without_sequence_id_or_producer_name_are_never_dropped(store: Store) -> None:
    _create(store)
    named = Producer(store, "t", name="p")
    named.send(b"seq", sequence_id=5)
    assert named.send(b"plain") == "0:1"
    assert named.send(b"plain") == "0:2"
    anonymous = Producer(store, "t")
    assert anonymous.send(b"anon", sequence_id=1) == "0:3"
    assert anonymous.send(b"anon", sequence_id=1) == "0:4"


def test_sequences_are_tracked_per_partition(store: Store) -> None:
    _create(store, partitions=2)
    producer = Producer(store, "t", name="p")
    assert producer.send(b"a", sequence_id=5, partition=0) == "0:0"
    assert producer.send(b"b", sequence_id=3, partition=1) == "1:0"
    assert producer.send(b"c", sequence_id=4, partition=0) is None
    assert producer.send(b"d", sequence_id=4, partition=1) == "1:1"


def test_deleting_the_topic_forgets_sequences(store: Store) -> None:
    _create(store)
    Producer(store, "t", name="p").send(b"x", sequence_id=9)
    TopicAdmin(store).delete("t")
    _create(store)
    assert Producer(store, "t", name="p").send(b"x", sequence_id=9) == "0:0"
