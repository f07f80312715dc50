"""Every broker connector on a worker SIGKILLed while it moves 10,000 messages: none lost.

Issue 30's acceptance, through the worker as users run the connectors: one
``sparkfn worker start`` process (a process group of its own: the worker,
its JVM and Spark's Python workers) hosts, all at once and created through
its REST API, the sources ``rabbitmq``, ``mqtt``, ``nats``, ``redis`` and
``postgres``, each moving 10,000 messages from its real broker into a topic
of its own, and the sinks ``rabbitmq``, ``redis``, ``nats`` and ``mqtt``,
each moving 10,000 messages from a topic of its own to its broker.

The test feeds the sinks at a steady rate and, once they are under way,
the sources as fast as their brokers take it, so that every connector is
mid-stream (read or written, not yet acknowledged or committed) when the
whole group is SIGKILLed, once each moved some and none all. It keeps
feeding while the worker is down and starts a new worker on the same
store, which restarts every connector from its registry (no request after
the kill). Then per connector, by name: every message arrived, nothing
foreign, and the duplicates are within what docs/connectors.md promises.
One worker for all nine: each worker start is a JVM, about 15 s of CPU on
the two-core test machine.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from brokers import (
    HOST,
    PG_URL,
    alive,
    count,
    kill_group,
    mqtt_client,
    require,
    start_worker,
    stop,
    unique,
    values,
    wait_for,
)

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

# They share the brokers test_broker_restart.py restarts: one xdist worker for them all.
pytestmark = pytest.mark.xdist_group("brokers")

TOTAL = 10_000
# Kill once every connector moved this many, and none all of them.
KILL_AFTER = 3000
# The sinks are fed this many a second until the kill, so that each is
# mid-stream when it comes (unpaced, the fast ones would be done by then).
# The sources are fed as fast as their brokers take it, from when every
# sink moved KILL_AFTER: behind from the start, they hold messages read and
# not yet acked when the kill comes a few seconds later.
SINK_RATE = 800
# Never fed past this before the kill: a slow connector cannot make the
# others finish before it reached KILL_AFTER.
BEFORE_KILL_AT_MOST = 7_000
CHUNK = 200
WAIT_S = 300.0
NATS_URL = "nats://127.0.0.1:4222"
SINK_BATCH = 1000  # a sink's maxRecordsPerBatch
# At-least-once sinks repeat what the killed worker published in batches it
# had not committed: at most a few (docs/connectors.md).
SINK_DUPLICATES = 3 * SINK_BATCH


@dataclass
class Lane:
    """One connector under test: how to feed it, and what it moved."""

    kind: str  # source or sink
    name: str  # the connector's type, which is also its name on the worker
    config: dict[str, Any]  # the REST API's sourceConfig / sinkConfig (no name)
    send: Callable[[list[str]], None]  # put values into its input (from the feeder's thread)
    moved: Callable[[], int]  # how many its output holds (test thread)
    found: Callable[[], list[str]]  # what its output holds, as the values fed
    max_duplicates: int  # what docs/connectors.md promises for a crash
    rate: int | None = SINK_RATE  # fed per second until the kill (None: unpaced)
    kill_after: int = KILL_AFTER  # the kill waits until it moved this many
    ahead: int | None = None  # never feed more than this past moved() (a broker's bound)
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    killed_at: int = 0  # how many its output held right after the kill
    fed_at_kill: int = 0

    @property
    def label(self) -> str:
        """How failures name it: ``source rabbitmq``, ``sink nats``, ..."""
        return f"{self.kind} {self.name}"


def _sent() -> list[str]:
    return [f"m-{i}" for i in range(TOTAL)]


class Feeders:
    """One thread per lane feeding its 10,000 values, paced (``lane.rate``, at most
    :data:`BEFORE_KILL_AT_MOST`) until :attr:`release` is set after the kill; the
    sources' only from when :attr:`sources_go` is set."""

    def __init__(self, lanes: list[Lane]) -> None:
        self.lanes = lanes
        self.release = threading.Event()
        self.sources_go = threading.Event()  # set once the sinks are under way
        self.quit = threading.Event()
        self.errors: dict[str, BaseException] = {}
        self.fed: dict[str, int] = dict.fromkeys((lane.label for lane in lanes), 0)
        self.threads = [
            threading.Thread(
                target=self._feed, args=(lane,), name=f"feed-{lane.label}", daemon=True
            )
            for lane in lanes
        ]

    def __enter__(self) -> Feeders:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.quit.set()
        for thread in self.threads:
            thread.join(30)

    def _feed(self, lane: Lane) -> None:
        sent, done = _sent(), 0
        try:
            if lane.kind == "source":
                while not (self.sources_go.wait(0.1) or self.quit.is_set()):
                    pass
            began = time.monotonic()
            while done < TOTAL and not self.quit.is_set():
                ahead_of_rate = lane.rate is not None and done > lane.rate * (
                    time.monotonic() - began
                )
                paced = not self.release.is_set() and (done >= BEFORE_KILL_AT_MOST or ahead_of_rate)
                if paced or (lane.ahead is not None and done - lane.moved() > lane.ahead):
                    time.sleep(0.02)
                    continue
                lane.send(sent[done : done + CHUNK])
                done = min(done + CHUNK, TOTAL)
                self.fed[lane.label] = done
        except BaseException as exc:
            self.errors[lane.label] = exc

    def check(self) -> None:
        """Fail naming the lane whose feeder failed."""
        if self.errors:
            pytest.fail(f"feeding failed: {self.errors}")

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.check()
        unfinished = {n: f for n, f in self.fed.items() if f < TOTAL}
        assert not unfinished, f"feeders did not finish in {timeout} s: {unfinished}"


