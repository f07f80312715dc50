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
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

HOST = "127.0.0.1"
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
BATCH = 1000
AHEAD = 600
# RabbitMQ's prefetch, for both: two batches, so that the next one arrives while one is
# appended (the client acks every BATCH too).
PREFETCH = 2 * BATCH
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


def warm_up(work: Path) -> None:
    """Append once before timing: the store's first append imports pyarrow's pandas glue
    (a second or so), which a worker has done long before its sources run."""
    store = Store.open(f"sqlite:///{work}/warm-up.db", work / "warm-up")
    try:
        TopicAdmin(store).create("warm-up", schema_type="bytes")
        Producer(store, "warm-up").send_batch([Message(b"x")])
    finally:
        store.close()


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
        cch.basic_qos(prefetch_count=PREFETCH)
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
            store, "rabbitmq", {"host": HOST, "queueName": queue, "prefetchCount": PREFETCH}, n
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


def soak_one(store: Store, name: str, before: float, after: float) -> SoakResult:
    """One source alone: ``before`` s of a steady stream, its broker restarted, ``after`` s more."""
    lane = SoakLane(store, name)
    try:
        lane.start()
        time.sleep(before)
        lane.result.restart_seconds = restart_broker(name, lane.stopped)
        time.sleep(after)
    except BaseException:
        lane.cancel()
        raise
    return lane.finish()


def soak(store: Store, names: list[str], minutes: float, sinks: bool = True) -> list[SoakResult]:
    """Every source in ``names`` (and, with ``sinks``, every sink: on Spark, in this
    process) at once for ``minutes``; their brokers restarted in turn, each in the middle
    of its share of the time. A broker's restart is its source's and its sink's."""
    lanes: dict[str, list[SoakLane | SinkLane]] = {name: [SoakLane(store, name)] for name in names}
    if sinks:
        from sparkfn.runtime.spark.session import spark_session

        spark = spark_session(master="local[2]", app_name="sparkfn-soak")
        for name in names:
            lanes[name].append(SinkLane(store, name, spark))
    every = [lane for group in lanes.values() for lane in group]
    share = minutes * 60 / len(names)
    began = time.monotonic()
    try:
        for lane in every:
            lane.start()
        for k, name in enumerate(names):
            time.sleep(max(0.0, began + (k + 0.5) * share - time.monotonic()))
            print(f"  {time.monotonic() - began:6.0f} s: restarting {name}", flush=True)
            group = lanes[name]
            seconds = restart_broker(
                name, lambda group=group: [lane.stopped() for lane in reversed(group)]
            )
            for lane in group:
                lane.result.restart_seconds = seconds
        time.sleep(max(0.0, began + minutes * 60 - time.monotonic()))
    except BaseException:
        for lane in every:
            lane.cancel()
        raise
    results = []
    for lane in every:
        try:
            results.append(lane.finish())
        except Exception as exc:  # one lane's end must not lose every lane's figures
            lane.result.errors.append(f"finishing: {type(exc).__name__}: {exc}")
            results.append(lane.result)
    return results


