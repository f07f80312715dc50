"""The ``redis`` (Streams) source and sink against the Redis server on 127.0.0.1:6379."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from brokers import (
    HOST,
    fill,
    require,
    unique,
    values,
    wait_for,
)

from sparkfn.api.errors import ConfigError
from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.connectors.builtin.redis_connection import StreamReader
from sparkfn.connectors.registry import load_sink, load_source
from sparkfn.connectors.source.runner import SourceRunner, SourceState
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

# They share the brokers test_broker_restart.py restarts: one xdist worker for them all.
pytestmark = pytest.mark.xdist_group("brokers")

HOSTS = f"{HOST}:6379"


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    require("redis")
    with redis.Redis(HOST, 6379) as conn:
        yield conn


@pytest.fixture
def stream(client: redis.Redis) -> Iterator[str]:
    """A stream name of the test's own, deleted after it."""
    name = unique("sparkfn-stream")
    yield name
    client.delete(name)


def xadd(client: redis.Redis, stream: str, bodies: list[str]) -> None:
    """Add entries ``{value: body}``, 1000 per round trip."""
    for start in range(0, len(bodies), 1000):
        pipe = client.pipeline(transaction=False)
        for body in bodies[start : start + 1000]:
            pipe.xadd(stream, {"value": body})
        pipe.execute()


def _config(stream: str, **extra: Any) -> dict[str, Any]:
    return {"redisHosts": HOSTS, "streamName": stream, **extra}


def test_source_appends_every_entry_and_xacks_after_the_append(
    store: Store, client: redis.Redis, stream: str
) -> None:
    TopicAdmin(store).create("in", schema_type="string")
    sent = [f"event {i} ✓" for i in range(2500)]
    xadd(client, stream, sent)
    client.xadd(stream, {"value": "keyed", "key": "k1", "region": "eu"})
    config = SourceConfig(name="rs", source_type="redis", output="in", batch_size=400,
                          configs=_config(stream, batchSize=300))  # fmt: skip
    runner = SourceRunner(config, store)
    runner.start()
    try:
        wait_for(lambda: runner.stats.acked >= len(sent) + 1, "every entry acked")
    finally:
        runner.stop("drain")
        assert runner.wait(30)
    assert runner.state is SourceState.STOPPED, runner.death
    assert values(store, "in") == [*sent, "keyed"]
    summary: Any = client.xpending(stream, "sparkfn")
    assert summary["pending"] == 0


def test_a_restarted_source_reads_its_pending_entries_again(
    sqlite_store: Store, client: redis.Redis, stream: str
) -> None:
    # Entries delivered to the consumer and never acked (a crash before the
    # XACK) are pending: the next run of the same consumer appends them.
    TopicAdmin(sqlite_store).create("in", schema_type="string")
    xadd(client, stream, ["p1", "p2", "p3", "new"])
    client.xgroup_create(stream, "sparkfn", id="0")
    consumer = "public.default.rs-0"
    client.xreadgroup("sparkfn", consumer, {stream: ">"}, count=3)  # p1..p3 now pending
    config = SourceConfig(name="rs", source_type="redis", output="in", configs=_config(stream))
    runner = SourceRunner(config, sqlite_store)
    runner.start()
    try:
        wait_for(lambda: runner.stats.acked >= 4, "four acked")
    finally:
        runner.stop("drain")
        assert runner.wait(30)
    assert values(sqlite_store, "in") == ["p1", "p2", "p3", "new"]
    summary: Any = client.xpending(stream, "sparkfn")
    assert summary["pending"] == 0


