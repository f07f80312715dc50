"""FunctionConfig: everything that defines a function, validated.

The same fields come from a YAML file (``--function-config-file``), CLI flags
of the same names and the worker's REST body. Field names follow Pulsar's
function config (snake_case); sparkfn's own fields are at the end. Every field
of Pulsar's ``FunctionConfig`` is read too, in camelCase or snake_case: mapped
to sparkfn's where sparkfn has the concept, else accepted with a warning
(:mod:`sparkfn.config.pulsar`).

>>> FunctionConfig(name="wc", py="wordcount.py", classname="wordcount.WordCount",
...                inputs=["sentences"], output="counts")
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from sparkfn.api.errors import ConfigError
from sparkfn.config.durations import parse_duration_seconds
from sparkfn.config.fields import (
    check_input_serdes,
    check_name,
    check_serde,
    input_topics,
    pulsar_spelling,
    user_config_mapping,
)
from sparkfn.config.names import DEFAULT_NAMESPACE, DEFAULT_TENANT, TopicName
from sparkfn.config.policy import FailurePolicy
from sparkfn.config.producer import ProducerConfig
from sparkfn.config.pulsar import function_fields
from sparkfn.config.reading import describe_validation_error as describe_validation_error
from sparkfn.config.reading import read_yaml_fields as read_yaml_fields
from sparkfn.config.reading import read_yaml_mapping
from sparkfn.config.reading import snake_fields as snake_fields
from sparkfn.config.resources import Resources
from sparkfn.config.topics_pattern import check_config_pattern
from sparkfn.config.window import WindowConfig

_LOG = logging.getLogger("sparkfn.config")


class ProcessingGuarantee(StrEnum):
    """What a failure may do to the messages of the batch in flight."""

    AT_LEAST_ONCE = "at_least_once"  # replayed: nothing lost, duplicates possible
    AT_MOST_ONCE = "at_most_once"  # dropped: nothing duplicated, loss possible
    EFFECTIVELY_ONCE = "effectively_once"  # replayed and de-duplicated: exactly once


class SubscriptionType(StrEnum):
    """How the input is shared among a function's instances."""

    SHARED = "shared"  # offset ranges spread over instances
    KEY_SHARED = "key_shared"  # rows routed by key hash; per-key order kept
    FAILOVER = "failover"  # each partition owned by one instance; partition order kept


class SubscriptionPosition(StrEnum):
    """Where a new function starts reading."""

    LATEST = "latest"
    EARLIEST = "earliest"


