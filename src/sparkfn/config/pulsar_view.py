"""A function's config as Pulsar's ``FunctionConfig`` JSON, sparkfn's own fields alongside.

What ``GET /admin/v3/functions/{tenant}/{namespace}/{name}`` and
``sparkfn functions get`` return, so a script written for
``pulsar-admin functions get`` reads it: camelCase keys, Pulsar's enum
spellings (``processingGuarantees: "ATLEAST_ONCE"``, ``subscriptionPosition:
"Latest"``, ``runtime: "PYTHON"``), topics as ``persistent://`` names,
``inputSpecs`` with a ``ConsumerConfig`` per input, ``resources``. Fields
sparkfn has and Pulsar has not follow in camelCase (``subscriptionType``,
``autoCreateTopics``, ``failurePolicy``, ...), only when they differ from
their defaults. Read back by :func:`sparkfn.config.pulsar.function_fields`
(``FunctionConfig.assemble``), the view is the same config again.

>>> view = pulsar_view(FunctionConfig.build(name="f", py="f.py", inputs=["in"]))
>>> view["inputSpecs"], view["processingGuarantees"]
({'persistent://public/default/in': {'regexPattern': False}}, 'ATLEAST_ONCE')
"""

from __future__ import annotations

from typing import Any

from pydantic.alias_generators import to_camel

from sparkfn.config.function import FunctionConfig, SubscriptionType

# The built-in serdes, as Pulsar's schema types.
_SCHEMA_TYPES = {"bytes": "BYTES", "string": "STRING", "json": "JSON"}
_GUARANTEES = {
    "at_least_once": "ATLEAST_ONCE",
    "at_most_once": "ATMOST_ONCE",
    "effectively_once": "EFFECTIVELY_ONCE",
}
# sparkfn's fields that Pulsar's view above already carries, in its own terms.
_IN_PULSARS = {
    "tenant", "namespace", "name", "py", "classname", "inputs", "topics_pattern", "output",
    "log_topic", "dead_letter_topic", "max_message_retries", "processing_guarantees",
    "subscription_position", "subscription_name", "parallelism", "user_config", "secrets",
    "retain_ordering", "forward_source_message_property", "cleanup_subscription", "resources",
    "output_serde", "input_serdes", "auto_ack", "secrets_provider_classname",
    "secrets_provider_config",
}  # fmt: skip
# Pulsar's Resources defaults, shown for what a config leaves unset (as
# pulsar-admin's get shows them) and read back as unset.
PULSAR_RESOURCES: dict[str, Any] = {"cpu": 1.0, "ram": 1 << 30, "disk": 10 << 30}
# Keys of the view that are no config field: what the registry says of a version.
METADATA_KEYS = ("version", "packageDigest", "createdBy", "createdAt", "warnings", "runtime")


def _topic(name: str | None) -> str | None:
    return None if name is None else f"persistent://{name}"


def _consumer_config(serde: str | None, regex: bool) -> dict[str, Any]:
    """Pulsar's ``ConsumerConfig`` of one input: its serde class or schema type."""
    spec: dict[str, Any] = {"regexPattern": regex}
    if serde in _SCHEMA_TYPES:
        spec["schemaType"] = _SCHEMA_TYPES[serde]
    elif serde is not None and serde != "auto":
        spec["serdeClassName"] = serde
    return spec


def pulsar_view(config: FunctionConfig) -> dict[str, Any]:
    """``config`` as Pulsar's ``FunctionConfig`` JSON, with sparkfn's own fields after it."""
    inputs = [f"persistent://{topic}" for topic in config.inputs]
    specs = {_topic(t): _consumer_config(config.input_serdes.get(t), False) for t in config.inputs}
    extra_serdes = {k: v for k, v in config.input_serdes.items() if k not in config.inputs}
    if config.topics_pattern:
        specs[config.topics_pattern] = _consumer_config(
            extra_serdes.pop(config.topics_pattern, None), True
        )
    view: dict[str, Any] = {
        "tenant": config.tenant,
        "namespace": config.namespace,
        "name": config.name,
        "fqfn": config.fqfn,
        "className": config.classname,
        "py": config.py,
        "runtime": "PYTHON",
        "inputs": inputs,
        "topicsPattern": config.topics_pattern,
        "inputSpecs": specs,
        "output": _topic(config.output),
        "logTopic": _topic(config.log_topic),
        "processingGuarantees": _GUARANTEES[config.processing_guarantees.value],
        "retainOrdering": config.subscription_type is SubscriptionType.FAILOVER,
        "retainKeyOrdering": config.subscription_type is SubscriptionType.KEY_SHARED,
        "forwardSourceMessageProperty": config.forward_source_message_property,
        "userConfig": dict(config.user_config),
        "secrets": dict(config.secrets),
        "autoAck": config.auto_ack,
        "maxMessageRetries": config.max_message_retries,
        "deadLetterTopic": _topic(config.dead_letter_topic),
        "subName": config.subscription_name,
        "subscriptionPosition": config.subscription_position.value.title(),
        "parallelism": config.parallelism,
        "resources": {**PULSAR_RESOURCES, **config.resources.model_dump(exclude_none=True)},
        "cleanupSubscription": config.cleanup_subscription,
        "secretsProviderClassName": config.secrets_provider_classname,
        "secretsProviderConfig": config.secrets_provider_config,
    }
    serde = config.output_serde
    if serde in _SCHEMA_TYPES:
        view["outputSchemaType"] = _SCHEMA_TYPES[serde]
    elif serde != "auto":
        view["outputSerdeClassName"] = serde
    view = {k: v for k, v in view.items() if v is not None}
    for field, info in FunctionConfig.model_fields.items():
        if field in _IN_PULSARS:
            continue
        value = getattr(config, field)
        if value == info.get_default(call_default_factory=True):
            continue
        if field == "window_config":  # Pulsar's WindowConfig: camelCase, unset keys left out
            dumped = value.model_dump(mode="json", exclude_none=True)
            view["windowConfig"] = {to_camel(k): v for k, v in dumped.items()}
            continue
        if field == "producer_config":  # Pulsar's ProducerConfig: camelCase, its spellings
            dumped = value.model_dump(mode="json", exclude_none=True, by_alias=True)
            if "compressionType" in dumped:
                dumped["compressionType"] = dumped["compressionType"].upper()
            view["producerConfig"] = dumped
            continue
        view[to_camel(field)] = (
            value.model_dump(mode="json") if hasattr(value, "model_dump") else _plain(value)
        )
    if extra_serdes:
        view["inputSerdes"] = extra_serdes
    return view


def _plain(value: Any) -> Any:
    return getattr(value, "value", value)


def config_fields(view: dict[str, Any]) -> dict[str, Any]:
    """The config fields of a view (:func:`pulsar_view`, as ``functions get`` printed
    it): the registry's keys and Pulsar's ``runtime`` left out, and a resource at
    Pulsar's default (:data:`PULSAR_RESOURCES`) read as unset, as the view shows one."""
    fields = {k: v for k, v in view.items() if k not in METADATA_KEYS}
    resources = fields.get("resources")
    if isinstance(resources, dict):
        fields["resources"] = {k: v for k, v in resources.items() if PULSAR_RESOURCES.get(k) != v}
    return fields