def _verdict(lane: Lane) -> str | None:
    """What is wrong with ``lane``'s output, naming it, or None."""
    found = lane.found()
    counts = Counter(found)
    sent = _sent()
    missing = [v for v in sent if v not in counts]
    foreign = sorted(set(counts) - set(sent))
    duplicates = len(found) - len(counts)
    wrong = []
    if missing:
        wrong.append(f"{len(missing)} lost, e.g. {missing[:5]}")
    if foreign:
        wrong.append(f"unexpected values, e.g. {foreign[:5]}")
    if duplicates > lane.max_duplicates:
        wrong.append(f"{duplicates} duplicates, more than the {lane.max_duplicates} promised")
    print(
        f"{lane.label}: {lane.killed_at} moved of {lane.fed_at_kill} fed at the kill, "
        f"{duplicates} duplicates"
    )
    return f"{lane.label}: {'; '.join(wrong)}" if wrong else None


def _crash(store: Store, tmp_path: Path, lanes: list[Lane]) -> None:
    """Create the lanes' sources and sinks on a worker, feed them, SIGKILL the worker's
    group mid-stream, start a new worker on the store and check every lane."""
    port = _free_port()
    log = tmp_path / "worker.log"
    worker = start_worker(store, log, port)
    try:
        with httpx.Client(base_url=f"http://{HOST}:{port}/admin/v3", timeout=120) as http:
            for lane in lanes:
                made = http.post(
                    f"/{lane.kind}s/public/default/{lane.name}",
                    data={f"{lane.kind}Config": json.dumps(lane.config)},
                )
                assert made.status_code == 200, f"{lane.label}: {made.text}"
        with Feeders(lanes) as feeders:

            def moved_enough() -> bool:
                alive(worker, log)
                feeders.check()
                moved = {lane.label: lane.moved() >= lane.kill_after for lane in lanes}
                if all(moved[x.label] for x in lanes if x.kind == "sink"):
                    feeders.sources_go.set()
                return all(moved.values())

            def progress() -> str:
                said = [(x.label, x.moved(), x.kill_after) for x in lanes]
                return f"each to move enough (moved, wanted): {said}"

            wait_for(moved_enough, progress, WAIT_S, log)
            kill_group(worker)  # mid-stream: read, appended or published, not yet acked
            for lane in lanes:
                lane.killed_at, lane.fed_at_kill = lane.moved(), feeders.fed[lane.label]
            feeders.release.set()  # the rest, while the worker is down and after
            done = [f"{x.label} ({x.killed_at})" for x in lanes if x.killed_at >= TOTAL]
            assert not done, f"moved everything before the kill, no crash tested: {done}"
            worker = start_worker(store, log, port)  # restarts every connector by itself

            complete: set[str] = set()  # lanes whose output holds every value

            def all_complete() -> bool:
                alive(worker, log)
                feeders.check()
                for lane in lanes:
                    if lane.label not in complete and lane.moved() >= TOTAL:
                        if set(lane.found()) >= set(_sent()):
                            complete.add(lane.label)
                return len(complete) == len(lanes)

            def missing() -> str:
                left = [(x.label, x.moved()) for x in lanes if x.label not in complete]
                return f"every message after the restart; incomplete: {left}"

            wait_for(all_complete, missing, WAIT_S, log)
            feeders.join(30)
        time.sleep(1.0)  # anything a broker still redelivers lands now
        wrong = [v for lane in lanes if (v := _verdict(lane)) is not None]
        assert not wrong, "\n".join(wrong)
    finally:
        if worker.poll() is None:
            try:
                # uvicorn ends by the signal again once its shutdown (ours) is done
                stop(worker, log, timeout=120, codes=(0, -signal.SIGTERM))
            finally:
                with contextlib.suppress(ProcessLookupError):
                    kill_group(worker)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


