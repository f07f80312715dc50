"""Serdes: how a value becomes a message's bytes and back, with Pulsar's names and rules.

A named serde is any class with ``serialize(value) -> bytes`` and
``deserialize(bytes) -> value``; a function names one as ``module.Class``
(``input_serde``, ``output_serde``, ``context.publish(..., serde_class_name)``).
Pulsar's own names resolve here: ``serde.IdentitySerDe`` and
``serde.PickleSerDe`` are :class:`IdentitySerDe` and :class:`PickleSerDe`.

>>> IdentitySerDe().serialize(42), IdentitySerDe().deserialize(b"42")
(b'42', 42)
"""

from __future__ import annotations

import pickle
from abc import ABC, abstractmethod
from typing import Any

_IDENTITY_TYPES: tuple[type, ...] = (int, float, complex, str)


class SerDe(ABC):
    """A named serde: turns message bytes into the value a function sees, and back."""

    @abstractmethod
    def serialize(self, value: Any) -> bytes:
        """Value → bytes for the topic."""

    @abstractmethod
    def deserialize(self, data: bytes) -> Any:
        """Bytes from the topic → value for the function."""


class IdentitySerDe(SerDe):
    """Pulsar's default serde: numbers and text as their UTF-8 text, bytes as they are.

    ``serialize``: an ``int``, ``float``, ``complex`` or ``str`` (exactly those
    types: not ``bool``, not a ``str`` subclass) becomes ``str(value)`` in
    UTF-8; ``bytes`` stay as they are; anything else is a ``TypeError``.
    ``deserialize``: the UTF-8 text is tried as ``int``, then ``float``, then
    ``complex``, else kept as ``str``; bytes that are not UTF-8 stay bytes.
    So ``b"42"`` arrives as ``42`` and ``b"hi"`` as ``"hi"``, as in Pulsar.

    >>> IdentitySerDe().deserialize(b"1.5"), IdentitySerDe().deserialize(b"\\xff")
    (1.5, b'\\xff')
    """

    def serialize(self, value: Any) -> bytes:
        """``value`` as bytes, by Pulsar's rules; ``TypeError`` for other types."""
        kind = type(value)
        if kind in _IDENTITY_TYPES:
            return str(value).encode("utf-8")
        if kind is bytes:
            return value  # type: ignore[no-any-return]
        msg = f"IdentitySerDe cannot serialize object of type {kind}"
        raise TypeError(msg)

    def deserialize(self, data: bytes) -> Any:
        """The first of ``int``, ``float``, ``complex``, ``str`` that reads the text; else the bytes."""
        try:
            text = data.decode("utf-8")
        except (UnicodeDecodeError, AttributeError):
            return data
        for kind in _IDENTITY_TYPES:
            try:
                return kind(text)
            except (ValueError, TypeError):
                continue
        return text  # pragma: no cover - str(text) always succeeds


class PickleSerDe(SerDe):
    """Any picklable Python object, with :mod:`pickle` (trusted producers only)."""

    def serialize(self, value: Any) -> bytes:
        """``pickle.dumps(value)``."""
        return pickle.dumps(value)

    def deserialize(self, data: bytes) -> Any:
        """``pickle.loads(data)``."""
        return pickle.loads(data)  # noqa: S301 - the serde the user chose


# Pulsar names its serdes after the module its runtime keeps them in.
PULSAR_SERDE_NAMES: dict[str, type[SerDe]] = {
    "serde.IdentitySerDe": IdentitySerDe,
    "serde.PickleSerDe": PickleSerDe,
}
