"""A RabbitMQ source → a function → a Redis sink on one worker, as a user drives them (issue 30).

The shared worker process, the real RabbitMQ (127.0.0.1:5672) and Redis
(127.0.0.1:6379). One test drives the pipeline through the REST routes
(``/admin/v3/sources``, ``/functions``, ``/sinks``), the other through
``sparkfn`` typed as a Pulsar user types ``pulsar-admin`` (Pulsar IO's config
names, topics nobody created, the Pulsar exclamation example). Messages are
published to a RabbitMQ queue, the function appends ``!``, and every one must
be in the Redis stream. Then each of the three is stopped (what is published
meanwhile stops in front of it and arrives once it starts), drained (status
``STOPPED``, the instance too) and restarted, and what is published after
arrives.

A third test creates the three from Pulsar IO's YAML files as a Pulsar user
has them (``archive: builtin://...``, the Redis sink's own configs: no
``streamName``, so each message is ``SET`` under its key, ``""`` for the
function's unkeyed outputs) and publishes messages with no key of their own:
Redis's MONITOR must see each one SET exactly once.

Nothing here crashes, and every stop, drain and restart of all three is
graceful (each commits what it has read or written and acks it), so
docs/connectors.md promises no duplicate: each message must be in the stream
exactly once. The crash cases, with their duplicates, are the connectors'
crash tests.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pika
import pytest
import redis
from brokers import HOST, require, unique
from cli_forks import run_sparkfn
from worker_process import SharedWorker

from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from waiting import WAIT, until

# One xdist worker with the tests that restart the brokers (tests/connectors).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("brokers")]

REPO = Path(__file__).resolve().parents[2]
EXCLAMATION = "examples/pulsar_exclamation.py"  # as a user types it, in the checkout
CLASSNAME = "pulsar_exclamation.ExclamationFunction"
SOURCE, FUNCTION, SINK = "rabbit-in", "exclaim", "redis-out"
RAW, BANG = "raw", "bang"
FIRST = 300  # published once the pipeline runs
MORE = 50  # published at each step after
QUIET_S = 1.0  # how long a stopped part must let nothing past

Ran = subprocess.CompletedProcess[str]


# the shared bounded wait (tests/waiting.py), with this module's timeout
_until = partial(until, timeout=WAIT, every=0.2)


# --- the brokers -----------------------------------------------------------------------


class Rabbit:
    """One durable queue of the test's own on the real RabbitMQ."""

    def __init__(self) -> None:
        self.queue = unique("sparkfn-e2e")
        self.published = 0

    def _channel(self) -> tuple[pika.BlockingConnection, Any]:
        conn = pika.BlockingConnection(pika.ConnectionParameters(HOST))
        return conn, conn.channel()

    def declare(self) -> None:
        conn, channel = self._channel()
        channel.queue_declare(self.queue, durable=True)
        conn.close()

    def delete(self) -> None:
        conn, channel = self._channel()
        channel.queue_delete(self.queue)
        conn.close()

    def publish(self, count: int) -> list[str]:
        """``count`` new persistent messages ``m-<n>``, committed; what was sent."""
        bodies = [f"m-{n}" for n in range(self.published, self.published + count)]
        conn, channel = self._channel()
        channel.tx_select()
        props = pika.BasicProperties(delivery_mode=2)
        for body in bodies:
            channel.basic_publish("", self.queue, body.encode(), props)
        channel.tx_commit()
        conn.close()
        self.published += count
        return bodies

    def depth(self) -> tuple[int, int]:
        """(messages ready, consumers) of the queue."""
        conn, channel = self._channel()
        ok = channel.queue_declare(self.queue, passive=True).method
        conn.close()
        return int(ok.message_count), int(ok.consumer_count)


@pytest.fixture
def rabbit() -> Iterator[Rabbit]:
    require("rabbitmq")
    queue = Rabbit()
    queue.declare()
    yield queue
    queue.delete()


@pytest.fixture
def stream() -> Iterator[tuple[redis.Redis, str]]:
    require("redis")
    name = unique("sparkfn-e2e")
    with redis.Redis(HOST, 6379) as client:
        yield client, name
        client.delete(name)


# --- the two ways in ---------------------------------------------------------------------


