"""A sink as a function config: what :class:`~sparkfn.connectors.sink_runtime.SinkFunction` runs.

:func:`sink_function_config` turns a :class:`SinkConfig` into the
:class:`FunctionConfig` of its Spark query: the fields a sink shares with a
function, no output, the adapter :data:`ADAPTER_CLASSNAME` for code, and the
whole sink config as JSON in ``user_config[SINK_CONFIG_KEY]``
(``SinkConfig.model_dump(mode="json")``; a ``py`` path made absolute), where
:func:`sink_config_of` finds it again.

>>> config = sink_function_config(SinkConfig.build(name="archive", sink_type="file",
...     inputs=["raw"], configs={"path": "/data/out-{instance}.jsonl"}))
>>> config.classname
'sparkfn.connectors.sink_runtime.SinkFunction'
>>> sink_config_of(config).sink_type
'file'
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sparkfn.api.errors import ConfigError
from sparkfn.config.connector import SinkConfig
from sparkfn.config.function import FunctionConfig

SINK_CONFIG_KEY = "__sparkfn_sink__"
"""The ``user_config`` key of a sink's function config that holds the sink's config."""

ADAPTER_CLASSNAME = "sparkfn.connectors.sink_runtime.SinkFunction"
"""The ``classname`` of every sink's function config (stored with it: it must not move)."""

# The fields of a SinkConfig that its function config takes as they are.
_SHARED_FIELDS = (
    "tenant",
    "namespace",
    "name",
    "parallelism",
    "processing_guarantees",
    "failure_policy",
    "subscription_position",
    "max_records_per_batch",
    "trigger_interval",
    "max_message_retries",
    "dead_letter_topic",
    "negative_ack_redelivery_delay_ms",
)


def sink_function_config(sink: SinkConfig) -> FunctionConfig:
    """The function config that runs ``sink`` on Spark.

    It has the sink's name, inputs, subscription (``sink:<fqfn>`` unless
    named), parallelism, guarantees, failure policy, subscription position,
    batch cap, trigger interval, retries and dead-letter topic of a message
    whose write fails, and secrets, no
    output, and the adapter for code; the sink's config rides in
    ``user_config[SINK_CONFIG_KEY]``.
    """
    if sink.py:
        # Absolute, so that Spark's Python workers find it whatever their directory.
        sink = sink.model_copy(update={"py": str(Path(sink.py).expanduser().resolve())})
    return FunctionConfig.build(
        **{field: getattr(sink, field) for field in _SHARED_FIELDS},
        classname=ADAPTER_CLASSNAME,
        inputs=list(sink.inputs),
        topics_pattern=sink.topics_pattern,
        subscription_name=sink.subscription,
        output=None,
        secrets=dict(sink.secrets),
        user_config={SINK_CONFIG_KEY: sink.model_dump(mode="json")},
    )


def sink_config_of(config: FunctionConfig) -> SinkConfig:
    """The sink config a function config made by :func:`sink_function_config` carries."""
    return embedded_sink(config.user_config.get(SINK_CONFIG_KEY), config.fqfn)


def embedded_sink(embedded: Any, fqfn: str) -> SinkConfig:
    """The sink config from ``user_config[SINK_CONFIG_KEY]``; a :class:`ConfigError` if none."""
    if not isinstance(embedded, Mapping):
        msg = (
            f"function {fqfn}: {ADAPTER_CLASSNAME} runs sinks only; its user_config has no "
            f"{SINK_CONFIG_KEY!r} (make the config with sink_function_config)"
        )
        raise ConfigError(msg)
    built: SinkConfig = SinkConfig.build(**dict(embedded))
    return built
