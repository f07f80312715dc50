"""``auto_ack: false`` on real Spark, both stores (issue 29, point 6; issue 38, point 2).

The function acknowledges through ``context.ack``. As in Pulsar, a call
that did not acknowledge still publishes its output; with ``timeout_ms``
(the ack timeout) its message is delivered again, and after
``max_message_retries`` redeliveries it goes to the dead letter topic. With
``strict_ack`` (sparkfn's stricter option) a message returned from without
acknowledging is delivered again with its first call's output and state
discarded, so each output is written once, from the acknowledged delivery,
and nothing is lost: one never acknowledged goes to the dead letter topic
after its redeliveries. The outputs also show the Context's
values as Pulsar gives them: ``""`` and 0 for a message with no key or
event time, a UUID function id, and ``get_state`` after
``put_state('s', 'v')`` giving ``b'v'`` (Pulsar's state table gives bytes).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from sparkfn import Consumer, FunctionConfig, Producer, Store, TopicAdmin
from sparkfn.runtime.function.rows import DLQ_ATTEMPTS, DLQ_EXCEPTION
from sparkfn.state.store import get_state
from sparkfn.topics.message import Message

FUNCS = Path(__file__).resolve().parents[1] / "funcs"

pytestmark = pytest.mark.slow


def _values(store: Store, topic: str) -> list[Any]:
    return list(Consumer(store, topic, initial_position="earliest").receive(max_messages=1000))


def test_strict_ack_redelivers_unacknowledged_messages_and_none_is_lost(
    store: Store, run_until_drained: Any
) -> None:
    name = f"acker-{uuid.uuid4().hex[:8]}"  # fresh objects in Spark's reused workers
    config = FunctionConfig.build(
        name=name,
        py=str(FUNCS / "ack_on_redelivery.py"),
        classname="ack_on_redelivery.AckOnRedelivery",
        inputs=["in"],
        output="out",
        auto_ack=False,
        strict_ack=True,  # sparkfn's stricter autoAck false, on request
        max_message_retries=2,
        subscription_position="earliest",
    )
    TopicAdmin(store).create("in", partitions=2)
    Producer(store, "in").send_batch(
        [Message(f"m{i}".encode(), key=None if i == 0 else f"k{i}") for i in range(6)]
        + [Message(b"never")]
    )
    run = run_until_drained(config, store)

    outputs = [json.loads(m.value) for m in _values(store, "out")]
    assert sorted(o["input"] for o in outputs) == [f"m{i}" for i in range(6)]  # each once
    fid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"sparkfn:function:public/default/{name}"))
    for output in outputs:
        assert output["delivery"] == 2, output  # the first delivery went unacknowledged
        assert (output["function_id"], output["state"], output["eventtime"]) == (fid, "b'v'", 0)
        expected_key = "" if output["input"] == "m0" else f"k{output['input'][1:]}"
        assert (output["key"], output["partition_key"]) == (expected_key, expected_key)

    [dead] = _values(store, f"public/default/{name}-DLQ")
    assert dead.value == b"never"
    assert dead.properties[DLQ_EXCEPTION].startswith("NotAcknowledgedError: function ")
    assert "did not acknowledge message" in dead.properties[DLQ_EXCEPTION]
    calls = get_state(store, config.fqfn, "calls")
    assert calls is not None and calls.counter == 6  # one acknowledged call each, kept
    instance = run.status().instances[0].status
    assert (instance.num_received, instance.num_successfully_processed) == (7, 6)
    assert (instance.num_dead_lettered, instance.num_user_exceptions) == (1, 0)


def _pulsar_acker(name: str, **fields: Any) -> FunctionConfig:
    return FunctionConfig.build(
        name=name,
        py=str(FUNCS / "ack_on_redelivery.py"),
        classname="ack_on_redelivery.AckOnRedelivery",
        inputs=["in"],
        output="out",
        auto_ack=False,
        subscription_position="earliest",
        **fields,
    )


def test_an_unacknowledged_call_publishes_and_the_ack_timeout_redelivers(
    store: Store, run_until_drained: Any
) -> None:
    name = f"acker-{uuid.uuid4().hex[:8]}"
    config = _pulsar_acker(name, timeout_ms=10_000, max_message_retries=1)
    TopicAdmin(store).create("in")
    Producer(store, "in").send_batch([Message(b"m0"), Message(b"m1"), Message(b"never")])
    run = run_until_drained(config, store)

    # Pulsar publishes what every call returned, acknowledged or not.
    outputs = sorted((o["input"], o["delivery"]) for o in map(json.loads, _out(store)))
    assert outputs == [("m0", 1), ("m0", 2), ("m1", 1), ("m1", 2), ("never", 1), ("never", 2)]
    [dead] = _values(store, f"public/default/{name}-DLQ")  # after maxMessageRetries
    assert dead.value == b"never"
    assert dead.properties[DLQ_EXCEPTION].startswith("NotAcknowledgedError: function ")
    assert dead.properties[DLQ_ATTEMPTS] == "2"
    calls = get_state(store, config.fqfn, "calls")
    assert calls is not None and calls.counter == 6  # every call's state change kept
    instance = run.status().instances[0].status
    assert (instance.num_received, instance.num_dead_lettered) == (3, 1)
    assert instance.num_user_exceptions == 0


def test_without_an_ack_timeout_an_unacknowledged_message_is_not_redelivered(
    sqlite_store: Store, run_until_drained: Any
) -> None:
    store = sqlite_store
    name = f"acker-{uuid.uuid4().hex[:8]}"
    TopicAdmin(store).create("in")
    Producer(store, "in").send_batch([Message(b"m0"), Message(b"never")])
    run_until_drained(_pulsar_acker(name, max_message_retries=3), store)

    outputs = sorted((o["input"], o["delivery"]) for o in map(json.loads, _out(store)))
    assert outputs == [("m0", 1), ("never", 1)]  # one delivery each, its output published
    assert not TopicAdmin(store).exists(f"public/default/{name}-DLQ")  # nothing dead-lettered


def test_timeout_ms_does_not_interrupt_a_call(sqlite_store: Store, run_until_drained: Any) -> None:
    store = sqlite_store
    for topic in ("in", "out"):
        TopicAdmin(store).create(topic, schema_type="string")
    Producer(store, "in").send_batch([Message(b"a"), Message(b"slow 1"), Message(b"b")])
    config = FunctionConfig.build(
        name="timed",
        py=str(FUNCS / "windows.py"),
        classname="windows.slow",
        inputs=["in"],
        output="out",
        subscription_position="earliest",
        timeout_ms=300,  # the ack timeout: the 2 s call runs to its end
    )
    run_until_drained(config, store)

    assert _out(store) == ["a!", "slow 1!", "b!"]
    assert not TopicAdmin(store).exists("public/default/timed-DLQ")


def _out(store: Store) -> list[str]:
    return [m.value.decode() for m in _values(store, "out")]
