"""Window functions and ``timeout_ms`` on the real runtime (Spark, both stores).

The window functions are ``funcs/windows.py``'s: each window comes out as
one line, ``"v1,v2,...|end"``. Inputs are one partition and small batches
(``max_records_per_batch``), so windows straddle batches and their messages
wait in the function's state between them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from sparkfn.api.errors import TopicNotFoundError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.rows import DLQ_ATTEMPTS, DLQ_EXCEPTION
from sparkfn.runtime.function.window import Pane, state_key
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.state.store import get_state
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message, ReceivedMessage
from sparkfn.topics.producer import Producer

FUNCS = Path(__file__).resolve().parents[1] / "funcs" / "windows.py"

pytestmark = pytest.mark.slow


def _topics(store: Store, *names: str) -> None:
    admin = TopicAdmin(store)
    for name in ("in", *names):
        admin.create(name, partitions=1, schema_type="string")


def _produce(store: Store, values: list[str]) -> None:
    Producer(store, "in").send_batch([Message(v.encode()) for v in values])


def _messages(store: Store, topic: str) -> list[ReceivedMessage]:
    consumer = Consumer(store, topic, initial_position="earliest")
    out: list[ReceivedMessage] = []
    while batch := consumer.receive(max_messages=10_000, timeout=0.2):
        out.extend(batch)
    return out


def _values(store: Store, topic: str) -> list[str]:
    return [m.value.decode() for m in _messages(store, topic) if m.value is not None]


def _config(name: str, window: dict[str, Any], **fields: Any) -> FunctionConfig:
    return FunctionConfig.build(
        name=name,
        py=str(FUNCS),
        classname=fields.pop("classname", "windows.Joined"),
        inputs=["in"],
        output=f"out-{name}",
        subscription_position="earliest",
        processing_guarantees="effectively_once",
        window_config=window,
        **fields,
    )


def _pane(store: Store, name: str) -> Pane:
    found = get_state(store, f"public/default/{name}", state_key(0))
    return Pane.load(None if found is None else found.value)


def test_count_windows_tumbling_and_sliding(run_until_drained: Any, store: Store) -> None:
    _topics(store, "out-tumbling", "out-sliding")
    _produce(store, [str(i) for i in range(10)])
    tumbling = _config("tumbling", {"windowLengthCount": 3}, max_records_per_batch=4)
    sliding = _config(
        "sliding", {"windowLengthCount": 4, "slidingIntervalCount": 2}, max_records_per_batch=3
    )
    run_until_drained(tumbling, store)
    run_until_drained(sliding, store)

    assert _values(store, "out-tumbling") == ["0,1,2|-", "3,4,5|-", "6,7,8|-"]
    # The tenth message waits for the two that complete its window, in the state.
    assert [h[1] for h in _pane(store, "tumbling").held] == [b"9"]
    assert _pane(store, "tumbling").since_fire == 1
    # Every second message, the last four (fewer at first, as Pulsar does).
    assert _values(store, "out-sliding") == [
        "0,1|-",
        "0,1,2,3|-",
        "2,3,4,5|-",
        "4,5,6,7|-",
        "6,7,8,9|-",
    ]


EVENTS = ["1:a", "4:b", "12:c", "3:late", "11:d", "30:e", "9:late2", "28:f", "50:g"]


def test_event_time_windows_send_late_messages_to_the_late_topic(
    run_until_drained: Any, store: Store
) -> None:
    """Batches of three: the watermark (latest time less maxLagMs 3) is 9, 27, 47 after them."""
    _topics(store, "out-events")
    _produce(store, EVENTS)
    window = {
        "windowLengthDurationMs": 10,
        "slidingIntervalDurationMs": 5,
        "timestampExtractorClassName": "windows.ValueTime",
        "maxLagMs": 3,
        "watermarkEmitIntervalMs": 1,
        "lateDataTopic": "events-late",  # created on first use
    }
    run_until_drained(_config("events", window, max_records_per_batch=3), store)

    # Windows (end - 10, end] with ends every 5 ms, fired once the watermark
    # passes their end; those with no message are skipped.
    assert _values(store, "out-events") == [
        "1:a,4:b|5",
        "1:a,4:b|10",
        "12:c,11:d|15",
        "12:c,11:d|20",
        "30:e,28:f|30",
        "30:e,28:f|35",
    ]
    late = _messages(store, "events-late")
    assert [m.value for m in late] == [b"3:late", b"9:late2"]
    assert [m.properties["ORIGIN_MESSAGE_ID"] for m in late] == ["0:3", "0:6"]
    assert {m.properties["REAL_TOPIC"] for m in late} == {"persistent://public/default/in"}
    assert [h[1] for h in _pane(store, "events").held] == [b"50:g"]


def test_late_messages_are_dropped_without_a_late_data_topic(
    run_until_drained: Any, store: Store
) -> None:
    """As Pulsar drops them, logged and counted (tests/runtime/function/test_window_semantics.py)."""
    _topics(store, "out-dropping", "late-here", "out-routed")
    _produce(store, EVENTS)
    window = {
        "windowLengthDurationMs": 10,
        "timestampExtractorClassName": "windows.ValueTime",
        "maxLagMs": 3,
        "watermarkEmitIntervalMs": 1,
    }
    run_until_drained(_config("dropping", window, max_records_per_batch=3), store)
    routed = {**window, "lateDataTopic": "late-here"}
    run_until_drained(_config("routed", routed, max_records_per_batch=3), store)

    tumbling = ["1:a,4:b|10", "12:c,11:d|20", "30:e,28:f|30"]
    assert _values(store, "out-dropping") == tumbling
    with pytest.raises(TopicNotFoundError):
        TopicAdmin(store).get("dropping-late")
    assert _values(store, "out-routed") == tumbling
    assert _values(store, "late-here") == ["3:late", "9:late2"]


def test_processing_time_windows_fire_on_the_clock(spark: Any, sqlite_store: Store) -> None:
    """No input follows a window's messages: the window fires when its end passes all the same."""
    store = sqlite_store
    _topics(store, "out-clock")
    config = _config("clock", {"windowLengthDurationMs": 1500})
    run = FunctionRun(config, store=store, spark=spark).start()
    try:
        run.wait_for(lambda: run.query is not None and run.query.isActive, 60, "the query start")
        time.sleep(1.0)  # its first batches have run: the subscription is in place
        before = int(time.time() * 1000)
        _produce(store, ["a", "b", "c"])
        run.wait_for(lambda: len(_values(store, "out-clock")) == 1, 60, "the first window")
        first = _values(store, "out-clock")[0]
        values, end = first.split("|")
        assert values == "a,b,c"
        assert int(end) % 1500 == 0
        assert int(end) >= before
        _produce(store, ["d", "e"])
        run.wait_for(lambda: len(_values(store, "out-clock")) == 2, 60, "the second window")
        assert _values(store, "out-clock")[1].split("|")[0] == "d,e"
    finally:
        run.close()


