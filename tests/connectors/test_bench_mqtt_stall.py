"""The MQTT stall of the connector benchmark (issue 40 point 2).

A 50,000-message MQTT run of ``benchmarks/connectors.py`` stopped moving on
the source's side: the benchmark started feeding the broker as soon as the
source's runner started, before the source had subscribed, and MQTT drops
what is published to a topic nobody subscribes to. The source then waited
for messages that were never coming. Whether it happened depended on which
thread won: the feeder's connect or the source's open (its store work, its
connect and its subscribe). Here the feeder publishes at once with a client
connected beforehand, so it always wins unless the benchmark waits for the
source to be open: every message must arrive, none may be lost.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from brokers import HOST, count, mqtt_client, require, unique

from sparkfn.store.store import Store

# They share the brokers test_broker_restart.py restarts: one xdist worker for them all.
pytestmark = pytest.mark.xdist_group("brokers")

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _benchmark() -> ModuleType:
    sys.path.append(str(BENCHMARKS))  # its _common
    spec = importlib.util.spec_from_file_location("bench_connectors", BENCHMARKS / "connectors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_feeds_an_mqtt_source_only_once_it_has_subscribed(
    sqlite_store: Store,
) -> None:
    require("mqtt")
    bench = _benchmark()
    bench.STALL_SECONDS = 10  # a stall fails in 10 s, not the benchmark's 30
    topic, client_id, n = unique("bench/stall"), unique("stall"), 300
    publisher = mqtt_client()

    def feed(received: Callable[[], int]) -> None:  # everything at once, the moment it is called
        infos = [publisher.publish(topic, f"m{i}", qos=1) for i in range(n)]
        for info in infos:
            info.wait_for_publish(10)

    configs = {"host": HOST, "topicFilters": [topic], "clientId": client_id}
    try:
        bench.run_source(sqlite_store, "mqtt", configs, n, feed=feed)
    finally:
        publisher.disconnect()
        publisher.loop_stop()
        session = mqtt_client(f"{client_id}-0", clean=True)  # forget the source's session
        session.disconnect()
        session.loop_stop()
    output = next(t for t in _topics(sqlite_store) if t.startswith("bench-"))
    assert count(sqlite_store, output) == n


def _topics(store: Store) -> list[str]:
    from sparkfn.topics.admin import TopicAdmin

    return [str(t.name).rpartition("/")[2] for t in TopicAdmin(store).list("public", "default")]