# --- sources ------------------------------------------------------------------


def _topic_lane(store: Store, name: str, as_stored: Callable[[str], str] = str) -> dict[str, Any]:
    """The fields of a source lane whose output is a topic of its own."""
    topic = unique(f"crash-{name}")
    TopicAdmin(store).create(topic, partitions=1, schema_type="string")
    back = {as_stored(v): v for v in _sent()}

    def found() -> list[str]:
        return [back.get(v, v) for v in values(store, topic)]

    return {"moved": lambda: count(store, topic), "found": found, "topic": topic}


def _source_config(
    name: str, topic: str, configs: dict[str, Any], guarantee: str
) -> dict[str, Any]:
    return {
        "archive": f"builtin://{name}",
        "topicName": topic,
        "configs": configs,
        "processingGuarantees": guarantee,
    }


def _rabbitmq_source(store: Store) -> Lane:
    import pika

    queue = unique("sparkfn-crash")
    admin = pika.BlockingConnection(pika.ConnectionParameters(HOST, heartbeat=0))
    admin.channel().queue_declare(queue, durable=True)
    admin.close()
    publisher: dict[str, Any] = {}  # made by the feeder's thread (pika's belong to one)

    def send(bodies: list[str]) -> None:
        if not publisher:
            conn = pika.BlockingConnection(pika.ConnectionParameters(HOST, heartbeat=0))
            publisher.update(conn=conn, channel=conn.channel())
            publisher["channel"].tx_select()  # each chunk committed: none lost here
        props = pika.BasicProperties(delivery_mode=2)
        for body in bodies:
            publisher["channel"].basic_publish("", queue, body.encode(), props)
        publisher["channel"].tx_commit()

    def delete() -> None:
        if publisher:
            publisher["conn"].close()
        conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
        conn.channel().queue_delete(queue)
        conn.close()

    out = _topic_lane(store, "rabbitmq")
    configs = {"host": HOST, "queueName": queue, "prefetchCount": 1000}
    # At-least-once: what was appended and not acked at the kill comes again;
    # one batch (batch_size 1000, prefetch 1000) at most.
    return Lane("source", "rabbitmq", _source_config("rabbitmq", out["topic"], configs, "ATLEAST_ONCE"),
                send, out["moved"], out["found"], 1000, rate=None, cleanup=[delete])  # fmt: skip


