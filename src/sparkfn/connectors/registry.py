"""Finding a connector's code: a built-in by name, or the user's file/class.

>>> load_source(SourceConfig(name="gen", source_type="generator", output="out"))
<sparkfn.connectors.builtin.generator.GeneratorSource object at ...>
>>> load_sink(SinkConfig(name="archive", py="archive.py", inputs=["raw"]))  # its one Sink class

Built-ins are named by ``source_type``/``sink_type`` (:data:`SOURCES`,
:data:`SINKS`). User code is a ``py`` file and/or a ``classname``
(``module.Name``), as for functions; with a file and no classname, the one
``Source`` (``Sink``) subclass the file defines is used. Each call returns a
new object: one per instance.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from sparkfn._usercode import import_file, resolve_classname
from sparkfn.api.connector import Sink, Source
from sparkfn.api.errors import ConnectorLoadError
from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.connectors.builtin.file_sink import FileSink
from sparkfn.connectors.builtin.file_source import FileSource
from sparkfn.connectors.builtin.generator import GeneratorSource
from sparkfn.connectors.builtin.mqtt import MqttSink, MqttSource
from sparkfn.connectors.builtin.nats_jetstream import NatsJetStreamSink, NatsJetStreamSource
from sparkfn.connectors.builtin.postgres_sink import PostgresSink
from sparkfn.connectors.builtin.postgres_source import PostgresTableSource
from sparkfn.connectors.builtin.rabbitmq import RabbitMQSource
from sparkfn.connectors.builtin.rabbitmq_sink import RabbitMQSink
from sparkfn.connectors.builtin.redis_streams import RedisStreamSink, RedisStreamSource
from sparkfn.connectors.builtin.stdout_sink import StdoutSink

SOURCES: dict[str, type[Source]] = {
    "file": FileSource,
    "generator": GeneratorSource,
    "mqtt": MqttSource,
    "nats": NatsJetStreamSource,
    "postgres": PostgresTableSource,
    "rabbitmq": RabbitMQSource,
    "redis": RedisStreamSource,
}
"""Built-in sources by ``source_type``."""

SINKS: dict[str, type[Sink]] = {
    "file": FileSink,
    "mqtt": MqttSink,
    "nats": NatsJetStreamSink,
    "postgres": PostgresSink,
    "rabbitmq": RabbitMQSink,
    "redis": RedisStreamSink,
    "stdout": StdoutSink,
}
"""Built-in sinks by ``sink_type``."""

# Source or Sink: abstract classes, which mypy does not take as type[...] arguments.
_Base = Any


def load_source(config: SourceConfig, *, check: bool = True) -> Source:
    """A new source object for ``config``; :class:`ConnectorLoadError` says what is wrong.

    With ``check`` (the default), a built-in's ``configs`` are checked too
    (:func:`check_builtin`): this is the up-front check before a run starts.
    """
    what = f"source {config.fqn}"
    source: Source = _load(what, Source, SOURCES, config.source_type, config.py, config.classname)
    if check:
        check_builtin("source", config.fqn, config.source_type, config.configs, SOURCES)
    return source


def load_sink(config: SinkConfig, *, check: bool = True) -> Sink:
    """A new sink object for ``config``; :class:`ConnectorLoadError` says what is wrong.

    With ``check`` (the default), a built-in's ``configs`` are checked too.
    """
    what = f"sink {config.fqn}"
    sink: Sink = _load(what, Sink, SINKS, config.sink_type, config.py, config.classname)
    if check:
        check_builtin("sink", config.fqn, config.sink_type, config.configs, SINKS)
    return sink


def check_builtin(
    kind: str,
    fqn: str,
    type_name: str | None,
    configs: Mapping[str, Any],
    builtins: Mapping[str, Any],
) -> None:
    """Check a built-in's ``configs`` before anything runs: a :class:`ConfigError` naming it.

    Built-ins that reach a broker have a ``check_configs(configs, what)``
    classmethod: the fields parse (unknown, missing, ill-typed), the broker
    answers and takes the credentials, the queue/stream/table exists. Others
    are checked in their ``open()``.
    """
    if not type_name:
        return
    name = type_name.strip().lower()
    check = getattr(builtins.get(name), "check_configs", None)
    if callable(check):
        check(dict(configs), f"{kind} {fqn} ({name})")


def _load(
    what: str,
    base: _Base,
    builtins: dict[str, Any],
    type_name: str | None,
    py: str | None,
    classname: str | None,
) -> Any:
    kind = base.__name__.lower()
    if type_name:
        if py or classname:
            msg = f"{what}: give {kind}_type (a built-in) or py/classname (your code), not both"
            raise ConnectorLoadError(msg)
        cls = builtins.get(type_name.strip().lower())
        if cls is None:
            known = ", ".join(sorted(builtins))
            msg = f"{what}: {kind}_type {type_name!r} is not a built-in {kind} (known: {known})"
            raise ConnectorLoadError(msg)
        return _instantiate(what, base, cls)
    module: ModuleType | None = None
    if py:
        module = import_file(what, Path(py).expanduser().resolve(), ConnectorLoadError)
    if classname:
        target = resolve_classname(what, module, classname, ConnectorLoadError)
    elif module is not None:
        target = _the_one_class(what, base, module, py or "")
    else:  # the configs require one of the three
        msg = f"{what}: needs {kind}_type, py or classname"
        raise ConnectorLoadError(msg)
    return _instantiate(what, base, target)


def _the_one_class(what: str, base: _Base, module: ModuleType, py: str) -> Any:
    found = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, base)
        and obj.__module__ == module.__name__
        and not inspect.isabstract(obj)
    ]
    if len(found) == 1:
        return found[0]
    names = ", ".join(sorted(c.__name__ for c in found)) or "none"
    msg = (
        f"{what}: no classname given and {py} defines {len(found)} {base.__name__} "
        f"classes ({names}); name one with classname"
    )
    raise ConnectorLoadError(msg)


def _instantiate(what: str, base: _Base, target: Any) -> Any:
    if inspect.isclass(target):
        if not issubclass(target, base):
            msg = f"{what}: {target.__name__} must subclass sparkfn.{base.__name__}"
            raise ConnectorLoadError(msg)
        if inspect.isabstract(target):
            missing = ", ".join(sorted(getattr(target, "__abstractmethods__", ())))
            msg = f"{what}: {target.__name__} does not implement {missing}"
            raise ConnectorLoadError(msg)
        try:
            return target()
        except Exception as exc:
            msg = f"{what}: creating {target.__name__}() failed: {type(exc).__name__}: {exc}"
            raise ConnectorLoadError(msg) from exc
    # An object would be shared by every instance: a class makes one each.
    msg = f"{what}: {target!r:.60} is a {type(target).__name__}, not a {base.__name__} class"
    raise ConnectorLoadError(msg)
