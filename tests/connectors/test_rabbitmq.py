"""The ``rabbitmq`` source and sink against the RabbitMQ server on 127.0.0.1:5672."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pika
import pytest
from brokers import (
    HOST,
    fill,
    mute_after_handshake_amqp,
    require,
    unique,
    values,
    wait_for,
)
from connector_probes import StaticSinkContext, StaticSourceContext

from sparkfn.api.connector import Record
from sparkfn.api.errors import BrokerUnreachableError, ConfigError
from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.connectors.builtin.rabbitmq import RabbitMQSource
from sparkfn.connectors.builtin.rabbitmq_sink import RabbitMQSink
from sparkfn.connectors.registry import load_sink, load_source
from sparkfn.connectors.source.runner import SourceRunner, SourceState
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer

# They share the brokers test_broker_restart.py restarts: one xdist worker for them all.
pytestmark = pytest.mark.xdist_group("brokers")


@pytest.fixture
def queue() -> Iterator[str]:
    """A fresh durable queue, deleted after the test."""
    require("rabbitmq")
    name = unique("sparkfn-q")
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    conn.channel().queue_declare(name, durable=True)
    conn.close()
    yield name
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    conn.channel().queue_delete(name)
    conn.close()


def publish(queue: str, bodies: list[str]) -> None:
    """Publish persistent messages to ``queue`` (default exchange), committed 500 at a time."""
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    channel = conn.channel()
    channel.tx_select()
    props = pika.BasicProperties(delivery_mode=2)
    for start in range(0, len(bodies), 500):
        for body in bodies[start : start + 500]:
            channel.basic_publish("", queue, body.encode(), props)
        channel.tx_commit()
    conn.close()


def depth(queue: str) -> tuple[int, int]:
    """(messages ready, consumers) of ``queue``."""
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    ok = conn.channel().queue_declare(queue, passive=True).method
    conn.close()
    return ok.message_count, ok.consumer_count


def test_source_appends_every_message_and_acks_them_after_the_append(
    store: Store, queue: str
) -> None:
    TopicAdmin(store).create("in", schema_type="string")
    sent = [f"order {i} ünïcode" for i in range(2500)]
    publish(queue, sent)
    config = SourceConfig(
        name="rabbit", source_type="rabbitmq", output="in", batch_size=300,
        configs={"host": HOST, "queueName": queue, "prefetchCount": 500, "connectionName": "t"},
    )  # fmt: skip
    runner = SourceRunner(config, store)
    runner.start()
    try:
        wait_for(lambda: runner.stats.acked >= len(sent), "every message acked")
    finally:
        runner.stop("drain")
        assert runner.wait(30)
    assert runner.state is SourceState.STOPPED, runner.death
    assert values(store, "in") == sent  # exact content, order and count
    assert depth(queue) == (0, 0)  # all acked, the consumer gone


def test_source_leaves_what_it_did_not_append_in_the_queue(sqlite_store: Store, queue: str) -> None:
    TopicAdmin(sqlite_store).create("in", schema_type="string")
    publish(queue, ["a", "b", "c"])
    config = SourceConfig(
        name="rabbit", source_type="rabbitmq", output="in",
        configs={"host": HOST, "queueName": queue, "passive": True},
    )  # fmt: skip
    runner = SourceRunner(config, sqlite_store)
    runner.start()
    wait_for(lambda: runner.stats.acked == 3, "three acked")
    runner.stop("cancel")
    assert runner.wait(30)
    publish(queue, ["d"])
    assert depth(queue) == (1, 0)
    assert values(sqlite_store, "in") == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("configs", "error"),
    [
        ({"queueName": "q"}, r"source public/default/s \(rabbitmq\): configs\.host: required"),
        ({"host": HOST, "queueName": "q", "prefetch": 5}, r"configs\.prefetch: unknown setting"),
        ({"host": HOST, "queueName": "q", "port": "x"}, r"configs\.port: .*\(got 'x'\)"),
        ({"host": HOST, "port": 1, "queueName": "q"}, r"configs\.host/port: cannot reach RabbitMQ at 127\.0\.0\.1:1"),
        ({"host": HOST, "queueName": "q", "password": "wrong"}, r"configs\.username/password: RabbitMQ at .* refused user 'guest'"),
        ({"host": HOST, "queueName": "q", "virtualHost": "nope"}, r"configs\.virtualHost: user 'guest' cannot open virtual host 'nope'"),
        ({"host": HOST, "queueName": "sparkfn-missing-queue", "passive": True}, r"configs\.queueName: queue 'sparkfn-missing-queue' does not exist"),
    ],
    ids=["missing", "unknown", "ill-typed", "unreachable", "credentials", "vhost", "no-queue"],
)  # fmt: skip
def test_source_configs_are_checked_before_it_starts(configs: dict[str, Any], error: str) -> None:
    require("rabbitmq")
    with pytest.raises(ConfigError, match=error):
        load_source(SourceConfig(name="s", source_type="rabbitmq", output="o", configs=configs))


def test_sink_configs_are_checked_before_it_starts() -> None:
    require("rabbitmq")
    missing = {"host": HOST, "exchangeName": unique("none"), "passive": True}
    with pytest.raises(
        ConfigError,
        match=r"sink public/default/k \(rabbitmq\): configs\.exchangeName: exchange .* does not exist",
    ):
        load_sink(SinkConfig(name="k", sink_type="rabbitmq", inputs=["i"], configs=missing))
    with pytest.raises(ConfigError, match=r"configs\.exchangeType: Input should be"):
        load_sink(SinkConfig(name="k", sink_type="rabbitmq", inputs=["i"],
                             configs={"host": HOST, "exchangeName": "x", "exchangeType": "nope"}))  # fmt: skip


def test_sink_counts_confirms_that_arrive_while_it_is_still_publishing(queue: str) -> None:
    # pika reads the socket while basic_publish writes, so under load the
    # broker's confirm of a message often arrived before the sink had noted
    # that message as owed: the confirm was lost and flush() waited out its
    # whole timeout for it (a batch of 1000 failed after 60 s, then repeated).
    exchange = unique("sparkfn-x")
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    channel = conn.channel()
    channel.exchange_declare(exchange, "topic", durable=True)
    channel.queue_bind(queue, exchange, "results")
    sink = RabbitMQSink()
    configs = {"host": HOST, "exchangeName": exchange, "routingKey": "results",
               "connectionTimeout": 10_000}  # fmt: skip
    sink.open(configs, StaticSinkContext())
    try:
        for batch in range(40):
            for i in range(1000):
                sink.write(Record(f"{batch}-{i}", topic="public/default/out",
                                  message_id=f"0:{batch * 1000 + i}"))  # fmt: skip
            sink.flush()  # raises if a confirm is still owed after 10 s
            assert not sink.unconfirmed
    finally:
        sink.close()
        channel.exchange_delete(exchange)
        conn.close()
    assert depth(queue)[0] == 40_000


@pytest.mark.slow
def test_sink_publishes_every_message_confirmed_with_its_position_as_id(
    sqlite_store: Store, queue: str, spark: Any
) -> None:
    from sparkfn.connectors.sink.sink_run import SinkRun

    sent = [f"r{i}" for i in range(500)]
    fill(sqlite_store, "out", sent)
    exchange = unique("sparkfn-x")
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    channel = conn.channel()
    channel.exchange_declare(exchange, "topic", durable=True)
    channel.queue_bind(queue, exchange, "results")
    config = SinkConfig.build(
        name="rabbit-sink", sink_type="rabbitmq", inputs=["out"],
        configs={"host": HOST, "exchangeName": exchange, "routingKey": "results"},
        subscription_position="earliest",
    )  # fmt: skip
    with SinkRun(config, store=sqlite_store, spark=spark) as run:
        run.start(until_drained=True)
        run.wait(timeout=120)
    got: list[str] = []
    ids: set[str] = set()
    for method, props, body in channel.consume(queue, inactivity_timeout=2):
        if method is None:
            break
        got.append(body.decode())
        ids.add(props.message_id)
        channel.basic_ack(method.delivery_tag)
    channel.cancel()
    channel.exchange_delete(exchange)
    conn.close()
    assert sorted(got) == sorted(sent)
    assert len(ids) == len(sent) and all(i.startswith("public/default/out@") for i in ids)


def test_source_keys_each_record_by_its_routing_key_as_pulsars_does(
    sqlite_store: Store, queue: str
) -> None:
    # Pulsar's source gives a record the message's routing key as its key, so a Redis
    # sink downstream has one to SET: here through an exchange, two keys.
    exchange = unique("sparkfn-x")
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    channel = conn.channel()
    channel.exchange_declare(exchange, "direct")
    for key in ("eu", "us"):
        channel.queue_bind(queue, exchange, key)
        channel.basic_publish(exchange, key, f"to {key}".encode())
    channel.basic_publish("", queue, b"direct")  # the default exchange: the queue's name
    TopicAdmin(sqlite_store).create("in", schema_type="string")
    config = SourceConfig(
        name="rabbit", source_type="rabbitmq", output="in",
        configs={"host": HOST, "queueName": queue},
    )  # fmt: skip
    runner = SourceRunner(config, sqlite_store)
    runner.start()
    try:
        wait_for(lambda: runner.stats.acked == 3, "three acked")
    finally:
        runner.stop("drain")
        assert runner.wait(30)
        channel.exchange_delete(exchange)
        conn.close()
    got = Consumer(sqlite_store, "in", initial_position="earliest").receive(max_messages=10)
    assert [(m.key, m.value) for m in got] == [
        ("eu", b"to eu"),
        ("us", b"to us"),
        (queue, b"direct"),
    ]
    assert all("routingKey" not in m.properties for m in got), [m.properties for m in got]


def test_source_takes_an_existing_queue_as_it_is_and_declares_a_missing_one_as_pulsar() -> None:
    require("rabbitmq")
    transient, missing = unique("sparkfn-transient"), unique("sparkfn-missing")
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    channel = conn.channel()
    channel.queue_declare(transient, durable=False)
    try:
        # passive false: an existing non-durable queue was a 406 (declared durable) before.
        for name in (transient, missing):
            load_source(
                SourceConfig(
                    name="s", source_type="rabbitmq", output="o",
                    configs={"host": HOST, "queueName": name, "passive": False},
                )
            )  # fmt: skip
        # The missing one now exists with Pulsar's arguments: a declare with them is no 406.
        channel.queue_declare(missing, durable=False, exclusive=False, auto_delete=False)
    finally:
        channel.queue_delete(transient)
        channel.queue_delete(missing)
        conn.close()


def test_sink_binds_its_queue_name_and_routes_by_a_messages_routing_key_property(
    queue: str,
) -> None:
    # Pulsar's sink: queueName declares a direct exchange and the queue bound by routingKey;
    # a message's routingKey property overrides the configured key.
    exchange, bound = unique("sparkfn-x"), unique("sparkfn-q")
    sink = RabbitMQSink()
    configs = {"host": HOST, "exchangeName": exchange, "queueName": bound, "routingKey": "main"}
    sink.open(configs, StaticSinkContext())
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    channel = conn.channel()
    try:
        channel.queue_bind(queue, exchange, "other")
        sink.write(Record("plain", topic="public/default/out", message_id="0:0"))
        sink.write(
            Record("routed", properties={"routingKey": "other"}, topic="public/default/out",
                   message_id="0:1")
        )  # fmt: skip
        sink.flush()
        taken = {}
        for name in (bound, queue):
            method, _, body = channel.basic_get(name, auto_ack=True)
            taken[name] = body
            assert channel.basic_get(name, auto_ack=True)[0] is None, f"{name}: more than one"
        assert taken == {bound: b"plain", queue: b"routed"}
    finally:
        sink.close()
        channel.queue_delete(bound)
        channel.exchange_delete(exchange)
        conn.close()


@pytest.mark.parametrize("kind", ["source", "sink"])
def test_open_ends_when_the_broker_stops_answering_after_the_handshake(kind: str) -> None:
    """With ``requestedHeartbeat`` 0 (no heartbeats to notice a hung broker), open() is still
    bounded by ``connectionTimeout``: a BrokerUnreachableError naming the step, not a wait
    without end."""
    with mute_after_handshake_amqp() as port:
        configs: dict[str, Any] = {
            "host": HOST, "port": port, "requestedHeartbeat": 0, "connectionTimeout": 1500,
        }  # fmt: skip
        connector: RabbitMQSource | RabbitMQSink
        if kind == "source":
            connector, context = RabbitMQSource(), StaticSourceContext("mute")
            configs["queueName"] = "q"
        else:
            connector, context = RabbitMQSink(), StaticSinkContext("mute")
            configs["exchangeName"] = "e"
        failed: list[BaseException] = []

        def open_it() -> None:
            try:
                connector.open(configs, context)  # type: ignore[arg-type]
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                failed.append(exc)

        began = time.monotonic()
        opening = threading.Thread(target=open_it, daemon=True)
        opening.start()
        opening.join(15)
        assert not opening.is_alive(), f"{kind} open() still waits on a mute broker after 15 s"
    assert len(failed) == 1, failed
    assert isinstance(failed[0], BrokerUnreachableError), repr(failed[0])
    message = str(failed[0])
    assert f"{kind} public/default/mute (rabbitmq)" in message
    assert "1500 ms" in message and "connectionTimeout" in message
    assert "step: open a channel" in message
    assert time.monotonic() - began < 10
    assert connector.connection is None  # closed, not left holding the socket
