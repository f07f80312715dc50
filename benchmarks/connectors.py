"""Throughput of each broker connector alone, against the broker's own client (no Spark).

Run it with ``make bench`` or::

    .venv/bin/python benchmarks/connectors.py [--messages N] [--connectors rabbitmq,redis,...]

For every connector, on the brokers on 127.0.0.1 (RabbitMQ, Mosquitto,
NATS JetStream, Redis, PostgreSQL), with fresh queues/streams/tables:

* **in** (the source): N messages are put into the broker first (not timed);
  then the time to move them all into a sparkfn topic with the source's
  runner (``SourceRunner``, appends committed, acks sent), against the
  broker's client consuming the same N messages with the same kind of ack
  (the baseline, measured in the same run). MQTT cannot hold N messages for
  an absent subscriber (Mosquitto keeps 1000), so its messages are published
  while the source runs, never more than 600 ahead, for both.
* **out** (the sink): the sink object alone (``open``, ``write`` N records,
  ``flush()`` every 1,000, as the Spark sink runtime calls it, without the
  Spark query around it) against the broker's client publishing the same
  messages with the same acknowledgement (RabbitMQ: a commit per 1,000;
  MQTT: every PUBACK; NATS: every publish ack; Redis: MULTI/EXEC per 1,000).

The ratio is sparkfn's msg/s over the baseline's. Values are 100 bytes.
The store is a SQLite file in a temporary directory. Numbers are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from statistics import median
from typing import Any

from _common import load_average

from sparkfn.api.connector import Record, SinkContext
from sparkfn.config.connector import SourceConfig
from sparkfn.connectors.registry import SINKS
from sparkfn.connectors.source.runner import SourceRunner, SourceState
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin

HOST = "127.0.0.1"
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
BATCH = 1000
AHEAD = 600
# A run that moves nothing more for this long is reported as stalled, not waited on.
STALL_SECONDS = 30


class Progress:
    """Raises once a count has not grown for :data:`STALL_SECONDS`."""

    def __init__(self, what: str, n: int) -> None:
        self.what, self.n, self.seen, self.since = what, n, -1, time.monotonic()

    def check(self, count: int) -> None:
        if count != self.seen:
            self.seen, self.since = count, time.monotonic()
        elif time.monotonic() - self.since > STALL_SECONDS:
            msg = f"{self.what}: stuck at {count} of {self.n} for {STALL_SECONDS} s"
            raise RuntimeError(msg)


class BenchSinkContext(SinkContext):
    """The context a sink object gets here: names and configs, nothing else."""

    def __init__(self, configs: Mapping[str, Any]) -> None:
        self.configs = dict(configs)

    def get_name(self) -> str:
        return "bench"

    def get_tenant(self) -> str:
        return "public"

    def get_namespace(self) -> str:
        return "default"

    def get_instance_id(self) -> int:
        return 0

    def get_num_instances(self) -> int:
        return 1

    def get_logger(self) -> logging.Logger:
        return logging.getLogger("bench")

    def get_secret(self, secret_name: str) -> str | None:
        return None

    def get_user_config_map(self) -> Mapping[str, Any]:
        return self.configs

    def record_metric(self, metric_name: str, metric_value: float) -> None:
        pass

    def fatal(self, exc: BaseException) -> None:
        raise exc

    def get_input_topics(self) -> list[str]:
        return ["public/default/bench"]


def bodies(n: int) -> list[bytes]:
    return [f"{i:08d}".encode().ljust(100, b"x") for i in range(n)]


def timed(action: Callable[[], None]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def run_source(store: Store, source_type: str, configs: dict[str, Any], n: int,
               feed: Callable[[Callable[[], int]], None] | None = None) -> float:  # fmt: skip
    """Seconds for the source's runner to append and ack ``n`` messages."""
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    TopicAdmin(store).create(topic, schema_type="bytes")
    config = SourceConfig(name=topic, source_type=source_type, output=topic, configs=configs)
    runner = SourceRunner(config, store)
    start = time.perf_counter()
    runner.start()
    feeder = None
    if feed is not None:
        # Not before the source is open: an MQTT broker drops what is published before
        # the source's subscription exists, and the run then waits for it without end.
        while runner.state is not SourceState.RUNNING:
            if runner.death is not None:
                raise RuntimeError(str(runner.death))
            time.sleep(0.001)
        feeder = threading.Thread(target=feed, args=(lambda: runner.stats.acked,), daemon=True)
        feeder.start()
    progress = Progress(f"{source_type} source, acked", n)
    while runner.stats.acked < n:
        if runner.death is not None:
            raise RuntimeError(str(runner.death))
        progress.check(runner.stats.acked)
        time.sleep(0.01)
    elapsed = time.perf_counter() - start
    runner.stop("drain")
    runner.wait(30)
    if feeder is not None:
        feeder.join(30)
    return elapsed


