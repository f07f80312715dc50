"""A stand-in for the ``pulsar`` package, for functions written for Pulsar.

sparkfn puts this package first on ``sys.path`` when a function is run with
``pulsar_compat``, so ``from pulsar import Function`` (and ``Context``,
``SerDe``, ``IdentitySerDe``) resolves to sparkfn's classes. It is not the
Pulsar client and never needs it.
"""

from sparkfn.api.context import Context
from sparkfn.api.function import Function, IdentitySerDe, SerDe

__all__ = ["Context", "Function", "IdentitySerDe", "SerDe"]