def print_soak(results: list[SoakResult], minutes: float) -> None:
    print(
        f"soak, {minutes:g} min, {SOAK_RATE} msg/s into each connector; load average {load_average()}"
    )
    print(f"{'connector':<15} {'fed':>7} {'moved':>7} {'lost':>5} {'unread':>6} {'dups':>5} "
          f"{'restart s':>9} {'gap s':>6} {'restarts':>8}  verdict")  # fmt: skip
    for r in results:
        wrong = r.verdict()
        print(f"{r.label:<15} {r.fed:>7} {r.moved:>7} {r.lost:>5} {r.unread_at_restart:>6} "
              f"{r.duplicates:>5} {r.restart_seconds:>9.1f} {r.longest_gap:>6.1f} {r.restarts:>8}  "
              f"{'; '.join(wrong) or 'ok'}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--connectors", default=",".join(CONNECTORS))
    parser.add_argument("--repeats", type=int, default=3, help="runs per connector (medians)")
    parser.add_argument("--no-sinks", action="store_true",
                        help="a soak of the sources only (no Spark)")  # fmt: skip
    parser.add_argument("--soak", type=float, metavar="MINUTES",
                        help="instead: every source at once this long, each broker restarted once")  # fmt: skip
    args = parser.parse_args()
    n = args.messages
    work = Path(tempfile.mkdtemp(prefix="sparkfn-bench-connectors-"))
    if args.soak is not None:
        store = Store.open(f"sqlite:///{work}/soak.db", work / "soak")
        try:
            names = args.connectors.split(",")
            print_soak(soak(store, names, args.soak, sinks=not args.no_sinks), args.soak)
        finally:
            store.close()
            shutil.rmtree(work, ignore_errors=True)
        return
    print(
        f"connectors, {n} messages of 100 bytes each, medians of {args.repeats} runs; "
        f"load average {load_average()}"
    )
    print(
        f"{'connector':<10} {'in msg/s':>10} {'client':>10} {'ratio':>6}   {'out msg/s':>10} {'client':>10} {'ratio':>6}"
    )
    try:
        warm_up(work)
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


# --- soak: a steady stream through every connector, each broker restarted in turn ----------
#
# ``--soak MINUTES``: one process (as one worker hosts them), every broker source run
# as a worker runs it (``SourceRun``: its instance under the supervisor and the
# default failure policy), each fed a steady stream of numbered messages; and every
# broker sink (``SinkRun`` on a local Spark in the same process, unless --no-sinks),
# its input topic fed the same way, its broker read back. In the middle of each
# broker's share of the time it is restarted (stopped by its pid, started again,
# waited for), under its source and its sink at once. Per connector: the longest gap
# between two outputs against the broker's restart, what was lost, the duplicates.

SOAK_RATE = 200  # messages a second into each source
RESTART_SLACK = 10.0  # a connector must move again within the restart plus this


def _run(*command: str, timeout: float = 120) -> None:
    subprocess.run(command, check=True, timeout=timeout, capture_output=True)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


