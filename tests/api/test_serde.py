"""Pulsar's serde rules: IdentitySerDe (its default) and PickleSerDe, and their names."""

from __future__ import annotations

from typing import Any

import pytest

from sparkfn import IdentitySerDe, PickleSerDe
from sparkfn.api.serde import PULSAR_SERDE_NAMES


@pytest.mark.parametrize(
    ("data", "value"),
    [
        (b"42", 42),
        (b" -7\n", -7),  # int() strips whitespace, as in Pulsar
        (b"1_000", 1000),
        (b"1.5", 1.5),
        (b"1e3", 1000.0),
        (b"inf", float("inf")),
        (b"1+2j", 1 + 2j),
        (b"hello", "hello"),
        (b"", ""),
        ("héllo".encode(), "héllo"),
        (b"\xff\xfe", b"\xff\xfe"),  # not UTF-8: the bytes themselves
    ],
)
def test_identity_deserialize_tries_int_float_complex_then_text(data: bytes, value: Any) -> None:
    got = IdentitySerDe().deserialize(data)
    assert (type(got), got) == (type(value), value)


@pytest.mark.parametrize(
    ("value", "data"),
    [
        (42, b"42"),
        (1.5, b"1.5"),
        (1 + 2j, b"(1+2j)"),
        ("héllo", "héllo".encode()),
        (b"\x00raw", b"\x00raw"),
    ],
)
def test_identity_serialize_writes_numbers_and_text_as_utf8(value: Any, data: bytes) -> None:
    assert IdentitySerDe().serialize(value) == data


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}, bytearray(b"x"), object()])
def test_identity_serialize_refuses_other_types_exactly_as_pulsar(value: Any) -> None:
    with pytest.raises(TypeError, match="IdentitySerDe cannot serialize object of type"):
        IdentitySerDe().serialize(value)


def test_pickle_round_trips_any_object_and_pulsar_names_resolve() -> None:
    serde = PickleSerDe()
    value = {"when": (1, 2.5), "who": {"a", "b"}}
    assert serde.deserialize(serde.serialize(value)) == value
    assert PULSAR_SERDE_NAMES == {
        "serde.IdentitySerDe": IdentitySerDe,
        "serde.PickleSerDe": PickleSerDe,
    }
