"""``pulsar-admin sinks|sources`` flags and connector YAML files, as a Pulsar user gives them.

Every flag of Pulsar's ``CmdSinks`` and ``CmdSources`` that sparkfn had no
flag for is accepted with Pulsar's meaning: mapped to the config (asserted)
or warned about (the warning names it). A connector YAML file with Pulsar's
``archive: builtin://<type>`` and ``sourceSubscriptionPosition`` is read as
Pulsar reads it. No Spark, no worker: the config is what is checked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from sparkfn.cli.configs import connector_config
from sparkfn.cli.flags import takes
from sparkfn.cli.localrun import SINK_LOCALRUN, SOURCE_LOCALRUN
from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.config.function import SubscriptionPosition

# One xdist worker with the tests that restart the brokers (tests/connectors).
pytestmark = pytest.mark.xdist_group("brokers")


def _fields(kind: str, args: list[str]) -> dict[str, Any]:
    """The config fields ``sinks|sources localrun`` gets for ``args``."""
    seen: list[dict[str, Any]] = []
    app = typer.Typer()

    @app.command("localrun")
    @takes(kind, SINK_LOCALRUN if kind == "sink" else SOURCE_LOCALRUN)
    def localrun(ctx: typer.Context, fields: dict[str, Any], **own: Any) -> None:
        seen.append(fields)

    @app.command("other")
    def other() -> None:  # two commands, so "localrun" is a subcommand as in sparkfn
        pass

    result = CliRunner().invoke(app, ["localrun", *args])
    assert result.exit_code == 0, result.output
    return seen[0]


def test_pulsars_sink_flags_are_taken_with_pulsars_meaning() -> None:
    fields = _fields(
        "sink",
        [
            "--name", "out", "--sink-type", "redis", "-i", "persistent://public/default/a",
            "--subs-name", "my-sub", "--subs-position", "Earliest",
            "--max-redeliver-count", "3", "--dead-letter-topic", "persistent://public/default/dl",
            "--custom-serde-inputs", '{"persistent://public/default/b": "serde.X"}',
            "--retain-ordering", "--timeout-ms", "30000", "--auto-ack", "true",
            "--cleanup-subscription", "--negative-ack-redelivery-delay-ms", "100",
            "--cpu", "2",
        ],
    )  # fmt: skip
    config, warnings = connector_config("sink", fields, None)
    assert isinstance(config, SinkConfig)
    assert config.inputs == ["public/default/a", "public/default/b"]
    assert (config.subscription, config.subscription_position) == (
        "my-sub",
        SubscriptionPosition.EARLIEST,
    )
    assert (config.max_message_retries, config.dead_letter_topic) == (3, "public/default/dl")
    assert config.negative_ack_redelivery_delay_ms == 100
    said = "\n".join(warnings)
    for name in (
        "retainOrdering", "timeoutMs", "autoAck", "cleanupSubscription",
        "cpu", "customSerdeInputs",
    ):  # fmt: skip
        assert f"{name}: " in said, (name, warnings)


def test_a_sink_starts_at_latest_unless_told_as_pulsars_do() -> None:
    config, _ = connector_config(
        "sink", _fields("sink", ["--sink-type", "stdout", "-i", "a"]), None
    )
    assert config.subscription_position is SubscriptionPosition.LATEST


def test_pulsars_source_flags_are_accepted_and_say_they_have_no_effect() -> None:
    fields = _fields(
        "source",
        [
            "--source-type", "generator", "--destination-topic-name", "persistent://public/default/o",
            "--schema-type", "STRING", "--deserialization-classname", "serde.X",
            "--producer-config", '{"maxPendingMessages": 10}', "--batch-builder", "KEY_BASED",
            "--cpu", "1",
        ],
    )  # fmt: skip
    config, warnings = connector_config("source", fields, None)
    assert isinstance(config, SourceConfig) and config.output == "public/default/o"
    said = "\n".join(warnings)
    for name in ("schemaType", "serdeClassName", "producerConfig", "batchBuilder", "cpu"):
        assert f"{name}: " in said, (name, warnings)


def test_pulsar_io_yaml_files_with_a_builtin_archive_are_read_as_pulsar_reads_them(
    tmp_path: Path,
) -> None:
    source_file = tmp_path / "rabbitmq-source.yaml"
    source_file.write_text(
        "tenant: public\nnamespace: default\nname: rabbit-in\n"
        "topicName: persistent://public/default/raw\narchive: builtin://rabbitmq\n"
        "parallelism: 1\nconfigs:\n  host: 127.0.0.1\n  port: 5672\n  queueName: q\n"
    )
    sink_file = tmp_path / "redis-sink.yaml"
    sink_file.write_text(
        "tenant: public\nnamespace: default\nname: redis-out\n"
        "inputs: [persistent://public/default/bang]\narchive: builtin://redis\n"
        "sourceSubscriptionPosition: Earliest\nretainOrdering: true\n"
        "configs:\n  redisHosts: 127.0.0.1:6379\n  redisDatabase: 0\n"
    )
    source, _ = connector_config("source", _fields("source", []), source_file)
    assert (source.name, source.source_type, source.output) == (
        "rabbit-in",
        "rabbitmq",
        "public/default/raw",
    )
    # A flag wins over the file's field, as pulsar-admin's do.
    sink, warnings = connector_config("sink", _fields("sink", ["--parallelism", "2"]), sink_file)
    assert (sink.sink_type, sink.inputs, sink.parallelism) == (
        "redis",
        ["public/default/bang"],
        2,
    )
    assert sink.subscription_position is SubscriptionPosition.EARLIEST
    assert any(w.startswith("retainOrdering: ") for w in warnings), warnings
    # The models' own YAML reading is the same.
    assert SinkConfig.from_yaml(sink_file).sink_type == "redis"
    assert SourceConfig.from_yaml(source_file).source_type == "rabbitmq"
