"""The broker sinks' own wire paths store what their clients' calls stored.

The ``redis`` sink lays out its XADDs and SETs and sends them as one MULTI/EXEC
on a socket of its own (:mod:`sparkfn.connectors.builtin.redis_writer`); the
``rabbitmq`` sink marshals its publishes' frames itself
(:class:`~sparkfn.connectors.builtin.rabbitmq_sink.Frames`); the ``nats`` sink
lays out its ``HPUB`` commands and counts JetStream's acks itself
(:mod:`sparkfn.connectors.builtin.nats_publish`). Each test writes
the same records through the sink and through the client's own call with the
arguments the sink used to pass it, then compares what the broker keeps:
values, keys, properties, event times, routing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pika
import pytest
import redis
from brokers import HOST, require, unique
from connector_probes import StaticSinkContext

from sparkfn.api.connector import Record
from sparkfn.connectors.builtin._config import payload
from sparkfn.connectors.builtin.nats_jetstream import NatsJetStreamSink
from sparkfn.connectors.builtin.rabbitmq_sink import RabbitMQSink
from sparkfn.connectors.builtin.redis_streams import RedisStreamSink
from sparkfn.connectors.builtin.redis_writer import bulk

pytestmark = pytest.mark.xdist_group("brokers")

NATS = "nats://127.0.0.1:4222"

# Every shape of record a sink is given: text and bytes values, JSON ones, none; keys,
# event times, properties (text that is not ASCII, values that look like the protocol).
RECORDS = [
    Record(b"plain", topic="public/default/a", message_id="0:0"),
    Record("tèxt ✓", key="kéy", topic="public/default/a", message_id="0:1", event_time=1_700_000_000_123),
    Record({"b": [1, 2], "a": "x"}, topic="public/default/b", message_id="1:2",
           properties={"z": "1", "ünï": "çödé", "routingKey": "r2"}),
    Record(None, key="", topic="public/default/b", message_id="1:3", properties={}),
    Record(b"\r\n+QUEUED\r\n*2\r\n$5\r\nvalue\r\n", key="k\r\n", topic="public/default/a",
           message_id="0:4", event_time=0, properties={"p": "+OK\r\n"}),
    Record(bytes(range(256)) * 600, topic="public/default/a", message_id="0:5"),  # > frame max
    Record(b"", topic="", message_id="", key="k"),
]  # fmt: skip


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    require("redis")
    with redis.Redis(HOST, 6379) as conn:
        yield conn


def _old_xadd(stream: str, record: Record) -> list[Any]:
    """The XADD arguments the sink gave redis-py's pipeline before it laid them out itself."""
    args: list[Any] = ["XADD", stream, "*", "value", payload(record.value),
                       "topic", record.topic or "", "messageId", record.message_id or ""]  # fmt: skip
    if record.key is not None:
        args += ("key", record.key)
    if record.event_time is not None:
        args += ("eventTime", record.event_time)
    if record.properties:
        args += ("properties", json.dumps(record.properties, sort_keys=True))
    return args


def test_the_redis_sinks_own_xadds_store_what_redis_py_stored(client: redis.Redis) -> None:
    ours, theirs = unique("sparkfn-wire"), unique("sparkfn-wire")
    sink = RedisStreamSink()
    sink.open({"redisHosts": f"{HOST}:6379", "streamName": ours}, StaticSinkContext())
    try:
        for _ in range(3):  # a batch of 3 x 7, then one of 7: two transactions
            for record in RECORDS:
                sink.write(record)
        sink.flush()
        for record in RECORDS:
            sink.write(record)
        sink.flush()
        pipe = client.pipeline(transaction=True)
        for record in RECORDS * 4:
            pipe.execute_command(*_old_xadd(theirs, record))
        pipe.execute()
        got: Any = client.xrange(ours)
        want: Any = client.xrange(theirs)
        assert len(got) == len(RECORDS) * 4
        assert [list(f.items()) for _, f in got] == [list(f.items()) for _, f in want]
    finally:
        sink.close()
        client.delete(ours, theirs)


