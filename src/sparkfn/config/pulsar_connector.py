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

from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.config.function import ProcessingGuarantee
from sparkfn.config.pulsar import Translated
from sparkfn.config.pulsar_connector_fields import (
    BUILTIN,
    layered_fields,
    read_connector_fields,
)

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
    return layered_fields(model, kind, *layers, what=what)


def connector_config(
    kind: str, *layers: Mapping[str, Any], what: str = ""
) -> tuple[SourceConfig | SinkConfig, tuple[str, ...]]:
    """A ``source`` or ``sink`` config from ``layers`` read as Pulsar's (later layers win,
    field by field: a flag's ``--inputs`` replaces the file's), and the warnings."""
    model = SourceConfig if kind == "source" else SinkConfig
    translated = read_connector_fields(model, kind, *layers, what=what)
    config: SourceConfig | SinkConfig = model.build(**translated.fields)
    return config, translated.warnings


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
