"""The built-in connectors and their config fields, as Pulsar's ``builtinsources`` lists them.

Each built-in (:data:`sparkfn.connectors.registry.SOURCES` and ``SINKS``)
reads its ``configs`` into a pydantic model, a
:class:`~sparkfn.connectors.builtin._config.BuiltinConfig` subclass: the
class's ``CONFIG`` attribute if it has one, else the one such model its
module defines (in a module of both, the one named ``...SourceConfig`` or
``...SinkConfig``). Its fields are the connector's config fields: Pulsar's
``ConfigFieldDefinition`` (``fieldName``, ``typeName``, ``attributes``
with ``required``, ``defaultValue``, ``help``, ``sensitive``).

>>> [d.name for d in definitions("source")][:2]
['file', 'generator']
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from sparkfn.api.errors import ConnectorLoadError
from sparkfn.config.secrets import is_sensitive
from sparkfn.connectors.builtin._config import BuiltinConfig


class _Shape(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class ConfigFieldDefinition(_Shape):
    """One config field of a built-in connector (Pulsar's ``ConfigFieldDefinition``)."""

    field_name: str
    type_name: str
    attributes: dict[str, str]


class ConnectorDefinition(_Shape):
    """A built-in connector (Pulsar's ``ConnectorDefinition``), with its config fields."""

    name: str
    description: str
    source_class: str | None = None
    sink_class: str | None = None
    source_config_class: str | None = None
    sink_config_class: str | None = None
    config_field_definitions: list[ConfigFieldDefinition]


def definitions(kind: str) -> list[ConnectorDefinition]:
    """Every built-in ``source`` or ``sink``, sorted by name."""
    from sparkfn.connectors.registry import SINKS, SOURCES

    builtins: dict[str, type[Any]] = dict(SOURCES if kind == "source" else SINKS)
    found = []
    for name, cls in sorted(builtins.items()):
        model = config_model(cls)
        classes = {
            f"{kind}_class": f"{cls.__module__}.{cls.__qualname__}",
            f"{kind}_config_class": (
                f"{model.__module__}.{model.__qualname__}" if model is not None else None
            ),
        }
        found.append(
            ConnectorDefinition(
                name=name,
                description=_first_line(sys.modules[cls.__module__].__doc__ or cls.__doc__),
                config_field_definitions=fields_of(model) if model is not None else [],
                **classes,
            )
        )
    return found


def definition(kind: str, type_name: str) -> ConnectorDefinition:
    """The built-in ``kind`` named ``type_name``; :class:`ConnectorLoadError` naming the known."""
    known = definitions(kind)
    for found in known:
        if found.name == type_name.strip().lower():
            return found
    names = ", ".join(d.name for d in known)
    msg = f"{kind}_type {type_name!r} is not a built-in {kind} (known: {names})"
    raise ConnectorLoadError(msg)


def config_model(cls: type[Any]) -> type[BaseModel] | None:
    """The model a built-in reads its configs into (see the module docstring)."""
    given = getattr(cls, "CONFIG", None)
    if inspect.isclass(given) and issubclass(given, BaseModel):
        return given
    module = sys.modules[cls.__module__]
    models = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, BuiltinConfig)
        and obj is not BuiltinConfig
        and obj.__module__ == module.__name__
    ]
    if len(models) > 1:  # a module of a source and a sink: <Name>SourceConfig, <Name>SinkConfig
        from sparkfn.api.connector import Source

        suffix = "SourceConfig" if issubclass(cls, Source) else "SinkConfig"
        models = [m for m in models if m.__name__.endswith(suffix)]
    return models[0] if len(models) == 1 else None


def fields_of(model: type[BaseModel]) -> list[ConfigFieldDefinition]:
    """The config fields of ``model``, in declaration order."""
    out = []
    for name, info in model.model_fields.items():
        shown = info.alias or name
        attributes = {
            "required": str(info.is_required()).lower(),
            "sensitive": str(is_sensitive(name)).lower(),
            "help": info.description or "",
        }
        if not info.is_required():
            default = info.get_default(call_default_factory=True)
            attributes["defaultValue"] = "" if default is None else json.dumps(default, default=str)
        out.append(
            ConfigFieldDefinition(
                field_name=shown, type_name=_type_name(info.annotation), attributes=attributes
            )
        )
    return out


def check_configs(kind: str, fqn: str, type_name: str | None, configs: dict[str, Any]) -> None:
    """A built-in's ``configs`` read by its model now, before anything starts: a
    :class:`ConfigError` naming the connector and each bad field. Nothing for user code,
    whose ``open()`` is the first to read them."""
    if not type_name:
        return
    from sparkfn.connectors.builtin._config import parse_configs
    from sparkfn.connectors.registry import SINKS, SOURCES

    cls = (SOURCES if kind == "source" else SINKS).get(type_name.strip().lower())
    model = config_model(cls) if cls is not None else None
    if model is not None:
        parse_configs(model, configs, f"{kind} {fqn} ({type_name})")


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None)
    if text is not None and not getattr(annotation, "__args__", None):
        return str(text)
    return str(annotation).replace("typing.", "")


def _first_line(doc: str | None) -> str:
    for line in (doc or "").strip().splitlines():
        if line.strip():
            return line.strip()
    return ""
