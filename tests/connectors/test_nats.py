"""The ``nats`` (JetStream) source and sink against the NATS server on 127.0.0.1:4222."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import nats
import pytest
from brokers import (
    fill,
    require,
    unique,
    values,
    wait_for,
)
from connector_probes import StaticSourceContext
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig

from sparkfn.api.errors import ConfigError
from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.connectors.builtin.nats_pull import Puller
from sparkfn.connectors.registry import load_sink, load_source
from sparkfn.connectors.source.runner import SourceRunner, SourceState
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from waiting import until

# They share the brokers test_broker_restart.py restarts: one xdist worker for them all.
pytestmark = pytest.mark.xdist_group("brokers")

URL = "nats://127.0.0.1:4222"
T = TypeVar("T")


def js_run(action: Callable[[JetStreamContext], Awaitable[T]]) -> T:
    """Run ``action(jetstream)`` on a connection of its own."""

    async def main() -> T:
        nc = await nats.connect(URL)
        try:
            return await action(nc.jetstream())
        finally:
            await nc.close()

    return _alone(main())


@pytest.fixture
def stream() -> Iterator[str]:
    """A stream of the test's own taking ``<name>.>``, deleted after it."""
    require("nats")
    name = unique("SPARKFN").replace("-", "_")

    async def create(js: JetStreamContext) -> None:
        await js.add_stream(name=name, subjects=[f"{name}.>"])

    js_run(create)
    yield name

    async def delete(js: JetStreamContext) -> None:
        await js.delete_stream(name)

    js_run(delete)


def publish(subject: str, bodies: list[str]) -> None:
    """Publish ``bodies`` to JetStream, 500 awaited at a time."""

    async def send(js: JetStreamContext) -> None:
        for start in range(0, len(bodies), 500):
            await asyncio.gather(
                *(js.publish(subject, b.encode()) for b in bodies[start : start + 500])
            )

    js_run(send)


def test_source_appends_every_message_and_acks_after_the_append(store: Store, stream: str) -> None:
    TopicAdmin(store).create("in", schema_type="string")
    sent = [f"event {i} ✓" for i in range(2500)]
    publish(f"{stream}.in", sent)
    config = SourceConfig(
        name="ns", source_type="nats", output="in", batch_size=400,
        configs={"servers": URL, "stream": stream, "durableName": "sparkfn", "batchSize": 300},
    )  # fmt: skip
    runner = SourceRunner(config, store)
    runner.start()
    try:
        wait_for(lambda: runner.stats.acked >= len(sent), "every message acked")
    finally:
        runner.stop("drain")
        assert runner.wait(30)
    assert runner.state is SourceState.STOPPED, runner.death
    assert values(store, "in") == sent

    async def info(js: JetStreamContext) -> Any:
        return await js.consumer_info(stream, "sparkfn")

    consumer = js_run(info)
    assert (consumer.num_ack_pending, consumer.num_pending) == (0, 0)
    assert consumer.ack_floor.stream_seq == len(sent)


@pytest.mark.parametrize(
    ("configs", "error"),
    [
        ({"servers": URL, "durableName": "d"}, r"source public/default/s \(nats\): configs\.stream: required"),
        ({"servers": URL, "stream": "S", "durableName": "d", "durable": "x"}, r"configs\.durable: unknown setting"),
        ({"servers": URL, "stream": "S", "durableName": "d", "batchSize": "many"}, r"configs\.batchSize: .*\(got 'many'\)"),
        ({"servers": "nats://127.0.0.1:1", "stream": "S", "durableName": "d", "connectTimeoutMs": 1000}, r"configs\.servers: cannot reach NATS at \['nats://127\.0\.0\.1:1'\]"),
        ({"servers": URL, "stream": "SPARKFN_NO_SUCH_STREAM", "durableName": "d"}, r"configs\.stream: JetStream has no stream 'SPARKFN_NO_SUCH_STREAM'"),
    ],
    ids=["missing", "unknown", "ill-typed", "unreachable", "no-stream"],
)  # fmt: skip
def test_source_configs_are_checked_before_it_starts(configs: dict[str, Any], error: str) -> None:
    require("nats")
    with pytest.raises(ConfigError, match=error):
        load_source(SourceConfig(name="s", source_type="nats", output="o", configs=configs))


def test_sink_configs_are_checked_before_it_starts() -> None:
    require("nats")
    configs = {"servers": URL, "subject": "x", "stream": "SPARKFN_NO_SUCH_STREAM"}
    with pytest.raises(
        ConfigError,
        match=r"sink public/default/k \(nats\): configs\.stream: JetStream has no stream",
    ):
        load_sink(SinkConfig(name="k", sink_type="nats", inputs=["i"], configs=configs))


