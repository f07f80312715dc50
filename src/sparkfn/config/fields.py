"""The checks a function's and a connector's config fields share: names, serdes, topic lists.

Each takes the value as given (a YAML file's, a CLI flag's, a REST body's)
and returns it normalised, or raises ``ValueError`` naming the field and the
value found, which pydantic reports with the field's name.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from sparkfn.api.errors import ConfigError
from sparkfn.config.names import TopicName
from sparkfn.config.pulsar_fields import CLASS_NAME

BUILTIN_SERDES = ("auto", "bytes", "string", "json")
_PULSAR_ALIASES = {
    "atleast_once": "at_least_once",
    "atmost_once": "at_most_once",
    "effectively-once": "effectively_once",
    "at-least-once": "at_least_once",
    "at-most-once": "at_most_once",
    "key-shared": "key_shared",
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


def split_commas(value: Any) -> Any:
    """``"a, b"`` as ``["a", "b"]`` (a CLI or YAML string); other values unchanged."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


def input_topics(value: list[str]) -> list[str]:
    """Input topic names, fully qualified; ``ValueError`` naming a bad or repeated one."""
    out = []
    for topic in value:
        try:
            out.append(str(TopicName.parse(topic, field="inputs")))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    if len(set(out)) != len(out):
        msg = f"inputs lists a topic twice: {out}"
        raise ValueError(msg)
    return out


def check_serde(value: str, field: str) -> str:
    """A serde name: one of :data:`BUILTIN_SERDES` or ``module.Class``; else ValueError."""
    if value in BUILTIN_SERDES or CLASS_NAME.match(value):
        return value
    msg = f"{field} {value!r} is neither one of {', '.join(BUILTIN_SERDES)} nor a module.Class name"
    raise ValueError(msg)


def pulsar_spelling(value: Any) -> Any:
    """Pulsar writes ``ATLEAST_ONCE``, ``Key_Shared``, ``Earliest``: sparkfn's spelling of those."""
    if isinstance(value, str):
        lowered = value.strip().lower()
        return _PULSAR_ALIASES.get(lowered, lowered)
    return value


def check_name(value: str, field: str) -> str:
    """A tenant, namespace or function/connector name, or ValueError naming ``field``."""
    if not _NAME.match(value):
        msg = (
            f"{field} {value!r} is not a valid name (letters, digits, '_', '-', '.'; "
            "starting with a letter or digit)"
        )
        raise ValueError(msg)
    return value


def check_input_serdes(value: dict[str, str]) -> dict[str, str]:
    """``input_serdes`` with each key a topic name (normalised) or a regex of
    ``topics_pattern``, and each serde checked."""
    out = {}
    for key, serde in value.items():
        try:
            name = str(TopicName.parse(key, field="input_serdes"))
        except ConfigError:
            try:
                name = re.compile(key).pattern
            except re.error:
                msg = f"input_serdes key {key!r} is neither a topic name nor a regex"
                raise ValueError(msg) from None
        out[name] = check_serde(serde, f"input_serdes[{key}]")
    return out


def user_config_mapping(value: Any) -> Any:
    """``user_config`` given as JSON or YAML text (a flag's) as its mapping; else unchanged."""
    if not isinstance(value, str):
        return value
    try:
        loaded = yaml.safe_load(value) if value.strip() else {}
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        msg = f"user_config is neither JSON nor YAML: {problem}{at}"
        raise ValueError(msg) from None
    if not isinstance(loaded, dict):
        msg = f"user_config must be a mapping (JSON or YAML object); got {value!r}"
        raise ValueError(msg)
    return loaded
