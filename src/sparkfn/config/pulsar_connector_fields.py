"""Reading a Pulsar connector config into the fields of a sparkfn connector config.

The half of :mod:`sparkfn.config.pulsar_connector` that
:class:`~sparkfn.config.connector.SourceConfig` and
:class:`~sparkfn.config.connector.SinkConfig` use themselves (``from_yaml``):
it takes the config class as an argument instead of importing it, so the
configs and this module import no module that imports them back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from sparkfn.api.errors import ConfigError
from sparkfn.config.fields import pulsar_spelling
from sparkfn.config.pulsar import Translated
from sparkfn.config.reading import snake

BUILTIN = "builtin://"

# Pulsar's names of fields sparkfn has under another name (snake_case of either spelling).
_RENAMED = {
    "class_name": "classname",
    "max_redeliver_count": "max_message_retries",
    "source_subscription_name": "subscription_name",
    "source_subscription_position": "subscription_position",
}
_SOURCE_RENAMED = {"topic_name": "output", "destination_topic_name": "output"}

# Pulsar fields with no meaning on sparkfn, and why (one warning line each).
_IGNORED = {
    "serde_class_name": "records are bytes or the topic's schema on sparkfn",
    "schema_type": "the output topic's schema decides",
    "producer_config": "sparkfn appends to its store; there is no Pulsar producer",
    "batch_source_config": "batch sources are not supported; ignored",
    "batch_builder": "sparkfn appends in transactions of batch_size",
    "runtime_flags": "no separate runtime process",
    "custom_runtime_options": "no separate runtime process",
    "log_topic": "connector logs go to the worker's log",
    "topic_to_serde_class_name": "records are bytes or the topic's schema on sparkfn; "
    "each topic is an input",
    "topic_to_schema_type": "the input topic's schema decides",
    "topic_to_schema_properties": "the input topic's schema decides",
    "retain_ordering": "a sink instance writes its partitions in order already",
    "retain_key_ordering": "a sink instance writes its partitions in order already",
    "auto_ack": "a sink's input is committed with the batch it wrote",
    "timeout_ms": "a sink's input is committed with the batch it wrote",
    "negative_ack_redelivery_delay_ms": "a source's records are not negative-acked",
    "cleanup_subscription": "deleting a sink always removes its subscription",
    "resources": "a source's instances are threads and a sink's query shares the worker's "
    "Spark session",
    "cpu": "a source's instances are threads and a sink's query shares the worker's "
    "Spark session (resources)",
    "ram": "a source's instances are threads and a sink's query shares the worker's "
    "Spark session (resources)",
    "disk": "a source's instances are threads and a sink's query shares the worker's "
    "Spark session (resources)",
    "deserialization_classname": "records are bytes or the topic's schema on sparkfn",
    "transform_function": "run a function before the sink instead",
    "transform_function_class_name": "run a function before the sink instead",
    "transform_function_config": "run a function before the sink instead",
}


def read_connector_fields(
    model: type[BaseModel], kind: str, *layers: Mapping[str, Any], what: str = ""
) -> Translated:
    """The fields of ``model`` (a ``source`` or ``sink`` config) given in ``layers`` read as
    Pulsar's, each layer on its own and later layers winning field by field (a flag's
    ``--inputs`` replaces the file's), and one warning line per Pulsar field sparkfn
    ignores; ``what`` names the connector in errors (default: ``kind`` and the name)."""
    fields: dict[str, Any] = {}
    warnings: list[str] = []
    for layer in layers:
        translated = layered_fields(model, kind, layer, what=what)
        fields.update(translated.fields)
        warnings.extend(translated.warnings)
    return Translated(fields=fields, warnings=tuple(dict.fromkeys(warnings)))


def layered_fields(
    model: type[BaseModel], kind: str, *layers: Mapping[str, Any], what: str = ""
) -> Translated:
    """The fields of ``layers`` read as one config (a sink's ``inputs`` of later layers
    add to the earlier ones'), and the warnings."""
    fields: dict[str, Any] = {}
    warnings: list[str] = []
    unset: set[str] = set()
    for raw, value in ((raw, value) for layer in layers for raw, value in layer.items()):
        if value is None:
            continue
        key = snake(str(raw))
        key = _RENAMED.get(key, key)
        if kind == "source":
            key = _SOURCE_RENAMED.get(key, key)
        if key in _IGNORED and key not in model.model_fields:
            warnings.append(f"{_camel(key)}: {_IGNORED[key]}; ignored")
            continue
        if key == "archive":
            _archive(what or f"{kind} {fields.get('name', '?')}", kind, str(value), fields)
            continue
        if key in ("input_specs", "custom_serde_inputs", "topic_to_serde_class_name") and (
            kind == "sink"
        ):
            fields["inputs"] = _spec_topics(value, fields.get("inputs"))
            if key != "input_specs":  # each topic is an input; its serde means nothing
                warnings.append(f"{_camel(key)}: {_IGNORED['topic_to_serde_class_name']}")
            continue
        if key == "inputs" and kind == "sink" and "inputs" in fields:
            given = value if isinstance(value, list) else str(value).split(",")
            fields["inputs"] = [*fields["inputs"], *(t for t in given if t)]
            continue
        if key == "subscription_position":
            value = pulsar_spelling(value)
        numbers = ("max_message_retries", "negative_ack_redelivery_delay_ms")
        if key in numbers and isinstance(value, str) and value.isdigit():
            value = int(value)  # a flag's text, as --max-redeliver-count gives it
        if key == "max_message_retries" and value in (-1, "-1"):
            fields.pop(key, None)  # Pulsar's unset, over what an earlier layer gave
            unset.add(key)
            continue
        unset.discard(key)
        fields[key] = value
    return Translated(fields, tuple(dict.fromkeys(warnings)), frozenset(unset))


def _archive(what: str, kind: str, archive: str, fields: dict[str, Any]) -> None:
    """``builtin://<type>`` names a built-in; anything else is a package (the route's ``url``)."""
    if archive.startswith(BUILTIN):
        fields[f"{kind}_type"] = archive.removeprefix(BUILTIN)
        return
    msg = (
        f"{what}: archive {archive!r} names a file; upload it as "
        "the multipart field data, or name an uploaded package with url "
        f"(archive takes {BUILTIN}<type> for a built-in)"
    )
    raise ConfigError(msg)


def _spec_topics(specs: Any, inputs: Any) -> list[str]:
    if not isinstance(specs, Mapping):
        msg = f"inputSpecs must map each input topic to its spec; got {specs!r:.80}"
        raise ConfigError(msg)
    before = list(inputs) if isinstance(inputs, list) else []
    return [*before, *(str(topic) for topic in specs if topic not in before)]


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)
