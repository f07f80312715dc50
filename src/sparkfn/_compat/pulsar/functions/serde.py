"""``pulsar.functions.serde``: the serdes; ``"serde.PickleSerDe"`` names these too."""

from sparkfn.api.serde import IdentitySerDe, PickleSerDe, SerDe

__all__ = ["IdentitySerDe", "PickleSerDe", "SerDe"]