class Rest:
    """The worker's REST routes, as an HTTP client calls them."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=f"{url}/admin/v3", timeout=120)

    def create(self, rabbit: Rabbit, stream: str) -> None:
        source = {
            "archive": "builtin://rabbitmq",
            "topicName": f"persistent://public/default/{RAW}",
            "configs": {"host": HOST, "port": 5672, "queueName": rabbit.queue},
        }
        made = self.http.post(
            f"/sources/public/default/{SOURCE}", data={"sourceConfig": json.dumps(source)}
        )
        assert made.status_code == 200, f"create the source: {made.text}"
        assert (made.json()["archive"], made.json()["topicName"]) == (
            "builtin://rabbitmq",
            f"public/default/{RAW}",
        )
        function = {
            "className": CLASSNAME,
            "inputs": [f"persistent://public/default/{RAW}"],
            "output": f"persistent://public/default/{BANG}",
            "runtime": "PYTHON",
        }
        with (REPO / EXCLAMATION).open("rb") as code:
            made = self.http.post(
                f"/functions/public/default/{FUNCTION}",
                data={"functionConfig": json.dumps(function)},
                files={"data": ("pulsar_exclamation.py", code, "text/x-python")},
            )
        assert made.status_code == 200, f"create the function: {made.text}"
        sink = {
            "archive": "builtin://redis",
            "inputs": [f"persistent://public/default/{BANG}"],
            # What the function wrote before the sink's first batch, too (Pulsar: Latest).
            "sourceSubscriptionPosition": "Earliest",
            "configs": {"redisHosts": f"{HOST}:6379", "redisDatabase": 0, "streamName": stream},
        }
        made = self.http.post(
            f"/sinks/public/default/{SINK}", data={"sinkConfig": json.dumps(sink)}
        )
        assert made.status_code == 200, f"create the sink: {made.text}"

    def act(self, kind: str, name: str, action: str) -> None:
        done = self.http.post(f"/{kind}s/public/default/{name}/{action}")
        assert done.status_code == 204, f"{action} {kind} {name}: {done.status_code} {done.text}"

    def status(self, kind: str, name: str, instance: int | None = None) -> dict[str, Any]:
        where = f"/{kind}s/public/default/{name}" + ("" if instance is None else f"/{instance}")
        got = self.http.get(f"{where}/status")
        assert got.status_code == 200, f"status of {kind} {name}: {got.text}"
        return dict(got.json())

    def close(self) -> None:
        self.http.close()


class Cli:
    """``sparkfn`` in a child process, in the checkout, pointed at the worker once
    (``SPARKFN_URL``, as ``pulsar-admin``'s client.conf does), so each command is typed as is."""

    def __init__(self, url: str) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKFN_")}
        self.env |= {"SPARKFN_URL": url, "COLUMNS": "200"}

    def run(self, *args: str) -> Ran:
        ran = run_sparkfn(args, self.env, WAIT, cwd=REPO)  # forked: tests/cli/cli_forks.py
        said = f"sparkfn {' '.join(args)} exited {ran.returncode}\n{ran.stdout}{ran.stderr}"
        assert ran.returncode == 0, said
        assert "Traceback" not in ran.stdout + ran.stderr, said
        return ran

    def create(self, rabbit: Rabbit, stream: str) -> None:
        # What a Pulsar user types for pulsar-admin, with `sparkfn` in its place.
        where = ("--tenant", "public", "--namespace", "default")
        made = self.run(
            "sources", "create", *where, "--name", SOURCE,
            "--source-type", "rabbitmq",
            # Pulsar's examples give every value as a string.
            "--source-config", json.dumps({"host": HOST, "port": "5672", "queueName": rabbit.queue}),
            "--destination-topic-name", f"persistent://public/default/{RAW}",
        )  # fmt: skip
        assert made.stdout == f"created source public/default/{SOURCE} (version 1)\n", made.stdout
        made = self.run(
            "functions", "create", *where, "--name", FUNCTION,
            "--py", EXCLAMATION, "--classname", CLASSNAME,
            "--inputs", f"persistent://public/default/{RAW}",
            "--output", f"persistent://public/default/{BANG}",
        )  # fmt: skip
        assert made.stdout == f"created function public/default/{FUNCTION} (version 1)\n"
        made = self.run(
            "sinks", "create", *where, "--name", SINK,
            "--sink-type", "redis",
            "--sink-config",
            json.dumps({"redisHosts": f"{HOST}:6379", "redisDatabase": "0", "streamName": stream}),
            "--inputs", f"persistent://public/default/{BANG}", "--subs-position", "Earliest",
        )  # fmt: skip
        assert made.stdout == f"created sink public/default/{SINK} (version 1)\n", made.stdout

    def act(self, kind: str, name: str, action: str) -> None:
        done = self.run(f"{kind}s", action, "--name", name).stdout
        said = {"start": "started", "stop": "stopped", "drain": "drained", "restart": "restarted"}
        expected = f"{said[action]} {kind} public/default/{name}"
        if action == "stop":
            expected += " (SUSPENDED)"  # a stop waits until it has stopped
        assert done == expected + "\n", done

    def status(self, kind: str, name: str, instance: int | None = None) -> dict[str, Any]:
        one = () if instance is None else ("--instance-id", str(instance))
        shown = self.run(f"{kind}s", "status", "--name", name, *one, "--output", "json").stdout
        return dict(json.loads(shown))


# --- the test ------------------------------------------------------------------------------


class Pipeline:
    """What the test checks along the pipeline."""

    def __init__(
        self, worker: SharedWorker, rabbit: Rabbit, redis_client: redis.Redis, stream: str
    ) -> None:
        self.admin = TopicAdmin(worker.store)
        self.rabbit = rabbit
        self.redis = redis_client
        self.stream = stream
        self.sent: list[str] = []

    def held(self, topic: str) -> int:
        """How many messages ``topic`` holds."""
        return sum(p.messages for p in self.admin.stats(topic))

    def arrived(self) -> list[dict[bytes, bytes]]:
        return [fields for _, fields in self.redis.xrange(self.stream)]

    def publish(self, count: int) -> None:
        self.sent += self.rabbit.publish(count)

    def all_arrived(self, after: str, *, final: bool = False) -> None:
        """Wait until every message sent is in the stream, transformed, each exactly once."""
        expected = {f"{body}!" for body in self.sent}

        def complete() -> bool:
            return {f[b"value"].decode() for f in self.arrived()} >= expected

        _until(complete, f"all {len(expected)} messages in Redis {after}")
        if final:
            time.sleep(1.0)  # anything on its way twice lands now (each check counts them all)
        found = self.arrived()
        values = collections.Counter(f[b"value"].decode() for f in found)
        twice = {v: n for v, n in values.items() if n > 1}
        assert not twice, f"{after}: {len(twice)} messages in Redis more than once: {twice}"
        foreign = set(values) - expected
        assert not foreign, f"{after}: Redis holds what was not sent: {sorted(foreign)[:5]}"
        for fields in found:  # the sink's fields: where each came from
            assert fields[b"topic"].decode().endswith(f"public/default/{BANG}"), fields
            assert fields[b"messageId"], fields
        ids = collections.Counter((f[b"topic"], f[b"messageId"]) for f in found)
        assert max(ids.values()) == 1, f"{after}: a (topic, messageId) twice"

    def in_front(self, kind: str, upstream: tuple[tuple[int, int], int, int]) -> bool:
        """Whether the last MORE messages wait in front of the stopped ``kind``: in the queue
        (no consumer on it), on its input topic."""
        depth, raw, bang = upstream
        if kind == "source":
            return self.rabbit.depth() == (depth[0] + MORE, 0)
        if kind == "function":
            return self.held(RAW) == raw + MORE
        return self.held(BANG) == bang + MORE

    def past(self, kind: str) -> int:
        """How many messages are past the ``kind``: on its output topic, or in Redis."""
        if kind == "source":
            return self.held(RAW)
        if kind == "function":
            return self.held(BANG)
        return int(self.redis.xlen(self.stream))


# A run that goes on: RUNNING, or PARKED when its input has been quiet for a while (its
# instances run; its query starts again when input arrives: docs/lifecycle.md).
GOES_ON = ("RUNNING", "PARKED")


def _state(rest: Rest, kind: str, name: str, state: str) -> None:
    """Wait until the ``kind``'s status says ``state`` (polled over REST: it is cheap; what
    the driver shows is checked once it is there). ``RUNNING`` is met by ``PARKED`` too."""
    states = GOES_ON if state == "RUNNING" else (state,)
    _until(lambda: rest.status(kind, name)["state"] in states, f"{kind} {name} to be {state}")


@pytest.mark.long_running(60)
@pytest.mark.both_backends  # each case on its own backend: neither may be left out
@pytest.mark.parametrize(
    ("shared_worker", "way"),
    [("sqlite", "rest"), ("postgresql", "cli")],
    indirect=["shared_worker"],
)
def test_a_rabbitmq_source_a_function_and_a_redis_sink_lose_nothing_across_their_lifecycles(
    shared_worker: SharedWorker,
    rabbit: Rabbit,
    stream: tuple[redis.Redis, str],
    way: str,
) -> None:
    redis_client, stream_name = stream
    rest = Rest(shared_worker.url)
    driver: Rest | Cli = rest if way == "rest" else Cli(shared_worker.url)
    pipe = Pipeline(shared_worker, rabbit, redis_client, stream_name)
    parts = (("source", SOURCE), ("function", FUNCTION), ("sink", SINK))
    try:
        driver.create(rabbit, stream_name)  # topics nobody created: made on first use
        for kind, name in parts:
            _state(rest, kind, name, "RUNNING")
        pipe.publish(FIRST)
        pipe.all_arrived("once the three run")
        # Each shows what it did: appended, processed, written.
        for (kind, name), counter in zip(
            parts, ("numWritten", "numSuccessfullyProcessed", "numWrittenToSink"), strict=True
        ):
            shown = driver.status(kind, name)
            assert shown["state"] in GOES_ON, shown
            assert (shown["numInstances"], shown["numRunning"]) == (1, 1), shown
            assert shown["instances"][0]["status"][counter] >= FIRST, shown

        for kind, name in parts:
            driver.act(kind, name, "stop")
            _state(rest, kind, name, "SUSPENDED")
            # What is published now gets as far as the stopped part (the evidence that it
            # was sent), and no further.
            upstream = (pipe.rabbit.depth(), pipe.held(RAW), pipe.held(BANG))
            before = pipe.past(kind)
            pipe.publish(MORE)
            in_front = functools.partial(pipe.in_front, kind, upstream)
            _until(in_front, f"{MORE} messages in front of the stopped {kind}")
            time.sleep(QUIET_S)
            now = pipe.past(kind)
            assert now == before, f"{now - before} messages got past the stopped {kind}"
            driver.act(kind, name, "start")
            _state(rest, kind, name, "RUNNING")
            pipe.all_arrived(f"after the {kind} started again")

            driver.act(kind, name, "drain")
            _state(rest, kind, name, "STOPPED")
            drained = driver.status(kind, name)
            assert (drained["state"], drained["numRunning"]) == ("STOPPED", 0), drained
            one = driver.status(kind, name, 0)  # the instance's own route
            assert (one["state"], one["running"]) == ("STOPPED", False), one
            driver.act(kind, name, "restart")
            _state(rest, kind, name, "RUNNING")
            pipe.publish(MORE)
            pipe.all_arrived(f"after the {kind} was drained and restarted", final=kind == "sink")
        assert len(pipe.sent) == FIRST + 6 * MORE
    finally:
        rest.close()


# --- Pulsar IO's YAML files, unkeyed messages ----------------------------------------------

SOURCE_YAML = """\
tenant: public
namespace: default
name: rabbit-yaml
topicName: persistent://public/default/raw-yaml
archive: builtin://rabbitmq
parallelism: 1
configs:
  host: {host}
  port: 5672
  queueName: {queue}
  passive: false
"""
SINK_YAML = """\
tenant: public
namespace: default
name: redis-yaml
inputs:
  - persistent://public/default/bang-yaml
archive: builtin://redis
sourceSubscriptionPosition: Earliest
parallelism: 1
configs:
  redisHosts: {host}:6379
  redisDatabase: {database}
"""
# The database of the YAML test's sink: its key "" is nobody else's (tests/connectors' own
# unkeyed-sink test uses 7).
YAML_DB = 8


class SetWatch:
    """Every ``SET "" value`` Redis runs on ``database``, seen through MONITOR on a socket of
    its own, read by a thread (the sink's writes, each as Redis ran it, not only the last)."""

    SET_EMPTY = re.compile(rb'^\+[\d.]+ \[(\d+) [^\]]*\] "(?i:set)" "" "([^"]*)"$')

    def __init__(self, database: int) -> None:
        self.database = str(database).encode()
        self.values: list[str] = []
        self._stop = threading.Event()
        self._socket = socket.create_connection((HOST, 6379), timeout=5)
        self._socket.sendall(b"MONITOR\r\n")
        self._lines = self._socket.makefile("rb")
        assert self._lines.readline() == b"+OK\r\n"  # on from here
        self._socket.settimeout(None)
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        for line in self._lines:  # ends when close() shuts the socket down
            seen = self.SET_EMPTY.match(line.rstrip(b"\r\n"))
            if seen is not None and seen.group(1) == self.database:
                self.values.append(seen.group(2).decode())

    def close(self) -> None:
        self._socket.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)
        self._lines.close()
        self._socket.close()