def _mqtt_source(store: Store) -> Lane:
    import paho.mqtt.client as paho

    filter_, client_id = unique("sparkfn/crash"), unique("sparkfn-crash")

    connected = mqtt_client

    # The source's session exists before anything is published, so that the
    # broker queues what comes before the source subscribed (as for a source
    # that ran before).
    session = connected(f"{client_id}-0", clean=False)
    session.subscribe(f"{filter_}/#", qos=1)
    time.sleep(0.3)
    session.disconnect()
    session.loop_stop()
    publisher: list[paho.Client] = []

    def send(bodies: list[str]) -> None:
        if not publisher:
            publisher.append(connected())
        infos = [publisher[0].publish(f"{filter_}/x", b.encode(), qos=1) for b in bodies]
        for info in infos:
            info.wait_for_publish(30)

    def forget() -> None:
        for client in publisher:
            client.disconnect()
            client.loop_stop()
        done = connected(f"{client_id}-0", clean=True)
        done.disconnect()
        done.loop_stop()

    out = _topic_lane(store, "mqtt")
    configs = {"host": HOST, "topicFilters": [f"{filter_}/#"], "clientId": client_id}
    # At-least-once: what was appended and not PUBACKed at the kill comes again
    # (Mosquitto has at most 20 in flight per client). Fed at most 300 past
    # what the source appended: Mosquitto drops a session's messages past
    # max_queued_messages (1000), a broker bound docs/connectors.md names;
    # so it moves slowest, and the kill waits for fewer of its messages.
    return Lane("source", "mqtt", _source_config("mqtt", out["topic"], configs, "ATLEAST_ONCE"),
                send, out["moved"], out["found"], 1000, rate=None, ahead=300, kill_after=1000, cleanup=[forget])  # fmt: skip


def _nats_run(action: Callable[[Any], Any]) -> Any:
    """``action(jetstream)`` on a connection of its own, on a loop in a thread of its own."""
    import asyncio
    import concurrent.futures

    import nats

    async def main() -> Any:
        nc = await nats.connect(NATS_URL)
        try:
            return await action(nc.jetstream())
        finally:
            await nc.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


def _nats_stream() -> tuple[str, Callable[[], None]]:
    name = unique("SPARKFN").replace("-", "_")

    async def create(js: Any) -> None:
        await js.add_stream(name=name, subjects=[f"{name}.>"])

    async def delete(js: Any) -> None:
        await js.delete_stream(name)

    _nats_run(create)
    return name, lambda: _nats_run(delete)


def _nats_source(store: Store) -> Lane:
    import asyncio

    stream, delete = _nats_stream()

    def send(bodies: list[str]) -> None:
        async def publish(js: Any) -> None:
            await asyncio.gather(*(js.publish(f"{stream}.in", b.encode()) for b in bodies))

        _nats_run(publish)

    out = _topic_lane(store, "nats")
    configs = {"servers": NATS_URL, "stream": stream, "durableName": "crash", "ackWaitSeconds": 5}
    # At-least-once: appended and not acked at the kill comes again after
    # ackWaitSeconds: one fetch (batchSize 1000) at most.
    return Lane("source", "nats", _source_config("nats", out["topic"], configs, "ATLEAST_ONCE"),
                send, out["moved"], out["found"], 1000, rate=None, cleanup=[delete])  # fmt: skip


def _redis_source(store: Store) -> Lane:
    import redis

    stream = unique("sparkfn-crash")
    conn = redis.Redis(HOST, 6379)

    def send(bodies: list[str]) -> None:
        pipe = conn.pipeline(transaction=False)
        for body in bodies:
            pipe.xadd(stream, {"value": body})
        pipe.execute()

    def delete() -> None:
        conn.delete(stream)
        conn.close()

    out = _topic_lane(store, "redis")
    configs = {"redisHosts": f"{HOST}:6379", "streamName": stream}
    # At-least-once: pending (appended, not XACKed) at the kill are read again:
    # one batch (batchSize 1000) at most.
    return Lane("source", "redis", _source_config("redis", out["topic"], configs, "ATLEAST_ONCE"),
                send, out["moved"], out["found"], 1000, rate=None, cleanup=[delete])  # fmt: skip


