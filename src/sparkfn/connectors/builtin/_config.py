"""Validating a built-in connector's ``configs``, with errors that name it.

>>> parse_configs(FileSourceConfig, {"path": "/in", "format": "xml"}, "source public/default/in (file)")
ConfigError: source public/default/in (file): configs.format: Input should be 'jsonl' or 'csv' (got 'xml')

Every timeout, size and count a built-in takes has an upper bound, so that no
config can make a connector (or a request checking it) wait, buffer or loop
without end: the bounded types below (:data:`TimeoutMs`, :data:`PollMs`,
:data:`Count`), text of at most :data:`MAX_TEXT` characters, lists of at most
:data:`MAX_ITEMS`. :class:`BuiltinConfig` refuses, when a model is defined, a
number or list field without an upper bound. A value over its bound is a
:class:`ConfigLimitError` naming the field, the value found and the limit.
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sparkfn.api.connector import ConnectorContext
from sparkfn.api.errors import ConfigError, ConfigLimitError
from sparkfn.config.secrets import MASK, is_sensitive

M = TypeVar("M", bound=BaseModel)

MAX_TIMEOUT_MS = 60_000
"""The longest connect, handshake, operation or publish wait (ms) a config may ask for."""
MAX_POLL_MS = 10_000
"""The longest one read may wait for its first message (ms): a stop waits that long."""
MAX_COUNT = 100_000
"""The most records one read, fetch or write batch may hold."""
MAX_TEXT = 4_096
"""The most characters any text setting may have (hosts, paths, names, URLs)."""
MAX_ITEMS = 100
"""The most items any list setting may have (servers, topic filters, columns)."""

TimeoutMs = Annotated[int, Field(ge=1, le=MAX_TIMEOUT_MS)]
"""A wait on a broker, in ms: 1 to :data:`MAX_TIMEOUT_MS`."""
PollMs = Annotated[int, Field(ge=1, le=MAX_POLL_MS)]
"""One read's wait for a first message, in ms: 1 to :data:`MAX_POLL_MS`."""
Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
"""Records per read or per batch: 1 to :data:`MAX_COUNT`."""

# Pydantic's error types for a value over an upper bound, and the bound's key in the context.
_OVER = {
    "less_than_equal": "le",
    "less_than": "lt",
    "string_too_long": "max_length",
    "too_long": "max_length",
}

# One identifier of PostgreSQL as the connectors take it unquoted (at most 63 bytes).
_SQL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")


class BuiltinConfig(BaseModel):
    """Base of the built-ins' config models: frozen, unknown keys rejected, every number,
    text and list bounded (see the module docstring)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", str_max_length=MAX_TEXT, allow_inf_nan=False
    )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse a model with an unbounded number or list: every limit is declared."""
        super().__pydantic_init_subclass__(**kwargs)
        for name, info in cls.model_fields.items():
            kinds = _kinds(info.annotation)
            bounded = {type(m).__name__ for m in info.metadata}
            if kinds & {int, float} and not bounded & {"Le", "Lt"}:
                msg = f"{cls.__name__}.{name}: a number setting needs an upper bound (le=...)"
                raise TypeError(msg)
            if list in kinds and "MaxLen" not in bounded:
                msg = f"{cls.__name__}.{name}: a list setting needs max_length"
                raise TypeError(msg)


def describe(kind: str, type_name: str, context: ConnectorContext) -> str:
    """``source public/default/lines (file)``: who a message is about."""
    fqn = f"{context.get_tenant()}/{context.get_namespace()}/{context.get_name()}"
    return f"{kind} {fqn} ({type_name})"


def _kinds(annotation: Any) -> set[Any]:
    """The plain types an annotation admits: ``int | None`` is ``{int, NoneType}``."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return set().union(*(_kinds(a) for a in typing.get_args(annotation)))
    if origin is Annotated:
        return _kinds(typing.get_args(annotation)[0])
    return {origin or annotation}


def shown(value: Any, limit: int = 60) -> str:
    """``value`` as a message shows it: its repr, cut to ``limit`` characters (a 1 MB
    name is never written whole to an answer or a log)."""
    if isinstance(value, str | bytes | list | tuple | dict) and len(value) > limit:
        text = repr(value)[:limit]
        return f"{text}... ({len(value)} {'characters' if isinstance(value, str) else 'items'})"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} digits)"


def sql_table_name(value: str) -> str:
    """``name`` or ``schema.name``, each an unquoted PostgreSQL identifier of at most 63
    characters; a ``ValueError`` saying what a name may hold."""
    parts = value.split(".")
    if len(parts) > 2 or not all(_SQL_NAME.fullmatch(p) for p in parts):
        msg = (
            "must be name or schema.name, each a letter or _ then letters, digits, _ or $ "
            "(at most 63)"
        )
        raise ValueError(msg)
    return value


def parse_configs(model: type[M], configs: Mapping[str, Any], what: str) -> M:
    """``configs`` as ``model``; :class:`ConfigError` naming each bad field and its value, or
    :class:`ConfigLimitError` when a value is over its field's bound."""
    try:
        return model.model_validate(dict(configs))
    except ValidationError as exc:
        problems = []
        over = False
        for error in exc.errors():
            where = ".".join(str(p) for p in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            found = error.get("input")
            bound = _OVER.get(error["type"])
            if error["type"] == "missing":
                problems.append(f"configs.{where}: required")
            elif error["type"] == "extra_forbidden":
                known = ", ".join(sorted(model.model_fields))
                problems.append(f"configs.{where}: unknown setting (known: {known})")
            elif bound is not None:
                over = True
                limit = (error.get("ctx") or {}).get(bound)
                unit = {"string_too_long": " characters", "too_long": " items"}
                problems.append(
                    f"configs.{where}: {shown_value(error, found)} is over the limit of "
                    f"{limit}{unit.get(error['type'], '')}"
                )
            else:
                problems.append(f"configs.{where}: {message} (got {shown_value(error, found)})")
        error_class = ConfigLimitError if over else ConfigError
        raise error_class(f"{what}: " + "; ".join(problems)) from None


def shown_value(error: Any, found: Any) -> str:
    """A bad value as a message shows it: a secret's never, not even a wrong one."""
    return MASK if any(is_sensitive(str(p)) for p in error["loc"]) else shown(found)


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
    if type(value) is bytes:  # the usual value: no union built per call
        return value
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
