"""The config a ``localrun`` command runs: its flags over an optional YAML file.

``functions``, ``sources`` and ``sinks`` build their config alike
(:func:`build_config`): the flags are taken as text, made what the config
model's fields want where that is plain (a number, Pulsar's spelling of an
enum value, ``KEY=VALUE`` settings), laid over the YAML file, the function or
connector named as Pulsar names it when nothing names it, and validated by the
model, so every bad value is reported alike: the function or connector, the
field, the problem and the value.

A function's flags include Pulsar's (:mod:`sparkfn.cli.pulsar_flags`):
:func:`function_config` reads them and the file as ``pulsar-admin`` would
(:func:`function_layers`, then :meth:`FunctionConfig.assemble`) and returns
the warnings about what sparkfn ignores; :func:`function_config_json` gives
the same layers as the one JSON object a worker's REST API takes.
"""

from __future__ import annotations

import enum
import json
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

import typer

if TYPE_CHECKING:
    from sparkfn.config.function import FunctionConfig


class _Config(Protocol):
    """What the function, source and sink configs have in common here."""

    @property
    def py(self) -> str | None: ...

    @classmethod
    def from_yaml(cls, path: Path, **overrides: Any) -> Self: ...

    @classmethod
    def build(cls, **fields: Any) -> Self: ...

    def model_copy(self, *, update: dict[str, Any]) -> Self: ...


ConfigT = TypeVar("ConfigT", bound=_Config)

_PULSAR_SPELLINGS = {"atleast_once": "at_least_once", "atmost_once": "at_most_once"}


def split_topics(values: list[str] | None) -> list[str] | None:
    """``["a,b", "c"]`` → ``["a", "b", "c"]``; nothing given → ``None``."""
    if not values:
        return None
    return [topic.strip() for value in values for topic in value.split(",") if topic.strip()]


