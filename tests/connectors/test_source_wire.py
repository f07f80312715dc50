"""The ``rabbitmq`` source's own decoding of deliveries gives the records pika's did.

:mod:`sparkfn.connectors.builtin.rabbitmq_deliveries` reads deliveries from the
connection's bytes. The same messages go to two queues (a fanout exchange);
the source reads one, pika's own consumer the other, and each of pika's
deliveries is made a record by the source's pika path (``_on_message``, what
the source did with every delivery before): both lists must be equal.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pika
import pytest
from brokers import HOST, require, unique
from connector_probes import StaticSourceContext

from sparkfn.api.connector import Record
from sparkfn.connectors.builtin.rabbitmq import RabbitMQSource

pytestmark = pytest.mark.xdist_group("brokers")

PERSISTENT = pika.DeliveryMode.Persistent
# Every kind of delivery: properties the decoder reads itself, and others it leaves to
# pika's decoder; empty and multi-frame bodies; headers of several types.
MESSAGES: list[tuple[str, pika.BasicProperties, bytes]] = [
    ("k1", pika.BasicProperties(delivery_mode=PERSISTENT), b"plain"),
    ("k2", pika.BasicProperties(), b""),
    ("ké", pika.BasicProperties(message_id="m-ü", timestamp=1_700_000_000), b"x" * 100),
    ("k3", pika.BasicProperties(headers={"a": "1", "b": b"raw", "n": 7, "t": True}), b"h"),
    ("k4", pika.BasicProperties(content_type="text/plain", message_id="m2", priority=3,
                                delivery_mode=PERSISTENT, timestamp=5), "tèxt".encode()),
    ("k5", pika.BasicProperties(delivery_mode=PERSISTENT), bytes(range(256)) * 2000),
]  # fmt: skip


@pytest.fixture
def queues() -> Iterator[tuple[Any, str, str, str]]:
    """(channel, exchange, queue for the source, queue for pika), all deleted after."""
    require("rabbitmq")
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    channel = conn.channel()
    exchange, ours, theirs = unique("sparkfn-x"), unique("sparkfn-q"), unique("sparkfn-q")
    channel.exchange_declare(exchange, "fanout")
    for queue in (ours, theirs):
        channel.queue_declare(queue)
        channel.queue_bind(queue, exchange)
    yield channel, exchange, ours, theirs
    for queue in (ours, theirs):
        channel.queue_delete(queue)
    channel.exchange_delete(exchange)
    conn.close()


def _read_all(queue: str, n: int) -> list[Record]:
    """``n`` records of the source, not acked (they go back to the queue on close)."""
    source = RabbitMQSource()

    def by_pika(*_: Any) -> None:
        pytest.fail("a delivery was left to pika's decoder")

    source._on_message = by_pika  # type: ignore[method-assign]
    source.open({"host": HOST, "queueName": queue, "prefetchCount": 0}, StaticSourceContext())
    got: list[Record] = []
    try:
        for _ in range(200):
            batch = source.read()
            got += batch if isinstance(batch, list) else []
            if len(got) >= n:
                return got
        raise AssertionError(f"{len(got)} of {n} read")
    finally:
        source.close()


def _pikas(queue: str, n: int) -> list[Record]:
    """``n`` deliveries to pika's own consumer, made records by the source's pika path."""
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    channel = conn.channel()
    maker = RabbitMQSource()
    for method, props, body in channel.consume(queue, inactivity_timeout=5):
        assert method is not None, f"{len(maker.buffer)} of {n} consumed"
        maker._on_message(channel, method, props, body)
        if len(maker.buffer) == n:
            break
    conn.close()  # not acked: they go back to the queue
    return maker.buffer


def test_the_sources_deliveries_are_the_records_pika_gave(
    queues: tuple[Any, str, str, str],
) -> None:
    channel, exchange, ours, theirs = queues
    sent = MESSAGES * 150  # 900: deliveries cut across the connection's reads
    for key, props, body in sent:
        channel.basic_publish(exchange, key, body, props)
    n = len(sent)
    for attempt in ("first", "redelivered"):
        got, want = _read_all(ours, n), _pikas(theirs, n)
        assert len(got) == n
        assert [r.value for r in got] == [body for _, _, body in sent]
        assert [(r.value, r.key, r.properties, r.event_time) for r in got] == [
            (r.value, r.key, r.properties, r.event_time) for r in want
        ], attempt
        assert [r.delivery_tag for r in got] == list(range(1, n + 1))  # type: ignore[attr-defined]
        redelivered = {r.properties.get("redelivered") for r in got}
        assert redelivered == ({None} if attempt == "first" else {"true"})


def test_a_read_returns_deliveries_as_they_arrive_and_says_when_the_queue_ran_dry(
    queues: tuple[Any, str, str, str],
) -> None:
    """The decoded deliveries bypass pika's event queues: a read's wait must still end
    when they arrive (it waited its whole ``readTimeoutMs`` before, 100 ms a batch), and
    one that owes acks for a stream of records it returned must not wait that long for
    more (the runner holds them meanwhile: the queue's last partial batch waited 100 ms)."""
    _, exchange, ours, _ = queues
    source = RabbitMQSource()
    configs = {"host": HOST, "queueName": ours, "prefetchCount": 0, "readTimeoutMs": 10_000}
    source.open(configs, StaticSourceContext())
    try:
        started = time.monotonic()
        publisher = threading.Thread(target=_publish_later, args=(exchange, 0.3, 150))
        publisher.start()
        got = source.read()
        waited = time.monotonic() - started
        publisher.join()
        assert isinstance(got, list) and got, got
        assert waited < 3, f"the first delivery ended the wait only after {waited:.1f} s"
        while len(got) < 150:
            more = source.read()
            assert isinstance(more, list), f"{len(got)} of 150, then {more!r}"
            got += more
        started = time.monotonic()
        assert source.read() is None  # dry after a stream, 150 records not acked: said at once
        assert time.monotonic() - started < 2
        source.ack(got[-1])
        source.commit()
        source.config = source.config.model_copy(update={"readTimeoutMs": 300})  # type: ignore[union-attr]
        started = time.monotonic()
        assert source.read() is None  # dry, nothing owed: the whole readTimeoutMs
        assert time.monotonic() - started >= 0.25
    finally:
        source.close()


def _publish_later(exchange: str, delay: float, n: int) -> None:
    time.sleep(delay)
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    channel = conn.channel()
    for i in range(n):
        channel.basic_publish(exchange, "k", f"{i}".encode())
    conn.close()
