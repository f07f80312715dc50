"""Message errors are not fatal (DESIGN 2.2), on the real runtime, both stores.

``funcs/flaky_function.py`` raises on inputs starting with ``bad`` after it
has incremented a counter, set a state value and published a message; it
appends one line per attempt to a file, because the state changes of a
failed attempt are discarded by design and cannot count attempts.
"""

from __future__ import annotations

import collections
import uuid
from pathlib import Path
from typing import Any

import pytest

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.rows import (
    DLQ_ATTEMPTS,
    DLQ_EXCEPTION,
    DLQ_ORIGIN_MESSAGE_ID,
    DLQ_REAL_TOPIC,
)
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message, ReceivedMessage
from sparkfn.topics.producer import Producer

FLAKY = Path(__file__).resolve().parents[1] / "funcs" / "flaky_function.py"
TOTAL = 40
BAD_EVERY = 5  # inputs 0, 5, 10, ... are bad

pytestmark = pytest.mark.slow


def _is_bad(i: int) -> bool:
    return i % BAD_EVERY == 0


def _value(i: int) -> str:
    return f"bad {i}" if _is_bad(i) else f"good {i}"


def _setup(store: Store, *, dlq: bool) -> dict[str, str]:
    """Create the topics and produce the input; returns ``{input value: message id}``."""
    admin = TopicAdmin(store)
    admin.create("in", partitions=2, schema_type="string")
    for topic in ("out", "side", *(["dlq"] if dlq else [])):
        admin.create(topic, partitions=2, schema_type="string")
    producer = Producer(store, "in")
    ids = producer.send_batch(
        [
            Message(_value(i).encode(), key=f"k{i}", properties={"origin": f"test-{i}"})
            for i in range(TOTAL)
        ]
    )
    return {_value(i): str(ids[i]) for i in range(TOTAL)}


def _read(store: Store, topic: str) -> list[ReceivedMessage]:
    consumer = Consumer(store, topic, initial_position="earliest")
    out: list[ReceivedMessage] = []
    while batch := consumer.receive(max_messages=10_000):
        out.extend(batch)
    return out


def _values(store: Store, topic: str) -> collections.Counter[str]:
    return collections.Counter(m.value.decode() for m in _read(store, topic) if m.value)


def _run(spark: Any, store: Store, tmp_path: Path, **fields: Any) -> tuple[FunctionRun, Path]:
    attempts = tmp_path / "attempts.txt"
    config = FunctionConfig.build(
        name=f"flaky-{uuid.uuid4().hex[:8]}",  # fresh objects in Spark's reused workers
        py=str(FLAKY),
        classname="flaky_function.Flaky",
        inputs=["in"],
        output="out",
        subscription_position="earliest",
        max_records_per_batch=10,  # several batches: errors in early ones must not stop later ones
        user_config={"attempts_file": str(attempts)},
        **fields,
    )
    run = FunctionRun(config, store=store, spark=spark)
    run.start(until_drained=True)
    assert run.wait(180), "the function did not drain its input within 180 s"
    return run, attempts


def _attempts(path: Path) -> collections.Counter[str]:
    return collections.Counter(path.read_text().split())


def _check_no_trace_of_failures(run: FunctionRun, store: Store) -> None:
    """Only good inputs left outputs, publishes and state behind."""
    good = [_value(i) for i in range(TOTAL) if not _is_bad(i)]
    assert _values(store, "out") == collections.Counter(v.upper() for v in good)
    assert _values(store, "side") == collections.Counter(f"side {v}" for v in good)
    assert run.get_counter("seen") == len(good)
    state = run.state()
    assert sorted(k for k, s in state.items() if s.value is not None) == sorted(
        f"last/k{i}" for i in range(TOTAL) if not _is_bad(i)
    )