def test_the_sources_own_reader_gives_every_entry_as_redis_stores_it(
    client: redis.Redis, stream: str
) -> None:
    # The source's XREADGROUP is parsed by sparkfn (redis_connection.StreamReader): values
    # that look like RESP, hold CRLF, span several recvs; other fields; deleted entries.
    odd = [b"a\r\nb", b"", b"*2\r\n$5\r\nvalue\r\n$3\r\n", bytes(range(256)) * 2000]
    for value in odd:
        client.xadd(stream, {"value": value})
    client.xadd(stream, {"key": "k", "value": b"v", "extra": "e"})
    client.xadd(stream, {"other": "x"})
    xadd(client, stream, [f"{i}" * 40 for i in range(2500)])
    client.xgroup_create(stream, "g", id="0")
    reader = StreamReader(HOST, 6379, password=None, db=0, connect_timeout=5, timeout=10,
                          keepalive=False, value_field=b"value")  # fmt: skip
    try:
        got: list[Any] = []
        while entries := reader.xreadgroup("g", "c", stream, ">", 1000, 100):
            got += entries
        stored: Any = client.xrange(stream)
        assert [i for i, _ in got] == [i for i, _ in stored]
        assert [dict(zip(f[::2], f[1::2], strict=True)) for _, f in got] == [f for _, f in stored]
        client.xdel(stream, stored[0][0])  # pending, then deleted: its fields are nil
        pending = reader.xreadgroup("g", "c", stream, "0", 2, None)
        assert pending == [(stored[0][0], None), (stored[1][0], [b"value", odd[1]])]
        assert reader.xreadgroup("g", "c", stream, ">", 10, 20) == []  # BLOCK ran out
        with pytest.raises(redis.exceptions.ResponseError, match="NOGROUP"):
            reader.xreadgroup("nobody", "c", stream, ">", 10, None)
        assert len(reader.xreadgroup("g", "c", stream, "0", 5, None)) == 5  # still in step
        assert reader.xack(stream, "g", [i for i, _ in got[:10]]) == 10  # the deleted one too
        summary: Any = client.xpending(stream, "g")
        assert summary["pending"] == len(got) - 10
    finally:
        reader.close()


def test_the_sources_records_carry_every_entrys_value_key_properties_and_time(
    client: redis.Redis, stream: str
) -> None:
    # read() makes its records from the reader's two columns (ids, values); values alone
    # taken by the reader's match or, cut by a recv, by its parser; other entries by fields.
    from connector_probes import StaticSourceContext

    from sparkfn.connectors.builtin.redis_streams import RedisStreamSource

    big = bytes(range(256)) * 1500  # 384 KB: more than one recv
    entries: list[dict[str, Any]] = [{"value": b"a"}, {"value": big}, {"value": b""},
               {"value": b"v", "key": "k", "region": "eu"}, {"region": "us", "n": "1"}]  # fmt: skip
    entries += [{"value": f"{i}".encode() * 50} for i in range(1500)]
    for fields in entries:
        client.xadd(stream, fields)
    source = RedisStreamSource()
    source.open(_config(stream, batchSize=700), StaticSourceContext())
    try:
        got: list[Any] = []
        while batch := source.read():
            assert isinstance(batch, list)
            got += batch
    finally:
        source.close()
    stored: Any = client.xrange(stream)
    assert len(got) == len(entries)
    for record, (entry_id, fields) in zip(got, stored, strict=True):
        text_id = entry_id.decode()
        extra = {k.decode(): v.decode() for k, v in fields.items() if k not in (b"value", b"key")}
        if b"value" in fields:
            assert record.value == fields[b"value"]
        else:  # no value field: the entry as a JSON object
            assert json.loads(record.value) == extra
            extra = {}
        assert record.key == (fields[b"key"].decode() if b"key" in fields else None)
        assert record.properties == {**extra, "redisStream": stream, "redisId": text_id}
        assert record.event_time == int(text_id.split("-")[0])
        assert record.entry_id == entry_id


@pytest.mark.parametrize(
    ("configs", "error"),
    [
        ({"redisHosts": HOSTS}, r"source public/default/s \(redis\): configs\.streamName: required"),
        ({**_config("s"), "stream": "x"}, r"configs\.stream: unknown setting"),
        ({**_config("s"), "redisDatabase": "zero"}, r"configs\.redisDatabase: .*\(got 'zero'\)"),
        ({**_config("s"), "redisHosts": "a:1,b:2"}, r"configs\.redisHosts: one host:port"),
        ({**_config("s"), "redisHosts": f"{HOST}:1"}, r"configs\.redisHosts: cannot reach Redis at 127\.0\.0\.1:1"),
        ({**_config("s"), "redisDatabase": 999}, r"configs\.redisDatabase/redisPassword: Redis at .*: DB index is out of range"),
        ({**_config("sparkfn-no-such-stream"), "createGroup": False}, r"configs\.streamName: stream 'sparkfn-no-such-stream' does not exist"),
    ],
    ids=["missing", "unknown", "ill-typed", "cluster", "unreachable", "database", "no-stream"],
)  # fmt: skip
def test_source_configs_are_checked_before_it_starts(configs: dict[str, Any], error: str) -> None:
    require("redis")
    with pytest.raises(ConfigError, match=error):
        load_source(SourceConfig(name="s", source_type="redis", output="o", configs=configs))


