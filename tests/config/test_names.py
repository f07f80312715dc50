"""Topic and function names: ``name``, ``tenant/namespace/name``, ``persistent://...``."""

from __future__ import annotations

import pytest

from sparkfn.api.errors import ConfigError, SparkfnError
from sparkfn.config.names import FunctionName, TopicName


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("orders", ("public", "default", "orders")),
        ("acme/sales/orders", ("acme", "sales", "orders")),
        ("persistent://acme/sales/orders", ("acme", "sales", "orders")),
        ("non-persistent://acme/sales/orders", ("acme", "sales", "orders")),
        ("persistent://orders", ("public", "default", "orders")),
        ("  orders  ", ("public", "default", "orders")),
        ("a.b-c_D9", ("public", "default", "a.b-c_D9")),
        ("9lives/x/y", ("9lives", "x", "y")),
        ("n" * 128, ("public", "default", "n" * 128)),
    ],
)
def test_parse_accepts(text: str, expected: tuple[str, str, str]) -> None:
    name = TopicName.parse(text)
    assert (name.tenant, name.namespace, name.name) == expected
    assert str(name) == "/".join(expected)


def test_the_three_spellings_of_one_topic_are_equal() -> None:
    forms = ["orders", "public/default/orders", "persistent://public/default/orders"]
    assert len({TopicName.parse(f) for f in forms}) == 1


def test_str_round_trips() -> None:
    name = TopicName.parse("persistent://acme/sales/orders")
    assert TopicName.parse(str(name)) == name


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a/b", "found 2 parts"),
        ("a/b/c/d", "found 4 parts"),
        ("persistent://a/b", "found 2 parts"),
        ("a//b", "namespace ''"),
        ("/b/c", "tenant ''"),
        ("a/b/", "name ''"),
        ("or ders", "name 'or ders'"),
        ("or$ders", "name 'or$ders'"),
        ("-orders", "name '-orders'"),
        ("_orders", "name '_orders'"),
        ("acme/sal:es/orders", "namespace 'sal:es'"),
        ("ténant/ns/x", "tenant 'ténant'"),
        ("n" * 129, "at most 128 characters"),
        ("http://a/b/c", "found 5 parts"),
    ],
)
def test_parse_rejects_bad_names(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        TopicName.parse(text)
    message = str(caught.value)
    assert fragment in message
    assert repr(text) in message  # the whole value the user gave is quoted


@pytest.mark.parametrize("text", ["", "   ", None, 42])
def test_parse_rejects_empty_or_non_string(text: object) -> None:
    with pytest.raises(ConfigError, match="non-empty topic name"):
        TopicName.parse(text)  # type: ignore[arg-type]


def test_error_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"^inputs 'a/b' must be"):
        TopicName.parse("a/b", field="inputs")
    with pytest.raises(ConfigError, match=r"^output 'x y': name 'x y' is not a valid name"):
        TopicName.parse("x y", field="output")


def test_config_error_is_a_value_error_and_sparkfn_error() -> None:
    with pytest.raises(ValueError) as caught:
        TopicName.parse("a/b")
    assert isinstance(caught.value, SparkfnError)
    assert caught.value.reason == "invalid_config"


def test_function_names_follow_the_same_rules() -> None:
    assert FunctionName.parse("wc") == TopicName("public", "default", "wc")
    with pytest.raises(ConfigError, match="function"):
        FunctionName.parse("a/b", field="function")


def test_names_are_ordered_and_hashable() -> None:
    names = [TopicName.parse(n) for n in ["b/a/a", "a/b/b", "a/b/a"]]
    assert [str(n) for n in sorted(names)] == ["a/b/a", "a/b/b", "b/a/a"]
    assert len(set(names + names)) == 3