def _postgres_source(store: Store) -> Lane:
    import psycopg

    table = unique("sparkfn_crash").replace("-", "_")
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, body text)")
    writer: list[psycopg.Connection[Any]] = []

    def send(bodies: list[str]) -> None:  # one writer: ids grow in commit order
        if not writer:
            writer.append(psycopg.connect(PG_URL, autocommit=True))
        with writer[0].transaction(), writer[0].cursor() as cur:
            cur.executemany(f"INSERT INTO {table} (body) VALUES (%s)", [(b,) for b in bodies])

    def drop() -> None:
        for conn in writer:
            conn.close()
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")

    out = _topic_lane(store, "postgres", lambda v: json.dumps({"body": v}, separators=(",", ":")))
    configs = {"url": PG_URL, "table": table, "offset_column": "id", "columns": ["body"]}
    # effectively_once: rows appended before the kill whose offset was not
    # stored are read again and dropped by the store (sequence id = id): none.
    return Lane("source", "postgres", _source_config("postgres", out["topic"], configs, "EFFECTIVELY_ONCE"),
                send, out["moved"], out["found"], 0, rate=None, cleanup=[drop])  # fmt: skip


SOURCES: dict[str, Callable[[Store], Lane]] = {
    "rabbitmq": _rabbitmq_source,
    "mqtt": _mqtt_source,
    "nats": _nats_source,
    "redis": _redis_source,
    "postgres": _postgres_source,
}


@contextlib.contextmanager
def _lanes(made: Iterator[Callable[[], Lane]]) -> Iterator[list[Lane]]:
    """The lanes ``made`` makes, their broker objects removed at the end."""
    lanes: list[Lane] = []
    try:
        for make in made:
            lanes.append(make())
        yield lanes
    finally:
        for lane in lanes:
            for cleanup in lane.cleanup:
                with contextlib.suppress(Exception):
                    cleanup()


# --- sinks --------------------------------------------------------------------


def _sink_lane(
    store: Store,
    name: str,
    configs: dict[str, Any],
    moved: Callable[[], int],
    found: Callable[[], list[str]],
    max_duplicates: int,
    cleanup: list[Callable[[], None]],
) -> Lane:
    """A sink lane reading a topic of its own (two partitions, keyed)."""
    topic = unique(f"crash-{name}")
    TopicAdmin(store).create(topic, partitions=2, schema_type="string")
    producer = Producer(store, topic)
    keys = iter(range(10**9))

    def send(bodies: list[str]) -> None:
        producer.send_batch([Message(b.encode(), key=f"k{next(keys) % 7}") for b in bodies])

    config = {"archive": f"builtin://{name}", "inputs": [topic], "configs": configs,
              "maxRecordsPerBatch": SINK_BATCH, "sourceSubscriptionPosition": "Earliest"}  # fmt: skip
    return Lane("sink", name, config, send, moved, found, max_duplicates, cleanup=cleanup)


def _redis_sink(store: Store) -> Lane:
    import redis

    stream = unique("sparkfn-crash")
    conn = redis.Redis(HOST, 6379)

    def found() -> list[str]:
        entries: Any = conn.xrange(stream)
        return [f[b"value"].decode() for _, f in entries]

    def delete() -> None:
        conn.delete(stream)
        conn.close()

    configs = {"redisHosts": f"{HOST}:6379", "streamName": stream}
    # Redis has no producer de-duplication: a replayed batch adds again.
    return _sink_lane(store, "redis", configs, lambda: int(conn.xlen(stream)), found,
                      SINK_DUPLICATES, [delete])  # fmt: skip


