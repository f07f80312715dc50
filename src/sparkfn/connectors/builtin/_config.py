"""Validating a built-in connector's ``configs``, with errors that name it.

>>> parse_configs(FileSourceConfig, {"path": "/in", "format": "xml"}, "source public/default/in (file)")
ConfigError: source public/default/in (file): configs.format: Input should be 'jsonl' or 'csv' (got 'xml')
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from sparkfn.api.connector import ConnectorContext
from sparkfn.api.errors import ConfigError
from sparkfn.config.secrets import MASK, is_sensitive

M = TypeVar("M", bound=BaseModel)


class BuiltinConfig(BaseModel):
    """Base of the built-ins' config models: frozen, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def describe(kind: str, type_name: str, context: ConnectorContext) -> str:
    """``source public/default/lines (file)``: who a message is about."""
    fqn = f"{context.get_tenant()}/{context.get_namespace()}/{context.get_name()}"
    return f"{kind} {fqn} ({type_name})"


def parse_configs(model: type[M], configs: Mapping[str, Any], what: str) -> M:
    """``configs`` as ``model``; :class:`ConfigError` naming each bad field and its value."""
    try:
        return model.model_validate(dict(configs))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = ".".join(str(p) for p in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            if error["type"] == "missing":
                problems.append(f"configs.{where}: required")
            elif error["type"] == "extra_forbidden":
                known = ", ".join(sorted(model.model_fields))
                problems.append(f"configs.{where}: unknown setting (known: {known})")
            else:  # a secret's value is never shown, not even a wrong one
                found = MASK if any(is_sensitive(str(p)) for p in error["loc"]) else None
                problems.append(
                    f"configs.{where}: {message} (got {found or repr(error.get('input'))})"
                )
        raise ConfigError(f"{what}: " + "; ".join(problems)) from None


def json_default(value: Any) -> Any:
    """For ``json.dumps``: bytes as hex (as ``sparkfn topics consume --json`` shows them)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return str(value)


def dumps(value: Any) -> str:
    """Compact JSON."""
    return json.dumps(value, separators=(",", ":"), default=json_default, ensure_ascii=False)


def payload(value: Any) -> bytes:
    """A record's value as bytes for a broker: bytes as they are, text as UTF-8, else JSON."""
    if value is None:
        return b""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return dumps(value).encode()


def split_list(value: Any) -> Any:
    """A comma-separated string as a list of its stripped items (Pulsar's list configs)."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value
