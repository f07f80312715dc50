"""Two functions with one subscription_name on Spark: the second is refused, the first loses nothing.

Before subscriptions had an owner, both queries planned batches of the one
subscription, each overwriting the other's plan, and a commit moved the
cursors by the other query's plan: messages vanished without an error.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path
from typing import Any

import pytest

from sparkfn.api.errors import SubscriptionInUseError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.runtime.group.solo import start_solo_query
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.query.build import prepare
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from waiting import until

EXCLAIM = str(Path(__file__).resolve().parents[2] / "examples" / "exclamation.py")
SHARED = "public/default/shared"

pytestmark = pytest.mark.slow


def _config(name: str, output: str, **more: Any) -> FunctionConfig:
    return FunctionConfig.build(
        name=name,
        py=EXCLAIM,
        inputs=["in"],
        output=output,
        processing_guarantees="effectively_once",
        subscription_position="earliest",
        subscription_name=SHARED,
        trigger_interval=0.2,
        max_records_per_batch=15,
        **more,
    )


def _produce(store: Store, first: int, count: int) -> None:
    Producer(store, "in").send_batch(
        [Message(f"m{i:03d}".encode()) for i in range(first, first + count)]
    )


def _outputs(store: Store, topic: str) -> collections.Counter[str]:
    consumer = Consumer(store, topic, initial_position="earliest")
    out: collections.Counter[str] = collections.Counter()
    while batch := consumer.receive(max_messages=10_000):
        out.update(m.value.decode() for m in batch if m.value is not None)
    return out


def _expected(count: int) -> collections.Counter[str]:
    return collections.Counter(f"m{i:03d}!" for i in range(count))


def test_a_second_function_on_a_subscription_is_refused_and_the_first_outputs_everything_once(
    spark: Any, store: Store, tmp_path: Path
) -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=2, schema_type="string")
    admin.create("out-a", schema_type="string")
    admin.create("out-b", schema_type="string")
    _produce(store, 0, 40)
    first = _config("a", "out-a")
    # No restarts: the refusal is the same every time, so the first ends the run.
    second = _config("b", "out-b", failure_policy={"max_restarts": 0})
    message = (
        f"subscription {SHARED}: read by function public/default/a; function "
        "public/default/b cannot share it (give it another subscription_name)"
    )
    with FunctionRun(first, store=store, spark=spark) as a:
        a.start()
        a.wait_for(lambda: sum(_outputs(store, "out-a").values()) >= 40, 120, "the first 40")
        # A run refuses to start on a subscription another run owns.
        with FunctionRun(second, store=store, spark=spark) as b:
            with pytest.raises(SubscriptionInUseError, match=re.escape(message)):
                b.start()
            assert b.run_state == "ERROR"
        # A query that got past that check (two starts at once) is refused at its first
        # plan: the refusal is the run's death, with the message, and it plans nothing.
        epoch = control.begin_run(store, "public/default/b", "function", 1, "a second start")
        control.set_state(store, "public/default/b", control.RUNNING, "started")
        query = start_solo_query(
            spark, store, prepare(store, second), epoch=epoch, checkpoint=tmp_path / "ck-b"
        )
        _produce(store, 40, 40)  # both queries see new input: each plans a batch
        try:
            until(
                lambda: _death_of(store, "public/default/b", message),
                "the second run's refusal recorded as its death",
                timeout=120,
            )
        finally:
            query.stop()
        _produce(store, 80, 40)
        a.wait_for(lambda: sum(_outputs(store, "out-a").values()) >= 120, 120, "all 120")
        assert a.drain(timeout=120)
    assert _outputs(store, "out-a") == _expected(120)  # every message, exactly once
    assert _outputs(store, "out-b") == collections.Counter()
    with store.read() as conn:
        assert subscription.owner_of(conn, SHARED) == "public/default/a"
        assert sum(subscription.cursors(conn, SHARED).values()) == 120


def _death_of(store: Store, control_id: str, message: str) -> bool:
    record = control.read_control(store, control_id)
    deaths = [r.death for r in record.instances.values() if r.death] if record else []
    return any(message in str(d) for d in deaths)