@pytest.mark.slow
@pytest.mark.long_running(50)
def test_sink_publishes_once_and_a_replay_is_dropped_by_jetstream(
    sqlite_store: Store, stream: str, spark: Any
) -> None:
    from sparkfn.connectors.sink.sink_run import SinkRun

    sent = [f"r{i}" for i in range(500)]
    fill(sqlite_store, "out", sent)
    configs = {"servers": URL, "subject": f"{stream}.out", "stream": stream}
    # The second run reads the topic again under another subscription: the
    # same messages, the same Nats-Msg-Id values, as after a crash.
    for subscription in ("first", "replay"):
        config = SinkConfig.build(name="nats-sink", sink_type="nats", inputs=["out"],
                                  subscription_name=subscription, configs=configs,
                                  subscription_position="earliest")  # fmt: skip
        with SinkRun(config, store=sqlite_store, spark=spark) as run:
            run.start(until_drained=True)
            run.wait(timeout=120)

    async def read_all(js: JetStreamContext) -> list[Any]:
        sub = await js.pull_subscribe(f"{stream}.out", durable="check", stream=stream)
        got: list[Any] = []
        while True:
            try:
                batch = await sub.fetch(500, timeout=1)
            except (nats.errors.TimeoutError, TimeoutError):  # nats-py raises either
                return got
            got.extend(batch)
            for msg in batch:
                await msg.ack()

    msgs = js_run(read_all)
    assert sorted(m.data.decode() for m in msgs) == sorted(sent)
    ids = {m.headers["Nats-Msg-Id"] for m in msgs}
    assert len(ids) == len(sent)
    assert all(i.startswith("public/default/nats-sink:public/default/out@") for i in ids)


def _alone(coro: Any) -> Any:
    """``asyncio.run(coro)`` in a thread of its own: this thread may run a loop already
    (another test's browser driver, in the same xdist worker)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def test_the_sources_fetch_ends_at_a_full_batch_or_at_its_expiry(stream: str) -> None:
    # The source's own fetch (nats_pull.Puller): JetStream's pull API, not nats-py's fetch.
    publish(f"{stream}.in", [str(i) for i in range(2500)])

    async def fetches(js: JetStreamContext) -> tuple[list[int], list[str], float]:
        await js.add_consumer(
            stream, ConsumerConfig(durable_name="p", ack_policy=AckPolicy.EXPLICIT)
        )
        puller = Puller(js._nc, stream, "p")
        await puller.start()
        sizes, got = [], []
        for _ in range(3):
            msgs = await puller.fetch(1000, 0.2)
            sizes.append(len(msgs))
            got += [m.data.decode() for m in msgs]
            for m in msgs:
                await m.ack()
        began = asyncio.get_running_loop().time()
        assert await puller.fetch(1000, 0.2, wait=False) == []  # no_wait: a 404 at once
        assert asyncio.get_running_loop().time() - began < 0.15
        began = asyncio.get_running_loop().time()
        assert await puller.fetch(1000, 0.2) == []  # nothing left: ends when it expires
        return sizes, got, asyncio.get_running_loop().time() - began

    sizes, got, empty_seconds = js_run(fetches)
    assert sizes == [1000, 1000, 500]
    assert got == [str(i) for i in range(2500)]
    assert 0.15 < empty_seconds < 1.0


def test_a_redelivered_message_says_so_with_its_stream_sequence(stream: str) -> None:
    publish(f"{stream}.in", ["a", "b"])
    configs = {"servers": URL, "stream": stream, "durableName": "r", "ackWaitSeconds": 1}
    source = load_source(SourceConfig(name="s", source_type="nats", output="o", configs=configs))
    source.open(configs, StaticSourceContext("s"))
    try:
        first = source.read()
        assert isinstance(first, list)
        assert [(r.value, r.properties["natsStreamSeq"]) for r in first] == [
            (b"a", "1"),
            (b"b", "2"),
        ]
        assert all("natsDelivered" not in r.properties for r in first)
        assert all(
            isinstance(r.event_time, int) and r.event_time > 1_700_000_000_000 for r in first
        )
        # After the consumer's ack wait (1 s) the unacked messages come again.
        again = until(source.read, "the unacked messages again", timeout=10)
        assert [(r.value, r.properties["natsDelivered"]) for r in again] == [
            (b"a", "2"),
            (b"b", "2"),
        ]
    finally:
        source.close()
