"""``functions get`` speaks Pulsar's FunctionConfig JSON (issue 29, point 4).

Every key of the view is a field of Pulsar's ``FunctionConfig`` (its
``inputSpecs`` values fields of Pulsar's ``ConsumerConfig``, its enums in
Pulsar's spellings), a field of sparkfn's own in camelCase, or one the
registry adds; read back, the view is the same config.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic.alias_generators import to_camel

from sparkfn.config.function import FunctionConfig
from sparkfn.config.pulsar_view import METADATA_KEYS, config_fields, pulsar_view

# The fields of Pulsar's org.apache.pulsar.common.functions.FunctionConfig.
PULSAR_FUNCTION_CONFIG = {
    "runtimeFlags", "tenant", "namespace", "name", "className", "inputs", "customSerdeInputs",
    "topicsPattern", "customSchemaInputs", "customSchemaOutputs", "inputSpecs",
    "inputTypeClassName", "output", "producerConfig", "outputSchemaType", "outputTypeClassName",
    "outputSerdeClassName", "logTopic", "logLevel", "processingGuarantees", "retainOrdering",
    "retainKeyOrdering", "batchBuilder", "forwardSourceMessageProperty", "userConfig", "secrets",
    "runtime", "autoAck", "maxMessageRetries", "deadLetterTopic", "subName", "parallelism",
    "resources", "fqfn", "windowConfig", "timeoutMs", "jar", "py", "go", "functionType",
    "cleanupSubscription", "customRuntimeOptions", "maxPendingAsyncRequests",
    "exposePulsarAdminClientEnabled", "skipToLatest", "subscriptionPosition",
    # Pulsar's localrun flags, which sparkfn keeps as fields.
    "secretsProviderClassName", "secretsProviderConfig",
}  # fmt: skip
CONSUMER_CONFIG = {
    "schemaType", "serdeClassName", "regexPattern", "schemaProperties", "consumerProperties",
    "receiverQueueSize", "cryptoConfig", "poolMessages",
}  # fmt: skip
SPARKFN_OWN = {to_camel(f) for f in FunctionConfig.model_fields}

CONFIGS = {
    "minimal": {"name": "f", "py": "f.py", "inputs": ["in"]},
    "everything": {
        "name": "g", "py": "g.py", "classname": "g.G", "inputs": ["in", "acme/x/y"],
        "topics_pattern": "audit-.*", "output": "out", "log_topic": "log",
        "dead_letter_topic": "dlq", "processing_guarantees": "effectively_once",
        "subscription_type": "key_shared", "subscription_position": "earliest",
        "subscription_name": "s", "parallelism": 3, "user_config": {"a": 1},
        "secrets": {"p": "env:X"}, "auto_ack": False, "max_message_retries": 2,
        "input_serdes": {"in": "string", "acme/x/y": "m.Serde", "audit-.*": "json",
                         "other-.*": "bytes"},
        "output_serde": "json", "resources": {"cpu": 2.0, "ram": 1024},
        "auto_create_topics": False, "pulsar_compat": True, "trigger_interval": 1.5,
        "max_records_per_batch": 10, "spark_conf": {"a": "b"},
        "failure_policy": {"max_restarts": 2}, "input_serde": "string",
        "forward_source_message_property": False, "cleanup_subscription": False,
        "secrets_provider_classname": "ClearTextSecretsProvider",
    },
    "failover-named-serde": {
        "name": "h", "py": "h.py", "inputs": ["in"], "retain_ordering": True,
        "output_serde": "m.S",
    },
    "dropping": {"name": "d", "py": "d.py", "inputs": ["in"], "drop_failed_messages": True},
    "producing": {"name": "p", "py": "p.py", "inputs": ["in"], "output": "out",
                  "producer_config": {"compressionType": "zstd"}},
    "windowed": {
        "name": "w", "py": "w.py", "inputs": ["in"], "timeout_ms": 100,
        "window_config": {"windowLengthDurationMs": 1000, "lateDataTopic": "late", "maxLagMs": 50,
                          "timestampExtractorClassName": "m.E"},
    },
}  # fmt: skip


@pytest.mark.parametrize("fields", CONFIGS.values(), ids=CONFIGS.keys())
def test_the_view_has_pulsars_names_and_reads_back_as_the_same_config(
    fields: dict[str, Any],
) -> None:
    config = FunctionConfig.build(**fields)
    view = json.loads(json.dumps(pulsar_view(config)))
    unknown = set(view) - PULSAR_FUNCTION_CONFIG - SPARKFN_OWN
    assert unknown == set()
    for spec in view["inputSpecs"].values():
        assert set(spec) <= CONSUMER_CONFIG
    assert view["processingGuarantees"] in ("ATLEAST_ONCE", "ATMOST_ONCE", "EFFECTIVELY_ONCE")
    assert view["subscriptionPosition"] in ("Latest", "Earliest")
    assert view["runtime"] == "PYTHON"
    assert all(t.startswith("persistent://") for t in view["inputs"])
    back, warnings = FunctionConfig.assemble(config_fields(view))
    assert (back, warnings) == (config, ())


def test_the_view_of_the_everything_config() -> None:
    view = pulsar_view(FunctionConfig.build(**CONFIGS["everything"]))
    assert view["inputSpecs"] == {
        "persistent://public/default/in": {"regexPattern": False, "schemaType": "STRING"},
        "persistent://acme/x/y": {"regexPattern": False, "serdeClassName": "m.Serde"},
        "audit-.*": {"regexPattern": True, "schemaType": "JSON"},
    }
    assert view["inputSerdes"] == {"other-.*": "bytes"}  # sparkfn's: no Pulsar input
    assert (view["className"], view["outputSchemaType"], view["retainKeyOrdering"]) == (
        "g.G",
        "JSON",
        True,
    )
    assert (view["processingGuarantees"], view["subscriptionPosition"]) == (
        "EFFECTIVELY_ONCE",
        "Earliest",
    )
    # Pulsar's default for what is unset, as pulsar-admin's get shows it.
    assert view["resources"] == {"cpu": 2.0, "ram": 1024, "disk": 10 << 30}
    assert (view["autoAck"], view["autoCreateTopics"], view["subscriptionType"]) == (
        False,
        False,
        "key_shared",
    )
    assert set(METADATA_KEYS) & set(view) == {"runtime"}


def test_a_window_config_is_pulsars_window_config() -> None:
    view = pulsar_view(FunctionConfig.build(**CONFIGS["windowed"]))
    assert view["timeoutMs"] == 100
    assert view["windowConfig"] == {
        "windowLengthDurationMs": 1000,
        "lateDataTopic": "public/default/late",
        "maxLagMs": 50,
        "timestampExtractorClassName": "m.E",
        "dropLateData": False,
    }


def test_producer_config_and_resources_as_pulsar_admin_shows_them() -> None:
    view = pulsar_view(FunctionConfig.build(**CONFIGS["producing"]))
    assert view["producerConfig"] == {"compressionType": "ZSTD"}
    assert view["resources"] == {"cpu": 1.0, "ram": 1 << 30, "disk": 10 << 30}