def _await(what: str, check: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            msg = f"{what} did not come back within {timeout:g} s"
            raise RuntimeError(msg)
        time.sleep(0.2)


def _stop_pid(binary: str) -> None:
    """SIGTERM the one daemon whose executable is ``binary`` (``pgrep -x``) and wait for its end."""
    found = subprocess.run(["pgrep", "-x", binary], capture_output=True, text=True, check=False)
    pids = [int(p) for p in found.stdout.split()]
    if len(pids) != 1:
        msg = f"expected one {binary} process, found {pids}"
        raise RuntimeError(msg)
    os.kill(pids[0], signal.SIGTERM)
    _await(f"{binary} ending", lambda: not Path(f"/proc/{pids[0]}").exists(), 60)


def _redis_start() -> None:
    _run("redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379",
         "--save", "", "--appendonly", "no", "--dir", "/var/lib/redis",
         "--logfile", "/var/log/redis/ci.log")  # fmt: skip


def _nats_start() -> None:
    _run("start-stop-daemon", "--start", "--oknodo", "--background",
         "--exec", "/usr/sbin/nats-server", "--", "-a", "127.0.0.1", "-p", "4222", "-js",
         "-sd", "/var/lib/nats-server", "-l", "/var/log/nats-server.log")  # fmt: skip


def _nats_answers() -> bool:
    import nats

    async def jetstream() -> bool:
        nc = await nats.connect("nats://127.0.0.1:4222", connect_timeout=1, allow_reconnect=False)
        try:
            await nc.jetstream().account_info()
            return True
        finally:
            await nc.close()

    try:
        return asyncio.run(asyncio.wait_for(jetstream(), 3))
    except Exception:
        return False


def _pg_cluster() -> str:
    return sorted(os.listdir("/etc/postgresql"))[-1]


# Per broker: stop it, then start it (always, in a finally), then wait until it answers.
BROKERS: dict[str, tuple[Callable[[], None], Callable[[], None], Callable[[], bool]]] = {
    "rabbitmq": (
        lambda: _run("rabbitmqctl", "stop"),
        lambda: _run("rabbitmq-server", "-detached"),
        lambda: (
            subprocess.run(
                ["rabbitmqctl", "await_startup", "--timeout", "5"], capture_output=True, check=False
            ).returncode
            == 0
        ),  # fmt: skip
    ),
    "redis": (lambda: _stop_pid("redis-server"), _redis_start, lambda: _answers(6379)),
    "nats": (lambda: _stop_pid("nats-server"), _nats_start, _nats_answers),
    "mqtt": (
        lambda: _stop_pid("mosquitto"),
        lambda: _run("mosquitto", "-d", "-c", "/etc/mosquitto/mosquitto.conf"),
        lambda: _answers(1883),
    ),
    "postgres": (
        lambda: None,  # pg_ctlcluster restarts in one step
        lambda: _run(
            "pg_ctlcluster", "--skip-systemctl-redirect", _pg_cluster(), "main", "restart"
        ),  # fmt: skip
        lambda: _answers(5432),
    ),
}


def restart_broker(name: str, stopped: Callable[[], None] | None = None) -> float:
    """Stop the broker ``name`` serves, call ``stopped``, start it again and wait until it
    answers; the seconds from the stop to its first answer. The start runs whatever the
    stop (or ``stopped``) did."""
    stop, start, answers = BROKERS[name]
    began = time.monotonic()
    try:
        stop()
        if stopped is not None:
            stopped()
    finally:
        start()
        _await(f"broker {name}", answers)
    return time.monotonic() - began


@dataclass
class Feed:
    """How a soak puts numbered values into a source's broker."""

    configs: dict[str, Any]  # the source's
    connect: Callable[
        [], Callable[[list[str]], None]
    ]  # a sender; it raises while the broker is down
    cleanup: Callable[[], None]
    guarantee: str = "ATLEAST_ONCE"
    # Values the broker itself may drop in its restart (it keeps nothing: Redis here).
    lost_with_the_broker: bool = False
    # The value fed, from the value the source appended (postgres: a JSON object of the row).
    fed_as: Callable[[str], str] = str


def _feed_rabbitmq(queue: str) -> Feed:
    import pika

    admin = pika.BlockingConnection(pika.ConnectionParameters(HOST))
    admin.channel().queue_declare(queue, durable=True)
    admin.close()

    def connect() -> Callable[[list[str]], None]:
        conn = pika.BlockingConnection(pika.ConnectionParameters(HOST, heartbeat=0))
        channel = conn.channel()
        channel.confirm_delivery()  # a value counts as fed once the broker confirmed it
        props = pika.BasicProperties(delivery_mode=2)

        def send(chunk: list[str]) -> None:
            for value in chunk:
                channel.basic_publish("", queue, value.encode(), props)

        return send

    def cleanup() -> None:
        conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
        conn.channel().queue_delete(queue)
        conn.close()

    configs = {"host": HOST, "queueName": queue, "prefetchCount": BATCH}
    return Feed(configs, connect, cleanup)


def _feed_redis(stream: str) -> Feed:
    import redis

    def connect() -> Callable[[list[str]], None]:
        client = redis.Redis(HOST, 6379, socket_timeout=5)

        def send(chunk: list[str]) -> None:
            pipe = client.pipeline(transaction=True)
            for value in chunk:
                pipe.xadd(stream, {"value": value})
            pipe.execute()

        return send

    def cleanup() -> None:
        redis.Redis(HOST, 6379).delete(stream)

    configs = {"redisHosts": f"{HOST}:6379", "streamName": stream}
    return Feed(configs, connect, cleanup, lost_with_the_broker=True)


def _feed_nats(stream: str) -> Feed:
    import nats

    async def admin(action: Callable[[Any], Any]) -> None:
        nc = await nats.connect("nats://127.0.0.1:4222")
        try:
            await action(nc.jetstream())
        finally:
            await nc.close()

    asyncio.run(admin(lambda js: js.add_stream(name=stream, subjects=[f"{stream}.>"])))

    def connect() -> Callable[[list[str]], None]:
        def send(chunk: list[str]) -> None:
            async def publish() -> None:
                nc = await nats.connect("nats://127.0.0.1:4222", allow_reconnect=False,
                                        connect_timeout=2)  # fmt: skip
                try:
                    js = nc.jetstream(timeout=5)
                    await asyncio.gather(*(js.publish(f"{stream}.in", v.encode()) for v in chunk))
                finally:
                    await nc.close()

            asyncio.run(publish())

        return send

    def cleanup() -> None:
        asyncio.run(admin(lambda js: js.delete_stream(stream)))

    configs = {"servers": "nats://127.0.0.1:4222", "stream": stream, "durableName": "soak",
               "ackWaitSeconds": 10}  # fmt: skip
    return Feed(configs, connect, cleanup)


def _mqtt_client(client_id: str = "", clean: bool = True) -> Any:
    import paho.mqtt.client as paho
    from paho.mqtt.enums import CallbackAPIVersion

    made = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean)
    made.connect(HOST, 1883)
    made.loop_start()
    _await("an MQTT CONNACK", made.is_connected, 10)
    return made