def run_sink(sink_type: str, configs: dict[str, Any], n: int) -> float:
    """Seconds for the sink object to write and flush ``n`` records, 1,000 per flush."""
    sink = SINKS[sink_type]()
    sink.open(configs, BenchSinkContext(configs))
    values = bodies(n)
    try:
        start = time.perf_counter()
        for i, value in enumerate(values):
            sink.write(Record(value, topic="public/default/bench", message_id=f"0:{i}"))
            if (i + 1) % BATCH == 0:
                sink.flush()
        sink.flush()
        return time.perf_counter() - start
    finally:
        sink.close()


# --- per broker: fill, baseline in, baseline out, sparkfn configs ---------------------


def rabbitmq(store: Store, n: int) -> tuple[float, float, float, float]:
    import pika

    queue = f"bench-{uuid.uuid4().hex[:8]}"
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    ch = conn.channel()
    ch.queue_declare(queue, durable=True)
    props = pika.BasicProperties(delivery_mode=2)

    def publish() -> None:
        ch.tx_select()
        for i, body in enumerate(bodies(n)):
            ch.basic_publish("", queue, body, props)
            if (i + 1) % BATCH == 0:
                ch.tx_commit()
        ch.tx_commit()

    def consume() -> None:
        cch = conn.channel()  # not the transactional one: its acks would wait for a commit
        cch.basic_qos(prefetch_count=BATCH)
        for i, (method, _, _) in enumerate(cch.consume(queue), start=1):
            if i % BATCH == 0 or i == n:
                cch.basic_ack(method.delivery_tag, multiple=True)
            if i == n:
                break
        cch.cancel()
        cch.close()

    try:
        base_out = timed(publish)
        base_in = timed(consume)
        publish()
        ours_in = run_source(
            store, "rabbitmq", {"host": HOST, "queueName": queue, "prefetchCount": BATCH}, n
        )
        ch.queue_purge(queue)
        ours_out = run_sink("rabbitmq", {"host": HOST, "exchangeName": "", "routingKey": queue}, n)
    finally:
        ch.queue_delete(queue)
        conn.close()
    return base_in, ours_in, base_out, ours_out


def redis_streams(store: Store, n: int) -> tuple[float, float, float, float]:
    import redis

    client = redis.Redis(HOST, 6379)
    stream = f"bench-{uuid.uuid4().hex[:8]}"

    def publish() -> None:
        for start in range(0, n, BATCH):
            pipe = client.pipeline(transaction=True)
            for body in bodies(min(BATCH, n - start)):
                pipe.xadd(stream, {"value": body})
            pipe.execute()

    def consume() -> None:
        client.xgroup_create(stream, "base", id="0")
        got = 0
        while got < n:
            reply: Any = client.xreadgroup("base", "c", {stream: ">"}, count=BATCH, block=100)
            ids = [i for i, _ in reply[0][1]] if reply else []
            if ids:
                client.xack(stream, "base", *ids)
            got += len(ids)

    try:
        base_out = timed(publish)
        base_in = timed(consume)
        ours_in = run_source(
            store, "redis", {"redisHosts": f"{HOST}:6379", "streamName": stream}, n
        )
        client.delete(stream)
        ours_out = run_sink("redis", {"redisHosts": f"{HOST}:6379", "streamName": stream}, n)
    finally:
        client.delete(stream)
        client.close()
    return base_in, ours_in, base_out, ours_out


def nats_jetstream(store: Store, n: int) -> tuple[float, float, float, float]:
    import nats

    name = f"BENCH_{uuid.uuid4().hex[:8]}"

    async def js_do(action: Callable[[Any], Any]) -> Any:
        nc = await nats.connect("nats://127.0.0.1:4222")
        try:
            return await action(nc.jetstream())
        finally:
            await nc.close()

    async def publish(js: Any) -> None:
        values = bodies(n)
        for start in range(0, n, 512):
            await asyncio.gather(
                *(js.publish(f"{name}.in", v) for v in values[start : start + 512])
            )

    async def consume(js: Any) -> None:
        sub = await js.pull_subscribe(f"{name}.in", durable="base", stream=name)
        got = 0
        while got < n:
            msgs = await sub.fetch(BATCH, timeout=1)
            for msg in msgs:
                await msg.ack()
            got += len(msgs)

    async def create(js: Any) -> None:
        await js.add_stream(name=name, subjects=[f"{name}.>"])

    async def delete(js: Any) -> None:
        await js.delete_stream(name)

    asyncio.run(js_do(create))
    try:
        base_out = timed(lambda: asyncio.run(js_do(publish)))
        base_in = timed(lambda: asyncio.run(js_do(consume)))
        servers = "nats://127.0.0.1:4222"
        ours_in = run_source(
            store, "nats", {"servers": servers, "stream": name, "durableName": "ours"}, n
        )
        ours_out = run_sink(
            "nats", {"servers": servers, "subject": f"{name}.out", "stream": name}, n
        )
    finally:
        asyncio.run(js_do(delete))
    return base_in, ours_in, base_out, ours_out


