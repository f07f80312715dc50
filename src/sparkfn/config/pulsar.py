"""Pulsar's function config on sparkfn: every field of Pulsar's ``FunctionConfig``.

A Pulsar function config (a YAML file, the REST API's ``functionConfig``
JSON, ``pulsar-admin functions`` flags) is read in three steps, by one
function, :func:`function_fields`:

1. :func:`canonical` names each key as sparkfn does: Pulsar's camelCase or
   snake_case (``subName``, ``sub_name``) becomes the sparkfn field it means
   (``subscription_name``); a Pulsar field sparkfn reads as a whole keeps its
   snake_case name (``input_specs``); an unknown key is kept as written, for
   the config model to refuse by that name.
2. :func:`overlay` lays later layers over earlier ones (flags over the file),
   merging ``resources`` and ``window_config`` key by key as Pulsar's CLI does.
3. :func:`translate` turns Pulsar's structures into sparkfn's fields
   (``inputSpecs``, ``customSerdeInputs``, ``customSchemaInputs`` into inputs,
   ``topics_pattern`` and ``input_serdes``; ``retainKeyOrdering`` into a
   ``key_shared`` subscription; ``fqfn`` into its parts, ...) and gives one warning line per field that
   means nothing on Spark, naming it.

>>> function_fields({"name": "f", "py": "f.py", "subName": "s", "runtime": "PYTHON"})
Translated(fields={'name': 'f', 'py': 'f.py', 'subscription_name': 's'}, \
warnings=("runtime: sparkfn runs Python functions, in Spark's Python workers; ignored",))

docs/pulsar-migration.md has the table of every field and why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from sparkfn.api.errors import ConfigError
from sparkfn.config.names import TopicName
from sparkfn.config.pulsar_fields import (
    IGNORED,
    INPUT_SPEC,
    INPUT_SPEC_IGNORED,
    NESTED,
    RENAMED,
    TRANSLATED,
    schema_serde,
)
from sparkfn.config.reading import snake
from sparkfn.config.topics_pattern import TopicsPattern


@dataclass(frozen=True)
class Translated:
    """sparkfn's fields of a config, and one warning line per Pulsar field it ignores."""

    fields: dict[str, Any]
    warnings: tuple[str, ...] = ()
    # Fields given as Pulsar's unset (a connector's maxMessageRetries -1): an update unsets them.
    unset: frozenset[str] = field(default=frozenset(), repr=False)


# Every spelling of a Pulsar field (camelCase, snake_case) -> its canonical key.
_CANONICAL: dict[str, str] = {}
for _camel in (*RENAMED, *TRANSLATED, *IGNORED):
    _key = RENAMED.get(_camel, snake(_camel))
    _CANONICAL[_camel] = _CANONICAL[snake(_camel)] = _key
_PULSAR_NAME = {snake(camel): camel for camel in (*TRANSLATED, *IGNORED)}


def canonical(
    layer: Mapping[Any, Any], what: str = "function", known: Collection[str] = ()
) -> dict[str, Any]:
    """``layer``'s keys as sparkfn names them (see the module docstring); unset values dropped.

    A camelCase key whose snake_case is one of ``known`` (sparkfn's fields:
    ``failurePolicy``) is that field. Two spellings of one field in a layer
    (``className`` and ``classname``) with different values are a :class:`ConfigError`.
    """
    out: dict[str, Any] = {}
    spelt: dict[str, str] = {}
    for raw, value in layer.items():
        if value is None:
            continue
        given = str(raw)
        key = _CANONICAL.get(given) or (snake(given) if snake(given) in known else given)
        if key in out and out[key] != value:
            msg = f"{what}: invalid config: {spelt[key]} and {given} are one field; give one"
            raise ConfigError(msg)
        out[key], spelt[key] = value, given
    return out


