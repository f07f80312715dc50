"""sparkfn's Context has every method of Pulsar's Python Context, with the same behaviour.

The methods are those of Pulsar's ``pulsar.functions.context.Context`` and
what its Python instance's ``ContextImpl`` adds for functions
(``get_message_sequence_id``, ``get_message_partition_index``). A Pulsar
function (``funcs/context_probe.py``) calls each one on a message with a key,
properties, an event time and a topic, through the harness and through
FunctionRun on Spark: both must report the same.
"""

from __future__ import annotations

import inspect
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sparkfn import Consumer, FunctionConfig, Producer, Store, TopicAdmin
from sparkfn.runtime.function.context import FunctionContext
from sparkfn.testing import FunctionHarness

PULSAR_CONTEXT_METHODS = [
    "get_message_id",
    "get_message_key",
    "get_message_eventtime",
    "get_message_properties",
    "get_current_message_topic_name",
    "get_message_sequence_id",
    "get_message_partition_index",
    "get_partition_key",
    "get_function_tenant",
    "get_function_namespace",
    "get_function_name",
    "get_function_id",
    "get_instance_id",
    "get_function_version",
    "get_logger",
    "get_user_config_value",
    "get_user_config_map",
    "get_secret",
    "record_metric",
    "publish",
    "get_input_topics",
    "get_output_topic",
    "get_output_serde_class_name",
    "ack",
    "incr_counter",
    "get_counter",
    "del_counter",
    "put_state",
    "get_state",
]
FUNCS = Path(__file__).resolve().parents[1] / "funcs"
EVENT_TIME = datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
EXPECTED = {
    "message_id": "0:0",
    "message_id_parts": [0, 0],
    "key": "k1",
    "eventtime": int(EVENT_TIME.timestamp() * 1000),
    "properties": {"origin": "test"},
    "topic": "persistent://public/default/in",
    "sequence_id": 0,
    "partition_index": 0,
    "partition_key": "k1",
    # The id is a UUID, as Pulsar's (the same for every instance and run of the function).
    "function": [
        "public",
        "default",
        "probe",
        str(uuid.uuid5(uuid.NAMESPACE_URL, "sparkfn:function:public/default/probe")),
    ],
    "version_is_text": True,
    "instance_id": 0,
    "logger": "Logger",
    "config_value": "hello",
    "config_missing": None,
    "config_map": {"greeting": "hello"},
    "secret": "s3cret",  # Pulsar's ClearTextSecretsProvider
    "secret_missing": None,
    "input_topics": ["persistent://public/default/in"],
    "output_topic": "persistent://public/default/out",
    "output_serde": "serde.IdentitySerDe",
    "counter": 2,
    "state": "ping",
    "bad_ack": "ValueError",
    "callbacks_before_success": [],  # called once process() has returned
    "counter_after_delete": 0,
}


PROBE: dict[str, Any] = {
    "name": "probe",
    "py": str(FUNCS / "context_probe.py"),
    "classname": "context_probe.ContextProbe",
    "inputs": ["in"],
    "output": "out",
    "log_topic": "logs",
    "user_config": {"greeting": "hello"},
    "secrets": {"token": "s3cret"},
    "subscription_position": "earliest",
}


def probe_config() -> FunctionConfig:
    return FunctionConfig.build(**PROBE)


def test_every_method_of_pulsars_context_exists_with_its_parameters() -> None:
    missing = [m for m in PULSAR_CONTEXT_METHODS if not callable(getattr(FunctionContext, m, None))]
    assert missing == []
    publish = list(inspect.signature(FunctionContext.publish).parameters)
    assert publish == [
        "self",
        "topic_name",
        "message",
        "serde_class_name",
        "properties",
        "compression_type",
        "callback",
        "message_conf",
    ]


def test_the_harness_context_behaves_as_pulsars() -> None:
    harness = FunctionHarness(
        probe_config(), input_schema="bytes", output_schema="bytes", topic_schemas={"side": "bytes"}
    )
    [output] = harness.send(b"ping", key="k1", properties={"origin": "test"}, event_time=EVENT_TIME)
    assert json.loads(output) == EXPECTED
    assert harness.counters == {}
    assert harness.state == {"last": b"ping"}
    assert harness.metrics["size"].count == 1
    assert harness.logs == ["probing ping", "published: ok=True id=None"]
    [side] = [m for m in harness.messages if m.topic == "public/default/side"]
    assert (side.value, side.key, side.properties) == (b"7", "side-key", {"via": "publish"})
    assert side.event_time == datetime.fromtimestamp(1, UTC)


@pytest.mark.slow
def test_localrun_on_spark_reports_the_same(sqlite_store: Store, run_until_drained: Any) -> None:
    admin = TopicAdmin(sqlite_store)
    for topic in ("in", "out", "logs", "side"):
        admin.create(topic)  # sparkfn's defaults: 1 partition, bytes
    Producer(sqlite_store, "in").send(
        b"ping", key="k1", properties={"origin": "test"}, event_time=EVENT_TIME
    )
    run = run_until_drained(probe_config(), sqlite_store)
    [output] = Consumer(sqlite_store, "out", initial_position="earliest").receive()
    assert json.loads(output.value or b"") == EXPECTED
    [side] = Consumer(sqlite_store, "side", initial_position="earliest").receive()
    assert (side.value, side.key, side.properties) == (b"7", "side-key", {"via": "publish"})
    logs = Consumer(sqlite_store, "logs", initial_position="earliest").receive()
    assert [m.value for m in logs] == [b"probing ping", b"published: ok=True id=None"]
    stats = run.stats()
    assert stats.user_metrics["size"].count == 1
    assert (stats.received_total, stats.processed_successfully_total) == (1, 1)