def test_the_redis_sinks_sets_store_what_redis_py_stored(client: redis.Redis) -> None:
    prefix = unique("sparkfn-wire")
    sink = RedisStreamSink()
    sink.open({"redisHosts": f"{HOST}:6379", "redisDatabase": 5}, StaticSinkContext())
    keyed = [Record(f"v{i}", key=f"{prefix}-{i % 3}é", topic="t", message_id=f"0:{i}")
             for i in range(10)] + [Record(b"\r\n$1\r\n", key=prefix, topic="t", message_id="0:10")]  # fmt: skip
    try:
        for record in keyed:
            sink.write(record)
        sink.flush()
        with redis.Redis(HOST, 6379, db=5) as five:
            got = {k: five.get(k) for k in {r.key for r in keyed if r.key}}
            five.delete(*got)
    finally:
        sink.close()
    last = {r.key: payload(r.value) for r in keyed}
    assert got == last


def test_the_redis_sink_raises_the_first_refused_command_and_stays_in_step(
    client: redis.Redis,
) -> None:
    stream, text = unique("sparkfn-wire"), unique("sparkfn-wire")
    client.set(text, "not a stream")
    sink = RedisStreamSink()
    sink.open({"redisHosts": f"{HOST}:6379", "streamName": stream}, StaticSinkContext())
    try:
        writer = sink.writer
        assert writer is not None
        # Failed inside EXEC (the others ran, as in any MULTI/EXEC): WRONGTYPE, named.
        xadd = b"*5\r\n%s%s%s%s%s" % (bulk("XADD"), bulk(text), bulk("*"), bulk("f"), bulk("v"))
        good = b"*5\r\n%s%s%s%s%s" % (bulk("XADD"), bulk(stream), bulk("*"), bulk("f"), bulk("v"))
        with pytest.raises(redis.exceptions.ResponseError, match=r"# 2 .*WRONGTYPE"):
            writer.transaction([good, xadd, good])
        assert client.xlen(stream) == 2
        # Refused when queued (wrong arity): EXEC aborts, nothing runs.
        with pytest.raises(redis.exceptions.ResponseError, match=r"# 1 .*wrong number"):
            writer.transaction([b"*2\r\n%s%s" % (bulk("XADD"), bulk(stream)), good])
        assert client.xlen(stream) == 2
        sink.write(RECORDS[0])  # still in step: the next batch is answered as its own
        sink.flush()
        assert client.xlen(stream) == 3
    finally:
        sink.close()
        client.delete(stream, text)


@pytest.fixture
def rabbit() -> Iterator[Any]:
    require("rabbitmq")
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    yield conn.channel()
    conn.close()


def _drain(channel: Any, queue: str) -> list[tuple[str, dict[str, Any], bytes]]:
    """Every message of ``queue``: its routing key, properties and body."""
    got = []
    while True:
        method, props, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            return got
        shown = {k: v for k, v in vars(props).items() if v is not None}
        got.append((method.routing_key, shown, body))


def test_the_rabbitmq_sinks_own_frames_are_the_messages_pika_published(rabbit: Any) -> None:
    exchange, queue = unique("sparkfn-x"), unique("sparkfn-q")
    rabbit.exchange_declare(exchange, "topic", durable=True)
    rabbit.queue_declare(queue, durable=True)
    rabbit.queue_bind(queue, exchange, "#")
    sink = RabbitMQSink()
    sink.open({"host": HOST, "exchangeName": exchange, "routingKey": "main"}, StaticSinkContext())
    try:
        for record in RECORDS * 60:  # 420: more than one piece handed to the connection
            sink.write(record)
        sink.flush()
        ours = _drain(rabbit, queue)
        mode = pika.DeliveryMode.Persistent
        for record in RECORDS * 60:  # what the sink gave pika's basic_publish before
            props = pika.BasicProperties(
                delivery_mode=mode, message_id=f"{record.topic}@{record.message_id}",
                timestamp=record.event_time // 1000 if record.event_time is not None else None,
                headers=dict(record.properties or {}) or None,
            )  # fmt: skip
            wanted = (record.properties or {}).get("routingKey")
            key = str(wanted or "main" or record.key or "")
            rabbit.basic_publish(exchange, key, payload(record.value), props, True)
        theirs = _drain(rabbit, queue)
    finally:
        sink.close()
        rabbit.queue_delete(queue)
        rabbit.exchange_delete(exchange)
    assert len(ours) == len(RECORDS) * 60
    assert ours == theirs
    assert {k for k, _, _ in ours} == {"main", "r2"}
    assert len(ours[5][2]) == 256 * 600


