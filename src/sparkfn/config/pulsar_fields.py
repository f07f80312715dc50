"""Every field of Pulsar's ``FunctionConfig``, and what each is in sparkfn.

:data:`RENAMED` fields are sparkfn fields under another name,
:data:`TRANSLATED` ones are read into sparkfn's by
:mod:`sparkfn.config.pulsar`, and :data:`IGNORED` ones mean nothing on Spark
(the reason is the warning's text). :data:`NESTED` lists the keys of Pulsar's
nested configs, so that a misspelt one is named.

>>> schema_serde("AVRO", "outputSchemaType", "function f")
'auto'
"""

from __future__ import annotations

import re
from typing import Any

from sparkfn.api.errors import ConfigError

# Pulsar's field -> the sparkfn field of the same meaning.
RENAMED = {
    "tenant": "tenant",
    "namespace": "namespace",
    "name": "name",
    "className": "classname",
    "inputs": "inputs",
    "topicsPattern": "topics_pattern",
    "output": "output",
    "outputSerdeClassName": "output_serde",
    "logTopic": "log_topic",
    "processingGuarantees": "processing_guarantees",
    "retainOrdering": "retain_ordering",
    "forwardSourceMessageProperty": "forward_source_message_property",
    "userConfig": "user_config",
    "secrets": "secrets",
    "maxMessageRetries": "max_message_retries",
    "deadLetterTopic": "dead_letter_topic",
    "subName": "subscription_name",
    "parallelism": "parallelism",
    "py": "py",
    "cleanupSubscription": "cleanup_subscription",
    "subscriptionPosition": "subscription_position",
    "autoAck": "auto_ack",
    # Pulsar's localrun flags --secrets-provider-classname and -config.
    "secretsProviderClassName": "secrets_provider_classname",
    "secretsProviderConfig": "secrets_provider_config",
    # sparkfn.config.window; Pulsar's keys are the model's aliases.
    "windowConfig": "window_config",
    "timeoutMs": "timeout_ms",
    "negativeAckRedeliveryDelayMs": "negative_ack_redelivery_delay_ms",
    "producerConfig": "producer_config",  # sparkfn.config.producer
}

# Pulsar's fields that :func:`translate` reads into sparkfn's.
TRANSLATED = (
    "fqfn",
    "customSerdeInputs",
    "customSchemaInputs",
    "inputSpecs",
    "outputSchemaType",
    "retainKeyOrdering",
    "resources",
    "runtime",
)

# Pulsar's fields that mean nothing on Spark, and why: accepted with a warning.
IGNORED = {
    "runtime": "sparkfn runs Python functions, in Spark's Python workers",
    "runtimeFlags": "flags of Pulsar's process or Kubernetes runtime; Spark settings "
    "go in spark_conf",
    "customRuntimeOptions": "options of Pulsar's Kubernetes manifest customizer; Spark "
    "settings go in spark_conf",
    "jar": "a Java function's package; sparkfn runs Python functions (py)",
    "go": "a Go function's executable; sparkfn runs Python functions (py)",
    "functionType": "Pulsar's built-in (Java) functions do not exist in sparkfn",
    "inputTypeClassName": "a Java type; a Python function's input is not declared",
    "outputTypeClassName": "a Java type; a Python function's output is not declared",
    "customSchemaOutputs": "schema properties of Pulsar's producer; a sparkfn topic's "
    "schema is fixed when the topic is created",
    "maxPendingAsyncRequests": "Pulsar's asynchronous (Java) functions; a Python function "
    "returns its result",
    "exposePulsarAdminClientEnabled": "the Java Context's admin client; Python's Context has none",
    "skipToLatest": "a restarted function resumes from its subscription, so nothing "
    "committed is skipped or repeated",
    "batchBuilder": "outputs are appended as segments in the micro-batch's commit; there "
    "is no producer batching",
}

RESOURCES = ("cpu", "ram", "disk")
INPUT_SPEC = (
    "schemaType",
    "serdeClassName",
    "isRegexPattern",
    "regexPattern",
    "schemaProperties",
    "consumerProperties",
    "receiverQueueSize",
    "cryptoConfig",
    "poolMessages",
    "messagePayloadProcessorConfig",
)
INPUT_SPEC_IGNORED = {
    "schemaProperties": "a sparkfn topic's schema is fixed when the topic is created",
    "consumerProperties": "sparkfn reads topics with no Pulsar consumer",
    "receiverQueueSize": "sparkfn reads micro-batches (see max_records_per_batch)",
    "cryptoConfig": "sparkfn topics are not end-to-end encrypted",
    "poolMessages": "sparkfn reads micro-batches, with no Pulsar consumer",
    "messagePayloadProcessorConfig": "sparkfn reads micro-batches, with no Pulsar consumer",
}
# The keys Pulsar allows in its nested configs, to name a misspelt one.
NESTED = {
    "resources": RESOURCES,
    "windowConfig": (
        "windowLengthCount",
        "windowLengthDurationMs",
        "slidingIntervalCount",
        "slidingIntervalDurationMs",
        "lateDataTopic",
        "maxLagMs",
        "watermarkEmitIntervalMs",
        "timestampExtractorClassName",
        "actualWindowFunctionClassName",
        "processingGuarantees",
        "dropLateData",  # sparkfn's own: late messages dropped, by choice
    ),
    "producerConfig": (
        "maxPendingMessages",
        "maxPendingMessagesAcrossPartitions",
        "useThreadLocalProducers",
        "cryptoConfig",
        "batchBuilder",
        "compressionType",
        "batchingConfig",
    ),
}
# A Pulsar schema type that names a sparkfn serde; "avro" and "auto*" follow the topic.
_SCHEMA_SERDES = {
    "bytes": "bytes",
    "string": "string",
    "json": "json",
    "avro": "auto",
    "auto": "auto",
    "auto_consume": "auto",
    "auto_publish": "auto",
}
# A serde, schema or Record class: module.Class or module:Class.
CLASS_NAME = re.compile(r"^[A-Za-z_][\w.]*[.:][A-Za-z_]\w*$")


def schema_serde(value: Any, field: str, what: str) -> str | None:
    """The serde a Pulsar schema type means: ``STRING`` → ``string``, ``AVRO`` → ``auto``
    (the topic's own schema), a class name → that class (a ``Record``); ``""`` → ``None``."""
    if not isinstance(value, str):
        msg = f"{what}: invalid config: {field}: a schema type is text (got {value!r})"
        raise ConfigError(msg)
    text = value.strip()
    if not text or text.lower() == "none":
        return None
    serde = _SCHEMA_SERDES.get(text.lower())
    if serde is not None:
        return serde
    if CLASS_NAME.match(text):
        return text
    msg = (
        f"{what}: invalid config: {field}: schema type {value!r} is none of sparkfn's "
        f"({', '.join(sorted(_SCHEMA_SERDES))}) nor a module.Record class name"
    )
    raise ConfigError(msg)
