"""``pulsar.schema``: typed records and the schemas that write them.

``from pulsar.schema import *`` gives ``Record``, the field types and the
schema classes. A function reads records from, and returns them to, ``json``
and ``avro`` topics (see :mod:`sparkfn.runtime.function.serde`).
"""

from sparkfn.api.fields import (
    Boolean,
    Bytes,
    CustomEnum,
    Double,
    Field,
    Float,
    Integer,
    Long,
    Null,
    String,
)
from sparkfn.api.records import Array, Map, Record
from sparkfn.api.schemas import (
    AvroSchema,
    BytesSchema,
    JsonSchema,
    Schema,
    SchemaInfo,
    StringSchema,
)

__all__ = [
    "Array",
    "AvroSchema",
    "Boolean",
    "Bytes",
    "BytesSchema",
    "CustomEnum",
    "Double",
    "Field",
    "Float",
    "Integer",
    "JsonSchema",
    "Long",
    "Map",
    "Null",
    "Record",
    "Schema",
    "SchemaInfo",
    "String",
    "StringSchema",
]