def _feed_mqtt(topic: str) -> Feed:
    client_id = f"soak-{uuid.uuid4().hex[:8]}"
    # The source's session exists before anything is published: the broker keeps
    # what comes for it (as for a source that ran before).
    session = _mqtt_client(f"{client_id}-0", clean=False)
    session.subscribe(topic, qos=1)
    time.sleep(0.3)
    session.disconnect()
    session.loop_stop()

    def connect() -> Callable[[list[str]], None]:
        client = _mqtt_client()

        def send(chunk: list[str]) -> None:
            infos = [client.publish(topic, v.encode(), qos=1) for v in chunk]
            for info in infos:
                info.wait_for_publish(5)
                if not info.is_published():
                    client.disconnect()
                    client.loop_stop()
                    msg = "mqtt: publish not acknowledged"
                    raise ConnectionError(msg)

        return send

    def cleanup() -> None:
        forget = _mqtt_client(f"{client_id}-0", clean=True)
        forget.disconnect()
        forget.loop_stop()

    configs = {"host": HOST, "topicFilters": [topic], "clientId": client_id}
    return Feed(configs, connect, cleanup)


def _feed_postgres(table: str) -> Feed:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, body text)")

    def connect() -> Callable[[list[str]], None]:
        conn = psycopg.connect(PG_URL, autocommit=True, connect_timeout=2)

        def send(chunk: list[str]) -> None:  # one writer: ids grow in commit order
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {table} (body) VALUES (%s)", [(v,) for v in chunk])

        return send

    def cleanup() -> None:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")

    configs = {"url": PG_URL, "table": table, "offset_column": "id", "columns": ["body"]}
    return Feed(configs, connect, cleanup, guarantee="EFFECTIVELY_ONCE",
                fed_as=lambda v: str(json.loads(v)["body"]))  # fmt: skip


FEEDS: dict[str, Callable[[str], Feed]] = {
    "rabbitmq": lambda n: _feed_rabbitmq(f"soak-{n}"),
    "redis": lambda n: _feed_redis(f"soak-{n}"),
    "nats": lambda n: _feed_nats(f"SOAK_{n}"),
    "mqtt": lambda n: _feed_mqtt(f"soak/{n}"),
    "postgres": lambda n: _feed_postgres(f"soak_{n}"),
}
# What docs/connectors.md promises a source after its broker restarted: at most one
# batch of duplicates (at-least-once), none for postgres (effectively-once). NATS: what
# the source acked in the seconds before the restart may come again, as JetStream may
# restore an older ack floor of the consumer (seen: 1,040, 5 s of the stream): 10 s.
SOAK_DUPLICATES = {"rabbitmq": BATCH, "redis": BATCH, "nats": 10 * SOAK_RATE, "mqtt": BATCH,
                   "postgres": 0}  # fmt: skip


