"""``pulsar.schema`` records and schemas: typed fields, Avro schemas, JSON and Avro bytes."""

from __future__ import annotations

from enum import Enum

import pytest

from sparkfn.api.fields import Boolean, Bytes, Double, Float, Integer, Long, String
from sparkfn.api.records import Array, Map, Record
from sparkfn.api.schemas import AvroSchema, BytesSchema, JsonSchema, StringSchema


class Shade(Enum):
    LIGHT = 1
    DARK = 2


class Tag(Record):
    label = String(required=True)


class Order(Record):
    id = Long(required=True)
    item = String()
    qty = Integer(default=1, required_default=True)
    price = Double()
    weight = Float()
    paid = Boolean()
    blob = Bytes()
    shade = Shade
    tags = Array(Tag)
    extras = Map(String())


def test_fields_take_defaults_and_check_types_on_set() -> None:
    order = Order(id=1, item=b"pear", blob="raw", shade="DARK", tags=[{"label": "new"}])
    assert (order.item, order.qty, order.paid, order.blob) == ("pear", 1, False, b"raw")
    assert (order.shade, order.tags) == (Shade.DARK, [Tag(label="new")])
    assert order == Order(id=1, item="pear", blob=b"raw", shade=2, tags=[Tag(label="new")])
    with pytest.raises(TypeError, match="Invalid type .* for field 'qty'"):
        order.qty = "many"
    with pytest.raises(AttributeError, match="undeclared field colour"):
        order.colour = "red"
    with pytest.raises(TypeError, match="Map keys"):
        order.extras = {1: "x"}


def test_schema_is_the_avro_record_with_optional_fields_as_unions() -> None:
    fields = {f["name"]: f for f in Order.schema()["fields"]}
    assert Order.schema()["name"] == "Order"
    assert fields["id"] == {"name": "id", "type": "long"}
    assert fields["item"] == {"name": "item", "type": ["null", "string"]}
    assert fields["qty"] == {"name": "qty", "type": ["null", "int"], "default": 1}
    assert fields["shade"]["type"][1] == {
        "type": "enum",
        "name": "Shade",
        "symbols": ["LIGHT", "DARK"],
    }
    assert fields["tags"]["type"][1]["items"]["name"] == "Tag"


def test_avro_and_json_schemas_round_trip_records() -> None:
    order = Order(id=9, item="fig", shade=Shade.LIGHT, tags=[Tag(label="a")], extras={"k": "v"})
    for schema in (AvroSchema(Order), JsonSchema(Order)):
        assert schema.decode(schema.encode(order)) == order
    assert b'"shade": 1' in JsonSchema(Order).encode(order)  # JSON writes enums by value
    as_dict = AvroSchema(None, Order.schema())
    assert as_dict.decode(AvroSchema(Order).encode(order))["shade"] == "LIGHT"
    with pytest.raises(TypeError, match="expected type"):
        AvroSchema(Order).encode(Tag(label="x"))
    with pytest.raises(ValueError, match="not a valid Avro schema"):
        AvroSchema(None, {"type": "record"})


def test_avro_validate_wants_exactly_one_value() -> None:
    schema = AvroSchema(Tag)
    data = schema.encode(Tag(label="x"))
    schema.validate(data)
    with pytest.raises(ValueError, match="left over"):
        schema.validate(data + b"\x00")
    with pytest.raises(ValueError):
        schema.validate(b"\x09")


def test_string_and_bytes_schemas() -> None:
    assert StringSchema().decode(StringSchema().encode("é")) == "é"
    assert BytesSchema().encode(b"\x00") == b"\x00"
    assert StringSchema().schema_info().schema_type() == "STRING"
    assert AvroSchema(Tag).schema_info().schema().startswith('{"type": "record"')
    with pytest.raises(TypeError):
        StringSchema().encode(b"x")
