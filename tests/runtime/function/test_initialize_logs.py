"""What a function logs in ``initialize()`` reaches its log topic, before what it logs per message.

``initialize`` runs in the instance's first task, before its buffers are
set up for that task: the records it logged must go out with that task's
output, not be dropped with the buffers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkfn import Consumer, FunctionConfig, Message, Producer, Store, TopicAdmin
from sparkfn.testing import FunctionHarness

FUNCS = Path(__file__).resolve().parents[1] / "funcs"


def _config() -> FunctionConfig:
    return FunctionConfig.build(
        name="init-logger",
        py=str(FUNCS / "initialize_logger.py"),
        classname="initialize_logger.InitializeLogger",
        inputs=["in"],
        output="out",
        log_topic="logs",
        subscription_position="earliest",
    )


def test_the_harness_publishes_what_initialize_logged() -> None:
    harness = FunctionHarness(_config(), input_schema="bytes", output_schema="bytes")
    harness.send(b"a")
    harness.send(b"b")
    assert harness.logs == ["initialized instance 0", "processing b'a'", "processing b'b'"]
    [first, *_] = [m for m in harness.messages if m.kind == "log"]
    assert first.topic == "public/default/logs"
    assert first.properties["level"] == "INFO"
    assert "message_id" not in first.properties  # logged before any message


@pytest.mark.slow
def test_localrun_on_spark_publishes_what_initialize_logged(
    sqlite_store: Store, run_until_drained: Any
) -> None:
    admin = TopicAdmin(sqlite_store)
    for topic in ("in", "out", "logs"):
        admin.create(topic)  # 1 partition, bytes
    Producer(sqlite_store, "in").send_batch([Message(b"a"), Message(b"b")])
    run_until_drained(_config(), sqlite_store)
    logs = Consumer(sqlite_store, "logs", initial_position="earliest").receive()
    assert [m.value for m in logs] == [
        b"initialized instance 0",
        b"processing b'a'",
        b"processing b'b'",
    ]
    assert logs[0].properties["instance_id"] == "0"
    outputs = Consumer(sqlite_store, "out", initial_position="earliest").receive()
    assert [m.value for m in outputs] == [b"a", b"b"]
