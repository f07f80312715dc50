"""Typed records for JSON and Avro topics: Pulsar's ``pulsar.schema`` ``Record`` and fields.

A record class declares its fields as class attributes; instances are
built with keyword arguments, check the type of every value set, and map
onto an Avro record schema (:meth:`Record.schema`). A field is optional
(``null`` or its type) unless ``required=True``; ``default=`` gives its
value when none is set, ``required_default=True`` writes that default into
the schema.

>>> class Order(Record):
...     id = Integer(required=True)
...     item = String()
...     qty = Integer(default=1)
>>> order = Order(id=7, item="pear")
>>> (order.id, order.item, order.qty)
(7, 'pear', 1)
>>> [f["name"] for f in Order.schema()["fields"]]
['id', 'item', 'qty']
"""

from __future__ import annotations

import copy
from enum import Enum, EnumMeta
from typing import Any, ClassVar

from sparkfn.api.fields import RESERVED, CustomEnum, Field


class _Container(Field):
    """A field holding values of one inner type (a field or a record)."""

    def __init__(
        self,
        inner: Any,
        default: Any = None,
        required: bool = False,
        required_default: bool = False,
    ) -> None:
        self._inner = _field_of(inner)
        super().__init__(default, required, required_default)

    def _item(self, name: str, value: Any) -> Any:
        return self._inner.validate_type(name, value)


class Array(_Container):
    """A ``list`` whose items are all of ``array_type`` (a field or a record)."""

    avro_type = "array"
    python_types = (list,)

    @property
    def array_type(self) -> Any:
        """The type of the items."""
        return self._inner

    def validate_type(self, name: str, value: Any) -> Any:
        """Each item is checked as ``array_type``."""
        value = super().validate_type(name, value)
        return None if value is None else [self._item(name, item) for item in value]

    def schema_info(self, defined_names: set[str]) -> Any:
        """``{"type": "array", "items": ...}``."""
        return {"type": "array", "items": self._inner.schema_info(defined_names)}


class Map(_Container):
    """A ``dict`` of ``str`` keys to values of ``value_type`` (a field or a record)."""

    avro_type = "map"
    python_types = (dict,)

    @property
    def value_type(self) -> Any:
        """The type of the values."""
        return self._inner

    def validate_type(self, name: str, value: Any) -> Any:
        """Keys must be ``str``; each value is checked as ``value_type``."""
        value = super().validate_type(name, value)
        if value is None:
            return None
        if any(not isinstance(key, str) for key in value):
            msg = f"Map keys for field {name} should all be strings"
            raise TypeError(msg)
        return {key: self._item(name, item) for key, item in value.items()}

    def schema_info(self, defined_names: set[str]) -> Any:
        """``{"type": "map", "values": ...}``."""
        return {"type": "map", "values": self._inner.schema_info(defined_names)}


def _field_of(kind: Any) -> Any:
    """A field (or record) instance for what a class body or ``Array``/``Map`` names."""
    if isinstance(kind, EnumMeta):
        return CustomEnum(kind)
    if isinstance(kind, RecordMeta):
        return kind()
    if isinstance(kind, Field | Record):
        return kind
    msg = f"{kind!r} is not a Record or a Field"
    raise TypeError(msg)