def test_timeout_interrupts_fails_a_slow_attempt_and_goes_on(
    run_until_drained: Any, sqlite_store: Store
) -> None:
    store = sqlite_store
    _topics(store, "out-timed")
    _produce(store, ["a", "slow 1", "b", "spin 2", "c"])
    config = FunctionConfig.build(
        name="timed",
        py=str(FUNCS),
        classname="windows.slow",
        inputs=["in"],
        output="out-timed",
        subscription_position="earliest",
        timeout_ms=300,
        timeout_interrupts=True,  # sparkfn's stricter timeout_ms, on request
        max_message_retries=1,
    )
    run_until_drained(config, store)

    assert _values(store, "out-timed") == ["a!", "b!", "c!"]
    dead = _messages(store, "timed-DLQ")
    assert [m.value for m in dead] == [b"slow 1", b"spin 2"]
    for message in dead:
        assert message.properties[DLQ_ATTEMPTS] == "2"
        assert message.properties[DLQ_EXCEPTION].startswith("MessageTimeoutError: ")
        assert "more than timeout_ms 300" in message.properties[DLQ_EXCEPTION]


def _file_bytes(store: Store, topic: str) -> int:
    from sqlalchemy import select

    from sparkfn.store import schema

    info = TopicAdmin(store).get(topic)
    segments = schema.segments
    with store.read() as conn:
        rows = conn.execute(
            select(segments.c.location, segments.c.inline_data).where(
                segments.c.topic_id == info.id
            )
        ).all()
    assert rows and all(row.location is not None for row in rows), rows
    return sum((store.data_dir / row.location).stat().st_size for row in rows)