def overlay(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Canonical ``layers``, later ones winning; ``resources`` and ``window_config`` merged."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            earlier = out.get(key)
            merge = key in ("resources", "window_config")
            if merge and isinstance(earlier, Mapping) and isinstance(value, Mapping):
                out[key] = {**earlier, **value}
            else:
                out[key] = value
    return out


def function_fields(
    *layers: Mapping[Any, Any], what: str = "", known: Collection[str] = ()
) -> Translated:
    """sparkfn's function fields from ``layers`` in sparkfn's or Pulsar's spelling.

    Later layers win (a YAML file, then flags); ``known`` are sparkfn's field
    names (see :func:`canonical`). This is the one reading of Pulsar's
    config: ``FunctionConfig.from_yaml``, ``FunctionConfig.build``, the
    worker's REST API and the CLI all go through it.
    """
    named = what or _label(layers)
    return translate(overlay(*(canonical(layer, named, known) for layer in layers)), named)


def translate(fields: Mapping[str, Any], what: str = "function") -> Translated:
    """Canonical ``fields`` as sparkfn's, with a warning per ignored Pulsar field."""
    reading = _Reading(dict(fields), what)
    reading.fqfn()
    reading.inputs()
    reading.output_schema()
    reading.ordering()
    reading.resources()
    reading.retries()
    reading.window()
    reading.ignored()
    return Translated(reading.fields, tuple(reading.warnings))


class _Reading:
    """The fields being translated, and the warnings so far."""

    def __init__(self, fields: dict[str, Any], what: str) -> None:
        self.fields = fields
        self.what = what
        self.warnings: list[str] = []

    def fail(self, field: str, problem: str) -> NoReturn:
        msg = f"{self.what}: invalid config: {field}: {problem}"
        raise ConfigError(msg)

    def pop(self, key: str) -> Any:
        return self.fields.pop(key, None)

    def warn(self, field: str, why: str) -> None:
        self.warnings.append(f"{field}: {why}; ignored")

    def fqfn(self) -> None:
        fqfn = self.pop("fqfn")
        if fqfn is None:
            return
        parts = str(fqfn).split("/")
        if len(parts) != 3:
            self.fail("fqfn", f"{fqfn!r} must be tenant/namespace/name")
        for key, part in zip(("tenant", "namespace", "name"), parts, strict=True):
            given = self.fields.setdefault(key, part)
            if given != part:
                self.fail("fqfn", f"{fqfn!r} says {key} {part!r}, the config {given!r}")

    def inputs(self) -> None:
        """Every input Pulsar names (inputs, the keys of the per-input maps), and their serdes."""
        given = self.fields.get("inputs")
        if isinstance(given, str):  # Pulsar's is a list; the CLI splits its --inputs itself
            self.fail("inputs", f"must be a list of topic names (got {given!r})")
        topics = _as_list(given)
        patterns = [self.fields["topics_pattern"]] if self.fields.get("topics_pattern") else []
        serdes: dict[str, tuple[str, str]] = {}  # topic or regex -> (serde, where it was given)

        def give(key: str, serde: str | None, where: str, regex: bool, add: bool = True) -> None:
            if add:  # Pulsar reads every topic its per-input maps name
                (patterns if regex else topics).append(key)
            if serde is None:
                return
            name = key if regex else _topic_key(key)
            earlier = serdes.get(name)
            if earlier is not None and earlier[0] != serde:
                problem = f"input {key} has serde {earlier[0]!r} ({earlier[1]}) and {serde!r}"
                self.fail(where, problem + "; give one")
            serdes[name] = (serde, where)

        for key, serde in self._mapping("input_serdes").items():
            give(key, str(serde), "input_serdes", _is_regex(key), add=False)
        for key, serde in self._mapping("custom_serde_inputs").items():
            give(key, str(serde), "customSerdeInputs", key in patterns)
        for key, schema in self._mapping("custom_schema_inputs").items():
            give(key, self._custom_schema(key, schema), "customSchemaInputs", key in patterns)
        for key, spec in self._mapping("input_specs").items():
            serde, regex = self._input_spec(key, spec)
            give(key, serde, "inputSpecs", regex)
        if topics:
            self.fields["inputs"] = _unique_topics(topics)
        if patterns:
            bare = list(dict.fromkeys(map(_bare_pattern, patterns)))
            self._one_namespace(bare)
            self.fields["topics_pattern"] = "|".join(bare)
        if serdes:
            self.fields["input_serdes"] = {
                (_bare_pattern(k) if k in patterns or _is_regex(k) else k): serde
                for k, (serde, _) in serdes.items()
            }

    def _one_namespace(self, patterns: list[str]) -> None:
        """Fail unless the patterns, joined into one, name one namespace: only its topics are read."""
        try:
            spaces = {TopicsPattern.parse(p, field="topicsPattern").namespace for p in patterns}
        except ConfigError:
            return  # the config's own check names the pattern that is not one
        if len(spaces) > 1:
            problem = (
                f"the patterns {patterns} name namespaces {sorted(spaces)}; give one namespace"
            )
            self.fail("topicsPattern", problem)

    def _mapping(self, key: str) -> dict[str, Any]:
        value = self.pop(key)
        if value is None:
            return {}
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else {}
            except ValueError:
                pass
        if not isinstance(value, Mapping):
            field = _PULSAR_NAME.get(key, key)
            self.fail(field, f"must be a mapping of topic to value (got {value!r})")
        return {str(k): v for k, v in value.items()}

    def _custom_schema(self, topic: str, schema: Any) -> str | None:
        field = f"customSchemaInputs.{topic}"
        if isinstance(schema, str) and schema.strip().startswith("{"):
            try:
                schema = json.loads(schema)
            except ValueError:
                self.fail(field, f"is not JSON (got {schema!r})")
        if isinstance(schema, Mapping):  # Pulsar's newer form: a ConsumerConfig's schema part
            return schema_serde(schema.get("schemaType", ""), field, self.what)
        return schema_serde(schema, field, self.what)

    def _input_spec(self, topic: str, spec: Any) -> tuple[str | None, bool]:
        """The serde an ``inputSpecs`` entry gives, and whether its key is a regex."""
        field = f"inputSpecs.{topic}"
        if not isinstance(spec, Mapping):
            self.fail(field, f"must be a mapping (got {spec!r})")
        given = {k: v for k, v in spec.items() if v not in (None, "", {}, [], False)}
        for key in given:
            if key not in INPUT_SPEC:
                self.fail(f"{field}.{key}", "not a field of Pulsar's ConsumerConfig")
            if key in INPUT_SPEC_IGNORED:
                self.warn(f"{field}.{key}", INPUT_SPEC_IGNORED[key])
        serde_class, schema_type = given.get("serdeClassName"), given.get("schemaType")
        if serde_class and schema_type:
            self.fail(field, "only one of serdeClassName or schemaType may be set")
        serde = str(serde_class) if serde_class else None
        if schema_type:
            serde = schema_serde(schema_type, f"{field}.schemaType", self.what)
        regex = bool(given.get("isRegexPattern") or given.get("regexPattern"))
        return serde, regex

    def output_schema(self) -> None:
        schema = self.pop("output_schema_type")
        if schema is None:
            return
        serde = schema_serde(schema, "outputSchemaType", self.what)
        given = self.fields.get("output_serde")
        if serde is not None and given is not None and given != serde:
            problem = f"{schema!r} and outputSerdeClassName {given!r}: only one of them may be set"
            self.fail("outputSchemaType", problem)
        if serde is not None:
            self.fields["output_serde"] = serde

    def ordering(self) -> None:
        """retainKeyOrdering: a key_shared subscription (retainOrdering's failover wins)."""
        if not _true(self.pop("retain_key_ordering")):
            return
        if _true(self.fields.get("retain_ordering")):
            return
        given = self.fields.get("subscription_type")
        if given is None or str(given).strip().lower() == "shared":
            self.fields["subscription_type"] = "key_shared"

    def resources(self) -> None:
        """Pulsar's per-instance resources: sparkfn's ``resources`` (see
        :mod:`sparkfn.config.resources`) but disk, which Spark does not allot."""
        resources = self.fields.get("resources")
        if not isinstance(resources, Mapping):
            return  # absent, or not a mapping: the model says so
        self._known("resources", resources)
        if resources.get("disk") is not None:
            self.warn("resources.disk", "Spark has no per-task disk allotment")
        self.fields["resources"] = {k: v for k, v in resources.items() if k != "disk"}

    def _known(self, field: str, value: Mapping[str, Any]) -> None:
        allowed = NESTED[field]
        for key in value:
            if key not in allowed and snake(str(key)) not in {snake(a) for a in allowed}:
                self.fail(f"{field}.{key}", f"not a field of Pulsar's {field}")

    def window(self) -> None:
        """Pulsar's submit names the user's class in ``windowConfig``
        (``actualWindowFunctionClassName``) and its own executor in ``className``:
        the user's class is the function's."""
        producer = self.fields.get("producer_config")
        if isinstance(producer, Mapping):
            self._known("producerConfig", producer)
        window = self.fields.get("window_config")
        if not isinstance(window, Mapping):
            return  # absent, or not a mapping: the model says so
        self._known("windowConfig", window)
        actual = window.get("actualWindowFunctionClassName") or window.get(
            "actual_window_function_class_name"
        )
        executor = "org.apache.pulsar.functions.windowing.WindowFunctionExecutor"
        if actual and self.fields.get("classname") in (None, "", executor):
            self.fields["classname"] = actual

    def retries(self) -> None:
        """Pulsar's unset maxMessageRetries is -1; any other negative number is refused."""
        retries = self.fields.get("max_message_retries")
        if retries == -1 and not isinstance(retries, bool | float):
            self.fields.pop("max_message_retries")

    def ignored(self) -> None:
        runtime = self.pop("runtime")
        if runtime is not None and str(runtime).strip().upper() not in ("", "PYTHON"):
            self.fail("runtime", f"sparkfn runs Python functions only (got {runtime!r})")
        if runtime:
            self.warn("runtime", IGNORED["runtime"])
        for camel, why in IGNORED.items():
            value = self.pop(snake(camel))
            if camel == "runtime" or value in (None, "", {}, []):
                continue
            if camel in NESTED and isinstance(value, Mapping):
                self._known(camel, value)
                keys = ", ".join(str(k) for k, v in value.items() if v is not None)
                self.warn(f"{camel} ({keys})" if keys else camel, why)
            else:
                self.warn(camel, why)


def _true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    return [value]  # the model names what is wrong with it


def _topic_key(topic: str) -> str:
    try:
        return str(TopicName.parse(topic))
    except ConfigError:
        return topic  # the model names the bad topic


def _unique_topics(topics: list[Any]) -> list[Any]:
    """``topics`` without a second spelling of one topic (``in``, ``public/default/in``)."""
    seen: dict[Any, Any] = {}
    for topic in topics:
        seen.setdefault(_topic_key(topic) if isinstance(topic, str) else id(topic), topic)
    return list(seen.values())


def _is_regex(key: str) -> bool:
    try:
        TopicName.parse(key)
    except ConfigError:
        return True
    return False


_PREFIX = re.compile(r"^(non-)?persistent://")


def _bare_pattern(pattern: str) -> str:
    """A topics regex over sparkfn's names (``tenant/namespace/name``): Pulsar's
    ``persistent://`` dropped."""
    return _PREFIX.sub("", pattern)


def _label(layers: tuple[Mapping[Any, Any], ...]) -> str:
    """``function NAME`` for errors: the name the layers give, last one winning."""
    name: Any = None
    for layer in layers:
        name = layer.get("name") or (str(layer["fqfn"]) if layer.get("fqfn") else None) or name
    return f"function {name or '?'}"