class RecordMeta(type):
    """Collects a record class's fields, in the order they are declared."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> RecordMeta:
        fields: dict[str, Any] = {}
        for base in reversed(bases):
            fields.update(getattr(base, "_fields", {}))
        for key, value in namespace.items():
            if key.startswith("_") or callable(value) and not isinstance(value, type):
                continue
            if isinstance(value, EnumMeta | RecordMeta | Field) or isinstance(
                type(value), RecordMeta
            ):
                fields[key] = _field_of(value)
        namespace["_fields"] = fields
        return super().__new__(mcs, name, bases, namespace)


class Record(metaclass=RecordMeta):
    """A typed record; subclass it and declare fields (see the module docstring)."""

    _fields: ClassVar[dict[str, Any]]
    # How the record is declared when it is the field of another record.
    _default: Any
    _required: bool
    _required_default: bool
    _avro_namespace: ClassVar[str | None] = None  # the Avro namespace of the schema
    _sorted_fields: ClassVar[bool] = False  # list fields in the schema alphabetically

    def __init__(
        self,
        default: Any = None,
        required_default: bool = False,
        required: bool = False,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        # The first three describe the record when it is itself a field.
        object.__setattr__(self, "_default", default)
        object.__setattr__(self, "_required_default", required_default)
        object.__setattr__(self, "_required", required)
        for name, kind in self._fields.items():
            if name in kwargs:
                setattr(self, name, _nested(kind, kwargs[name]))
            elif isinstance(kind, Record):
                setattr(self, name, kind)
            else:
                object.__setattr__(self, name, kind.default())

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The Avro record schema of this class."""
        schema: dict[str, Any] = cls.schema_info(set())
        return schema

    @classmethod
    def schema_info(cls, defined_names: set[str]) -> Any:
        """The Avro schema, naming records already defined in ``defined_names`` by name only."""
        full_name = f"{cls._avro_namespace}.{cls.__name__}" if cls._avro_namespace else cls.__name__
        if full_name in defined_names:
            return full_name
        defined_names.add(full_name)
        schema: dict[str, Any] = {"type": "record", "name": cls.__name__}
        if cls._avro_namespace is not None:
            schema["namespace"] = cls._avro_namespace
        names = sorted(cls._fields) if cls._sorted_fields else list(cls._fields)
        schema["fields"] = [cls._field_schema(name, defined_names) for name in names]
        return schema

    @classmethod
    def _field_schema(cls, name: str, defined_names: set[str]) -> dict[str, Any]:
        kind = cls._fields[name]
        avro = kind.schema_info(defined_names)
        entry: dict[str, Any] = {
            "name": name,
            "type": avro if kind.is_required() else ["null", avro],
        }
        if kind.required_default():
            default = kind.default()
            entry["default"] = default.name if isinstance(default, Enum) else default
        return entry

    def __setattr__(self, name: str, value: Any) -> None:
        if name in RESERVED:
            object.__setattr__(self, name, value)
            return
        if name not in self._fields:
            msg = f"Cannot set undeclared field {name} on record"
            raise AttributeError(msg)
        object.__setattr__(self, name, self._fields[name].validate_type(name, value))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f, None) for f in self._fields)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        shown = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({shown})"

    __str__ = __repr__

    # --- a record as the field of another ---------------------------------------
    def type(self) -> str:
        """The record's name."""
        return type(self).__name__

    def python_type(self) -> Any:
        """The record class."""
        return type(self)

    def validate_type(self, name: str, value: Any) -> Any:
        """A value for a field of this record type."""
        if value is None and not self._required:
            return self.default()
        if not isinstance(value, type(self)):
            msg = f"Invalid type '{type(value)}' for sub-record field '{name}'. Expected: {type(self).__name__}"
            raise TypeError(msg)
        return value

    def default(self) -> Any:
        """The value when none is set."""
        return self._default

    def required_default(self) -> bool:
        """Whether the schema states the default."""
        return bool(self._required_default)

    def is_required(self) -> bool:
        """Whether the field may not be ``None``."""
        return bool(self._required)


def _nested(kind: Any, value: Any) -> Any:
    """Dicts given for record fields (also as list items or map values) become records."""
    if isinstance(kind, Record) and isinstance(value, dict):
        return _record_like(kind, value)
    inner = getattr(kind, "array_type", None) or getattr(kind, "value_type", None)
    if isinstance(inner, Record):
        if isinstance(kind, Array) and isinstance(value, list):
            return [_record_like(inner, v) if isinstance(v, dict) else v for v in value]
        if isinstance(kind, Map) and isinstance(value, dict):
            return {
                k: _record_like(inner, v) if isinstance(v, dict) else v for k, v in value.items()
            }
    return value


def _record_like(template: Record, values: dict[str, Any]) -> Record:
    record = copy.copy(template)
    record.__init__(**values)  # type: ignore[misc]
    return record


def record_to_dict(record: Record, *, enums_by_name: bool) -> dict[str, Any]:
    """The record's fields as plain values: nested records as dicts, enums by name
    (Avro) or by value (JSON), as Pulsar's Avro and JSON schemas write them."""
    return {name: _plain(getattr(record, name), enums_by_name) for name in record._fields}


def _plain(value: Any, enums_by_name: bool) -> Any:
    if isinstance(value, Record):
        return record_to_dict(value, enums_by_name=enums_by_name)
    if isinstance(value, Enum):
        return value.name if enums_by_name else value.value
    if isinstance(value, list):
        return [_plain(v, enums_by_name) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v, enums_by_name) for k, v in value.items()}
    return value
