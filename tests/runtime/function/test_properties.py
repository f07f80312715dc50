"""Message properties through a function on the real runtime (both stores).

Between its Python stages the runtime ships properties as JSON text (a map
column costs Spark far more to convert); functions must still see and
produce exactly the properties on the topics, none included.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

RELAY = Path(__file__).resolve().parents[1] / "funcs" / "properties_relay.py"
SENT = {
    "plain": {},
    "one": {"a": "1"},
    "odd": {"ünï": "✓", "quote": '"x", {y}', "empty": ""},
}

pytestmark = pytest.mark.slow


def _received(store: Store, topic: str) -> dict[str, dict[str, str]]:
    consumer = Consumer(store, topic, initial_position="earliest")
    out = {}
    while batch := consumer.receive(max_messages=1000):
        for m in batch:
            assert m.value is not None
            out[m.value.decode()] = m.properties
    return out


def _run(spark: Any, store: Store, classname: str) -> None:
    admin = TopicAdmin(store)
    for topic in ("in", "out", "side"):
        admin.create(topic, partitions=2, schema_type="string")
    Producer(store, "in").send_batch(
        [Message(value.encode(), key=value, properties=props) for value, props in SENT.items()]
    )
    config = FunctionConfig.build(
        name=f"relay-{uuid.uuid4().hex[:8]}",
        py=str(RELAY),
        classname=classname,
        inputs=["in"],
        output="out",
        subscription_position="earliest",
        parallelism=2,
    )
    with FunctionRun(config, store=store, spark=spark) as run:
        run.start(until_drained=True)
        assert run.wait(180), "the function did not drain its input within 180 s"


def test_a_function_sees_the_properties_and_publishes_its_own(spark: Any, store: Store) -> None:
    _run(spark, store, "properties_relay.process")
    # A returned value carries its input's properties (Pulsar's forwardSourceMessageProperty,
    # for sparkfn's own function) and Pulsar's two naming its input; a published one
    # carries what was given.
    received = _received(store, "out")
    origin = {"__pfn_input_topic__", "__pfn_input_msg_id__"}
    assert {v: {k: x for k, x in p.items() if k not in origin} for v, p in received.items()} == SENT
    for props in received.values():  # "in" has two partitions: Pulsar names each
        partition = props["__pfn_input_msg_id__"].split(":")[0]
        assert (
            props["__pfn_input_topic__"] == f"persistent://public/default/in-partition-{partition}"
        )
    assert len({p["__pfn_input_msg_id__"] for p in received.values()}) == len(SENT)
    assert _received(store, "side") == {
        value: {**props, "seen": str(len(props))} for value, props in SENT.items()
    }


def test_a_vectorized_function_gets_and_returns_properties_as_a_map(
    spark: Any, store: Store
) -> None:
    _run(spark, store, "properties_relay.Relay")
    assert _received(store, "out") == SENT
