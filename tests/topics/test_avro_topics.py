"""Avro topics: a topic keeps its Avro schema; producers and the commit check values against it."""

from __future__ import annotations

import pytest

from sparkfn import ConfigError, Consumer, PayloadError, Producer, Store, TopicAdmin
from sparkfn.api.fields import Integer, String
from sparkfn.api.records import Record
from sparkfn.topics.message import Message, avro_schema


class Point(Record):
    x = Integer(required=True)
    label = String()


def test_an_avro_topic_keeps_its_schema_and_encodes_dicts_and_records(store: Store) -> None:
    admin = TopicAdmin(store)
    info = admin.create(
        "points", partitions=2, schema_type="avro", schema_definition=Point.schema()
    )
    assert admin.get("persistent://public/default/points") == info
    assert [t.schema_definition for t in admin.list()] == [info.schema_definition]
    producer = Producer(store, "points")
    producer.send({"x": 1, "label": "a"})
    producer.send(Point(x=2))
    codec = avro_schema(info.schema_definition or "")
    received = Consumer(store, "points", initial_position="earliest").receive()
    got = sorted((codec.decode(m.value) for m in received if m.value), key=lambda v: v["x"])
    assert got == [{"x": 1, "label": "a"}, {"x": 2, "label": None}]


def test_values_that_do_not_fit_the_schema_are_refused(store: Store) -> None:
    TopicAdmin(store).create("points", schema_type="avro", schema_definition=Point.schema())
    producer = Producer(store, "points")
    with pytest.raises(PayloadError, match="does not fit the topic's schema"):
        producer.send({"label": "no x"})
    with pytest.raises(PayloadError, match="is not valid avro"):
        producer.send_batch([Message(b"\x02\x02\x02")])  # x=1, then a cut-off label


def test_an_avro_topic_needs_a_valid_definition_and_others_take_none(store: Store) -> None:
    admin = TopicAdmin(store)
    with pytest.raises(ConfigError, match="an avro topic needs a schema definition"):
        admin.create("a", schema_type="avro")
    with pytest.raises(ConfigError, match="schema definition: not a valid Avro schema"):
        admin.create("a", schema_type="avro", schema_definition='{"type": "record"}')
    with pytest.raises(ConfigError, match="only avro topics carry a schema definition"):
        admin.create("a", schema_type="json", schema_definition=Point.schema())
    assert admin.list() == []
    admin.create("a", schema_type="avro", schema_definition=Point.schema())
    admin.delete("a")
    admin.create("a", schema_type="avro", schema_definition={"type": "string"})
    assert admin.get("a").schema_definition == '{"type":"string"}'
