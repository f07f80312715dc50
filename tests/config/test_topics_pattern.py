"""``topics_pattern``: a literal namespace, then a regex over that namespace's topics only."""

from __future__ import annotations

import pytest

from sparkfn.api.errors import ConfigError
from sparkfn.config.function import FunctionConfig
from sparkfn.config.topics_pattern import TopicsPattern


@pytest.mark.parametrize(
    ("text", "namespace"),
    [
        ("acme/app/in-.*", "acme/app"),
        ("persistent://acme/app/in-.*", "acme/app"),
        ("acme\\.io/app/.*", "acme.io/app"),
        ("in-.*", "public/default"),
        ("acme/app/out|evil/.*", "acme/app"),
    ],
)
def test_the_namespace_is_the_literal_text_the_pattern_starts_with(
    text: str, namespace: str
) -> None:
    assert TopicsPattern.parse(text).namespace == namespace


def test_a_pattern_matches_nothing_outside_its_namespace() -> None:
    pattern = TopicsPattern.parse("acme/app/out|evil/.*|.*")
    assert pattern.matches("acme/app/out")
    assert pattern.matches("acme/app/anything")  # '.*' within acme/app
    assert not pattern.matches("evil/x/secret")
    assert not pattern.matches("acme/apps/out")
    bare = TopicsPattern.parse("in-.*|x")
    assert bare.matches("public/default/in-1") and bare.matches("public/default/x")
    assert not bare.matches("acme/app/in-1")


@pytest.mark.parametrize(
    ("text", "confined"),
    [
        ("acme/app/a-.*|acme/app/b-.*", True),
        ("acme/app/(a|b)-.*", True),
        ("acme/app/[|]x", True),
        ("acme/app/a\\|evil/x/y", True),
        ("acme/app/out|evil/.*", False),
        ("acme/app/out|acme/other/.*", False),
        ("acme/app/out|(evil/x/y)", False),
    ],
)
def test_confined_says_whether_every_alternative_starts_with_the_namespace(
    text: str, confined: bool
) -> None:
    assert TopicsPattern.parse(text).confined() is confined


@pytest.mark.parametrize(
    "text", [".*/x/y", "acme/.*", "acme/app/?.*", "acme/app*/x", "tenant-a/.*|tenant-b/.*"]
)
def test_a_pattern_that_names_no_namespace_is_refused_saying_so(text: str) -> None:
    with pytest.raises(ConfigError, match="must start with its namespace written out"):
        TopicsPattern.parse(text)
    with pytest.raises(ValueError, match="must start with its namespace written out"):
        FunctionConfig(name="f", py="f.py", topics_pattern=text)


def test_an_invalid_regex_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"topicsPattern 'acme/app/\(' is not a valid regular"):
        TopicsPattern.parse("acme/app/(", field="topicsPattern")
