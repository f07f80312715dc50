"""``pulsar.functions``: the function API modules, as Pulsar lays them out."""

from . import context, function, serde

__all__ = ["context", "function", "serde"]
