"""Names of topics and functions: ``tenant/namespace/name``.

A bare name means ``public/default/NAME``; ``persistent://tenant/ns/name`` is
accepted for Pulsar familiarity and means the same as ``tenant/ns/name``.

>>> TopicName.parse("orders")
TopicName(tenant='public', namespace='default', name='orders')
>>> str(TopicName.parse("persistent://acme/sales/orders"))
'acme/sales/orders'
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from sparkfn.api.errors import ConfigError

DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"
"""What each part of a topic or function name (tenant, namespace, name) must match."""
_PART = re.compile(NAME_PATTERN)
_PREFIXES = ("persistent://", "non-persistent://")


def _check_part(value: str, part: str, field: str, original: str) -> str:
    if not _PART.match(value):
        msg = (
            f"{field} {original!r}: {part} {value!r} is not a valid name "
            "(letters, digits, '_', '-', '.', starting with a letter or digit, "
            "at most 128 characters)"
        )
        raise ConfigError(msg)
    return value


@dataclass(frozen=True, order=True)
class TopicName:
    """A fully qualified topic name."""

    tenant: str
    namespace: str
    name: str

    @classmethod
    def parse(cls, text: str, *, field: str = "topic") -> TopicName:
        """Parse ``name``, ``tenant/namespace/name`` or ``persistent://...``.

        ``field`` names the setting being parsed, for the error message. A name
        parsed once is remembered (a group's reader parses each member's names at
        every trigger: thousands a second); a name refused is not.
        """
        try:
            return _parsed(text, field)
        except TypeError:  # unhashable, so not a name: said as such below
            return cls._parse(text, field)

    @classmethod
    def _parse(cls, text: str, field: str) -> TopicName:
        if not isinstance(text, str) or not text.strip():
            msg = f"{field} must be a non-empty topic name; got {text!r}"
            raise ConfigError(msg)
        raw = text.strip()
        for prefix in _PREFIXES:
            if raw.startswith(prefix):
                raw = raw[len(prefix) :]
                break
        parts = raw.split("/")
        if len(parts) == 1:
            tenant, namespace, name = DEFAULT_TENANT, DEFAULT_NAMESPACE, parts[0]
        elif len(parts) == 3:
            tenant, namespace, name = parts
        else:
            msg = (
                f"{field} {text!r} must be 'name' or 'tenant/namespace/name'; "
                f"found {len(parts)} parts"
            )
            raise ConfigError(msg)
        return cls(
            _check_part(tenant, "tenant", field, text),
            _check_part(namespace, "namespace", field, text),
            _check_part(name, "name", field, text),
        )

    def __str__(self) -> str:
        return f"{self.tenant}/{self.namespace}/{self.name}"


@functools.lru_cache(maxsize=16384)
def _parsed(text: str, field: str) -> TopicName:
    return TopicName._parse(text, field)  # noqa: SLF001 - the cache of TopicName.parse


# A function's FQFN has exactly the same shape and rules as a topic name.
FunctionName = TopicName
