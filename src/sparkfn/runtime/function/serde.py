"""How a function's values are read from and written to one topic: :class:`Serde`.

``name`` is the function's ``input_serde``/``output_serde``: ``auto``
follows the topic's schema type, ``bytes``/``string``/``json`` force one, and
a ``module.Class`` names a serde class (``serialize``/``deserialize``) or a
``pulsar.schema`` :class:`~sparkfn.api.records.Record` class (values are then
records of it, on a ``json`` or ``avro`` topic). Under Pulsar compatibility
an ``auto`` serde on a ``bytes`` topic (sparkfn's default) follows Pulsar's
:class:`~sparkfn.api.serde.IdentitySerDe`, Pulsar's default, so ``b"42"``
reaches the function as ``42`` and a returned ``42`` is written ``b"42"``;
on a ``string`` topic values arrive as text and leave by the same rules.

>>> Serde("auto", SchemaType.BYTES, "t", "f", pulsar_compat=True).decode(b"42")
42
"""

from __future__ import annotations

import inspect
import json
from typing import Any, cast

from sparkfn._usercode import import_module
from sparkfn.api.errors import FunctionLoadError
from sparkfn.api.records import Record, record_to_dict
from sparkfn.api.serde import PULSAR_SERDE_NAMES, IdentitySerDe, SerDe
from sparkfn.topics.message import SchemaType, avro_schema

BUILTIN_KINDS = ("auto", "bytes", "string", "json")
_IDENTITY = IdentitySerDe()


class Serde:
    """Decodes input bytes for the function and encodes its results, for one topic.

    ``kind`` is ``custom`` (a serde class), ``identity`` (Pulsar's default),
    or the encoding: ``bytes``, ``string``, ``json``, ``avro``. ``record``
    is the Record class values are read into, if one was named.
    """

    def __init__(
        self,
        name: str,
        schema_type: SchemaType,
        topic: str,
        fqfn: str,
        *,
        definition: str | None = None,
        pulsar_compat: bool = False,
    ) -> None:
        self.topic, self.fqfn = topic, fqfn
        self.schema_type, self.definition = schema_type, definition
        named = None if name in BUILTIN_KINDS else load_serde(fqfn, name)
        self.record: type[Record] | None = named if isinstance(named, type) else None
        self.custom: SerDe | None = None if isinstance(named, type) else named
        if self.record is not None and schema_type not in (SchemaType.JSON, SchemaType.AVRO):
            msg = (
                f"function {fqfn}: serde {name!r} is a Record class; topic {topic} "
                f"(schema {schema_type.value}) must be a json or avro topic for records"
            )
            raise FunctionLoadError(msg)
        self.kind = _kind(name, schema_type, named, pulsar_compat)
        # Under Pulsar compatibility, text topics are written by IdentitySerDe's rules too.
        self._identity = self.kind == "identity" or (pulsar_compat and self.kind == "string")

    def decode(self, data: bytes | None) -> Any:
        """Topic bytes → the value the function sees."""
        if data is None:
            return None
        kind = self.kind
        if kind == "custom":
            return self.custom.deserialize(data)  # type: ignore[union-attr]
        if kind == "identity":
            return _IDENTITY.deserialize(data)
        if kind == "string":
            return data.decode("utf-8")
        if kind == "json":
            value = json.loads(data)
        elif kind == "avro":
            value = avro_schema(self._definition()).decode(data)
        else:
            return data
        return value if self.record is None else self.record(**value)

    def encode(self, value: Any) -> bytes:
        """A function result → topic bytes; raises ``TypeError`` naming the function and topic."""
        kind = self.kind
        if kind == "custom":
            return bytes(self.custom.serialize(value))  # type: ignore[union-attr]
        if kind == "json":
            return self._json(value)
        if kind == "avro":
            return self._avro(value)
        if isinstance(value, Record):
            return self._refuse(value, "a record needs a json or avro topic")
        if self._identity:
            try:
                data = _IDENTITY.serialize(value)
            except TypeError:
                return self._refuse(value, "IdentitySerDe writes int, float, complex, str, bytes")
        elif isinstance(value, str):
            return value.encode()
        elif isinstance(value, bytes | bytearray | memoryview):
            data = bytes(value)
        else:
            return self._refuse(value, "expected str or bytes")
        if kind == "string":
            data.decode("utf-8")
        return data

    def _json(self, value: Any) -> bytes:
        if isinstance(value, Record):
            value = record_to_dict(value, enums_by_name=False)
        try:
            return json.dumps(value, separators=(",", ":")).encode()
        except (TypeError, ValueError) as exc:
            msg = (
                f"function {self.fqfn} returned a {type(value).__name__} for topic {self.topic} "
                f"(json) that is not JSON-serialisable: {exc}"
            )
            raise TypeError(msg) from exc

    def _avro(self, value: Any) -> bytes:
        try:
            return avro_schema(self._definition()).encode(value)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            msg = (
                f"function {self.fqfn} returned a {type(value).__name__} ({value!r:.60}) for "
                f"topic {self.topic} (avro) that does not fit its schema: {type(exc).__name__}: {exc}"
            )
            raise TypeError(msg) from exc

    def _definition(self) -> str:
        if self.definition is None:
            msg = f"function {self.fqfn}: topic {self.topic} (avro) has no schema definition"
            raise TypeError(msg)
        return self.definition

    def _refuse(self, value: Any, why: str) -> bytes:
        msg = (
            f"function {self.fqfn} returned a {type(value).__name__} ({value!r:.60}) for topic "
            f"{self.topic} (schema {self.kind}); {why}"
        )
        raise TypeError(msg)


def _kind(name: str, schema_type: SchemaType, named: Any, pulsar_compat: bool) -> str:
    """What encodes values: ``custom``, ``identity``, or the topic encoding."""
    if named is not None and not isinstance(named, type):
        return "custom"
    if name in ("bytes", "string", "json"):
        return name
    if pulsar_compat and named is None and schema_type is SchemaType.BYTES:
        return "identity"  # Pulsar's default serde, on sparkfn's default topics
    return schema_type.value


def load_serde(fqfn: str, name: str) -> SerDe | type[Record]:
    """The serde (an instance) or the Record class that ``module.Class`` ``name`` names.

    Pulsar's ``serde.IdentitySerDe`` and ``serde.PickleSerDe`` are sparkfn's.
    """
    known = PULSAR_SERDE_NAMES.get(name)
    if known is not None:
        return known()
    module_name, _, attr = name.replace(":", ".").rpartition(".")
    module = import_module(f"function {fqfn}", module_name, FunctionLoadError)
    cls = getattr(module, attr, None)
    if cls is None:
        msg = f"function {fqfn}: serde {name!r}: module {module_name} has no {attr!r}"
        raise FunctionLoadError(msg)
    if inspect.isclass(cls) and issubclass(cls, Record):
        return cls
    serde = cls() if inspect.isclass(cls) else cls
    if not (hasattr(serde, "serialize") and hasattr(serde, "deserialize")):
        msg = (
            f"function {fqfn}: serde {name!r} needs serialize() and deserialize() methods "
            "(or is a pulsar.schema Record class)"
        )
        raise FunctionLoadError(msg)
    return cast(SerDe, serde)
