"""``pulsar-admin functions localrun|create|update`` flags on ``sparkfn functions localrun``.

Every flag of Pulsar's ``CmdFunctions`` for those commands is accepted with
Pulsar's meaning: mapped to the config (asserted) or warned about (the
warning names it). No Spark: the config is what is checked; the child
process test stops at the missing topic, before Spark starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from cli_runner import Cli
from typer.testing import CliRunner

from sparkfn.cli.configs import function_config, function_config_json
from sparkfn.cli.flags import takes
from sparkfn.cli.localrun import FUNCTION_LOCALRUN
from sparkfn.cli.pulsar_flags import UPDATE_AUTH_DATA, localrun_warnings
from sparkfn.config.function import FunctionConfig, SubscriptionType

REPO = Path(__file__).resolve().parents[2]
EXCLAMATION = str(REPO / "examples" / "exclamation.py")

# Pulsar's FunctionDetailsCommand flags (localrun, create, update), with a value each.
CONFIG_FLAGS: list[tuple[str, str | None]] = [
    ("--fqfn", "acme/sales/enrich"),
    ("--classname", "exclamation.process"),
    ("--py", EXCLAMATION),
    ("-i", "in1,in2"),
    ("--custom-serde-inputs", '{"in3": "serde.PickleSerDe"}'),
    ("--custom-schema-inputs", '{"in4": "STRING"}'),
    ("--input-specs", '{"in5": {"schemaType": "JSON", "receiverQueueSize": 10}}'),
    ("--topics-pattern", "persistent://acme/sales/audit-.*"),
    ("-o", "out"),
    ("--output-serde-classname", "serde.IdentitySerDe"),
    ("--log-topic", "log"),
    ("--dead-letter-topic", "dlq"),
    ("--max-message-retries", "2"),
    ("--processing-guarantees", "EFFECTIVELY_ONCE"),
    ("--subs-name", "sub"),
    ("--subs-position", "Earliest"),
    ("--retain-key-ordering", None),
    ("--forward-source-message-property", "false"),
    ("--no-cleanup-subscription", None),
    ("--parallelism", "2"),
    ("--cpu", "2"),
    ("--ram", "2147483648"),
    ("--disk", "10737418240"),
    ("--user-config", '{"greeting": "hi"}'),
    ("--secrets", '{"password": "hunter2"}'),
    ("--secrets-provider-classname", "ClearTextSecretsProvider"),
    ("--secrets-provider-config", '{"vault": "local"}'),
    ("--timeout-ms", "30000"),
    ("--auto-ack", "true"),
    ("--batch-builder", "KEY_BASED"),
    ("--producer-config", '{"compressionType": "LZ4"}'),
    ("--custom-schema-outputs", '{"out": "{}"}'),
    ("--input-type-class-name", "java.lang.String"),
    ("--output-type-class-name", "java.lang.String"),
    ("-t", "exclamation"),
    ("--jar", "enrich.jar"),
    ("--go", "enrich"),
    ("--skip-to-latest", "true"),
    ("--custom-runtime-options", '{"nodeSelectorLabels": {"a": "b"}}'),
    ("--runtime-flags", "verbose"),
    ("--window-length-duration-ms", "1000"),
    ("--sliding-interval-duration-ms", "500"),
    ("--timestamp-extractor-classname", "exclamation.Stamp"),
    ("--max-lateness-ms", "100"),
    ("--watermark-emit-interval-ms", "50"),
    ("--late-data-topic", "late"),
]
# Pulsar's LocalRunner's own flags.
LOCALRUN_FLAGS: list[tuple[str, str | None]] = [
    ("--state-storage-service-url", "bk://localhost:4181"),
    ("--broker-service-url", "pulsar://localhost:6650"),
    ("--web-service-url", "http://localhost:8080"),
    ("--client-auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken"),
    ("--client-auth-params", "token:abc"),
    ("--use-tls", None),
    ("--tls-allow-insecure", None),
    ("--hostname-verification-enabled", None),
    ("--tls-trust-cert-path", "/etc/ca.pem"),
    ("--instance-id-offset", "1"),
    ("--runtime", "THREAD"),
    ("--metrics-port-start", "9100"),
]
WARNED = {
    "inputSpecs.in5.receiverQueueSize",
    "resources.disk",
    "batchBuilder",
    "customSchemaOutputs",
    "inputTypeClassName",
    "outputTypeClassName",
    "functionType",
    "jar",
    "go",
    "skipToLatest",
    "customRuntimeOptions",
    "runtimeFlags",
}
LOCALRUN_WARNED = {
    "--state-storage-service-url",
    "--broker-service-url",
    "--web-service-url",
    "--client-auth-plugin",
    "--client-auth-params",
    "--use-tls",
    "--tls-allow-insecure",
    "--hostname-verification-enabled",
    "--tls-trust-cert-path",
    "--instance-id-offset",
    "--runtime",
}


def _args(flags: list[tuple[str, str | None]]) -> list[str]:
    return [part for flag, value in flags for part in (flag, value) if part is not None]


def _given(args: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config fields and own options ``functions localrun`` gets for ``args``."""
    seen: list[tuple[dict[str, Any], dict[str, Any]]] = []
    app = typer.Typer()

    @app.command("localrun")
    @takes("function", FUNCTION_LOCALRUN)
    def localrun(ctx: typer.Context, fields: dict[str, Any], **own: Any) -> None:
        seen.append((fields, own))

    @app.command("other")
    def other() -> None:  # two commands, so "localrun" is a subcommand as in sparkfn
        pass

    result = CliRunner().invoke(app, ["localrun", *args])
    assert result.exit_code == 0, result.output
    return seen[0]


