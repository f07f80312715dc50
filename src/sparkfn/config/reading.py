"""Reading config files and describing what is wrong with them, for every config model.

>>> snake("deadLetterTopic")
'dead_letter_topic'
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sparkfn.api.errors import ConfigError


def read_yaml_fields(path: str | Path, what: str) -> dict[str, Any]:
    """A YAML config file's top-level mapping, keys in snake_case (Pulsar's camelCase too)."""
    return snake_fields(read_yaml_mapping(path, what))


def read_yaml_mapping(path: str | Path, what: str) -> dict[str, Any]:
    """A YAML config file's top-level mapping, keys as written; :class:`ConfigError` if none."""
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as exc:
        msg = f"{what} {path}: cannot read it: {exc.strerror}"
        raise ConfigError(msg) from exc
    except yaml.YAMLError as exc:
        msg = f"{what} {path}: not valid YAML: {exc}"
        raise ConfigError(msg) from exc
    if not isinstance(data, dict):
        msg = f"{what} {path}: expected a mapping at the top; got {type(data).__name__}"
        raise ConfigError(msg)
    return {str(k): v for k, v in data.items()}


def snake_fields(mapping: dict[Any, Any]) -> dict[str, Any]:
    """A config mapping's top-level keys in snake_case (Pulsar's camelCase accepted)."""
    return {snake(str(k)): v for k, v in mapping.items()}


def snake(key: str) -> str:
    """``subName`` → ``sub_name``, Pulsar's ``className`` → ``classname``; snake_case unchanged."""
    if key == "className":
        return "classname"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def describe_validation_error(exc: ValidationError, what: str) -> str:
    """One readable line per invalid field: ``what: field: problem (got value)``."""
    lines = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "config"
        message = str(error["msg"]).removeprefix("Value error, ")
        got = error.get("input")
        shown = "" if isinstance(got, dict) or error["type"] == "missing" else f" (got {got!r})"
        lines.append(f"{field}: {message}{shown}")
    return f"{what}: invalid config: " + "; ".join(lines)
