"""Topic administration: create, list, describe, retention settings, delete."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from sparkfn.api.errors import (
    AlreadyExistsError,
    ConfigError,
    NotFoundError,
    TopicExistsError,
    TopicNotFoundError,
)
from sparkfn.config.names import TopicName
from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store
from sparkfn.topics import garbage, segments
from sparkfn.topics.admin import MAX_PARTITIONS, PartitionStats, TopicAdmin, parse_schema_type
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message, SchemaType
from sparkfn.topics.producer import Producer


@pytest.fixture
def admin(store: Store) -> TopicAdmin:
    return TopicAdmin(store)


def _rows(store: Store, table: schema.Table) -> int:  # type: ignore[name-defined]
    with store.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def test_create_returns_the_topic(admin: TopicAdmin) -> None:
    info = admin.create(
        "acme/sales/orders",
        partitions=4,
        schema_type="json",
        retention=timedelta(hours=2),
        retention_bytes=10_000,
    )
    assert info.name == TopicName("acme", "sales", "orders")
    assert info.partitions == 4
    assert info.schema_type is SchemaType.JSON
    assert info.retention_ms == 2 * 3600 * 1000
    assert info.retention_bytes == 10_000
    assert info.key == "acme/sales/orders"
    assert info.created_at is not None
    assert admin.get("persistent://acme/sales/orders") == info
    assert admin.get(TopicName("acme", "sales", "orders")) == info


def test_create_defaults(admin: TopicAdmin) -> None:
    info = admin.create("plain")
    assert str(info.name) == "public/default/plain"
    assert (info.partitions, info.schema_type) == (1, SchemaType.BYTES)
    assert (info.retention_ms, info.retention_bytes) == (None, None)


def test_every_schema_type_is_accepted(admin: TopicAdmin) -> None:
    for i, kind in enumerate(["bytes", "string", "json", SchemaType.STRING]):
        assert admin.create(f"t{i}", schema_type=kind).schema_type is SchemaType(kind), kind


def test_list_is_sorted_and_filters(admin: TopicAdmin) -> None:
    for name in ["b/x/t2", "a/y/t1", "zeta", "b/x/t1", "b/y/t0", "alpha"]:
        admin.create(name)
    assert [str(t.name) for t in admin.list()] == [
        "a/y/t1",
        "b/x/t1",
        "b/x/t2",
        "b/y/t0",
        "public/default/alpha",
        "public/default/zeta",
    ]
    assert [str(t.name) for t in admin.list(tenant="b")] == ["b/x/t1", "b/x/t2", "b/y/t0"]
    assert [str(t.name) for t in admin.list(tenant="b", namespace="x")] == ["b/x/t1", "b/x/t2"]
    assert [str(t.name) for t in admin.list(namespace="y")] == ["a/y/t1", "b/y/t0"]
    assert admin.list(tenant="nobody") == []


def test_list_of_an_empty_store(admin: TopicAdmin) -> None:
    assert admin.list() == []


def test_exists(admin: TopicAdmin) -> None:
    admin.create("here")
    assert admin.exists("here")
    assert admin.exists("persistent://public/default/here")
    assert not admin.exists("there")


def test_stats_describe_each_partition(admin: TopicAdmin, store: Store) -> None:
    admin.create("t", partitions=3)
    assert admin.stats("t") == [PartitionStats(p, 0, 0, 0, 0) for p in range(3)]

    producer = Producer(store, "t")
    producer.send_batch([Message(b"a"), Message(b"b")], partition=0)
    producer.send_batch([Message(b"c")], partition=0)
    big = b"x" * (segments.INLINE_LIMIT + 1)
    producer.send_batch([Message(big)], partition=2)

    stats = admin.stats("t")
    assert [(s.partition, s.start_offset, s.end_offset, s.segments) for s in stats] == [
        (0, 0, 3, 2),
        (1, 0, 0, 0),
        (2, 0, 1, 1),
    ]
    assert [s.messages for s in stats] == [3, 0, 1]
    assert 0 < stats[0].size_bytes < segments.INLINE_LIMIT
    assert stats[1].size_bytes == 0
    assert stats[2].size_bytes > segments.INLINE_LIMIT


def test_duplicate_create_raises_topic_exists(admin: TopicAdmin) -> None:
    admin.create("acme/sales/orders", partitions=2)
    for spelling in ["acme/sales/orders", "persistent://acme/sales/orders"]:
        with pytest.raises(TopicExistsError, match="topic acme/sales/orders already exists") as e:
            admin.create(spelling, partitions=5)
        assert isinstance(e.value, AlreadyExistsError)
        assert e.value.reason == "topic_exists"
    # The failed create changed nothing.
    assert admin.get("acme/sales/orders").partitions == 2
    assert [s.partition for s in admin.stats("acme/sales/orders")] == [0, 1]


def test_same_name_in_other_namespaces_is_another_topic(admin: TopicAdmin) -> None:
    a = admin.create("t1/ns/orders")
    b = admin.create("t1/other/orders")
    c = admin.create("t2/ns/orders")
    assert len({a.id, b.id, c.id}) == 3


def test_missing_topic_raises_topic_not_found(admin: TopicAdmin, store: Store) -> None:
    calls: dict[str, Callable[[], object]] = {
        "get": lambda: admin.get("public/default/missing"),
        "stats": lambda: admin.stats("missing"),
        "delete": lambda: admin.delete("missing"),
        "set_retention": lambda: admin.set_retention(
            "missing", retention=None, retention_bytes=None
        ),
        "producer": lambda: Producer(store, "missing"),
        "consumer": lambda: Consumer(store, "missing"),
    }
    for what, call in calls.items():
        with pytest.raises(TopicNotFoundError) as caught:
            call()
        assert str(caught.value) == "topic public/default/missing does not exist", what
        assert isinstance(caught.value, NotFoundError)
        assert isinstance(caught.value, LookupError)
        assert caught.value.reason == "topic_not_found"


def test_bad_partition_counts_are_rejected_naming_field_and_value(admin: TopicAdmin) -> None:
    for partitions in [0, -1, -100, MAX_PARTITIONS + 1]:
        with pytest.raises(ConfigError) as caught:
            admin.create("t", partitions=partitions)
        assert str(caught.value) == (
            f"partitions for topic public/default/t must be between 1 and {MAX_PARTITIONS}; "
            f"got {partitions}"
        )
    for partitions in ["3", 2.0, True, None]:
        with pytest.raises(ConfigError) as caught:
            admin.create("t", partitions=partitions)  # type: ignore[arg-type]
        assert str(caught.value) == (
            f"partitions for topic public/default/t must be an integer; got {partitions!r}"
        )
    assert admin.list() == []


def test_the_largest_partition_count_is_accepted(admin: TopicAdmin) -> None:
    assert admin.create("wide", partitions=MAX_PARTITIONS).partitions == MAX_PARTITIONS


def test_bad_schema_type_lists_the_allowed_ones(admin: TopicAdmin) -> None:
    for kind in ["protobuf", "", "JSON", "str"]:
        expected = f"schema_type {kind!r} is not one of: bytes, string, json, avro"
        with pytest.raises(ConfigError) as caught:
            admin.create("t", schema_type=kind)
        assert str(caught.value) == expected
        with pytest.raises(ConfigError):
            parse_schema_type(kind)
    assert admin.list() == []


def test_bad_retention_is_rejected(admin: TopicAdmin) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"retention": timedelta(0)}, "retention for topic public/default/t must be positive"),
        ({"retention": timedelta(seconds=-1)}, "retention for topic .* must be positive"),
        ({"retention_bytes": 0}, "retention_bytes for topic .* must be positive; got 0"),
        ({"retention_bytes": -5}, "retention_bytes for topic .* must be positive; got -5"),
    ]
    for kwargs, fragment in cases:
        with pytest.raises(ConfigError, match=fragment):
            admin.create("t", **kwargs)
    assert admin.list() == []


def test_bad_names_are_rejected(admin: TopicAdmin) -> None:
    for bad in ["bad name", "a/b", "a/b/c/d", "x/-y/z", ""]:
        with pytest.raises(ConfigError, match=re.escape(repr(bad))):
            admin.create(bad)
        with pytest.raises(ConfigError, match=re.escape(repr(bad))):
            admin.get(bad)
    assert admin.list() == []


def test_set_retention(admin: TopicAdmin) -> None:
    admin.create("t")
    info = admin.set_retention("t", retention=timedelta(minutes=1), retention_bytes=4096)
    assert (info.retention_ms, info.retention_bytes) == (60_000, 4096)
    info = admin.set_retention("t", retention=None, retention_bytes=None)
    assert (info.retention_ms, info.retention_bytes) == (None, None)


def test_set_retention_rejects_what_create_rejects(admin: TopicAdmin) -> None:
    admin.create("t", retention=timedelta(hours=1))
    cases: list[dict[str, Any]] = [
        {"retention": timedelta(0), "retention_bytes": None},
        {"retention": None, "retention_bytes": 0},
        {"retention": timedelta(seconds=-3), "retention_bytes": None},
    ]
    for kwargs in cases:
        with pytest.raises(ConfigError, match="for topic public/default/t must be positive"):
            admin.set_retention("t", **kwargs)
    assert admin.get("t").retention_ms == 3_600_000


def test_delete_removes_everything_and_retires_files(admin: TopicAdmin, store: Store) -> None:
    admin.create("doomed", partitions=2)
    admin.create("bystander")
    producer = Producer(store, "doomed", name="p")
    producer.send_batch([Message(b"x" * (segments.INLINE_LIMIT + 1), sequence_id=1)], partition=0)
    producer.send_batch([Message(b"small", sequence_id=2)], partition=1)
    consumer = Consumer(store, "doomed", subscription="s", initial_position="earliest")
    consumer.receive()
    consumer.acknowledge()
    Producer(store, "bystander").send(b"keep")
    with store.read() as conn:
        files = (
            conn.execute(
                select(schema.segments.c.location).where(schema.segments.c.location.is_not(None))
            )
            .scalars()
            .all()
        )
    assert len(files) == 1
    assert store.path(files[0]).is_file()

    admin.delete("persistent://public/default/doomed")

    assert not admin.exists("doomed")
    assert [t.name.name for t in admin.list()] == ["bystander"]
    for table in (schema.subscriptions, schema.producer_sequences):
        assert _rows(store, table) == 0
    assert _rows(store, schema.partitions) == 1  # the bystander's
    assert _rows(store, schema.segments) == 1
    # The file is retired, not deleted: a reader in the middle of it keeps going.
    assert store.path(files[0]).is_file()
    assert _rows(store, schema.garbage_files) == 1
    assert garbage.collect(store) == 0
    assert garbage.collect(store, now=_later(garbage.DEFAULT_GRACE)) == 1
    assert not store.path(files[0]).exists()

    # A new topic of the same name starts empty, at offset 0, with no old state.
    admin.create("doomed", partitions=2)
    assert Producer(store, "doomed", name="p").send(b"new", sequence_id=1, partition=0) == "0:0"
    fresh = Consumer(store, "doomed", subscription="s", initial_position="earliest").receive()
    assert [(m.message_id, m.value) for m in fresh] == [("0:0", b"new")]
    assert Consumer(store, "bystander", initial_position="earliest").receive()[0].value == b"keep"


def test_delete_twice_raises_not_found(admin: TopicAdmin) -> None:
    admin.create("t")
    admin.delete("t")
    with pytest.raises(TopicNotFoundError):
        admin.delete("t")


def _later(delta: timedelta) -> datetime:
    return utc_now() + delta + timedelta(seconds=1)
