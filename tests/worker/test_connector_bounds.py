"""Hostile connector configs at create and update (issue 41 point 3, issue 40 point 2).

The real REST app over HTTP with a worker in the test process (the checks
come before anything touches the store, so one backend is enough):

* every timeout, size and count of a built-in's configs has an upper bound:
  a value over it is a 400 ``config_over_limit`` at once, naming the
  connector, the field, the value and the limit;
* a check against a broker that never answers (a port that accepts and
  stays silent) or that is not there ends in a 400 ``broker_unreachable``
  within 10 s, naming the broker, host and step, however long the
  configured (legal) timeouts are;
* a RabbitMQ queue name over AMQP's 255 and a PostgreSQL table that is no
  name are 400s, and a huge name is never written whole to an answer or log.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from app_server import served
from brokers import HOST, PG_URL, closed_port, silent_port

from sparkfn.connectors.builtin._config import BuiltinConfig
from sparkfn.worker.api.app import create_app
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings

# One xdist worker with the tests that restart the brokers (tests/connectors).
pytestmark = pytest.mark.xdist_group("brokers")

SOURCES = "/admin/v3/sources/public/default"
SINKS = "/admin/v3/sinks/public/default"
BIG = 10**12


@pytest.fixture
def client(data_dir: Path) -> Iterator[httpx.Client]:
    url = f"sqlite:///{data_dir}/sparkfn.db"
    worker = Worker(WorkerSettings.resolve(data_dir=data_dir, store_url=url))
    worker.open()
    try:
        with served(create_app(worker)) as client:
            client.timeout = httpx.Timeout(30)
            yield client
    finally:
        worker.shutdown()


def _source(kind: str, configs: dict[str, Any]) -> dict[str, Any]:
    return {"archive": f"builtin://{kind}", "topicName": "out", "configs": configs}


def _sink(kind: str, configs: dict[str, Any]) -> dict[str, Any]:
    return {"archive": f"builtin://{kind}", "inputs": ["in"], "configs": configs}


def _send(
    client: httpx.Client, verb: str, route: str, name: str, config: dict[str, Any]
) -> httpx.Response:
    form = "sourceConfig" if route == SOURCES else "sinkConfig"
    return client.request(verb, f"{route}/{name}", data={form: json.dumps(config)})


NATS = {"servers": "nats://127.0.0.1:4222", "stream": "S", "durableName": "d"}
RABBIT = {"host": HOST, "queueName": "q"}
REDIS = {"redisHosts": f"{HOST}:6379", "streamName": "s"}
MQTT = {"host": HOST, "topicFilters": ["t/#"]}
PG = {"url": PG_URL, "table": "t", "offset_column": "id"}

# (route, connector, configs, the field over its bound, the limit)
OVER_LIMIT = [
    (SOURCES, "nats", {**NATS, "connectTimeoutMs": BIG}, "connectTimeoutMs", "60000"),
    (SOURCES, "nats", {**NATS, "fetchTimeoutMs": BIG}, "fetchTimeoutMs", "10000"),
    (SOURCES, "nats", {**NATS, "batchSize": BIG}, "batchSize", "100000"),
    (SOURCES, "nats", {**NATS, "ackWaitSeconds": 1e300}, "ackWaitSeconds", "3600"),
    (SOURCES, "nats", {**NATS, "maxAckPending": BIG}, "maxAckPending", "1000000"),
    (SINKS, "nats", {"subject": "x", "publishTimeoutMs": BIG}, "publishTimeoutMs", "60000"),
    (SOURCES, "rabbitmq", {**RABBIT, "connectionTimeout": 10**9}, "connectionTimeout", "60000"),
    (SOURCES, "rabbitmq", {**RABBIT, "handshakeTimeout": 10**9}, "handshakeTimeout", "60000"),
    (SOURCES, "rabbitmq", {**RABBIT, "requestedHeartbeat": BIG}, "requestedHeartbeat", "65535"),
    (SOURCES, "rabbitmq", {**RABBIT, "requestedFrameMax": BIG}, "requestedFrameMax", "131072"),
    (SOURCES, "rabbitmq", {**RABBIT, "readTimeoutMs": BIG}, "readTimeoutMs", "10000"),
    (SOURCES, "rabbitmq", {**RABBIT, "queueName": "q" * 256}, "queueName", "255"),
    (SINKS, "rabbitmq", {"host": HOST, "exchangeName": "e" * 300}, "exchangeName", "255"),
    (SOURCES, "redis", {**REDIS, "connectTimeout": BIG}, "connectTimeout", "60000"),
    (SOURCES, "redis", {**REDIS, "operationTimeout": BIG}, "operationTimeout", "60000"),
    (SOURCES, "redis", {**REDIS, "blockMs": BIG}, "blockMs", "10000"),
    (SOURCES, "redis", {**REDIS, "redisDatabase": 2**40}, "redisDatabase", "2147483647"),
    (SINKS, "redis", {"redisHosts": f"{HOST}:6379", "batchTimeMs": BIG}, "batchTimeMs", "60000"),
    (SOURCES, "mqtt", {**MQTT, "connectTimeoutMs": BIG}, "connectTimeoutMs", "60000"),
    (SOURCES, "mqtt", {**MQTT, "keepAliveSeconds": BIG}, "keepAliveSeconds", "65535"),
    (SOURCES, "mqtt", {**MQTT, "topicFilters": ["t"] * 101}, "topicFilters", "100"),
    (SOURCES, "postgres", {**PG, "rows_per_read": BIG}, "rows_per_read", "100000"),
    (SOURCES, "file", {"path": "/tmp", "records_per_read": BIG}, "records_per_read", "100000"),
    (SOURCES, "file", {"path": "/" + "p" * 5000}, "path", "4096"),
    (SOURCES, "generator", {"rate": 1e30}, "rate", "10000000"),
    (SOURCES, "generator", {"buckets": BIG}, "buckets", "1000000"),
    (SINKS, "file", {"path": "/tmp/" + "x" * 5000}, "path", "4096"),
]


@pytest.mark.parametrize(
    ("route", "kind", "configs", "field", "limit"),
    OVER_LIMIT,
    ids=[f"{c[1]}-{c[3]}" for c in OVER_LIMIT],
)
def test_a_setting_over_its_bound_is_refused_at_once_naming_field_value_and_limit(
    client: httpx.Client, route: str, kind: str, configs: dict[str, Any], field: str, limit: str
) -> None:
    shape = _source if route == SOURCES else _sink
    started = time.monotonic()
    refused = _send(client, "POST", route, "hostile", shape(kind, configs))
    took = time.monotonic() - started
    body = refused.json()
    assert (refused.status_code, body["reason"]) == (400, "config_over_limit"), refused.text
    message = body["message"]
    assert f"({kind})" in message and "hostile" in message, message
    assert f"configs.{field}:" in message and f"limit of {limit}" in message, message
    found = configs[field]
    if isinstance(found, int | float):
        assert repr(found) in message, message  # the value found
    assert len(message) < 1000, "a long value is shown cut"
    assert took < 5, f"answered in {took:.1f} s"  # no broker waited on (a loaded machine)
    assert client.get(route).json() == []


def test_an_update_over_a_bound_is_refused_and_the_running_version_stays(
    client: httpx.Client,
) -> None:
    made = _send(client, "POST", SOURCES, "gen", _source("generator", {"rate": 10}))
    assert made.status_code == 200, made.text
    refused = _send(client, "PUT", SOURCES, "gen", _source("generator", {"rate": 1e30}))
    assert (refused.status_code, refused.json()["reason"]) == (400, "config_over_limit")
    assert "configs.rate" in refused.json()["message"]
    kept = client.get(f"{SOURCES}/gen").json()
    assert kept["configs"] == {"rate": 10}
    assert client.delete(f"{SOURCES}/gen").status_code == 200


def test_a_huge_queue_name_is_a_400_and_never_written_whole(
    client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    huge = "q" * 1_000_000
    with caplog.at_level(logging.DEBUG):
        refused = _send(
            client, "POST", SOURCES, "rq", _source("rabbitmq", {**RABBIT, "queueName": huge})
        )
    assert (refused.status_code, refused.json()["reason"]) == (400, "config_over_limit")
    assert "1000000 characters" in refused.json()["message"]
    assert len(refused.text) < 2000
    assert "q" * 1000 not in caplog.text


@pytest.mark.parametrize(
    "table", ['t"; drop table x; --', "a b", "x.y.z", "1abc", "t" * 64, 'a."b']
)
def test_a_postgres_table_that_is_not_a_name_is_a_400(client: httpx.Client, table: str) -> None:
    refused = _send(client, "POST", SOURCES, "pg", _source("postgres", {**PG, "table": table}))
    assert (refused.status_code, refused.json()["reason"]) == (400, "invalid_config"), refused.text
    assert "configs.table" in refused.json()["message"]
    sink = _send(client, "POST", SINKS, "pgs", _sink("postgres", {"url": PG_URL, "table": table}))
    assert (sink.status_code, sink.json()["reason"]) == (400, "invalid_config"), sink.text


def _hostile(port: int) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(route, connector, broker, configs): each broker at ``port``, with the largest legal
    timeouts."""
    where = f"{HOST}:{port}"
    return [
        (SOURCES, "nats", "NATS", {**NATS, "servers": f"nats://{where}", "connectTimeoutMs": 60000}),
        (SINKS, "nats", "NATS", {"servers": f"nats://{where}", "subject": "x", "connectTimeoutMs": 60000}),
        (
            SOURCES, "rabbitmq", "RabbitMQ",
            {**RABBIT, "port": port, "connectionTimeout": 60000, "handshakeTimeout": 60000},
        ),
        (SINKS, "rabbitmq", "RabbitMQ", {"host": HOST, "port": port, "exchangeName": "e", "connectionTimeout": 60000}),
        (
            SOURCES, "redis", "Redis",
            {**REDIS, "redisHosts": where, "connectTimeout": 60000, "operationTimeout": 60000},
        ),
        (SINKS, "redis", "Redis", {"redisHosts": where, "connectTimeout": 60000, "operationTimeout": 60000}),
        (SOURCES, "mqtt", "MQTT", {**MQTT, "port": port, "connectTimeoutMs": 60000}),
        (SINKS, "mqtt", "MQTT", {"host": HOST, "port": port, "topic": "t", "connectTimeoutMs": 60000}),
        (SOURCES, "postgres", "PostgreSQL", {**PG, "url": f"postgresql://postgres@{where}/test"}),
    ]  # fmt: skip