def test_every_pulsar_flag_has_pulsars_meaning() -> None:
    fields, own = _given(_args(CONFIG_FLAGS + LOCALRUN_FLAGS))
    config, warnings = function_config(fields, None)

    assert config.fqfn == "acme/sales/enrich"
    assert (config.py, config.classname) == (EXCLAMATION, "exclamation.process")
    assert config.inputs == [f"public/default/in{i}" for i in range(1, 6)]
    assert config.topics_pattern == "acme/sales/audit-.*"
    assert config.input_serdes == {
        "public/default/in3": "serde.PickleSerDe",
        "public/default/in4": "string",
        "public/default/in5": "json",
    }
    assert (config.output, config.output_serde) == ("public/default/out", "serde.IdentitySerDe")
    assert (config.log_topic, config.dead_letter_topic) == (
        "public/default/log",
        "public/default/dlq",
    )
    assert config.max_message_retries == 2
    assert config.processing_guarantees.value == "effectively_once"
    assert (config.subscription_name, config.subscription_position.value) == ("sub", "earliest")
    assert config.subscription_type is SubscriptionType.KEY_SHARED
    assert config.forward_source_message_property is False
    assert config.cleanup_subscription is False
    assert config.parallelism == 2
    assert config.session_conf == {
        "spark.task.cpus": "2",
        "spark.executor.pyspark.memory": "2048m",
    }
    assert (config.user_config, config.secrets) == ({"greeting": "hi"}, {"password": "hunter2"})
    assert config.secrets_provider_classname == "ClearTextSecretsProvider"
    assert config.secrets_provider_config == {"vault": "local"}
    assert config.timeout_ms == 30000
    assert config.producer_config is not None
    assert config.producer_config.compression == "lz4"
    window = config.window_config
    assert window is not None
    assert (window.window_length_duration_ms, window.sliding_interval_duration_ms) == (1000, 500)
    assert (window.timestamp_extractor_class_name, window.max_lag_ms) == ("exclamation.Stamp", 100)
    assert (window.watermark_emit_interval_ms, window.late_data_topic) == (
        50,
        "public/default/late",
    )

    assert {w.split(": ", 1)[0] for w in warnings} == WARNED
    assert len(warnings) == len(WARNED)
    local = localrun_warnings(own)
    assert {w.split(": ", 1)[0] for w in local} == LOCALRUN_WARNED
    assert own["metrics_port_start"] == "9100"  # the --metrics-port when none is given


def test_the_schema_type_is_the_outputs_serde() -> None:
    fields, _ = _given(["--py", EXCLAMATION, "-i", "in", "-o", "out", "-st", "STRING"])
    assert function_config(fields, None)[0].output_serde == "string"