def _nats_streams(*names: str) -> Any:
    """Make the streams ``<name>.>`` on a connection of their own; returns their deleter."""
    import nats

    async def each(make: bool) -> None:
        nc = await nats.connect(NATS)
        try:
            js = nc.jetstream()
            for name in names:
                await (
                    js.add_stream(name=name, subjects=[f"{name}.>"])
                    if make
                    else js.delete_stream(name)
                )
        finally:
            await nc.close()

    asyncio.run(each(True))
    return lambda: asyncio.run(each(False))


async def _nats_read(stream: str) -> list[tuple[bytes, dict[str, str]]]:
    """Every message of ``stream`` in order: its data and headers."""
    import nats

    nc = await nats.connect(NATS)
    try:
        js, got = nc.jetstream(), []
        info = await js.stream_info(stream)
        for seq in range(1, info.state.last_seq + 1):
            msg = await js.get_msg(stream, seq)
            got.append((msg.data or b"", dict(msg.headers or {})))
        return got
    finally:
        await nc.close()


def test_the_nats_sinks_own_publishes_store_what_nats_py_stored() -> None:
    require("nats")
    import nats

    ours, theirs = (unique("SPARKFN_WIRE").replace("-", "_") for _ in range(2))
    delete = _nats_streams(ours, theirs)
    sink = NatsJetStreamSink()
    try:
        sink.open({"servers": NATS, "subject": f"{ours}.out", "stream": ours}, StaticSinkContext())
        # NATS takes ASCII header names only (nats-py refuses others, before and now).
        shapes = [replace(r, properties={k.replace("ünï", "uni"): v for k, v in r.properties.items()})
                  for r in RECORDS]  # fmt: skip
        batch = [replace(r, message_id=f"{r.message_id}/{i}") for i, r in enumerate(shapes * 150)]
        for record in batch:  # 1,050: three windows of 512
            sink.write(record)
        sink.flush()
        for record in batch[:20]:  # a replay: JetStream drops it by its Nats-Msg-Id
            sink.write(record)
        sink.flush()
        assert sink.duplicates == 20

        async def old(nc_url: str) -> None:  # what the sink gave js.publish before
            nc = await nats.connect(nc_url)
            js = nc.jetstream()
            for record in batch:
                headers = {str(k): str(v) for k, v in (record.properties or {}).items()}
                headers["Nats-Msg-Id"] = f"{sink.id_prefix}:{record.topic}@{record.message_id}"
                if record.key is not None:
                    headers["sparkfn-key"] = record.key
                await js.publish(
                    f"{theirs}.out", payload(record.value), stream=theirs, headers=headers
                )
            await nc.close()

        asyncio.run(old(NATS))
        got, want = asyncio.run(_nats_read(ours)), asyncio.run(_nats_read(theirs))
        assert len(got) == len(batch)
        assert {h.pop("Nats-Expected-Stream") for _, h in got} == {ours}
        assert {h.pop("Nats-Expected-Stream") for _, h in want} == {theirs}
        assert got == want
        # Refusals name the record and why: a stream that is not the subject's.
        sink.config = sink.config.model_copy(update={"stream": theirs}) if sink.config else None
        sink.write(RECORDS[1])
        with pytest.raises(RuntimeError, match=r"public/default/a@0:1 to .*failed: JetStream: "):
            sink.flush()
    finally:
        sink.close()
        delete()


def test_the_nats_sink_says_when_no_stream_takes_its_subject() -> None:
    require("nats")
    sink = NatsJetStreamSink()
    subject = f"{unique('sparkfn-nobody')}.out"
    sink.open({"servers": NATS, "subject": subject}, StaticSinkContext())
    try:
        sink.write(RECORDS[0])
        with pytest.raises(RuntimeError, match=r"public/default/a@0:0 to .*no stream takes"):
            sink.flush()
        sink.buffer = []
        sink.write(Record(b"x", properties={"bad key": "v"}, topic="t", message_id="0:1"))
        with pytest.raises(RuntimeError, match=r"BadHeaderError"):
            sink.flush()
    finally:
        sink.close()