def _all_at_once(
    client: httpx.Client, cases: list[tuple[str, str, str, dict[str, Any]]]
) -> list[tuple[httpx.Response, float]]:
    def one(index: int) -> tuple[httpx.Response, float]:
        route, kind, _, configs = cases[index]
        shape = _source if route == SOURCES else _sink
        started = time.monotonic()
        answer = _send(client, "POST", route, f"{kind}-{index}", shape(kind, configs))
        return answer, time.monotonic() - started

    with ThreadPoolExecutor(len(cases)) as pool:
        return list(pool.map(one, range(len(cases))))


def test_a_broker_that_accepts_and_never_answers_is_a_4xx_within_10_s(
    client: httpx.Client,
) -> None:
    with silent_port() as port:
        cases = _hostile(port)
        answers = _all_at_once(client, cases)
    for (answer, took), (_, kind, broker, _) in zip(answers, cases, strict=True):
        body = answer.json()
        assert (answer.status_code, body["reason"]) == (400, "broker_unreachable"), (kind, body)
        assert broker in body["message"] and f"{HOST}:{port}" in body["message"], body
        assert "step: " in body["message"], body
        assert took < 10, f"{kind}: answered in {took:.1f} s"
    assert client.get(SOURCES).json() == [] and client.get(SINKS).json() == []


def test_a_broker_that_is_not_there_is_a_4xx_at_once(client: httpx.Client) -> None:
    port = closed_port()
    cases = _hostile(port)
    for (answer, took), (_, kind, broker, _) in zip(
        _all_at_once(client, cases), cases, strict=True
    ):
        body = answer.json()
        assert answer.status_code == 400 and body["reason"] == "broker_unreachable", (kind, body)
        assert broker in body["message"] and str(port) in body["message"], body
        assert "step: connect" in body["message"], body
        assert took < 10, f"{kind}: answered in {took:.1f} s"


def test_a_config_model_without_an_upper_bound_is_refused_when_defined() -> None:
    with pytest.raises(TypeError, match="needs an upper bound"):

        class Unbounded(BuiltinConfig):
            waitMs: int = 10

    with pytest.raises(TypeError, match="needs max_length"):

        class Endless(BuiltinConfig):
            hosts: list[str] = []