def _rabbitmq_sink(store: Store) -> Lane:
    import pika

    name = unique("sparkfn-crash")
    # No heartbeat: the test leaves this connection idle for minutes.
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST, heartbeat=0))
    channel = conn.channel()
    channel.exchange_declare(name, "topic", durable=True)
    channel.queue_declare(name, durable=True)
    channel.queue_bind(name, name, "out")
    got: list[str] = []

    def moved() -> int:
        return len(got) + int(channel.queue_declare(name, passive=True).method.message_count)

    def found() -> list[str]:  # taken off the queue: each read adds what came since
        for method, _, body in channel.consume(name, inactivity_timeout=1):
            if method is None:
                break
            got.append(body.decode())
            channel.basic_ack(method.delivery_tag)
        channel.cancel()
        return list(got)

    def delete() -> None:
        channel.queue_delete(name)
        channel.exchange_delete(name)
        conn.close()

    configs = {"host": HOST, "exchangeName": name, "routingKey": "out"}
    # A replayed batch publishes again (same message_id): duplicates.
    return _sink_lane(store, "rabbitmq", configs, moved, found, SINK_DUPLICATES, [delete])


def _nats_sink(store: Store) -> Lane:
    stream, delete = _nats_stream()

    async def held(js: Any) -> int:
        return int((await js.stream_info(stream)).state.messages)

    async def read(js: Any) -> list[str]:
        return [
            (await js.get_msg(stream, seq)).data.decode() for seq in range(1, await held(js) + 1)
        ]

    configs = {"servers": NATS_URL, "subject": f"{stream}.out", "stream": stream}
    # A replayed batch carries the same Nats-Msg-Id: JetStream drops it, none.
    return _sink_lane(store, "nats", configs, lambda: _nats_run(held), lambda: _nats_run(read),
                      0, [delete])  # fmt: skip


def _mqtt_sink(store: Store, tmp_path: Path) -> Lane:
    topic, client_id = unique("sparkfn/crash-out"), unique("sparkfn-crash-sub")
    received = tmp_path / "mqtt-received.txt"
    received.touch()
    log = tmp_path / "mqtt-subscriber.log"
    script = Path(__file__).with_name("mqtt_subscriber.py")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(script), HOST, "1883", topic, client_id, str(received)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    wait_for(lambda: (alive(proc, log), "subscribed" in log.read_text())[1],
             "the mqtt subscriber's SUBACK", 30, log)  # fmt: skip

    def lines() -> list[str]:
        alive(proc, log)
        return received.read_text().splitlines()

    def end() -> None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        import paho.mqtt.client as paho
        from paho.mqtt.enums import CallbackAPIVersion

        forget = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=True)
        forget.connect(HOST, 1883)  # a clean session deletes the persistent one
        forget.loop_start()
        forget.disconnect()
        forget.loop_stop()

    configs = {"host": HOST, "topic": topic}
    # A replayed batch publishes again: duplicates. Counted by a subscriber
    # in a process of its own (see mqtt_subscriber.py for Mosquitto's bound).
    return _sink_lane(store, "mqtt", configs, lambda: len(lines()), lines, SINK_DUPLICATES, [end])


@pytest.mark.slow
@pytest.mark.long_running(70)
def test_every_broker_connector_on_a_killed_worker_loses_nothing(
    sqlite_store: Store, tmp_path: Path
) -> None:
    for broker in ("rabbitmq", "mqtt", "nats", "redis", "postgresql"):
        require(broker)
    makers: list[Callable[[], Lane]] = [
        *((lambda make=make: make(sqlite_store)) for make in SOURCES.values()),
        lambda: _rabbitmq_sink(sqlite_store),
        lambda: _redis_sink(sqlite_store),
        lambda: _nats_sink(sqlite_store),
        lambda: _mqtt_sink(sqlite_store, tmp_path),
    ]
    with _lanes(iter(makers)) as lanes:
        _crash(sqlite_store, tmp_path, lanes)