@dataclass
class SoakResult:
    """What a soak saw of one source."""

    name: str
    fed: int = 0
    moved: int = 0
    lost: int = 0
    duplicates: int = 0
    restart_seconds: float = float("nan")
    longest_gap: float = 0.0
    unread_at_restart: int = 0  # fed and not yet appended when the broker stopped
    restarts: int = 0  # the source instance's restarts by its failure policy
    errors: list[str] = field(default_factory=list)
    lost_with_the_broker: bool = False  # its broker keeps nothing over a restart (Redis here)
    kind: str = "source"  # or "sink"

    @property
    def label(self) -> str:
        return f"{self.name} {self.kind}"

    @property
    def stalled(self) -> bool:
        return self.longest_gap > self.restart_seconds + RESTART_SLACK

    def verdict(self) -> list[str]:
        """What breaks a promise: a stall, a loss (beyond what the broker dropped), duplicates."""
        wrong = []
        if self.stalled:
            wrong.append(f"stalled {self.longest_gap:.1f} s (restart {self.restart_seconds:.1f} s)")
        allowed = self.unread_at_restart if self.lost_with_the_broker else 0
        if self.lost > allowed:
            wrong.append(f"{self.lost} lost (allowed {allowed})")
        bound = (SOAK_DUPLICATES if self.kind == "source" else SINK_SOAK_DUPLICATES)[self.name]
        if self.duplicates > bound:
            wrong.append(f"{self.duplicates} duplicates (bound {bound})")
        return wrong + self.errors


