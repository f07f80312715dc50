"""``auto_ack: false`` on real Spark, both stores (issue 29, point 6).

The function acknowledges through ``context.ack``; a message it returned
from without acknowledging is delivered again (its first call's output and
state discarded), so each output is written once, from the acknowledged
delivery, and nothing is lost: one never acknowledged goes to the dead
letter topic after its redeliveries. The outputs also show the Context's
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
from sparkfn.runtime.function.rows import DLQ_EXCEPTION
from sparkfn.state.store import get_state
from sparkfn.topics.message import Message

FUNCS = Path(__file__).resolve().parent / "funcs"

pytestmark = pytest.mark.slow


def _values(store: Store, topic: str) -> list[Any]:
    return list(Consumer(store, topic, initial_position="earliest").receive(max_messages=1000))


def test_unacknowledged_messages_are_redelivered_and_none_is_lost(
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