def mapping(text: str | None) -> Any:
    """A JSON or YAML object as a dict; anything else unchanged, for the config to reject."""
    if text is None:
        return None
    try:
        value = _json_or_yaml(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def user_config(text: str | None) -> Any:
    """``--user-config``'s JSON or YAML object; text that is neither is a usage error naming it.

    A value that parses but is no object is left for the config to reject.
    """
    if text is None:
        return None
    try:
        value = _json_or_yaml(text)
    except ValueError as exc:
        msg = f"neither JSON nor YAML: {exc}"
        raise typer.BadParameter(msg, param_hint="'--user-config'") from None
    return value if isinstance(value, dict) else text


def _json_or_yaml(text: str) -> Any:
    """``text`` read as JSON, else as YAML; ``ValueError`` with YAML's complaint in one line."""
    try:
        return json.loads(text)
    except ValueError:
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or type(exc).__name__
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            msg = f"{problem}{where}"
            raise ValueError(msg) from None


def enum_value(text: Any, allowed: Iterable[str]) -> Any:
    """``Shared``, ``ATLEAST_ONCE``, ``key-shared`` → sparkfn's value; unknown text unchanged."""
    if not isinstance(text, str):
        return text
    value = text.strip().lower().replace("-", "_")
    value = _PULSAR_SPELLINGS.get(value, value)
    return value if value in set(allowed) else text


def config_fields(
    fields: Mapping[str, Any],
    *,
    integers: Iterable[str] = (),
    enums: Mapping[str, Iterable[str]] | None = None,
) -> dict[str, Any]:
    """The flags that were given, with numbers as numbers and enum spellings normalised.

    A number reads as one in the config's error ("(got 0)", not "(got '0')");
    text that is not a number or a known value is left for the config to
    reject by name.
    """
    given = {k: v for k, v in fields.items() if v is not None}
    for key in integers:
        value = given.get(key)
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            given[key] = int(value)
    for key, allowed in (enums or {}).items():
        if key in given:
            given[key] = enum_value(given[key], allowed)
    return given


def default_name(fields: dict[str, Any], config_file: Path | None, type_key: str = "") -> None:
    """Name the function or connector as Pulsar does when neither flags nor file do.

    After the last part of the class name, else (sparkfn) the ``--py`` file's
    name, else the built-in connector type (``type_key``: ``source_type``).
    """
    if fields.get("name") or fields.get("fqfn"):
        return
    from_file = _peek_yaml(config_file) if config_file else {}
    if from_file.get("name") or from_file.get("fqfn"):
        return

    def given(key: str, camel: str = "") -> Any:
        first, *rest = key.split("_")
        camel = camel or first + "".join(word.title() for word in rest)  # Pulsar's spelling
        return fields.get(key) or from_file.get(key) or from_file.get(camel)

    classname, py = given("classname", "className"), given("py")
    kind = given(type_key) if type_key else None
    if isinstance(classname, str) and classname.strip():
        derived = classname.strip().rpartition(".")[2]
    elif isinstance(py, str) and py.strip():
        derived = Path(py.strip()).stem
    elif isinstance(kind, str) and kind.strip():
        derived = kind.strip()
    else:
        return
    if derived:
        fields["name"] = derived


def _peek_yaml(path: Path) -> dict[str, Any]:
    """The file's top-level mapping, or nothing: reading it for real reports its errors."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def load_config(model: type[ConfigT], fields: dict[str, Any], config_file: Path | None) -> ConfigT:
    """``model`` from the flags' ``fields`` over ``config_file``, with ``py`` made absolute."""
    if config_file is not None:
        config = model.from_yaml(config_file, **fields)
    else:
        config = model.build(**fields)
    return absolute_py(config)


def absolute_py(config: ConfigT) -> ConfigT:
    """``config`` with its ``py`` absolute, so that Spark's Python workers find the code
    from any directory."""
    if not config.py:
        return config
    return config.model_copy(update={"py": str(Path(config.py).expanduser().resolve())})


def build_config(
    model: type[ConfigT],
    kind: str,
    fields: Mapping[str, Any],
    config_file: Path | None,
    type_key: str = "",
) -> ConfigT:
    """``model`` from the flags' ``fields`` (``None`` where not given) over ``config_file``.

    ``kind`` (``function``, ``source``, ``sink``) names the config in errors;
    without a name, a connector is named after its built-in type
    (``type_key``: ``source_type``) last.
    """
    given = _flag_values(model, fields, config_file, kind=kind, type_key=type_key)
    return load_config(model, given, config_file)


def connector_config(
    kind: str, fields: Mapping[str, Any], config_file: Path | None
) -> tuple[Any, tuple[str, ...]]:
    """A ``source``'s or ``sink``'s config from its flags (``None`` where not given) over
    ``config_file``, both read as ``pulsar-admin`` reads them (``archive:
    builtin://<type>``, ``sourceSubscriptionPosition``, Pulsar's flags), with ``py`` made
    absolute; and a warning line per Pulsar field or flag that sparkfn ignores."""
    from sparkfn.config.connector import SinkConfig, SourceConfig
    from sparkfn.config.pulsar_connector import connector_config as read
    from sparkfn.config.reading import read_yaml_fields

    model = SourceConfig if kind == "source" else SinkConfig
    given = _flag_values(model, fields, config_file, kind=kind, type_key=f"{kind}_type")
    layers = [read_yaml_fields(config_file, f"{kind} config file")] if config_file else []
    config, warnings = read(kind, *layers, given)
    return absolute_py(config), warnings


def function_config(
    fields: Mapping[str, Any], config_file: Path | None
) -> tuple[FunctionConfig, tuple[str, ...]]:
    """A function's config from its flags (sparkfn's and Pulsar's, ``None`` where not
    given) over ``config_file``, with ``py`` made absolute; and a warning line per
    Pulsar field or flag that sparkfn ignores."""
    from sparkfn.config.function import FunctionConfig

    config, warnings = FunctionConfig.assemble(*function_layers(fields, config_file))
    return absolute_py(config), warnings


def function_config_json(fields: Mapping[str, Any], config_file: Path | None) -> dict[str, Any]:
    """The flags over ``config_file`` as one ``functionConfig`` object for a worker, which
    reads it as :func:`function_config` does (and returns the warnings)."""
    from sparkfn.config.function import FunctionConfig
    from sparkfn.config.pulsar import canonical, overlay

    layers = function_layers(fields, config_file)
    return overlay(*(canonical(layer, known=FunctionConfig.model_fields) for layer in layers))


def function_layers(fields: Mapping[str, Any], config_file: Path | None) -> list[dict[str, Any]]:
    """The file's fields as written, then the flags' as Pulsar's config fields
    (:func:`fold_flags`): what :meth:`FunctionConfig.assemble` reads, flags winning."""
    from sparkfn.config.function import FunctionConfig
    from sparkfn.config.reading import read_yaml_mapping

    given = fold_flags(_flag_values(FunctionConfig, fields, config_file, kind="function"))
    if config_file is None:
        return [given]
    return [read_yaml_mapping(config_file, "function config file"), given]


# Flags that are parts of one Pulsar field, as pulsar-admin folds them.
RESOURCE_FLAGS = ("cpu", "ram", "disk")
WINDOW_FLAGS = {
    "window_length_count": "windowLengthCount",
    "windowLengthCount": "windowLengthCount",
    "window_length_duration_ms": "windowLengthDurationMs",
    "windowLengthDurationMs": "windowLengthDurationMs",
    "sliding_interval_count": "slidingIntervalCount",
    "slidingIntervalCount": "slidingIntervalCount",
    "sliding_interval_duration_ms": "slidingIntervalDurationMs",
    "slidingIntervalDurationMs": "slidingIntervalDurationMs",
    "timestamp_extractor_classname": "timestampExtractorClassName",
    "max_lag_ms": "maxLagMs",
    "watermark_emit_interval_ms": "watermarkEmitIntervalMs",
    "late_data_topic": "lateDataTopic",
    "drop_late_data": "dropLateData",
}


def fold_flags(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The flags' values as Pulsar's config fields: ``--cpu``/``--ram``/``--disk`` into
    ``resources``, the window flags into ``windowConfig`` (``pulsar-admin`` does the same).

    >>> fold_flags({"cpu": "2", "window_length_count": "10", "name": "f"})
    {'name': 'f', 'resources': {'cpu': '2'}, 'windowConfig': {'windowLengthCount': '10'}}
    """
    out: dict[str, Any] = {}
    resources: dict[str, Any] = {}
    window: dict[str, Any] = {}
    for key, value in fields.items():
        if value is None:
            continue
        if key in RESOURCE_FLAGS:
            resources[key] = value
        elif key in WINDOW_FLAGS:
            window[WINDOW_FLAGS[key]] = value
        elif key == "timeoutMs":  # Pulsar's deprecated spelling: its text as --timeout-ms's
            text = str(value).strip()
            out["timeout_ms"] = int(text) if text.isdigit() else value
        else:
            out[key] = value
    if resources:
        out["resources"] = resources
    if window:
        out["windowConfig"] = window
    return out


def _flag_values(
    model: type[Any],
    fields: Mapping[str, Any],
    config_file: Path | None,
    *,
    kind: str,
    type_key: str = "",
) -> dict[str, Any]:
    """The given flags' values as ``model``'s fields want them, the config named."""
    from sparkfn.api.errors import ConfigError
    from sparkfn.cli.params import parse_properties

    integers, enums, mappings = field_kinds(model)
    given = config_fields(fields, integers=integers, enums=enums)
    default_name(given, config_file, type_key)
    for key in mappings:
        if isinstance(given.get(key), list):  # KEY=VALUE settings, as --spark-conf takes
            try:
                given[key] = parse_properties(given[key], "--" + key.replace("_", "-"))
            except typer.BadParameter as exc:
                msg = f"{kind} {given.get('name', '?')}: invalid config: {key}: {exc.message}"
                raise ConfigError(msg) from None
    return given


def field_kinds(model: type[Any]) -> tuple[list[str], dict[str, list[str]], list[str]]:
    """The fields of a pydantic ``model`` that want an integer, an enum (its values), a mapping."""
    integers: list[str] = []
    enums: dict[str, list[str]] = {}
    mappings: list[str] = []
    for key, info in model.model_fields.items():
        annotation = info.annotation
        union = typing.get_origin(annotation) in (typing.Union, UnionType)
        types = typing.get_args(annotation) if union else (annotation,)
        for kind in types:
            if kind is int:
                integers.append(key)
            elif isinstance(kind, type) and issubclass(kind, enum.Enum):
                enums[key] = [str(member.value) for member in kind]
            elif typing.get_origin(kind) is dict:
                mappings.append(key)
    return integers, enums, mappings
