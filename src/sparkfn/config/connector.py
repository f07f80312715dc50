"""SourceConfig and SinkConfig: a connector's definition, validated.

A connector's code is a built-in (``source_type``/``sink_type``: see
:mod:`sparkfn.connectors`) or the user's (``py`` file and/or ``classname``,
as for functions). ``configs`` is what ``open(config, context)`` receives.

>>> SourceConfig(name="lines", source_type="file", output="raw",
...              configs={"path": "/data/in", "format": "jsonl"})
>>> SinkConfig(name="archive", sink_type="file", inputs=["raw"],
...            configs={"path": "/data/out.jsonl"})
"""

from __future__ import annotations

import logging
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
from sparkfn.config.fields import check_name, input_topics, pulsar_spelling, split_commas
from sparkfn.config.function import (
    ProcessingGuarantee,
    SubscriptionPosition,
    describe_validation_error,
    read_yaml_fields,
)
from sparkfn.config.names import DEFAULT_NAMESPACE, DEFAULT_TENANT, TopicName
from sparkfn.config.policy import FailurePolicy, connector_failure_policy
from sparkfn.config.pulsar_connector_fields import read_connector_fields
from sparkfn.config.topics_pattern import check_config_pattern

_LOG = logging.getLogger(__name__)


class _ConnectorBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: str = DEFAULT_TENANT
    namespace: str = DEFAULT_NAMESPACE
    name: str
    py: str | None = None
    classname: str | None = None
    configs: dict[str, Any] = Field(default_factory=dict)
    secrets: dict[str, str] = Field(default_factory=dict)
    parallelism: int = Field(default=1, ge=1, le=256, strict=True)
    processing_guarantees: ProcessingGuarantee = ProcessingGuarantee.AT_LEAST_ONCE
    failure_policy: FailurePolicy = Field(default_factory=connector_failure_policy)

    @field_validator("tenant", "namespace", "name")
    @classmethod
    def _check_name(cls, value: str, info: Any) -> str:
        return check_name(value, info.field_name)

    @field_validator("processing_guarantees", mode="before")
    @classmethod
    def _pulsar_spelling(cls, value: Any) -> Any:
        return pulsar_spelling(value)

    @property
    def fqn(self) -> str:
        """``tenant/namespace/name``."""
        return f"{self.tenant}/{self.namespace}/{self.name}"

    @classmethod
    def build(cls, **fields: Any) -> Any:
        """Validate ``fields``; raise :class:`ConfigError` naming every bad field."""
        clean = {k: v for k, v in fields.items() if v is not None}
        try:
            return cls(**clean)
        except ValidationError as exc:
            raise ConfigError(
                describe_validation_error(exc, f"{cls._kind()} {clean.get('name', '?')}")
            ) from None

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> Any:
        """Load a YAML file as Pulsar's connector config file reads (camelCase keys,
        ``archive: builtin://<type>``, ``sourceSubscriptionPosition``, a source's
        ``topicName``); ``overrides`` win. A Pulsar field that means nothing here
        is logged as a warning (the CLI prints them)."""
        kind = cls._kind()
        given = {k: v for k, v in overrides.items() if v is not None}
        read = read_connector_fields(
            cls, kind, read_yaml_fields(path, f"{kind} config file"), given
        )
        for warning in read.warnings:
            _LOG.warning("%s config file %s: %s", kind, path, warning)
        return cls.build(**read.fields)

    @classmethod
    def _kind(cls) -> str:
        return "source" if cls is SourceConfig else "sink"


class SourceConfig(_ConnectorBase):
    """A source: runs outside Spark and appends to ``output``."""

    source_type: str | None = None
    output: str
    # Records appended per transaction (at most), and how long a push
    # source's records may wait before they are appended.
    batch_size: int = Field(default=1000, ge=1)
    batch_timeout: float = 0.1
    # How long read() may return None before it is asked again.
    poll_interval: float = 0.05

    @field_validator("output")
    @classmethod
    def _topic(cls, value: str) -> str:
        try:
            return str(TopicName.parse(value, field="output"))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("batch_timeout", "poll_interval", mode="before")
    @classmethod
    def _duration(cls, value: Any, info: Any) -> float:
        return parse_duration_seconds(value, info.field_name)

    @model_validator(mode="after")
    def _code(self) -> SourceConfig:
        if not (self.source_type or self.py or self.classname):
            msg = "a source needs source_type (a built-in), py or classname; got none"
            raise ValueError(msg)
        return self


class SinkConfig(_ConnectorBase):
    """A sink: runs on Spark executors over ``inputs``."""

    sink_type: str | None = None
    inputs: list[str] = Field(default_factory=list)
    # Pulsar's topicsPattern: every topic whose name matches, now and later.
    topics_pattern: str | None = None
    # Pulsar's sourceSubscriptionName; default sink:<tenant/namespace/name>, so
    # a sink never shares its position with a function of the same name.
    subscription_name: str | None = None
    # Where a new subscription starts: the latest message, as Pulsar's sinks do.
    subscription_position: SubscriptionPosition = SubscriptionPosition.LATEST
    max_records_per_batch: int | None = Field(default=None, ge=1)
    trigger_interval: float = 0.0
    # A message whose write() fails is delivered again this often (Pulsar's maxMessageRetries,
    # --max-redeliver-count), then sent to dead_letter_topic (default {name}-DLQ); unset, as
    # Pulsar's: again without end (FunctionConfig.max_message_retries).
    max_message_retries: int | None = Field(default=None, ge=0, le=100, strict=True)
    dead_letter_topic: str | None = None
    # Pulsar's negativeAckRedeliveryDelayMs: how long a message whose write() failed
    # waits before it is delivered again.
    negative_ack_redelivery_delay_ms: int = Field(
        default=60_000, ge=0, le=7 * 24 * 3600 * 1000, strict=True
    )

    @field_validator("inputs", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return split_commas(value)

    @field_validator("inputs")
    @classmethod
    def _topics(cls, value: list[str]) -> list[str]:
        return input_topics(value) if value else value

    @field_validator("trigger_interval", mode="before")
    @classmethod
    def _duration(cls, value: Any, info: Any) -> float:
        return parse_duration_seconds(value, info.field_name)

    @field_validator("dead_letter_topic")
    @classmethod
    def _dead_letter_topic(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            return str(TopicName.parse(value, field="dead_letter_topic"))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @property
    def subscription(self) -> str:
        """The subscription the sink reads with: given, else ``sink:<tenant/namespace/name>``."""
        return self.subscription_name or f"sink:{self.tenant}/{self.namespace}/{self.name}"

    @model_validator(mode="after")
    def _code(self, info: ValidationInfo) -> SinkConfig:
        if not (self.sink_type or self.py or self.classname):
            msg = "a sink needs sink_type (a built-in), py or classname; got none"
            raise ValueError(msg)
        if not self.inputs and not self.topics_pattern:
            msg = "a sink needs at least one input topic (inputs or topics_pattern)"
            raise ValueError(msg)
        if self.topics_pattern:
            check_config_pattern(self.topics_pattern, info.context)
        return self
