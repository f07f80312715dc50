"""Pulsar's ``SourceConfig`` and ``SinkConfig`` on sparkfn: reading them, and showing them.

:func:`connector_fields` reads a Pulsar connector config (the REST API's
``sourceConfig``/``sinkConfig`` JSON, a ``--source-config-file``) into the
fields of sparkfn's :class:`~sparkfn.config.connector.SourceConfig` or
:class:`~sparkfn.config.connector.SinkConfig`: camelCase or snake_case keys,
``className`` as ``classname``, a source's ``topicName`` as ``output``, a
sink's ``inputSpecs`` keys as inputs and ``topicsPattern`` as
``topics_pattern``, ``sourceSubscriptionName``/``Position``, and
``archive: builtin://<type>`` as the built-in type. A Pulsar field that
means nothing on sparkfn gives one warning line naming it.

:func:`pulsar_shape` is the other way: a config as Pulsar's JSON shows it
(``processingGuarantees: ATLEAST_ONCE``, ``archive``, ...), with sparkfn's
own fields beside Pulsar's.

>>> connector_fields("source", {"name": "g", "topicName": "out", "archive": "builtin://generator"})
Translated(fields={'name': 'g', 'output': 'out', 'source_type': 'generator'}, warnings=())
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkfn.api.errors import ConfigError
from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.config.function import ProcessingGuarantee, pulsar_spelling
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
    "negative_ack_redelivery_delay_ms": "a message whose write fails is retried at once "
    "(maxMessageRetries), then dead-lettered",
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

_PULSAR_GUARANTEE = {
    ProcessingGuarantee.AT_LEAST_ONCE: "ATLEAST_ONCE",
    ProcessingGuarantee.AT_MOST_ONCE: "ATMOST_ONCE",
    ProcessingGuarantee.EFFECTIVELY_ONCE: "EFFECTIVELY_ONCE",
}


def connector_fields(kind: str, *layers: Mapping[str, Any], what: str = "") -> Translated:
    """The sparkfn fields of a ``source`` or ``sink`` config given in ``layers`` (later
    layers win), and one warning line per Pulsar field sparkfn ignores; ``what`` names
    the connector in errors (default: ``kind`` and the layers' name)."""
    model = SourceConfig if kind == "source" else SinkConfig
    fields: dict[str, Any] = {}
    warnings: list[str] = []
    for layer in layers:
        for raw, value in layer.items():
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
            if key == "max_message_retries" and isinstance(value, str) and value.isdigit():
                value = int(value)  # a flag's text, as --max-redeliver-count gives it
            fields[key] = value
    return Translated(fields=fields, warnings=tuple(dict.fromkeys(warnings)))


def connector_config(
    kind: str, *layers: Mapping[str, Any], what: str = ""
) -> tuple[SourceConfig | SinkConfig, tuple[str, ...]]:
    """A ``source`` or ``sink`` config from ``layers`` read as Pulsar's (later layers win,
    field by field: a flag's ``--inputs`` replaces the file's), and the warnings."""
    model = SourceConfig if kind == "source" else SinkConfig
    fields: dict[str, Any] = {}
    warnings: list[str] = []
    for layer in layers:
        translated = connector_fields(kind, layer, what=what)
        fields.update(translated.fields)
        warnings.extend(translated.warnings)
    config: SourceConfig | SinkConfig = model.build(**fields)
    return config, tuple(dict.fromkeys(warnings))


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


def pulsar_shape(config: SourceConfig | SinkConfig, archive: str | None) -> dict[str, Any]:
    """``config`` as Pulsar's ``SourceConfig``/``SinkConfig`` JSON (camelCase), with
    sparkfn's own fields (``sourceType``/``sinkType``, ``batchSize``, ``failurePolicy``,
    ...) beside Pulsar's. ``archive`` is the package's digest, if the code came in one."""
    dumped = config.model_dump(mode="json")
    shown: dict[str, Any] = {
        "tenant": config.tenant,
        "namespace": config.namespace,
        "name": config.name,
        "className": config.classname,
        "configs": dumped["configs"],
        "secrets": dumped["secrets"],
        "parallelism": config.parallelism,
        "processingGuarantees": _PULSAR_GUARANTEE[config.processing_guarantees],
        "archive": archive,
        "py": config.py,
        "failurePolicy": dumped["failure_policy"],
    }
    if isinstance(config, SourceConfig):
        if config.source_type and archive is None:
            shown["archive"] = BUILTIN + config.source_type
        shown.update(
            topicName=config.output,
            sourceType=config.source_type,
            batchSize=config.batch_size,
            batchTimeout=config.batch_timeout,
            pollInterval=config.poll_interval,
        )
    else:
        if config.sink_type and archive is None:
            shown["archive"] = BUILTIN + config.sink_type
        shown.update(
            inputs=list(config.inputs),
            inputSpecs={topic: {} for topic in config.inputs},
            topicsPattern=config.topics_pattern,
            sourceSubscriptionName=config.subscription,
            sourceSubscriptionPosition=config.subscription_position.value.title(),
            sinkType=config.sink_type,
            maxMessageRetries=config.max_message_retries,
            deadLetterTopic=config.dead_letter_topic,
            maxRecordsPerBatch=config.max_records_per_batch,
            triggerInterval=config.trigger_interval,
        )
    return shown