# A backend marker, not a parametrization: tests/conftest.py picks one backend for a Spark
# test, and a case on the other is left out (this test, parametrized on sqlite, never ran
# when its pick was postgresql).
@pytest.mark.long_running(60)
@pytest.mark.backend("sqlite")
def test_a_pulsar_io_pipeline_from_yaml_files_writes_every_unkeyed_message_once(
    shared_worker: SharedWorker, rabbit: Rabbit, tmp_path: Path
) -> None:
    # Pulsar IO's connector files, as a Pulsar user has them (archive: builtin://,
    # sourceSubscriptionPosition, the Redis sink's own configs), the messages published with
    # no key of their own: the files were refused, the source's records had no key, and the
    # Redis sink went to ERROR on the first message without one.
    require("redis")
    rest, cli = Rest(shared_worker.url), Cli(shared_worker.url)
    source_file, sink_file = tmp_path / "rabbitmq-source.yaml", tmp_path / "redis-sink.yaml"
    source_file.write_text(SOURCE_YAML.format(host=HOST, queue=rabbit.queue))
    sink_file.write_text(SINK_YAML.format(host=HOST, database=YAML_DB))
    watch = SetWatch(YAML_DB)
    try:
        made = cli.run("sources", "create", "--source-config-file", str(source_file))
        assert made.stdout == "created source public/default/rabbit-yaml (version 1)\n", made
        made = cli.run(
            "functions", "create", "--tenant", "public", "--namespace", "default",
            "--name", "exclaim-yaml", "--py", EXCLAMATION, "--classname", CLASSNAME,
            "--inputs", "persistent://public/default/raw-yaml",
            "--output", "persistent://public/default/bang-yaml",
        )  # fmt: skip
        made = cli.run("sinks", "create", "--sink-config-file", str(sink_file))
        assert made.stdout == "created sink public/default/redis-yaml (version 1)\n", made
        parts = (("source", "rabbit-yaml"), ("function", "exclaim-yaml"), ("sink", "redis-yaml"))
        for kind, name in parts:
            _state(rest, kind, name, "RUNNING")
        sent = rabbit.publish(FIRST)
        expected = {f"{body}!" for body in sent}

        _until(lambda: set(watch.values) >= expected, f"all {FIRST} messages SET in Redis")
        time.sleep(QUIET_S)  # anything on its way twice lands now
        counted = collections.Counter(watch.values)
        assert set(counted) == expected, sorted(set(counted) ^ expected)[:5]
        assert max(counted.values()) == 1, {v: n for v, n in counted.items() if n > 1}
        with redis.Redis(HOST, 6379, db=YAML_DB) as written:
            assert written.get("") == watch.values[-1].encode()  # the last one SET stays
        # The source keyed each record by its routing key (the queue's name), as Pulsar's;
        # the function's outputs have no key (Pulsar's Python runtime forwards none).
        raw = Consumer(shared_worker.store, "raw-yaml", initial_position="earliest")
        assert {m.key for m in raw.receive(max_messages=FIRST + 10)} == {rabbit.queue}
        bang = Consumer(shared_worker.store, "bang-yaml", initial_position="earliest")
        assert {m.key for m in bang.receive(max_messages=FIRST + 10)} == {None}
        for kind, name in parts:
            shown = cli.status(kind, name)
            assert (shown["state"] in GOES_ON, shown["numRunning"]) == (True, 1), shown
        sink = cli.status("sink", "redis-yaml")["instances"][0]["status"]
        assert (sink["numWrittenToSink"], sink["numSinkExceptions"]) == (FIRST, 0), sink
    finally:
        watch.close()
        rest.close()
        with redis.Redis(HOST, 6379, db=YAML_DB) as written:
            written.delete("")
