"""``pulsar.functions.context``: the ``Context`` a function is given."""

from sparkfn.api.context import Context

__all__ = ["Context"]