class FunctionConfig(BaseModel):
    """A function's definition. Frozen; build a new one to change it."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)

    tenant: str = DEFAULT_TENANT
    namespace: str = DEFAULT_NAMESPACE
    name: str
    py: str | None = None
    classname: str | None = None
    inputs: list[str] = Field(default_factory=list)
    topics_pattern: str | None = None
    output: str | None = None
    # The function's topics (inputs, output, log, dead-letter, ``context.publish``'s) are
    # created on first use, as Pulsar's are (sparkfn.topics.autocreate), unless this is
    # False or the store (or worker) turned that off: then a missing topic is an error.
    auto_create_topics: bool = True
    log_topic: str | None = None
    # Where a message that failed every attempt goes: this topic, else
    # ``{tenant}/{namespace}/{name}-DLQ`` (created on first use) unless
    # ``drop_failed_messages`` says to drop it (see ``dead_letter_target``).
    dead_letter_topic: str | None = None
    drop_failed_messages: bool = False
    # Pulsar's maxMessageRetries. Unset (as Pulsar's): a failed message is delivered again
    # after the delay without end; N: dead-lettered after N redeliveries; 0 (Pulsar's consumer
    # refuses it): at its first failure. Numbers are strict: JSON's true, 2.0 or "2" is an error.
    max_message_retries: int | None = Field(default=None, ge=0, le=100, strict=True)
    # Pulsar's negativeAckRedeliveryDelayMs: how long a message whose call raised waits in
    # the retry topic before it is delivered again (sparkfn.runtime.function.redelivery).
    negative_ack_redelivery_delay_ms: int = Field(default=60_000, ge=0, le=604_800_000, strict=True)
    processing_guarantees: ProcessingGuarantee = ProcessingGuarantee.AT_LEAST_ONCE
    subscription_type: SubscriptionType = SubscriptionType.SHARED
    subscription_position: SubscriptionPosition = SubscriptionPosition.LATEST
    subscription_name: str | None = None
    parallelism: int = Field(default=1, ge=1, le=256, strict=True)
    user_config: dict[str, Any] = Field(default_factory=dict)
    secrets: dict[str, str] = Field(default_factory=dict)
    # What ``context.get_secret`` makes of a ``secrets`` value (see
    # sparkfn.runtime.function.secrets): Pulsar's ClearTextSecretsProvider
    # (the value is the secret) under pulsar_compat, else sparkfn's
    # SecretReferenceProvider (the value is ``env:VAR``, ``VAR`` or ``file:PATH#key``).
    secrets_provider_classname: str | None = None
    # What the provider's init(config) receives (Pulsar's --secrets-provider-config).
    secrets_provider_config: dict[str, Any] | None = None
    retain_ordering: bool = False
    # Pulsar's forwardSourceMessageProperty: whether a returned value's message
    # carries the input message's key and properties. Unset: the code decides
    # (runtime.function.pulsar_mode): not for a function with Pulsar's behaviour,
    # as Pulsar's Python runtime forwards neither; yes for sparkfn's own. Every
    # output carries Pulsar's __pfn_input_topic__ and __pfn_input_msg_id__ either way.
    forward_source_message_property: bool | None = None
    cleanup_subscription: bool = True
    # Pulsar's autoAck: True acknowledges a message when process returns. False: the function
    # acknowledges it with context.ack. A call that did not still publishes its output and
    # keeps its state, as Pulsar's does; with timeout_ms (the ack timeout) its message is
    # delivered again (sparkfn.runtime.function.attempts).
    auto_ack: bool = True
    # sparkfn's stricter autoAck false, on request: a call that returned without
    # context.ack is a failed delivery (its outputs and state discarded).
    strict_ack: bool = False
    # Pulsar's serde and Context behaviour: None lets the code decide (a file
    # that imports pulsar, a class of pulsar-client's, a native function get
    # it: sparkfn.runtime.function.pulsar_mode); True or False forces it.
    pulsar_compat: bool | None = None
    # sparkfn's own.
    trigger_interval: float = 0.0
    # A worker runs the function in a Spark query of its own instead of its
    # query group (sparkfn.runtime.group): for a hot function, or one that
    # must never wait for another's batch.
    dedicated: bool = False
    # Admission caps per micro-batch (default: the data source's, 1M records, 256 MiB).
    max_records_per_batch: int | None = Field(default=None, ge=1, strict=True)
    max_bytes_per_batch: int | None = Field(default=None, ge=1, strict=True)
    spark_conf: dict[str, str] = Field(default_factory=dict)
    # Pulsar's per-instance cpu and ram: Spark settings of the session a
    # localrun creates (see sparkfn.config.resources and session_conf).
    resources: Resources = Field(default_factory=Resources)
    # Serde: how values reach the function and leave it; "auto" follows each topic's schema
    # type; ``module.Class`` names one with ``serialize(obj)`` and ``deserialize(bytes)``.
    input_serde: str = "auto"
    output_serde: str = "auto"
    # One input's serde over input_serde, by topic name or by a regex of
    # topics_pattern (Pulsar's customSerdeInputs, customSchemaInputs, inputSpecs).
    input_serdes: dict[str, str] = Field(default_factory=dict)
    # What happens after an instance dies (see sparkfn.config.policy).
    failure_policy: FailurePolicy = Field(default_factory=FailurePolicy)
    # Pulsar's windowConfig: the function is given windows of messages
    # (sparkfn.runtime.function.window); None: one message at a time.
    window_config: WindowConfig | None = None
    # Pulsar's timeoutMs: the ack timeout, after which a message the function did
    # not acknowledge (auto_ack false) is delivered again; it never interrupts a call.
    timeout_ms: int | None = Field(default=None, ge=1, le=24 * 3600 * 1000, strict=True)
    # sparkfn's stricter timeout_ms, on request: an attempt that runs longer than
    # timeout_ms is interrupted and fails like an exception (retried, then
    # dead-lettered; sparkfn.runtime.function.timeout).
    timeout_interrupts: bool = False
    # Pulsar's producerConfig: what of it applies to sparkfn's outputs
    # (compressionType), the rest refused (sparkfn.config.producer).
    producer_config: ProducerConfig | None = None

    @field_validator("tenant", "namespace", "name")
    @classmethod
    def _check_name(cls, value: str, info: Any) -> str:
        return check_name(value, info.field_name)

    @field_validator(
        "processing_guarantees", "subscription_type", "subscription_position", mode="before"
    )
    @classmethod
    def _pulsar_spelling(cls, value: Any) -> Any:
        return pulsar_spelling(value)

    @field_validator("input_serde", "output_serde")
    @classmethod
    def _check_serde(cls, value: str, info: Any) -> str:
        return check_serde(value, info.field_name)

    @field_validator("input_serdes")
    @classmethod
    def _check_input_serdes(cls, value: dict[str, str]) -> dict[str, str]:
        return check_input_serdes(value)

    @field_validator("inputs")
    @classmethod
    def _normalise_inputs(cls, value: list[str]) -> list[str]:
        return input_topics(value)

    @field_validator("output", "log_topic", "dead_letter_topic")
    @classmethod
    def _normalise_topic(cls, value: str | None, info: Any) -> str | None:
        if value is None or value == "":
            return None
        try:
            return str(TopicName.parse(value, field=info.field_name))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("trigger_interval", mode="before")
    @classmethod
    def _duration(cls, value: Any, info: Any) -> float:
        return parse_duration_seconds(value, info.field_name)

    @field_validator("user_config", mode="before")
    @classmethod
    def _user_config(cls, value: Any) -> Any:
        return user_config_mapping(value)

    @model_validator(mode="before")
    @classmethod
    def _retain_ordering(cls, data: Any) -> Any:
        # Pulsar: retain ordering forces failover-like assignment.
        if isinstance(data, dict) and data.get("retain_ordering") in (True, "true", "True"):
            given = pulsar_spelling(data.get("subscription_type", "shared"))
            if given in ("shared", SubscriptionType.SHARED):
                return {**data, "subscription_type": SubscriptionType.FAILOVER}
        return data

    @model_validator(mode="after")
    def _check_whole(self, info: ValidationInfo) -> FunctionConfig:
        if not self.inputs and not self.topics_pattern:
            msg = "a function needs inputs (or topics_pattern); got neither"
            raise ValueError(msg)
        if self.topics_pattern:
            check_config_pattern(self.topics_pattern, info.context)
        if not self.py and not self.classname:
            msg = "a function needs py (its file) or classname (an importable module.attr)"
            raise ValueError(msg)
        for topic in (self.output, self.log_topic, self.dead_letter_target):
            if topic is not None and topic in self.inputs:
                msg = (
                    f"topic {topic} is both an input and an output of the function; that would loop"
                )
                raise ValueError(msg)
        if self.window_config is not None:
            self.window_config.check_for(
                inputs=self.inputs,
                classname=self.classname,
                processing_guarantees=self.processing_guarantees.value,
                late_data_target=self.late_data_target,
            )
        if self.dead_letter_topic and self.max_message_retries is None and self.negative_acks:
            msg = (  # Pulsar's refusal: the message would never go there
                f"Dead Letter Topic specified, however max retries is set to infinity: "
                f"dead_letter_topic {self.dead_letter_topic} needs max_message_retries "
                "(unset, a failed message is delivered again without end)"
            )
            raise ValueError(msg)
        if self.drop_failed_messages and self.dead_letter_topic:
            msg = (
                f"drop_failed_messages contradicts dead_letter_topic {self.dead_letter_topic}; "
                "choose one"
            )
            raise ValueError(msg)
        return self

    @property
    def late_data_target(self) -> str | None:
        """Where an event-time window function's late messages go: ``lateDataTopic``;
        None without one (Pulsar drops them: logged and counted) or without event time."""
        window = self.window_config
        if window is None or not window.event_time or window.drop_late_data:
            return None
        return window.late_data_topic

    @property
    def default_late_data_topic(self) -> str:
        """``{tenant}/{namespace}/{name}-late``: late messages' topic unless one is given."""
        return f"{self.tenant}/{self.namespace}/{self.name}-late"

    @property
    def fqfn(self) -> str:
        """``tenant/namespace/name``."""
        return f"{self.tenant}/{self.namespace}/{self.name}"

    @property
    def default_dead_letter_topic(self) -> str:
        """``{tenant}/{namespace}/{name}-DLQ``, Pulsar's dead-letter topic name."""
        return f"{self.tenant}/{self.namespace}/{self.name}-DLQ"

    @property
    def retry_topic(self) -> str:
        """Pulsar's ``{subscription}-RETRY``, where a negative-acked message waits: by default
        ``{tenant}/{ns}/{name}-RETRY`` (a sink's ``sink:`` subscription spelled with ``_``)."""
        sub = self.subscription
        name = self.name if sub == self.fqfn else re.sub(r"[^A-Za-z0-9_.-]", "_", sub)
        return f"{self.tenant}/{self.namespace}/{name}-RETRY"

    @property
    def negative_acks(self) -> bool:
        """Whether failures are negative-acked (redelivered after the delay): unless retries
        are 0, under ATMOST_ONCE (its cursor moved before the call) or in a window function
        (tried in place, :attr:`attempts_in_place`)."""
        once = self.processing_guarantees is ProcessingGuarantee.AT_MOST_ONCE
        return self.max_message_retries != 0 and not once and self.window_config is None

    @property
    def attempts_in_place(self) -> int:
        """The attempts of a message retried where it is (a window, a vectorized batch,
        ATMOST_ONCE, an ack timeout): ``1 + max_message_retries``, one when unset."""
        return 1 + (self.max_message_retries or 0)

    def redelivers(self, redeliveries: int) -> bool:
        """Whether a negative-acked message delivered ``1 + redeliveries`` times is
        delivered again (unset retries: always), else dead-lettered."""
        limit = self.max_message_retries
        return limit is None or redeliveries < limit

    @property
    def dead_letter_target(self) -> str | None:
        """Where failed messages go: ``dead_letter_topic``, else the default; None only when dropping."""
        if self.drop_failed_messages:
            return None
        return self.dead_letter_topic or self.default_dead_letter_topic

    @property
    def subscription(self) -> str:
        """The subscription name: given, else Pulsar's default ``tenant/ns/name``."""
        return self.subscription_name or self.fqfn

    @property
    def session_conf(self) -> dict[str, str]:
        """The Spark settings of a session made for this function: what ``resources``
        ask for, then ``spark_conf`` (which wins)."""
        return {**self.resources.spark_conf(), **self.spark_conf}

    def input_serde_of(self, topic: str) -> str:
        """The serde of input ``topic``: its own in ``input_serdes`` (by name, else the
        first regex key that matches it), else ``input_serde``."""
        serde = self.input_serdes.get(topic)
        if serde is not None:
            return serde
        for key, named in self.input_serdes.items():
            if key not in self.inputs and re.fullmatch(key, topic):
                return named
        return self.input_serde

    @classmethod
    def build(cls, **fields: Any) -> FunctionConfig:
        """Validate ``fields``; raise :class:`ConfigError` naming every bad field.

        Pulsar's fields are read as :meth:`assemble` reads them; the warnings
        about the ones sparkfn ignores go to the ``sparkfn.config`` logger.
        """
        config, warnings = cls.assemble(fields)
        _log_warnings(warnings)
        return config

    @classmethod
    def assemble(cls, *layers: Mapping[str, Any]) -> tuple[FunctionConfig, tuple[str, ...]]:
        """The config of ``layers`` (later ones win), and a warning line per Pulsar field
        that means nothing on Spark; :class:`ConfigError` naming every bad field.

        >>> FunctionConfig.assemble({"name": "f", "py": "f.py", "inputs": ["in"]},
        ...                         {"runtime": "PYTHON"})[1]
        ('runtime: sparkfn runs Python functions, in Spark's Python workers; ignored',)
        """
        translated = function_fields(*layers, known=cls.model_fields)
        try:
            config = cls(**translated.fields)
        except ValidationError as exc:
            name = translated.fields.get("name", "?")
            raise ConfigError(describe_validation_error(exc, f"function {name}")) from None
        return config, translated.warnings

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> FunctionConfig:
        """Load a YAML file (Pulsar's camelCase keys accepted too); ``overrides`` win.

        Warnings about ignored Pulsar fields go to the ``sparkfn.config`` logger.
        """
        config, warnings = cls.assemble(read_yaml_mapping(path, "function config file"), overrides)
        _log_warnings(warnings)
        return config


def _log_warnings(warnings: tuple[str, ...]) -> None:
    for warning in warnings:
        _LOG.warning("%s", warning)