def test_failing_messages_are_retried_then_dead_lettered(
    spark: Any, store: Store, tmp_path: Path
) -> None:
    ids = _setup(store, dlq=True)
    bad = {v: ids[v] for v in ids if v.startswith("bad")}
    run, attempts = _run(spark, store, tmp_path, dead_letter_topic="dlq", max_message_retries=2)

    # The function kept running to the end of its input.
    status = run.status()
    instance = status.instances[0].status
    assert instance.state == "STOPPED" and instance.error == ""
    # Pulsar counts each delivery received: a bad message was delivered three times
    # (negative-acked twice, redelivered from the retry topic; a drain does not wait).
    assert instance.num_received == TOTAL + 2 * len(bad)
    assert instance.num_successfully_processed == TOTAL - len(bad)

    # Each bad message was tried 1 + max_message_retries = 3 times, under its own message
    # id every time, and nothing else failed.
    assert _attempts(attempts) == collections.Counter({mid: 3 for mid in bad.values()})
    assert instance.num_user_exceptions == 3 * len(bad)
    assert instance.num_dead_lettered == len(bad)
    assert instance.num_system_exceptions == 0

    # The latest exceptions carry type, message, traceback and message id.
    latest = instance.latest_user_exceptions
    assert latest, "no latest user exceptions in status"
    by_message = {v: mid for v, mid in bad.items()}
    for exc in latest:
        assert exc.type == "ValueError"
        value = exc.message.removeprefix("cannot handle ")
        assert value in bad, exc
        assert exc.message_id == by_message[value]
        assert exc.exception_string == f"ValueError: cannot handle {value}"
        assert "Traceback (most recent call last)" in exc.traceback
        assert "flaky_function.py" in exc.traceback and "raise ValueError" in exc.traceback

    # Outputs, publishes and state changes of the failed attempts are absent.
    _check_no_trace_of_failures(run, store)

    # The dead letter topic holds each bad message once, with the error attached.
    dead = _read(store, "dlq")
    assert sorted(m.value.decode() for m in dead if m.value) == sorted(bad)
    for m in dead:
        assert m.value is not None
        value = m.value.decode()
        i = int(value.split()[1])
        assert m.key == f"k{i}"
        assert m.properties == {
            "origin": f"test-{i}",
            DLQ_EXCEPTION: f"ValueError: cannot handle {value}",
            DLQ_ORIGIN_MESSAGE_ID: bad[value],
            # Pulsar's name of the partition it came from ("in" has two).
            DLQ_REAL_TOPIC: "persistent://public/default/in-partition-" + bad[value].split(":")[0],
            DLQ_ATTEMPTS: "3",
        }

    stats = run.stats()
    assert stats.user_exceptions_total == 3 * len(bad)
    assert stats.dead_lettered_total == len(bad)
    assert stats.processed_successfully_total == TOTAL - len(bad)


def test_without_dead_letter_topic_failing_messages_go_to_the_default_dlq(
    spark: Any, store: Store, tmp_path: Path
) -> None:
    ids = _setup(store, dlq=False)
    bad = {v: ids[v] for v in ids if v.startswith("bad")}
    run, attempts = _run(spark, store, tmp_path, max_message_retries=0)  # no redelivery

    instance = run.status().instances[0].status
    assert instance.state == "STOPPED" and instance.error == ""
    assert _attempts(attempts) == collections.Counter({mid: 1 for mid in bad.values()})
    assert instance.num_user_exceptions == len(bad)
    assert instance.num_dead_lettered == len(bad)
    _check_no_trace_of_failures(run, store)

    # Nothing is dropped without an explicit choice: {tenant}/{namespace}/{name}-DLQ, made on use.
    topic = f"{run.config.fqfn}-DLQ"
    assert TopicAdmin(store).exists(topic)
    dead = _read(store, topic)
    assert sorted(m.value.decode() for m in dead if m.value) == sorted(bad)
    for m in dead:
        assert m.value is not None
        value = m.value.decode()
        assert m.properties is not None
        assert m.properties[DLQ_EXCEPTION] == f"ValueError: cannot handle {value}"
        assert m.properties[DLQ_ORIGIN_MESSAGE_ID] == bad[value]
        assert m.properties[DLQ_ATTEMPTS] == "1"


def test_failing_messages_are_dropped_and_counted_only_when_asked(
    spark: Any, store: Store, tmp_path: Path
) -> None:
    ids = _setup(store, dlq=False)
    bad = {v: ids[v] for v in ids if v.startswith("bad")}
    run, attempts = _run(spark, store, tmp_path, drop_failed_messages=True, max_message_retries=0)

    instance = run.status().instances[0].status
    assert instance.state == "STOPPED" and instance.error == ""
    assert _attempts(attempts) == collections.Counter({mid: 1 for mid in bad.values()})
    assert instance.num_received == TOTAL
    assert instance.num_successfully_processed == TOTAL - len(bad)
    assert instance.num_user_exceptions == len(bad)
    assert instance.num_dead_lettered == 0
    assert {e.message_id for e in instance.latest_user_exceptions} <= set(bad.values())
    _check_no_trace_of_failures(run, store)
    assert TopicAdmin(store).list() and not TopicAdmin(store).exists("dlq")
    assert not TopicAdmin(store).exists(f"{run.config.fqfn}-DLQ")
