"""How a topic's values are interpreted: :class:`SchemaType`, and an ``avro`` topic's codec.

Below both the message row (:mod:`sparkfn.topics.message`) and a message read
back (:mod:`sparkfn.topics.received`), which decode values by it; importable
from :mod:`sparkfn.topics.message` too.

>>> SchemaType("json") is SchemaType.JSON
True
"""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache

from sparkfn.api.schemas import AvroSchema


class SchemaType(StrEnum):
    """How a topic's values are interpreted."""

    BYTES = "bytes"  # opaque bytes
    STRING = "string"  # UTF-8 text
    JSON = "json"  # UTF-8 JSON document
    AVRO = "avro"  # Avro binary encoding of the topic's schema definition


@lru_cache(maxsize=64)
def avro_schema(definition: str) -> AvroSchema:
    """The codec of an ``avro`` topic's schema definition (JSON text), parsed once."""
    return AvroSchema(None, definition)
