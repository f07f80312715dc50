"""Schemas: a value's bytes on a typed topic, Pulsar's ``pulsar.schema`` schema classes.

:class:`AvroSchema` reads and writes Avro's binary encoding (``fastavro``),
of a :class:`~sparkfn.api.records.Record` class or of a schema definition
alone (dicts then); :class:`JsonSchema` writes a record as a JSON object;
:class:`StringSchema` and :class:`BytesSchema` are text and raw bytes. An
``avro`` topic keeps its schema definition, and a function's records are
written with it.

>>> from sparkfn.api.fields import Integer
>>> from sparkfn.api.records import Record
>>> class Point(Record):
...     x = Integer()
>>> schema = AvroSchema(Point)
>>> schema.decode(schema.encode(Point(x=3)))
Point(x=3)
"""

from __future__ import annotations

import io
import json
from abc import ABC, abstractmethod
from typing import Any

from sparkfn.api.records import Record, record_to_dict


class SchemaInfo:
    """A schema's type, name and definition (JSON text), as Pulsar's ``SchemaInfo``."""

    def __init__(self, schema_type: str, name: str, definition: Any) -> None:
        self._type = schema_type
        self._name = name
        self._definition = definition

    def schema_type(self) -> str:
        """``BYTES``, ``STRING``, ``JSON`` or ``AVRO``."""
        return self._type

    def name(self) -> str:
        """The schema's name."""
        return self._name

    def schema(self) -> str:
        """The definition as JSON text (empty for bytes and string)."""
        return "" if self._definition is None else json.dumps(self._definition)


class Schema(ABC):
    """Encodes values to a topic's bytes and decodes them back."""

    def __init__(
        self, record_cls: Any, schema_type: str, definition: Any, schema_name: str
    ) -> None:
        self._record_cls = record_cls
        self._schema_info = SchemaInfo(schema_type, schema_name, definition)

    @abstractmethod
    def encode(self, obj: Any) -> bytes:
        """``obj`` as bytes."""

    @abstractmethod
    def decode(self, data: bytes) -> Any:
        """Bytes back to a value."""

    def schema_info(self) -> SchemaInfo:
        """The schema's type, name and definition."""
        return self._schema_info

    def record_class(self) -> Any:
        """The record class (or Python type) the schema is for, if any."""
        return self._record_cls

    def _validate_object_type(self, obj: Any) -> None:
        if not isinstance(obj, self._record_cls):
            msg = f"Invalid record obj of type {type(obj)} - expected type is {self._record_cls}"
            raise TypeError(msg)


class BytesSchema(Schema):
    """Raw bytes, unchanged."""

    def __init__(self) -> None:
        super().__init__(bytes, "BYTES", None, "BYTES")

    def encode(self, obj: Any) -> bytes:
        """``obj`` must be ``bytes``."""
        self._validate_object_type(obj)
        return bytes(obj)

    def decode(self, data: bytes) -> Any:
        """``data`` itself."""
        return data


class StringSchema(Schema):
    """Text, as UTF-8."""

    def __init__(self) -> None:
        super().__init__(str, "STRING", None, "STRING")

    def encode(self, obj: Any) -> bytes:
        """``obj`` must be ``str``."""
        self._validate_object_type(obj)
        return str(obj).encode("utf-8")

    def decode(self, data: bytes) -> Any:
        """UTF-8 text."""
        return data.decode("utf-8")


class JsonSchema(Schema):
    """Records of ``record_cls`` as JSON objects."""

    def __init__(self, record_cls: type[Record]) -> None:
        super().__init__(record_cls, "JSON", record_cls.schema(), "JSON")

    def encode(self, obj: Any) -> bytes:
        """A record of the class as a JSON object (enums by value)."""
        self._validate_object_type(obj)
        return json.dumps(record_to_dict(obj, enums_by_name=False)).encode("utf-8")

    def decode(self, data: bytes) -> Any:
        """A record of the class from a JSON object."""
        return self._record_cls(**json.loads(data))


class AvroSchema(Schema):
    """Avro binary encoding of records of ``record_cls``, or of dicts for ``schema_definition``.

    >>> AvroSchema(None, {"type": "record", "name": "P", "fields": [
    ...     {"name": "x", "type": "int"}]}).encode({"x": 1})
    b'\\x02'
    """

    def __init__(self, record_cls: type[Record] | None, schema_definition: Any = None) -> None:
        if record_cls is None and schema_definition is None:
            msg = "AvroSchema needs a record class or a schema definition"
            raise ValueError(msg)
        definition = record_cls.schema() if record_cls is not None else schema_definition
        if isinstance(definition, str | bytes):
            definition = json.loads(definition)
        super().__init__(record_cls, "AVRO", definition, "AVRO")
        import fastavro

        self._fastavro = fastavro
        try:
            self._parsed = fastavro.parse_schema(definition)
        except Exception as exc:  # fastavro raises several kinds for a bad schema
            msg = f"not a valid Avro schema: {type(exc).__name__}: {exc}"
            raise ValueError(msg) from exc

    def encode(self, obj: Any) -> bytes:
        """A record (of the class, when there is one) or a dict, in Avro's binary encoding."""
        if self._record_cls is not None:
            self._validate_object_type(obj)
        if isinstance(obj, Record):
            obj = record_to_dict(obj, enums_by_name=True)
        elif not isinstance(obj, dict):
            msg = f"Avro values are records or dicts; got a {type(obj).__name__}"
            raise TypeError(msg)
        buffer = io.BytesIO()
        self._fastavro.schemaless_writer(buffer, self._parsed, obj)
        return buffer.getvalue()

    def decode(self, data: bytes) -> Any:
        """A record of the class, or a dict when there is no class."""
        value: Any = self._fastavro.schemaless_reader(io.BytesIO(data), self._parsed)
        if self._record_cls is not None:
            return self._record_cls(**value)
        return value

    def validate(self, data: bytes) -> None:
        """Raise ``ValueError`` unless ``data`` is exactly one value of the schema."""
        buffer = io.BytesIO(data)
        try:
            self._fastavro.schemaless_reader(buffer, self._parsed)
        except Exception as exc:  # fastavro raises several kinds for bad data
            msg = f"{type(exc).__name__}: {exc}"
            raise ValueError(msg) from exc
        if buffer.tell() != len(data):
            msg = f"{len(data) - buffer.tell()} bytes left over after the value"
            raise ValueError(msg)