def test_producer_config_compression_type_is_how_outputs_compress(
    run_until_drained: Any, sqlite_store: Store
) -> None:
    """500 values of 2000 ``a``: a megabyte that compresses to almost nothing."""
    store = sqlite_store
    _topics(store, "out-auto", "out-none", "out-zstd")
    values = ["a" * 2000 for _ in range(500)]
    _produce(store, values)
    for name, producer in (("auto", None), ("none", "NONE"), ("zstd", "ZSTD")):
        config = FunctionConfig.build(
            name=name,
            py=str(FUNCS),
            classname="windows.slow",
            inputs=["in"],
            output=f"out-{name}",
            subscription_position="earliest",
            producer_config={"compressionType": producer} if producer else None,
        )
        run_until_drained(config, store)
        assert _values(store, f"out-{name}") == [v + "!" for v in values]
    raw = 500 * 2001
    assert _file_bytes(store, "out-none") >= raw  # as asked, though it compresses
    assert _file_bytes(store, "out-zstd") < raw // 20
    assert _file_bytes(store, "out-auto") < raw // 20  # the store's choice: LZ4 here


def test_a_window_function_needs_window_config_and_a_query_of_its_own(tmp_path: Path) -> None:
    from sparkfn.api.errors import FunctionLoadError
    from sparkfn.runtime.function.loader import load_function
    from sparkfn.runtime.group.run import groupable

    windowed = _config("grouped", {"windowLengthCount": 2})
    assert not groupable(windowed)  # the clock's ticks and the watermark's pace are its own
    assert groupable(windowed.model_copy(update={"window_config": None}))
    plain = FunctionConfig.build(
        name="plain", py=str(FUNCS), classname="windows.Joined", inputs=["in"]
    )
    with pytest.raises(
        FunctionLoadError, match="Joined is a WindowFunction; give it window_config"
    ):
        load_function(plain)
    code = tmp_path / "batchy.py"
    code.write_text(
        "from sparkfn import vectorized\n\n@vectorized\ndef process(batch):\n    return batch\n"
    )
    batchy = FunctionConfig.build(
        name="batchy", py=str(code), inputs=["in"], window_config={"windowLengthCount": 2}
    )
    with pytest.raises(FunctionLoadError, match="a vectorized function cannot have window_config"):
        load_function(batchy)
    event_time = {"windowLengthDurationMs": 10, "timestampExtractorClassName": "windows.Nope"}
    with pytest.raises(FunctionLoadError, match="timestampExtractorClassName: .*no 'Nope'"):
        load_function(_config("nope", event_time))


def test_fewer_instances_take_over_the_messages_of_the_gone_ones(
    run_until_drained: Any, store: Store
) -> None:
    """Two instances hold three messages each; run again with one, which takes all six."""
    admin = TopicAdmin(store)
    admin.create("in", partitions=2, schema_type="string")
    admin.create("out-shrunk", partitions=1, schema_type="string")
    producer = Producer(store, "in")
    for partition in range(2):
        producer.send_batch(
            [Message(f"p{partition}-{i}".encode()) for i in range(3)], partition=partition
        )
    fields: dict[str, Any] = {"subscription_type": "failover"}
    run_until_drained(_config("shrunk", {"windowLengthCount": 8}, parallelism=2, **fields), store)
    assert _values(store, "out-shrunk") == []
    assert len(_pane(store, "shrunk").held) == 3
    assert get_state(store, "public/default/shrunk", state_key(1)) is not None

    producer.send_batch([Message(b"last-1"), Message(b"last-2")], partition=0)
    run_until_drained(_config("shrunk", {"windowLengthCount": 8}, parallelism=1, **fields), store)
    [window] = _values(store, "out-shrunk")
    values = window.removesuffix("|-").split(",")
    assert sorted(values) == sorted(
        [f"p{p}-{i}" for p in range(2) for i in range(3)] + ["last-1", "last-2"]
    )
    assert values[-2:] == ["last-1", "last-2"]
    assert get_state(store, "public/default/shrunk", state_key(1)) is None  # taken, once
