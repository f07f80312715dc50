"""A stand-in for the ``pulsar`` package, for functions written for Pulsar.

sparkfn puts this package first on ``sys.path`` when a function runs with
``pulsar_compat``, so a Pulsar function's imports resolve to sparkfn's
classes: ``from pulsar import Function, Context, SerDe, IdentitySerDe,
PickleSerDe, MessageId``, the ``pulsar.functions`` modules
(``function``, ``context``, ``serde``), ``pulsar.schema`` (records and
schemas) and the ``CompressionType``/``Result`` a ``publish`` call uses.
It is what a function needs at run time, not the Pulsar client: there is no
``Client``, producer or consumer.

Everything here is defined in sparkfn itself and only re-exported, so a
record or serde a function makes is the very class the runtime knows.
"""

from sparkfn.api.context import Context
from sparkfn.api.function import Function
from sparkfn.api.message_id import MessageId
from sparkfn.api.publish import CompressionType, Result
from sparkfn.api.serde import IdentitySerDe, PickleSerDe, SerDe
from sparkfn.api.window import WindowFunction

from . import functions, schema

__all__ = [
    "CompressionType",
    "Context",
    "Function",
    "IdentitySerDe",
    "MessageId",
    "PickleSerDe",
    "Result",
    "SerDe",
    "WindowFunction",
    "functions",
    "schema",
]
