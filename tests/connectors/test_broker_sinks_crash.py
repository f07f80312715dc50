"""Each broker sink SIGKILLed while it moves 20,000 messages, then restarted: nothing lost.

The sink runs as a user runs it, ``sparkfn sinks localrun`` in a child
process (its own Spark); the test kills it once the broker holds some of the
messages, runs the sink again until the topic is drained (on the session's
Spark, from the same checkpoint) and reads the broker.
At-least-once sinks may repeat what the killed run published and did not
commit (at most a few batches); the ``nats`` sink repeats nothing, because
JetStream drops a message whose ``Nats-Msg-Id`` it has seen. (Not mqtt:
see the note at :data:`TARGETS`.)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pika
import pytest
import redis
from brokers import (
    HOST,
    alive,
    assert_all_once_or_duplicated,
    fill,
    kill,
    require,
    start_child,
    unique,
    wait_for,
)

from sparkfn.config.connector import SinkConfig
from sparkfn.store.store import Store

TOTAL = 20_000
BATCH = 2000
# At-least-once: what the killed run published in batches it had not committed.
AT_LEAST_ONCE_DUPLICATES = 3 * BATCH


class Target:
    """A broker destination: the sink's configs, how many it holds, what it holds."""

    def __init__(
        self,
        configs: dict[str, Any],
        held: Callable[[], int],
        contents: Callable[[], list[str]],
        cleanup: Callable[[], None],
        max_duplicates: int = AT_LEAST_ONCE_DUPLICATES,
    ) -> None:
        self.configs = configs
        self.held = held
        self.contents = contents
        self.cleanup = cleanup
        self.max_duplicates = max_duplicates


def _redis() -> Target:
    require("redis")
    stream = unique("sparkfn-sink")
    conn = redis.Redis(HOST, 6379)

    def contents() -> list[str]:
        entries: Any = conn.xrange(stream)
        return [f[b"value"].decode() for _, f in entries]

    def cleanup() -> None:
        conn.delete(stream)
        conn.close()

    return Target({"redisHosts": f"{HOST}:6379", "streamName": stream},
                  lambda: int(conn.xlen(stream)), contents, cleanup)  # fmt: skip


def _rabbitmq() -> Target:
    require("rabbitmq")
    name = unique("sparkfn-sink")
    # No heartbeat: the test may leave this connection idle for minutes.
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST, heartbeat=0))
    channel = conn.channel()
    channel.exchange_declare(name, "topic", durable=True)
    channel.queue_declare(name, durable=True)
    channel.queue_bind(name, name, "out")

    def held() -> int:
        return int(channel.queue_declare(name, passive=True).method.message_count)

    def contents() -> list[str]:
        got = []
        for method, _, body in channel.consume(name, inactivity_timeout=1):
            if method is None:
                break
            got.append(body.decode())
        channel.cancel()
        return got

    def cleanup() -> None:
        channel.queue_delete(name)
        channel.exchange_delete(name)
        conn.close()

    return Target(
        {"host": HOST, "exchangeName": name, "routingKey": "out"}, held, contents, cleanup
    )


def _nats() -> Target:
    require("nats")
    import nats

    name = unique("SPARKFN").replace("-", "_")

    def run(action: Callable[[Any], Any]) -> Any:
        async def main() -> Any:
            nc = await nats.connect("nats://127.0.0.1:4222")
            try:
                return await action(nc.jetstream())
            finally:
                await nc.close()

        return _alone(main())

    async def create(js: Any) -> None:
        await js.add_stream(name=name, subjects=[f"{name}.>"])

    run(create)

    async def count(js: Any) -> int:
        return int((await js.stream_info(name)).state.messages)

    async def read(js: Any) -> list[str]:
        got: list[str] = []
        for seq in range(1, await count(js) + 1):
            got.append((await js.get_msg(name, seq)).data.decode())
        return got

    async def delete(js: Any) -> None:
        await js.delete_stream(name)

    return Target({"servers": "nats://127.0.0.1:4222", "subject": f"{name}.out", "stream": name},
                  lambda: run(count), lambda: run(read), lambda: run(delete), max_duplicates=0)  # fmt: skip


TARGETS: dict[str, Callable[[Path], Target]] = {
    "redis": lambda _: _redis(),
    "rabbitmq": lambda _: _rabbitmq(),
    "nats": lambda _: _nats(),
}
# No mqtt case: to count what the sink published, a subscriber must keep up
# with it, and Mosquitto (max_queued_messages 1000 by default) drops messages
# for a subscriber that falls behind: on a busy machine the test's subscriber
# does, and the loss it sees is the broker's, not the sink's.


@pytest.fixture(params=sorted(TARGETS))
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Target]]:
    made = TARGETS[request.param](tmp_path)
    try:
        yield request.param, made
    finally:
        made.cleanup()


@pytest.mark.slow
@pytest.mark.long_running(60)
def test_sink_killed_mid_topic_loses_nothing(
    sqlite_store: Store, tmp_path: Path, target: tuple[str, Target], spark: Any
) -> None:
    from sparkfn.connectors.sink_run import SinkRun

    sink_type, broker = target
    sent = [f"m-{i}" for i in range(TOTAL)]
    fill(sqlite_store, "out", sent)
    args = (
        "sinks", "localrun", "--sink-type", sink_type, "--name", "crash", "--inputs", "out",
        "--sink-config", json.dumps(broker.configs), "--max-records-per-batch", str(BATCH),
    )  # fmt: skip
    log = tmp_path / "child.log"
    first = start_child(sqlite_store, log, *args)
    try:
        # alive() fails at once with the child's output if it ended.
        wait_for(lambda: (alive(first, log), broker.held() >= 2 * BATCH)[1],
                 "the first child's publishes", 240, log)  # fmt: skip
    finally:
        kill(first)
    assert first.returncode == -signal.SIGKILL
    assert broker.held() < TOTAL, "everything moved before the kill: no crash tested"
    # The restart runs on the session's Spark (a second JVM start is only
    # wall time): the same store, data directory, checkpoint and subscription.
    config = SinkConfig.build(name="crash", sink_type=sink_type, inputs=["out"],
                              configs=broker.configs, max_records_per_batch=BATCH)  # fmt: skip
    with SinkRun(config, store=sqlite_store, spark=spark) as run:
        run.start(until_drained=True)
        run.wait(timeout=120)
    time.sleep(0.5)
    duplicates = assert_all_once_or_duplicated(broker.contents(), sent, broker.max_duplicates)
    print(f"{sink_type}: {duplicates} duplicates after the kill")


def _alone(coro: Any) -> Any:
    """``asyncio.run(coro)`` in a thread of its own: this thread may run a loop already
    (another test's browser driver, in the same xdist worker)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
