"""``context.publish``'s arguments, read with Pulsar's rules into one :class:`Publication`.

Pulsar's ``publish(topic_name, message, serde_class_name, properties,
compression_type, callback, message_conf)`` hands ``message_conf`` to its
producer's ``send_async``; sparkfn reads the same keys:

==========================  ==============================================
``properties``              the message's properties (``str`` to ``str``);
                            the ``properties`` argument, when given,
                            replaces them
``partition_key``           the message's key
``ordering_key``            the key, when there is no ``partition_key``
``event_timestamp``         the event time, ms since the epoch
``sequence_id``             accepted; outputs are de-duplicated by the
                            function's subscription, not by sequence id
``replication_clusters``,   accepted; sparkfn topics are not geo-replicated
``disable_replication``
``deliver_at``,             refused (``ValueError``): topics deliver every
``deliver_after``           committed message at once
==========================  ==============================================

Any other key is a ``TypeError``, as it is for Pulsar's ``send_async``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import IntEnum
from typing import Any


class CompressionType(IntEnum):
    """Pulsar's producer compression types; accepted by ``publish`` and not needed:
    segment files are Arrow IPC, compressed as the store decides."""

    NONE = 0
    LZ4 = 1
    ZLib = 2
    ZSTD = 3
    SNAPPY = 4


class Result(IntEnum):
    """What a ``publish`` callback is told, as Pulsar's ``Result`` (``Ok`` on success)."""

    Ok = 0
    UnknownError = 1


PublishCallback = Callable[[Result, Any], Any]
"""``callback(result, message_id)``, Pulsar's ``send_async`` callback."""

_IGNORED_KEYS = frozenset({"sequence_id", "replication_clusters", "disable_replication"})
_REFUSED_KEYS = frozenset({"deliver_at", "deliver_after"})
_READ_KEYS = frozenset({"properties", "partition_key", "ordering_key", "event_timestamp"})


@dataclass(frozen=True)
class Publication:
    """One ``publish`` call, its arguments read and checked."""

    topic_name: str
    message: Any
    serde_class_name: str | None
    properties: dict[str, str] = field(default_factory=dict)
    key: str | None = None
    event_time: datetime | None = None
    callback: PublishCallback | None = None


def read_publish(
    topic_name: str,
    message: Any,
    serde_class_name: str | None,
    properties: Mapping[str, str] | None,
    compression_type: Any,
    callback: Any,
    message_conf: Mapping[str, Any] | None,
) -> Publication:
    """Check ``publish``'s arguments and read them into a :class:`Publication`.

    >>> read_publish("t", "x", None, {"a": "1"}, None, None, {"partition_key": "k"}).key
    'k'
    """
    if compression_type is not None and not isinstance(compression_type, CompressionType):
        msg = f"publish: compression_type must be a CompressionType; got {compression_type!r}"
        raise TypeError(msg)
    if callback is not None and not callable(callback):
        msg = f"publish: callback must be callable (result, message_id); got {callback!r}"
        raise TypeError(msg)
    conf = dict(message_conf or {})
    unknown = sorted(set(conf) - _READ_KEYS - _IGNORED_KEYS - _REFUSED_KEYS)
    if unknown:
        msg = f"publish: message_conf has unexpected keys {unknown}"
        raise TypeError(msg)
    refused = sorted(set(conf) & _REFUSED_KEYS)
    if refused:
        msg = (
            f"publish: message_conf {refused}: delayed delivery is not supported by sparkfn topics"
        )
        raise ValueError(msg)
    if properties:  # Pulsar's deprecated argument replaces message_conf's properties
        conf["properties"] = properties
    event_ms = conf.get("event_timestamp")
    return Publication(
        topic_name=str(topic_name),
        message=message,
        serde_class_name=None if serde_class_name is None else str(serde_class_name),
        properties=_properties(conf.get("properties")),
        key=conf.get("partition_key") or conf.get("ordering_key"),
        event_time=None if event_ms is None else datetime.fromtimestamp(event_ms / 1000, UTC),
        callback=callback,
    )


def _properties(given: Any) -> dict[str, str]:
    if not given:
        return {}
    if not isinstance(given, Mapping):
        msg = f"publish: properties must be a dict of str to str; got {type(given).__name__}"
        raise TypeError(msg)
    for name, value in given.items():
        if not isinstance(name, str) or not isinstance(value, str):
            msg = f"publish: property {name!r}: keys and values must be str; got {value!r}"
            raise TypeError(msg)
    return dict(given)
