"""The ``mqtt`` source and sink against the Mosquitto broker on 127.0.0.1:1883.

Mosquitto keeps at most ``max_queued_messages`` (1000 by default) messages
for a session and drops the rest: the publishers here never run more than
400 messages ahead of what the source appended, as docs/connectors.md tells
users to do (or to raise the bound).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import paho.mqtt.client as paho
import pytest
from brokers import (
    HOST,
    fill,
    mqtt_client,
    require,
    unique,
    values,
    wait_for,
)

from sparkfn.api.errors import ConfigError
from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.connectors.registry import load_sink, load_source
from sparkfn.connectors.source.runner import SourceRunner, SourceState
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from waiting import until

# They share the brokers test_broker_restart.py restarts: one xdist worker for them all.
pytestmark = pytest.mark.xdist_group("brokers")

AHEAD = 300


def client(client_id: str = "", clean: bool = True) -> paho.Client:
    """A connected client with its network thread running."""
    require("mqtt")
    return mqtt_client(client_id, clean)


def forget_session(client_id: str) -> None:
    """Delete the broker's persistent session of ``client_id``."""
    done = client(client_id, clean=True)
    done.disconnect()
    done.loop_stop()


def publish(topic: str, bodies: list[str], appended: Callable[[], int], base: int = 0) -> None:
    """Publish with QoS 1, never more than :data:`AHEAD` past what the source appended."""
    pub = client()
    try:
        for start in range(0, len(bodies), 100):
            until(
                lambda: start - (appended() - base) <= AHEAD,  # noqa: B023 (called right here)
                f"the source to take messages up to {start - AHEAD}",
                60,
                every=0.05,
            )
            infos = [pub.publish(topic, b.encode(), qos=1) for b in bodies[start : start + 100]]
            for info in infos:
                info.wait_for_publish(10)
    finally:
        pub.disconnect()
        pub.loop_stop()


@pytest.fixture
def topic() -> Iterator[str]:
    require("mqtt")
    yield unique("sparkfn/t")


def test_source_appends_every_message_and_keeps_its_session(store: Store, topic: str) -> None:
    TopicAdmin(store).create("in", schema_type="string")
    configs = {"host": HOST, "topicFilters": f"{topic}/+", "clientId": unique("sparkfn-test")}
    config = SourceConfig(name="mq", source_type="mqtt", output="in", configs=configs)
    runner = SourceRunner(config, store)
    runner.start()
    sent = [f"reading {i} ✓" for i in range(2000)]
    try:
        wait_for(lambda: runner.state is SourceState.RUNNING, "the source running")
        publish(f"{topic}/a", sent, lambda: runner.stats.acked)
        wait_for(lambda: runner.stats.acked >= len(sent), "every message acked")
    finally:
        runner.stop("drain")
        assert runner.wait(30)
    assert runner.state is SourceState.STOPPED, runner.death
    assert values(store, "in") == sent
    # Away: the broker queues for the persistent session; back: it delivers.
    later = [f"later {i}" for i in range(300)]
    publish(f"{topic}/b", later, lambda: 0)
    runner = SourceRunner(config, store)
    runner.start()
    try:
        wait_for(lambda: runner.stats.acked >= len(later), "the queued messages")
    finally:
        runner.stop("drain")
        assert runner.wait(30)
        forget_session(f"{configs['clientId']}-0")
    assert values(store, "in") == sent + later


@pytest.mark.parametrize(
    ("configs", "error"),
    [
        ({"topicFilters": ["a"]}, r"source public/default/s \(mqtt\): configs\.host: required"),
        ({"host": HOST, "topicFilters": ["a"], "topic": "x"}, r"configs\.topic: unknown setting"),
        ({"host": HOST, "topicFilters": ["a"], "qos": 0}, r"configs\.qos: .*greater than or equal to 1 \(got 0\)"),
        ({"host": HOST, "topicFilters": []}, r"configs\.topicFilters: .*at least 1 item"),
        ({"host": HOST, "port": 1, "topicFilters": ["a"]}, r"configs\.host/port: cannot reach the MQTT broker at 127\.0\.0\.1:1"),
    ],
    ids=["missing", "unknown", "qos", "no-filters", "unreachable"],
)  # fmt: skip
def test_source_configs_are_checked_before_it_starts(configs: dict[str, Any], error: str) -> None:
    require("mqtt")
    with pytest.raises(ConfigError, match=error):
        load_source(SourceConfig(name="s", source_type="mqtt", output="o", configs=configs))


def test_sink_configs_are_checked_before_it_starts() -> None:
    require("mqtt")
    with pytest.raises(
        ConfigError, match=r"sink public/default/k \(mqtt\): configs\.topic: .*no wildcards"
    ):
        load_sink(SinkConfig(name="k", sink_type="mqtt", inputs=["i"],
                             configs={"host": HOST, "topic": "a/+"}))  # fmt: skip


@pytest.mark.slow
def test_sink_publishes_every_message_acknowledged(
    sqlite_store: Store, topic: str, spark: Any
) -> None:
    from sparkfn.connectors.sink.sink_run import SinkRun

    got: list[str] = []
    sub = client()
    sub.on_message = lambda c, u, m: got.append(m.payload.decode())
    sub.subscribe(f"{topic}/out", qos=1)
    time.sleep(0.5)
    sent = [f"r{i}" for i in range(500)]
    fill(sqlite_store, "out", sent)
    config = SinkConfig.build(name="mqtt-sink", sink_type="mqtt", inputs=["out"],
                              configs={"host": HOST, "topic": f"{topic}/out"},
                              subscription_position="earliest")  # fmt: skip
    try:
        with SinkRun(config, store=sqlite_store, spark=spark) as run:
            run.start(until_drained=True)
            run.wait(timeout=120)
        wait_for(lambda: len(got) >= len(sent), "every message at the subscriber", 20)
    finally:
        sub.disconnect()
        sub.loop_stop()
    assert sorted(got) == sorted(sent)