def mqtt(store: Store, n: int) -> tuple[float, float, float, float]:
    import paho.mqtt.client as paho
    from paho.mqtt.enums import CallbackAPIVersion

    topic = f"bench/{uuid.uuid4().hex[:8]}"

    def client(client_id: str = "", clean: bool = True) -> Any:
        made = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean)
        made.connect(HOST, 1883)
        made.loop_start()
        while not made.is_connected():  # paho ignores a subscribe before the CONNACK
            time.sleep(0.01)
        return made

    def publish(received: Callable[[], int]) -> None:
        pub = client()
        values = bodies(n)
        for start in range(0, n, 200):
            while start - received() > AHEAD:
                time.sleep(0.002)
            infos = [pub.publish(topic, v, qos=1) for v in values[start : start + 200]]
            for info in infos:
                info.wait_for_publish(10)
        pub.disconnect()
        pub.loop_stop()

    def baseline_in() -> None:
        got = [0]
        sub = client()
        sub.on_message = lambda c, u, m: got.__setitem__(0, got[0] + 1)
        sub.subscribe(topic, qos=1)
        time.sleep(0.2)
        publish(lambda: got[0])
        progress = Progress("mqtt client, received", n)
        while got[0] < n:
            progress.check(got[0])
            time.sleep(0.005)
        sub.disconnect()
        sub.loop_stop()

    base_in = timed(baseline_in)
    base_out = timed(lambda: publish(lambda: n))  # no subscriber to wait for
    client_id = f"bench-{uuid.uuid4().hex[:8]}"
    ours_in = run_source(store, "mqtt", {"host": HOST, "topicFilters": [topic], "clientId": client_id}, n,
                         feed=publish)  # fmt: skip
    forget = client(f"{client_id}-0", clean=True)
    forget.disconnect()
    forget.loop_stop()
    ours_out = run_sink("mqtt", {"host": HOST, "topic": f"{topic}/out"}, n)
    return base_in, ours_in, base_out, ours_out


def postgres(store: Store, n: int) -> tuple[float, float, float, float]:
    import psycopg

    table = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, body text)")
        conn.execute(
            f"INSERT INTO {table} (body) SELECT repeat('x', 100) FROM generate_series(1, {n})"
        )

        def baseline() -> None:
            after = 0
            while True:
                rows = conn.execute(
                    f"SELECT id, body FROM {table} WHERE id > %s ORDER BY id LIMIT {BATCH}", [after]
                ).fetchall()
                if not rows:
                    return
                after = rows[-1][0]

        try:
            base_in = timed(baseline)
            ours_in = run_source(
                store, "postgres", {"url": PG_URL, "table": table, "offset_column": "id"}, n
            )
        finally:
            conn.execute(f"DROP TABLE {table}")
    return base_in, ours_in, float("nan"), float("nan")


CONNECTORS: dict[str, Callable[[Store, int], tuple[float, float, float, float]]] = {
    "rabbitmq": rabbitmq,
    "mqtt": mqtt,
    "nats": nats_jetstream,
    "redis": redis_streams,
    "postgres": postgres,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--connectors", default=",".join(CONNECTORS))
    parser.add_argument("--repeats", type=int, default=3, help="runs per connector (medians)")
    args = parser.parse_args()
    n = args.messages
    work = Path(tempfile.mkdtemp(prefix="sparkfn-bench-connectors-"))
    print(
        f"connectors, {n} messages of 100 bytes each, medians of {args.repeats} runs; "
        f"load average {load_average()}"
    )
    print(
        f"{'connector':<10} {'in msg/s':>10} {'client':>10} {'ratio':>6}   {'out msg/s':>10} {'client':>10} {'ratio':>6}"
    )
    try:
        for name in args.connectors.split(","):
            runs = []
            try:
                for attempt in range(args.repeats):
                    path = work / f"{name}-{attempt}"
                    store = Store.open(f"sqlite:///{path}.db", path)
                    try:
                        runs.append(CONNECTORS[name](store, n))
                    finally:
                        store.close()
            except RuntimeError as exc:
                print(f"{name:<10} stalled: {exc}", flush=True)
                continue
            base_in, ours_in, base_out, ours_out = (median(col) for col in zip(*runs, strict=True))

            def rate(seconds: float) -> str:
                return "-" if seconds != seconds else f"{n / seconds:,.0f}"

            def ratio(ours: float, base: float) -> str:
                return "-" if ours != ours else f"{base / ours:.2f}"

            print(
                f"{name:<10} {rate(ours_in):>10} {rate(base_in):>10} {ratio(ours_in, base_in):>6}   "
                f"{rate(ours_out):>10} {rate(base_out):>10} {ratio(ours_out, base_out):>6}",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
