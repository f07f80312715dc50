"""Pulsar's function config read by sparkfn: every field mapped or warned about, no Spark.

PULSAR_FIELDS is Pulsar's ``FunctionConfig`` (pulsar-client-admin-api,
``org.apache.pulsar.common.functions``), field by field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sparkfn.api.errors import ConfigError
from sparkfn.config.function import FunctionConfig, SubscriptionType
from sparkfn.config.pulsar import function_fields
from sparkfn.config.pulsar_fields import IGNORED, RENAMED, TRANSLATED

PULSAR_FIELDS = """
runtimeFlags: --verbose
tenant: acme
namespace: sales
name: enrich
className: enrich.Enrich
functionType: exclamation
inputs: [orders]
customSerdeInputs: {refunds: serde.PickleSerDe}
topicsPattern: persistent://acme/sales/audit-.*
customSchemaInputs: {returns: STRING}
customSchemaOutputs: {out: '{"jsr310ConversionEnabled": true}'}
inputSpecs:
  persistent://acme/sales/legacy:
    serdeClassName: serde.IdentitySerDe
    receiverQueueSize: 100
    consumerProperties: {a: b}
    poolMessages: false
  persistent://acme/sales/replay-.*:
    schemaType: JSON
    regexPattern: true
inputTypeClassName: java.lang.String
output: persistent://acme/sales/enriched
producerConfig: {compressionType: ZSTD, useThreadLocalProducers: true}
outputSchemaType: ""
outputSerdeClassName: serde.IdentitySerDe
outputTypeClassName: java.lang.String
logTopic: acme/sales/log
processingGuarantees: EFFECTIVELY_ONCE
retainOrdering: false
retainKeyOrdering: true
batchBuilder: KEY_BASED
forwardSourceMessageProperty: false
userConfig: {greeting: hi}
secrets: {password: hunter2}
runtime: PYTHON
autoAck: true
maxMessageRetries: 3
deadLetterTopic: acme/sales/dead
subName: enricher
parallelism: 2
resources: {cpu: 2.5, ram: 1073741824, disk: 10737418240}
fqfn: acme/sales/enrich
windowConfig: {windowLengthCount: 10, slidingIntervalCount: 5}
timeoutMs: 30000
jar: enrich.jar
py: enrich.py
go: enrich
cleanupSubscription: false
customRuntimeOptions: '{"nodeSelectorLabels": {}}'
maxPendingAsyncRequests: 1000
exposePulsarAdminClientEnabled: false
subscriptionPosition: Earliest
skipToLatest: true
"""

# What each field becomes, or the warning that names it.
WARNED = {
    "runtimeFlags",
    "functionType",
    "customSchemaOutputs",
    "inputSpecs.persistent://acme/sales/legacy.receiverQueueSize",
    "inputSpecs.persistent://acme/sales/legacy.consumerProperties",
    "inputTypeClassName",
    "outputTypeClassName",
    "batchBuilder",
    "runtime",
    "resources.disk",
    "jar",
    "go",
    "customRuntimeOptions",
    "maxPendingAsyncRequests",
    "exposePulsarAdminClientEnabled",
    "skipToLatest",
}


def _fields() -> dict[str, Any]:
    fields: dict[str, Any] = yaml.safe_load(PULSAR_FIELDS)
    return fields


def test_the_table_covers_every_field_of_pulsars_function_config() -> None:
    ours = {*RENAMED, *TRANSLATED, *IGNORED} - {
        "secretsProviderClassName",  # sparkfn's, Pulsar's localrun flag
        "secretsProviderConfig",
        "negativeAckRedeliveryDelayMs",  # Pulsar's sinks' key; its functions have the default
    }
    assert ours == set(_fields())


def test_a_pulsar_yaml_with_every_field_is_mapped_or_warned_about(tmp_path: Path) -> None:
    path = tmp_path / "enrich.yaml"
    path.write_text(PULSAR_FIELDS)
    config, warnings = FunctionConfig.assemble(yaml.safe_load(path.read_text()))

    assert config.fqfn == "acme/sales/enrich"
    assert (config.py, config.classname) == ("enrich.py", "enrich.Enrich")
    # Every input Pulsar names: inputs, and the keys of the per-input maps.
    assert config.inputs == [
        "public/default/orders",  # a bare name is of public/default, as in Pulsar
        "public/default/refunds",
        "public/default/returns",
        "acme/sales/legacy",
    ]
    assert config.topics_pattern == "acme/sales/audit-.*|acme/sales/replay-.*"
    assert config.input_serdes == {
        "public/default/refunds": "serde.PickleSerDe",
        "public/default/returns": "string",
        "acme/sales/legacy": "serde.IdentitySerDe",
        "acme/sales/replay-.*": "json",
    }
    assert config.input_serde_of("acme/sales/replay-7") == "json"
    assert config.input_serde_of("acme/sales/audit-1") == "auto"
    assert (config.output, config.output_serde) == ("acme/sales/enriched", "serde.IdentitySerDe")
    assert (config.log_topic, config.dead_letter_topic) == ("acme/sales/log", "acme/sales/dead")
    assert config.processing_guarantees.value == "effectively_once"
    assert config.subscription_type is SubscriptionType.KEY_SHARED  # retainKeyOrdering
    assert config.forward_source_message_property is False
    assert (config.user_config, config.secrets) == ({"greeting": "hi"}, {"password": "hunter2"})
    assert config.max_message_retries == 3
    assert (config.subscription_name, config.subscription_position.value) == (
        "enricher",
        "earliest",
    )
    assert config.parallelism == 2
    # resources: 2.5 cores is 3 Spark task cores; ram is the Python workers' memory.
    assert config.session_conf == {
        "spark.task.cpus": "3",
        "spark.executor.pyspark.memory": "1024m",
    }
    assert config.cleanup_subscription is False
    window = config.window_config
    assert window is not None
    assert (window.window_length_count, window.sliding_interval_count) == (10, 5)
    assert config.timeout_ms == 30000
    assert config.producer_config is not None
    assert config.producer_config.compression == "zstd"

    named = {warning.split(": ", 1)[0] for warning in warnings}
    assert named == WARNED
    assert len(warnings) == len(WARNED)  # one line each
    assert all(w.endswith("; ignored") and "\n" not in w for w in warnings)


def test_an_unknown_field_is_an_error_naming_it_as_written() -> None:
    with pytest.raises(ConfigError, match=r"function f: invalid config: autoAckk: Extra inputs"):
        FunctionConfig.assemble({"name": "f", "py": "f.py", "inputs": ["in"], "autoAckk": True})
    with pytest.raises(ConfigError, match=r"producerConfig.maxPending: not a field of Pulsar"):
        function_fields({"name": "f", "producerConfig": {"maxPending": 1}})
    with pytest.raises(ConfigError, match=r"inputSpecs.in.serde: not a field of Pulsar's Consumer"):
        function_fields({"name": "f", "inputSpecs": {"in": {"serde": "x.Y"}}})


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"runtime": "JAVA"}, "runtime: sparkfn runs Python functions only (got 'JAVA')"),
        ({"fqfn": "a/b"}, "fqfn: 'a/b' must be tenant/namespace/name"),
        ({"fqfn": "public/default/g"}, "fqfn: 'public/default/g' says name 'g', the config 'f'"),
        (
            {"outputSchemaType": "STRING", "outputSerdeClassName": "serde.PickleSerDe"},
            "outputSchemaType: 'STRING' and outputSerdeClassName 'serde.PickleSerDe': only one",
        ),
        ({"outputSchemaType": "PROTOBUF"}, "outputSchemaType: schema type 'PROTOBUF' is none of"),
        (
            {"customSerdeInputs": {"in": "a.B"}, "customSchemaInputs": {"in": "JSON"}},
            "customSchemaInputs: input in has serde 'a.B' (customSerdeInputs) and 'json'",
        ),
        ({"resources": {"cpu": "lots"}}, "resources.cpu: Input should be a valid number"),
        ({"resources": {"ram": 0}}, "resources.ram: Input should be greater than 0 (got 0)"),
        ({"resources": {"gpu": 1}}, "resources.gpu: not a field of Pulsar's resources"),
        ({"className": "a.B", "classname": "a.C"}, "className and classname are one field"),
        ({"windowConfig": {"windowLength": 3}}, "windowConfig.windowLength: not a field of"),
        ({"windowConfig": {}}, "needs windowLengthCount or windowLengthDurationMs; got neither"),
        (
            {"windowConfig": {"windowLengthCount": 3, "windowLengthDurationMs": 10}},
            "windowLengthCount and windowLengthDurationMs are both set; set one",
        ),
        (
            {"windowConfig": {"windowLengthCount": 3, "slidingIntervalCount": 4}},
            "slidingIntervalCount 4 is more than windowLengthCount 3",
        ),
        (
            {"windowConfig": {"windowLengthDurationMs": 10, "lateDataTopic": "late"}},
            "lateDataTopic applies to event time, which needs timestampExtractorClassName",
        ),
        (
            {"windowConfig": {"windowLengthCount": 0}},
            "window_config.windowLengthCount: Input should be greater than or equal to 1",
        ),
        (
            {
                "windowConfig": {
                    "windowLengthDurationMs": 10,
                    "timestampExtractorClassName": "a.B",
                    "lateDataTopic": "late",
                    "dropLateData": True,
                }
            },
            "dropLateData contradicts lateDataTopic public/default/late; choose one",
        ),
        ({"timeoutMs": 0}, "timeout_ms: Input should be greater than or equal to 1"),
        ({"producerConfig": {"compressionType": "SNAPPY"}}, "compresses with LZ4 or ZSTD only"),
        ({"producerConfig": {"maxPendingMessages": 10}}, "maxPendingMessages 10: sparkfn has no"),
        ({"producerConfig": {"cryptoConfig": {"a": 1}}}, "cryptoConfig: sparkfn topics are not"),
        ({"producerConfig": {"batchBuilder": "KEY_BASED"}}, "batchBuilder 'KEY_BASED': sparkfn"),
        (
            {"producerConfig": {"batchingConfig": {"batchingMaxMessages": 10}}},
            "batchingConfig.batchingMaxMessages: sparkfn's output batches are its micro-batches",
        ),
    ],
)
def test_what_pulsar_refuses_is_an_error_naming_the_field(
    fields: dict[str, Any], problem: str
) -> None:
    base = {"name": "f", "py": "f.py", "inputs": ["in"]}
    with pytest.raises(ConfigError) as caught:
        FunctionConfig.assemble({**base, **fields})
    assert str(caught.value).startswith("function f: invalid config: "), caught.value
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    ("schema", "serde"),
    [("STRING", "string"), ("json", "json"), ("BYTES", "bytes"), ("AVRO", "auto"),
     ("AUTO_CONSUME", "auto"), ("records.Order", "records.Order"), ("", "auto")],
)  # fmt: skip
def test_a_schema_type_is_the_serde_of_that_name(schema: str, serde: str) -> None:
    config = FunctionConfig.build(
        name="f", py="f.py", inputs=["in"], output="out", outputSchemaType=schema
    )
    assert config.output_serde == serde
    config = FunctionConfig.build(name="f", py="f.py", customSchemaInputs={"in": schema})
    assert config.input_serde_of("public/default/in") == serde
    # Pulsar's newer form: the map's value is a ConsumerConfig's schema part, as JSON.
    config = FunctionConfig.build(
        name="f", py="f.py", customSchemaInputs={"in": f'{{"schemaType": "{schema}"}}'}
    )
    assert config.input_serde_of("public/default/in") == serde


def test_later_layers_win_and_resources_merge_key_by_key() -> None:
    file = {"name": "f", "py": "f.py", "inputs": ["in"], "subName": "from-file",
            "resources": {"cpu": 2, "ram": 2 * 2**30}}  # fmt: skip
    flags = {"subscription_name": "from-flag", "resources": {"cpu": 4}}
    config, _ = FunctionConfig.assemble(file, flags)
    assert config.subscription_name == "from-flag"
    assert config.session_conf == {
        "spark.task.cpus": "4",
        "spark.executor.pyspark.memory": "2048m",
    }
    # spark_conf's own setting wins over what resources give.
    config, _ = FunctionConfig.assemble(file, {"spark_conf": {"spark.task.cpus": "1"}})
    assert config.session_conf["spark.task.cpus"] == "1"


def test_one_core_or_less_is_sparks_default_and_sets_nothing() -> None:
    config = FunctionConfig.build(name="f", py="f.py", inputs=["in"], resources={"cpu": 0.5})
    assert config.session_conf == {}
    assert config.resources.cpu == 0.5


def test_retain_ordering_wins_over_retain_key_ordering_as_in_pulsar() -> None:
    both = FunctionConfig.build(
        name="f", py="f.py", inputs=["in"], retainOrdering=True, retainKeyOrdering=True
    )
    assert both.subscription_type is SubscriptionType.FAILOVER
    explicit = FunctionConfig.build(
        name="f", py="f.py", inputs=["in"], retainKeyOrdering=True, subscription_type="failover"
    )
    assert explicit.subscription_type is SubscriptionType.FAILOVER


def test_pulsars_unset_retries_and_empty_values_ask_for_nothing() -> None:
    config, warnings = FunctionConfig.assemble(
        {"name": "f", "py": "f.py", "inputs": ["in"], "maxMessageRetries": -1,
         "jar": None, "customRuntimeOptions": "", "producerConfig": {}, "outputSchemaType": ""}
    )  # fmt: skip
    assert config.max_message_retries is None
    assert warnings == ()


def test_a_built_config_reads_back_as_itself() -> None:
    config, _ = FunctionConfig.assemble(_fields())
    again, warnings = FunctionConfig.assemble(config.model_dump(mode="json"))
    assert again == config
    assert warnings == ()


def test_build_and_from_yaml_log_the_warnings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "f.yaml"
    path.write_text("name: f\npy: f.py\ninputs: [in]\nskipToLatest: true\n")
    with caplog.at_level("WARNING", logger="sparkfn.config"):
        FunctionConfig.from_yaml(path, runtime="PYTHON")
    assert sorted(r.getMessage().split(":")[0] for r in caplog.records) == [
        "runtime",
        "skipToLatest",
    ]


def test_sparkfns_own_fields_read_in_camel_case_too_and_unknown_ones_as_written() -> None:
    config = FunctionConfig.build(
        name="f", py="f.py", inputs=["in"], autoCreateTopics=True, failurePolicy={"max_restarts": 1}
    )
    assert (config.auto_create_topics, config.failure_policy.max_restarts) == (True, 1)
    with pytest.raises(ConfigError, match=r"invalid config: autoCreateTopic: Extra inputs"):
        FunctionConfig.build(name="f", py="f.py", inputs=["in"], autoCreateTopic=True)


def test_patterns_of_two_namespaces_are_refused_rather_than_one_of_them_read() -> None:
    """Joined into one topics_pattern, only the first's namespace would be listed."""
    layer = {
        "name": "f",
        "py": "f.py",
        "topicsPattern": "persistent://acme/sales/audit-.*",
        "inputSpecs": {"persistent://acme/ops/replay-.*": {"regexPattern": True}},
    }
    with pytest.raises(ConfigError, match="name namespaces \\['acme/ops', 'acme/sales'\\]"):
        FunctionConfig.assemble(layer)
