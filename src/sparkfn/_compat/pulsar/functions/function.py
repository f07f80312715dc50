"""``pulsar.functions.function``: the ``Function`` base class."""

from sparkfn.api.function import Function

__all__ = ["Function"]