class SoakLane:
    """One source under a soak: its feeder thread, its watcher, its run."""

    def __init__(self, store: Store, name: str) -> None:
        from sparkfn.connectors.source.source_run import SourceRun

        self.name, self.store = name, store
        tag = uuid.uuid4().hex[:8]
        self.feed = FEEDS[name](tag)
        self.topic = f"soak-{name}-{tag}"
        TopicAdmin(store).create(self.topic, schema_type="bytes")
        config = SourceConfig(name=self.topic, source_type=name, output=self.topic,
                              configs=self.feed.configs,
                              processing_guarantees=self.feed.guarantee)  # fmt: skip
        self.run = SourceRun(config, store)
        self.result = SoakResult(name, lost_with_the_broker=self.feed.lost_with_the_broker)
        self.fed: list[str] = []
        self.feeding = threading.Event()
        self.quit = threading.Event()
        self.last_move = time.monotonic()
        self.moved = 0
        self._lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._feed, name=f"soak-feed-{name}", daemon=True),
            threading.Thread(target=self._watch, name=f"soak-watch-{name}", daemon=True),
        ]

    def start(self) -> None:
        self.run.start()
        for thread in self.threads:
            thread.start()
        self.feeding.set()

    def _feed(self, per_tick: int = SOAK_RATE // 10) -> None:
        send: Callable[[list[str]], None] | None = None
        index, began = 0, time.monotonic()
        while not self.quit.is_set():
            if not self.feeding.is_set() or index >= SOAK_RATE * (time.monotonic() - began):
                time.sleep(0.02)
                if not self.feeding.is_set():
                    began = time.monotonic() - index / SOAK_RATE
                continue
            chunk = [f"{self.name}-{i}" for i in range(index, index + per_tick)]
            try:
                if send is None:
                    send = self.feed.connect()
                send(chunk)
            except Exception:
                send = None  # the broker is away: connect again and send the chunk again
                time.sleep(0.2)
                continue
            with self._lock:
                self.fed.extend(chunk)
            index += per_tick

    def _watch(self) -> None:
        """The longest time the output did not grow while there was something to move."""
        while not self.quit.is_set():
            moved = _count(self.store, self.topic)
            now = time.monotonic()
            if moved != self.moved:
                self.moved, self.last_move = moved, now
            elif moved >= len(self.fed) or not self.feeding.is_set():
                self.last_move = now  # nothing to move, or the steady stream is over
            self.result.longest_gap = max(self.result.longest_gap, now - self.last_move)
            time.sleep(0.1)

    def stopped(self) -> None:
        """Its broker just stopped: note what was fed and not yet appended (a broker that
        keeps nothing loses that)."""
        time.sleep(0.5)  # a send the broker took just before it stopped is counted as fed
        with self._lock:
            self.result.unread_at_restart = len(self.fed) - _count(self.store, self.topic)

    def cancel(self) -> None:
        self.quit.set()
        self.run.stop("cancel")

    def finish(self, timeout: float = 120) -> SoakResult:
        """Stop feeding, let the source move what was fed, stop it, count."""
        self.feeding.clear()
        time.sleep(0.5)
        deadline = time.monotonic() + timeout
        lossy = self.result.unread_at_restart if self.feed.lost_with_the_broker else 0
        while _count(self.store, self.topic) < len(self.fed) - lossy:
            if self.result.stalled or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        time.sleep(1.0)  # what a broker still redelivers lands now
        self.quit.set()
        for thread in self.threads:
            thread.join(30)
        self.run.stop("drain")
        self.run.wait(60)
        found = [self.feed.fed_as(v) for v in _values(self.store, self.topic)]
        counts: dict[str, int] = {}
        for value in found:
            counts[value] = counts.get(value, 0) + 1
        result = self.result
        result.fed, result.moved = len(self.fed), len(found)
        result.lost = sum(1 for v in self.fed if v not in counts)
        result.duplicates = len(found) - len(counts)
        status = self.run.status()
        result.restarts = sum(i.num_restarts for i in status.instances)
        if self.run.state.value == "ERROR":
            result.errors.append(f"ended in ERROR: {self.run.death()}")
        try:
            self.feed.cleanup()
        except Exception as exc:
            result.errors.append(f"cleanup: {exc}")
        return result


# --- the sinks' side of a soak: a topic fed steadily, the sink on Spark, the broker read back


# What docs/connectors.md promises a sink after its broker restarted: a batch that failed
# its flush is written again (the at-least-once sinks: what it published before the
# failure, duplicated; under a batch); none where the broker or the table de-duplicates.
SINK_SOAK_DUPLICATES = {"rabbitmq": BATCH, "redis": BATCH, "mqtt": BATCH, "nats": 0,
                        "postgres": 0}  # fmt: skip


@dataclass
class SinkOut:
    """Where a soak's sink writes, and how to read it back (each call connects anew)."""

    configs: dict[str, Any]  # the sink's
    count: Callable[[], int]  # what the broker holds now; raises while it is down
    values: Callable[[], list[str]]  # every value it holds, at the end
    cleanup: Callable[[], None]
    lost_with_the_broker: bool = False


def _out_rabbitmq(queue: str) -> SinkOut:
    import pika

    def channel() -> Any:
        return pika.BlockingConnection(pika.ConnectionParameters(HOST, heartbeat=0)).channel()

    channel().queue_declare(queue, durable=True)

    def count() -> int:
        ch = channel()
        try:
            return int(ch.queue_declare(queue, passive=True).method.message_count)
        finally:
            ch.connection.close()

    def values() -> list[str]:
        ch, got = channel(), []
        for method, _, body in ch.consume(queue, inactivity_timeout=2):
            if method is None:
                break
            got.append(body.decode())
        ch.connection.close()  # unacked: the queue keeps them for count()
        return got

    def cleanup() -> None:
        ch = channel()
        ch.queue_delete(queue)
        ch.connection.close()

    configs = {"host": HOST, "exchangeName": "", "routingKey": queue}
    return SinkOut(configs, count, values, cleanup)


def _out_redis(stream: str) -> SinkOut:
    import redis

    def client() -> Any:
        return redis.Redis(HOST, 6379, socket_timeout=5)

    def values() -> list[str]:
        entries: Any = client().xrange(stream)
        return [f[b"value"].decode() for _, f in entries]

    configs = {"redisHosts": f"{HOST}:6379", "streamName": stream}
    return SinkOut(configs, lambda: int(client().xlen(stream)), values,
                   lambda: client().delete(stream), lost_with_the_broker=True)  # fmt: skip


def _out_nats(stream: str) -> SinkOut:
    import nats

    async def on_stream(action: Callable[[Any], Any]) -> Any:
        nc = await nats.connect("nats://127.0.0.1:4222", allow_reconnect=False, connect_timeout=2)
        try:
            return await action(nc.jetstream(timeout=5))
        finally:
            await nc.close()

    asyncio.run(on_stream(lambda js: js.add_stream(name=stream, subjects=[f"{stream}.>"])))

    async def held(js: Any) -> int:
        return int((await js.stream_info(stream)).state.messages)

    async def read(js: Any) -> list[str]:
        total, got = await held(js), []
        from nats.js.api import AckPolicy, ConsumerConfig

        # No acks: an explicit-ack consumer hands out at most max_ack_pending (1,000) unacked.
        sub = await js.pull_subscribe(f"{stream}.out", durable="soak-reader", stream=stream,
                                      config=ConsumerConfig(ack_policy=AckPolicy.NONE))  # fmt: skip
        while len(got) < total:
            got.extend(m.data.decode() for m in await sub.fetch(1000, timeout=5))
        return got

    configs = {"servers": "nats://127.0.0.1:4222", "subject": f"{stream}.out", "stream": stream}
    return SinkOut(configs, lambda: asyncio.run(on_stream(held)),
                   lambda: asyncio.run(on_stream(read)),
                   lambda: asyncio.run(on_stream(lambda js: js.delete_stream(stream))))  # fmt: skip


def _out_mqtt(topic: str) -> SinkOut:
    client_id = f"soak-out-{uuid.uuid4().hex[:8]}"
    got: list[str] = []
    # A persistent session, QoS 1: paho's loop reconnects after Mosquitto's restart and
    # the broker (persistence on) delivers what came for the session meanwhile.
    sub = _mqtt_client(client_id, clean=False)
    sub.on_message = lambda c, u, m: got.append(m.payload.decode())
    sub.subscribe(topic, qos=1)
    time.sleep(0.3)

    def cleanup() -> None:
        sub.disconnect()
        sub.loop_stop()
        forget = _mqtt_client(client_id, clean=True)
        forget.disconnect()
        forget.loop_stop()

    return SinkOut({"host": HOST, "topic": topic}, lambda: len(got), lambda: list(got), cleanup)


def _out_postgres(table: str) -> SinkOut:
    import psycopg

    def query(sql: str) -> list[Any]:
        with psycopg.connect(PG_URL, autocommit=True, connect_timeout=2) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchall() if cursor.description else []

    configs = {"url": PG_URL, "table": table, "create_table": True}
    return SinkOut(configs, lambda: int(query(f"SELECT count(*) FROM {table}")[0][0]),
                   lambda: [r[0] for r in query(f"SELECT value FROM {table}")],
                   lambda: query(f"DROP TABLE IF EXISTS {table}") and None)  # fmt: skip


OUTS: dict[str, Callable[[str], SinkOut]] = {
    "rabbitmq": lambda n: _out_rabbitmq(f"soak-out-{n}"),
    "redis": lambda n: _out_redis(f"soak-out-{n}"),
    "nats": lambda n: _out_nats(f"SOAK_OUT_{n}"),
    "mqtt": lambda n: _out_mqtt(f"soak/out-{n}"),
    "postgres": lambda n: _out_postgres(f"soak_out_{n}"),
}


class SinkLane:
    """One sink under a soak: a producer feeding its input topic, the sink run on Spark
    (``SinkRun``: the supervisor and the default failure policy), a watcher of its broker."""

    def __init__(self, store: Store, name: str, spark: Any) -> None:
        from sparkfn.config.connector import SinkConfig
        from sparkfn.connectors.sink.sink_run import SinkRun

        self.name, self.store = name, store
        tag = uuid.uuid4().hex[:8]
        self.out = OUTS[name](tag)
        self.topic = f"soak-in-{name}-{tag}"
        TopicAdmin(store).create(self.topic, schema_type="bytes")
        self.producer = Producer(store, self.topic)
        config = SinkConfig(name=f"soak-{name}-{tag}", sink_type=name, inputs=[self.topic],
                            configs=self.out.configs, subscription_position="earliest")  # fmt: skip
        self.run = SinkRun(config, store=store, spark=spark)
        self.result = SoakResult(name, lost_with_the_broker=self.out.lost_with_the_broker,
                                 kind="sink")  # fmt: skip
        self.fed: list[str] = []
        self.fed_at_stop = 0
        self.feeding = threading.Event()
        self.quit = threading.Event()
        self.threads = [
            threading.Thread(target=self._feed, name=f"soak-feed-{name}-sink", daemon=True),
            threading.Thread(target=self._watch, name=f"soak-watch-{name}-sink", daemon=True),
        ]

    def start(self) -> None:
        self.run.start()
        self.feeding.set()
        for thread in self.threads:
            thread.start()

    def _feed(self, per_tick: int = SOAK_RATE // 10) -> None:
        index, began = 0, time.monotonic()
        while not self.quit.is_set() and self.feeding.is_set():
            if index >= SOAK_RATE * (time.monotonic() - began):
                time.sleep(0.02)
                continue
            chunk = [f"{self.name}-sink-{i}" for i in range(index, index + per_tick)]
            self.producer.send_batch([Message(v.encode()) for v in chunk])
            self.fed.extend(chunk)
            index += per_tick

    def _watch(self) -> None:
        """The longest time the broker's count did not change while there was something
        to write (it is not asked while the broker is down: that is the restart)."""
        moved, last_move = -1, time.monotonic()
        while not self.quit.is_set():
            now = time.monotonic()
            try:
                count = self.out.count()
            except Exception:
                count = moved  # down: no move
            if count != moved:
                moved, last_move = count, now
            elif not self.feeding.is_set() and self._caught_up(count):
                last_move = now  # everything is written
            self.result.longest_gap = max(self.result.longest_gap, now - last_move)
            time.sleep(0.25)

    def _caught_up(self, count: int) -> bool:
        if self.result.lost_with_the_broker:
            return count >= len(self.fed) - self.fed_at_stop
        return count >= len(self.fed)

    def stopped(self) -> None:
        """Its broker just stopped: what was fed until now may be gone with it (Redis)."""
        self.fed_at_stop = len(self.fed)

    def cancel(self) -> None:
        self.quit.set()
        self.run.stop("cancel")

    def finish(self, timeout: float = 120) -> SoakResult:
        """Stop feeding, let the sink write what was fed, stop it, count."""
        self.feeding.clear()
        time.sleep(0.5)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.result.stalled:
            try:
                if self._caught_up(self.out.count()):
                    break
            except Exception:
                pass
            time.sleep(0.5)
        time.sleep(1.0)
        self.quit.set()
        for thread in self.threads:
            thread.join(30)
        self.run.stop("drain")
        self.run.wait(60)
        result = self.result
        try:
            found = self.out.values()
        except Exception as exc:
            result.errors.append(f"reading the broker back: {exc}")
            found = []
        counts: dict[str, int] = {}
        for value in found:
            counts[value] = counts.get(value, 0) + 1
        result.fed, result.moved = len(self.fed), len(found)
        missing = [i for i, v in enumerate(self.fed) if v not in counts]
        result.lost = len(missing)
        if result.lost_with_the_broker:  # what the broker dropped in its restart
            result.unread_at_restart = sum(1 for i in missing if i < self.fed_at_stop)
        result.duplicates = len(found) - len(counts)
        result.restarts = self.run.status().num_restarts
        if self.run.run_state == "ERROR":
            result.errors.append("ended in ERROR")
        self.producer.close()
        try:
            self.out.cleanup()
        except Exception as exc:
            result.errors.append(f"cleanup: {exc}")
        return result


def _count(store: Store, topic: str) -> int:
    return sum(p.messages for p in TopicAdmin(store).stats(topic))


def _values(store: Store, topic: str) -> list[str]:
    from sparkfn.topics.consumer import Consumer

    consumer = Consumer(store, topic, initial_position="earliest")
    out: list[str] = []
    while got := consumer.receive(max_messages=50_000):
        out.extend(m.value.decode() if m.value is not None else "" for m in got)
    return out


if __name__ == "__main__":
    sys.exit(main())