def test_a_missing_group_is_named(client: redis.Redis, stream: str) -> None:
    client.xadd(stream, {"value": "x"})
    configs = _config(stream, groupName="nobody", createGroup=False)
    with pytest.raises(ConfigError, match=r"configs\.groupName: stream .* has no group 'nobody'"):
        load_source(SourceConfig(name="s", source_type="redis", output="o", configs=configs))
    with pytest.raises(ConfigError, match=r"sink public/default/k \(redis\): configs\.maxLen"):
        load_sink(SinkConfig(name="k", sink_type="redis", inputs=["i"],
                             configs=_config(stream, maxLen=0)))  # fmt: skip


@pytest.mark.slow
def test_sink_xadds_every_message_with_its_position(
    sqlite_store: Store, client: redis.Redis, stream: str, spark: Any
) -> None:
    from sparkfn.connectors.sink.sink_run import SinkRun

    sent = [f"r{i}" for i in range(500)]
    fill(sqlite_store, "out", sent)
    config = SinkConfig.build(name="redis-sink", sink_type="redis", inputs=["out"],
                              configs=_config(stream), subscription_position="earliest")  # fmt: skip
    with SinkRun(config, store=sqlite_store, spark=spark) as run:
        run.start(until_drained=True)
        run.wait(timeout=120)
    entries: Any = client.xrange(stream)
    got = [fields[b"value"].decode() for _, fields in entries]
    assert sorted(got) == sorted(sent)
    ids = {(f[b"topic"], f[b"messageId"]) for _, f in entries}
    assert len(ids) == len(sent)
    assert {f[b"key"] for _, f in entries} == {f"k{i}".encode() for i in range(7)}


# Pulsar's documented Redis sink configs, values as strings as in its YAML examples.
PULSAR_SINK_CONFIGS = {
    "redisHosts": HOSTS, "redisPassword": "", "redisDatabase": "0", "clientMode": "Standalone",
    "operationTimeout": "2000", "batchSize": "100", "batchTimeMs": "1000", "connectTimeout": "3000",
    "autoReconnect": "true", "requestQueue": "2147483647", "tcpNoDelay": "false", "keepAlive": "true",
}  # fmt: skip


@pytest.mark.slow
def test_a_pulsar_users_sink_configs_set_each_messages_key_to_its_value(
    sqlite_store: Store, client: redis.Redis, spark: Any
) -> None:
    # Without streamName the sink writes as Pulsar's does: SET key value.
    from sparkfn.connectors.sink.sink_run import SinkRun

    prefix = unique("sparkfn-kv")
    sent = [f"r{i}" for i in range(500)]
    keyed = [(f"{prefix}-{i % 7}", value) for i, value in enumerate(sent)]
    TopicAdmin(sqlite_store).create("kv", partitions=2, schema_type="string")
    Producer(sqlite_store, "kv").send_batch([Message(v.encode(), key=k) for k, v in keyed])
    config = SinkConfig.build(
        name="redis-kv",
        sink_type="redis",
        inputs=["kv"],
        configs=PULSAR_SINK_CONFIGS,
        subscription_position="earliest",
    )
    try:
        with SinkRun(config, store=sqlite_store, spark=spark) as run:
            run.start(until_drained=True)
            run.wait(timeout=120)
        last = dict(keyed)  # a key's messages share a partition: its last one is written last
        assert {k: client.get(k) for k in last} == {k: v.encode() for k, v in last.items()}
    finally:
        client.delete(*{k for k, _ in keyed})


def test_a_key_value_sink_writes_a_message_without_a_key_under_the_empty_key(
    client: redis.Redis,
) -> None:
    # Pulsar's Redis sink SETs "" for a message without a key; it used to be an error,
    # which stopped the sink on the first such message.
    from connector_probes import StaticSinkContext

    from sparkfn.api.connector import Record
    from sparkfn.connectors.builtin.redis_streams import RedisStreamSink

    database = {**PULSAR_SINK_CONFIGS, "redisDatabase": "7"}  # "" of its own, not db 0's
    value = unique("unkeyed")
    sink = RedisStreamSink()
    sink.open(database, StaticSinkContext())
    try:
        sink.write(Record(value, topic="public/default/raw", message_id="0:3"))
        sink.flush()
        with redis.Redis(HOST, 6379, db=7) as seven:
            assert seven.get("") == value.encode()
            seven.delete("")
    finally:
        sink.close()
