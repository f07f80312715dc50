"""The fields of a ``pulsar.schema`` record: scalars (:class:`Integer`, :class:`String`, ...) and enums.

Each field checks the values set on it (:meth:`Field.validate_type`) and
describes itself in an Avro schema (:meth:`Field.schema_info`). Records and
the container fields ``Array`` and ``Map`` are in :mod:`sparkfn.api.records`.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, ClassVar

RESERVED = ("_default", "_required", "_required_default")


class Field:
    """One field of a record: its Avro type, the Python types it holds, its default."""

    avro_type: ClassVar[str] = ""
    python_types: ClassVar[tuple[type, ...]] = ()

    def __init__(
        self, default: Any = None, required: bool = False, required_default: bool = False
    ) -> None:
        self._required = required
        self._required_default = required_default
        self._default = None if default is None else self.validate_type("default", default)

    def type(self) -> str:
        """The Avro type name."""
        return self.avro_type

    def python_type(self) -> Any:
        """The Python type (or types) a value must have."""
        return self.python_types

    def validate_type(self, name: str, value: Any) -> Any:
        """``value`` checked (and converted) for field ``name``; ``None`` gives the default."""
        if value is None and not self._required:
            return self.default()
        if not isinstance(value, self.python_types):
            msg = f"Invalid type '{type(value)}' for field '{name}'. Expected: {self._expected()}"
            raise TypeError(msg)
        return value

    def _expected(self) -> str:
        return " or ".join(t.__name__ for t in self.python_types)

    def schema(self) -> Any:
        """The field's Avro type."""
        return self.schema_info(set())

    def schema_info(self, defined_names: set[str]) -> Any:
        """The Avro type, naming types already defined in ``defined_names`` by name only."""
        return self.avro_type

    def default(self) -> Any:
        """The value of the field when none was set."""
        return self._default

    def required_default(self) -> bool:
        """Whether the schema states the default."""
        return self._required_default

    def is_required(self) -> bool:
        """Whether the field may not be ``None`` (its schema type is then not a union with null)."""
        return self._required


class Null(Field):
    """Always ``None``."""

    avro_type = "null"
    python_types = (type(None),)

    def validate_type(self, name: str, value: Any) -> Any:
        """Only ``None``."""
        if value is not None:
            msg = f"Field {name} is set to be None"
            raise TypeError(msg)
        return value


class Boolean(Field):
    """A ``bool`` (``False`` by default)."""

    avro_type = "boolean"
    python_types = (bool,)

    def default(self) -> Any:
        """``False`` unless a default was given."""
        return False if self._default is None else self._default


class Integer(Field):
    """An ``int`` (Avro ``int``, 32 bits)."""

    avro_type = "int"
    python_types = (int,)


class Long(Field):
    """An ``int`` (Avro ``long``, 64 bits)."""

    avro_type = "long"
    python_types = (int,)


class Float(Field):
    """A ``float`` (an ``int`` is accepted)."""

    avro_type = "float"
    python_types = (float, int)


class Double(Field):
    """A ``float`` (an ``int`` is accepted)."""

    avro_type = "double"
    python_types = (float, int)


class Bytes(Field):
    """``bytes``; a ``str`` is stored as its UTF-8."""

    avro_type = "bytes"
    python_types = (bytes, str)

    def validate_type(self, name: str, value: Any) -> Any:
        """A ``str`` becomes its UTF-8 bytes."""
        value = super().validate_type(name, value)
        return value.encode() if isinstance(value, str) else value


class String(Field):
    """A ``str``; ``bytes`` are read as UTF-8."""

    avro_type = "string"
    python_types = (str, bytes)

    def validate_type(self, name: str, value: Any) -> Any:
        """``bytes`` become text."""
        value = super().validate_type(name, value)
        return value.decode() if isinstance(value, bytes) else value


class CustomEnum(Field):
    """A member of an :class:`enum.Enum`, given as the member, its name or its value."""

    avro_type = "enum"

    def __init__(
        self,
        enum_type: Any,
        default: Any = None,
        required: bool = False,
        required_default: bool = False,
    ) -> None:
        if not (isinstance(enum_type, type) and issubclass(enum_type, Enum)):
            msg = f"{enum_type!r} is not a valid Enum type"
            raise TypeError(msg)
        self.enum_type: type[Enum] = enum_type
        super().__init__(default, required, required_default)

    def python_type(self) -> Any:
        """The enum class."""
        return self.enum_type

    def validate_type(self, name: str, value: Any) -> Any:
        """A member from itself, its name (``str``) or its value (``int``)."""
        if value is None or isinstance(value, self.enum_type):
            return value
        members = self.enum_type.__members__
        if isinstance(value, str) and value in members:
            return members[value]
        for member in members.values():
            if isinstance(value, int) and member.value == value:
                return member
        msg = f"Invalid enum value '{value}' for field '{name}'. Expected: {list(members)}"
        raise TypeError(msg)

    def schema_info(self, defined_names: set[str]) -> Any:
        """An Avro enum of the member names."""
        name = self.enum_type.__name__
        if name in defined_names:
            return name
        defined_names.add(name)
        return {"type": "enum", "name": name, "symbols": list(self.enum_type.__members__)}