def test_pulsars_deprecated_spellings_are_accepted_and_hidden(tmp_path: Path) -> None:
    config_file = tmp_path / "f.yaml"
    config_file.write_text("inputs: [in]\n")
    deprecated = [
        ("--className", "exclamation.process"),
        ("--topicsPattern", "audit-.*"),
        ("--logTopic", "log"),
        ("--customSerdeInputs", '{"in2": "serde.PickleSerDe"}'),
        ("--outputSerdeClassName", "serde.IdentitySerDe"),
        ("--processingGuarantees", "ATMOST_ONCE"),
        ("--userConfig", '{"a": "b"}'),
        ("--retainOrdering", None),
        ("--windowLengthCount", "10"),
        ("--slidingIntervalCount", "5"),
        ("--autoAck", None),
        ("--timeoutMs", "100"),
        ("--functionConfigFile", str(config_file)),
        ("--stateStorageServiceUrl", "bk://x"),
        ("--brokerServiceUrl", "pulsar://x"),
        ("--clientAuthPlugin", "a.B"),
        ("--clientAuthParams", "p"),
        ("--use_tls", None),
        ("--tls_allow_insecure", None),
        ("--hostname_verification_enabled", None),
        ("--tls_trust_cert_path", "/x"),
        ("--instanceIdOffset", "2"),
    ]
    fields, own = _given(["--py", EXCLAMATION, "-o", "out", *_args(deprecated)])
    config, warnings = function_config(fields, own["functionConfigFile"])
    assert config.classname == "exclamation.process"
    assert config.inputs == ["public/default/in", "public/default/in2"]
    assert config.topics_pattern == "audit-.*"
    assert (config.log_topic, config.output_serde) == ("public/default/log", "serde.IdentitySerDe")
    assert config.input_serdes == {"public/default/in2": "serde.PickleSerDe"}
    assert (config.processing_guarantees.value, config.user_config) == ("at_most_once", {"a": "b"})
    assert config.subscription_type is SubscriptionType.FAILOVER  # retainOrdering
    assert config.timeout_ms == 100
    assert config.window_config is not None
    assert config.window_config.window_length_count == 10
    assert config.window_config.sliding_interval_count == 5
    assert config.auto_ack is True  # --autoAck
    assert {w.split(": ", 1)[0] for w in warnings} == set()
    assert len(localrun_warnings(own)) == 9
    assert localrun_warnings({"deprecated_use_tls": True}) == [
        "--use_tls: sparkfn localrun reads and writes the store (--store-url, --data-dir); "
        "there is no broker; ignored"
    ]


def test_a_worker_reads_the_flags_json_as_localrun_reads_the_flags(tmp_path: Path) -> None:
    config_file = tmp_path / "f.yaml"
    config_file.write_text("name: enrich\nclassName: exclamation.process\nresources: {cpu: 4}\n")
    fields, _ = _given(_args(CONFIG_FLAGS[2:]))  # no --fqfn, no --classname: the file's
    local, local_warnings = function_config(fields, config_file)
    remote, remote_warnings = FunctionConfig.assemble(function_config_json(fields, config_file))
    assert remote == local
    assert remote_warnings == local_warnings
    assert local.session_conf["spark.task.cpus"] == "2"  # --cpu over the file's resources.cpu
    assert local.session_conf["spark.executor.pyspark.memory"] == "2048m"


def test_update_auth_data_is_a_flag_for_update() -> None:
    assert UPDATE_AUTH_DATA.name == "--update-auth-data"
    assert not UPDATE_AUTH_DATA.config


def test_the_command_prints_a_warning_line_per_ignored_flag(cli: Cli) -> None:
    result = cli.run(
        "functions", "localrun", "--py", EXCLAMATION, "-i", "in", "--runtime", "PROCESS",
        "--auto-ack", "true", "--timeout-ms", "10", "--fqfn", "public/default/ex",
        "--no-auto-create-topics",
    )  # fmt: skip
    assert result.code == 1, result.describe()
    assert result.stderr.splitlines() == [
        "warning: --runtime: instances run as Spark tasks, neither threads nor processes; ignored",
        "error [invalid_config]: function public/default/ex: inputs topic public/default/in "
        "does not exist; create it first (topics are not created on first use here)",
    ]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["--runtime-flags", "x", "--cpu", "many"],
            "resources.cpu: Input should be a valid number",
        ),
        (["--fqfn", "a/b"], "fqfn: 'a/b' must be tenant/namespace/name"),
        (["--input-specs", '{"in": {"serde": "x.Y"}}'], "inputSpecs.in.serde: not a field"),
    ],
)
def test_a_bad_pulsar_flag_is_one_error_line(cli: Cli, args: list[str], error: str) -> None:
    result = cli.fail("functions", "localrun", "--py", EXCLAMATION, "-i", "in", *args)
    assert error in result.stderr, result.describe()
