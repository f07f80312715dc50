"""``context.publish`` to a topic that does not exist (DESIGN 2.2, issue 9 point 2).

By default the topic is created on first use, as Pulsar creates it. With
creation off (the function's ``auto_create_topics: false``, or the store's
setting) such a publish fails at its first call with a
:class:`TopicNotFoundError` naming the function and the topic: a message
error like any other (counted, retried, dead-lettered), never a failure of
the query.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.rows import DLQ_EXCEPTION
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.autocreate import TopicCreation
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

FUNCS = Path(__file__).resolve().parents[1] / "funcs"
TOTAL = 6
MISSING = "public/default/nowhere"

pytestmark = pytest.mark.slow


def _values(store: Store, topic: str) -> list[bytes]:
    consumer = Consumer(store, topic, initial_position="earliest")
    out: list[bytes] = []
    while batch := consumer.receive(max_messages=10_000):
        out.extend(m.value for m in batch if m.value is not None)
    return out


def _run(spark: Any, store: Store, serde: str | None, **fields: Any) -> tuple[FunctionRun, str]:
    admin = TopicAdmin(store)
    for topic in ("in", "out", "dlq"):
        if not admin.exists(topic):
            admin.create(topic, partitions=1, schema_type="string")
    Producer(store, "in").send_batch([Message(f"m{i}".encode()) for i in range(TOTAL)])
    config = FunctionConfig.build(
        name=f"publisher-{uuid.uuid4().hex[:8]}",  # fresh objects in Spark's reused workers
        py=str(FUNCS / "publish_anywhere.py"),
        classname="publish_anywhere.PublishAnywhere",
        inputs=["in"],
        output="out",
        subscription_position="earliest",
        max_records_per_batch=2,  # several batches: the query must outlive the first
        user_config={"publish_to": MISSING, "serde": serde},
        **fields,
    )
    run = FunctionRun(config, store=store, spark=spark)
    run.start(until_drained=True)
    assert run.wait(180), "the function did not drain its input within 180 s"
    return run, config.fqfn


@pytest.mark.parametrize(
    ("serde", "off"),
    [(None, "function"), ("publish_anywhere.Utf8", "store")],
    ids=["schema-function-off", "named-serde-store-off"],
)
def test_publish_to_a_missing_topic_is_a_message_error_when_creation_is_off(
    spark: Any, store: Store, serde: str | None, off: str
) -> None:
    fields: dict[str, Any] = {"dead_letter_topic": "dlq", "max_message_retries": 1}
    if off == "function":
        fields["auto_create_topics"] = False
    else:
        for topic in ("in", "out", "dlq"):  # created by hand, before creation is off
            TopicAdmin(store).create(topic, partitions=1, schema_type="string")
        TopicCreation.write(store, enabled=False)
    run, fqfn = _run(spark, store, serde, **fields)

    instance = run.status().instances[0].status
    assert instance.state == "STOPPED" and instance.error == "", instance
    assert instance.num_received == 2 * TOTAL  # each delivered twice: negative-acked once
    assert instance.num_successfully_processed == 0
    assert instance.num_user_exceptions == 2 * TOTAL  # 1 + max_message_retries attempts each
    assert instance.num_dead_lettered == TOTAL
    assert instance.num_system_exceptions == 0
    for exc in instance.latest_user_exceptions:
        assert exc.type == "TopicNotFoundError"
        assert fqfn in exc.message and MISSING in exc.message, exc.message

    dead = _values(store, "dlq")
    assert sorted(dead) == sorted(f"m{i}".encode() for i in range(TOTAL))
    consumer = Consumer(store, "dlq", initial_position="earliest")
    for message in consumer.receive(max_messages=100):
        assert message.properties[DLQ_EXCEPTION].startswith("TopicNotFoundError: ")
        assert MISSING in message.properties[DLQ_EXCEPTION]
    assert _values(store, "out") == []
    assert not TopicAdmin(store).exists(MISSING)


@pytest.mark.parametrize("serde", [None, "publish_anywhere.Utf8"], ids=["schema", "named-serde"])
def test_a_missing_topic_is_created_on_first_publish_by_default(
    spark: Any, store: Store, serde: str | None
) -> None:
    run, _ = _run(spark, store, serde)

    instance = run.status().instances[0].status
    assert instance.state == "STOPPED" and instance.error == "", instance
    assert instance.num_successfully_processed == TOTAL
    assert instance.num_user_exceptions == 0
    info = TopicAdmin(store).get(MISSING)
    assert info.partitions == 1 and info.schema_type.value == "bytes"
    assert sorted(_values(store, MISSING)) == sorted(f"m{i}".encode() for i in range(TOTAL))
    assert sorted(_values(store, "out")) == sorted(f"m{i}".encode() for i in range(TOTAL))
