"""Fifty hostile creates at once do not hold the worker (issue 41, acceptance).

On the shared worker (a real child process), another tenant's function
flows messages while 50 source and sink creates arrive at once: half with a
timeout over its bound (a 400 at once), half with legal timeouts against a
broker that accepts and never answers (a bounded 400). Throughout, ``/health``
answers within 1 s (polled every 0.2 s), the function's outputs keep
arriving, and every hostile request ends in a 4xx within 10 s. Before, such
creates held the worker's request threads for minutes.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from brokers import HOST, count, silent_port, wait_for
from worker_process import SharedWorker

from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

EXCLAIM = Path(__file__).resolve().parents[2] / "examples" / "exclamation.py"
FLOW = "/admin/v3/functions/acme/app/flow"
HOSTILE = 50


def _hostile(index: int, port: int) -> tuple[str, str, dict[str, Any]]:
    """(route, form field, config) of the ``index``-th hostile create: even ones over a
    bound, odd ones waiting on the silent ``port`` with the longest legal timeouts."""
    where = f"{HOST}:{port}"
    over = index % 2 == 0
    kinds = [
        ("sources", {"archive": "builtin://nats", "topicName": "out", "configs": {
            "servers": f"nats://{where}", "stream": "S", "durableName": "d",
            "connectTimeoutMs": 10**12 if over else 60000}}),
        ("sources", {"archive": "builtin://rabbitmq", "topicName": "out", "configs": {
            "host": HOST, "port": port, "queueName": "q",
            "connectionTimeout": 10**9 if over else 60000, "handshakeTimeout": 60000}}),
        ("sinks", {"archive": "builtin://redis", "inputs": ["out"], "configs": {
            "redisHosts": where, "connectTimeout": 60000,
            "operationTimeout": 10**12 if over else 60000}}),
        ("sinks", {"archive": "builtin://mqtt", "inputs": ["out"], "configs": {
            "host": HOST, "port": port, "topic": "t",
            "connectTimeoutMs": 10**12 if over else 60000}}),
    ]  # fmt: skip
    route, config = kinds[(index // 2) % len(kinds)]
    return route, "sourceConfig" if route == "sources" else "sinkConfig", config


@pytest.mark.long_running(60)
@pytest.mark.parametrize("shared_worker", ["sqlite"], indirect=True)
def test_fifty_hostile_creates_leave_health_and_another_tenants_flow_untouched(
    shared_worker: SharedWorker,
) -> None:
    admin = TopicAdmin(shared_worker.store)
    admin.create("acme/app/in")
    admin.create("acme/app/out")
    client = httpx.Client(base_url=shared_worker.url, timeout=30)
    feeding = threading.Event()
    try:
        with EXCLAIM.open("rb") as code:
            made = client.post(
                FLOW,
                data={"functionConfig": json.dumps({"inputs": ["acme/app/in"], "output": "acme/app/out"})},
                files={"data": (EXCLAIM.name, code, "text/x-python")},
            )  # fmt: skip
        assert made.status_code == 200, made.text
        feeding.set()

        def feed() -> None:
            producer, sent = Producer(shared_worker.store, "acme/app/in"), 0
            while feeding.is_set():
                producer.send_batch([Message(f"m{sent + i}".encode()) for i in range(20)])
                sent += 20
                time.sleep(0.2)

        threading.Thread(target=feed, name="feed", daemon=True).start()
        out = lambda: count(shared_worker.store, "acme/app/out")  # noqa: E731
        wait_for(lambda: out() > 0, "the flow's first outputs", 120, shared_worker.process.log)

        health: list[float] = []
        polling = threading.Event()
        polling.set()

        def poll() -> None:
            with httpx.Client(base_url=shared_worker.url, timeout=1.0) as probe:
                while polling.is_set():
                    started = time.monotonic()
                    assert probe.get("/health").status_code == 200
                    health.append(time.monotonic() - started)
                    time.sleep(0.2)

        poller = ThreadPoolExecutor(1)
        polled = poller.submit(poll)
        before = out()
        with silent_port() as port:

            def create(index: int) -> tuple[int, str, float]:
                route, form, config = _hostile(index, port)
                started = time.monotonic()
                answer = client.post(
                    f"/admin/v3/{route}/public/default/hostile-{index}",
                    data={form: json.dumps(config)},
                )
                return answer.status_code, answer.json()["reason"], time.monotonic() - started

            with ThreadPoolExecutor(HOSTILE) as pool:
                answers = list(pool.map(create, range(HOSTILE)))
        after = out()
        polling.clear()
        polled.result(5)  # re-raises a /health that failed or took over 1 s
        poller.shutdown()

        for index, (status, reason, took) in enumerate(answers):
            expected = "config_over_limit" if index % 2 == 0 else "broker_unreachable"
            assert (status, reason) == (400, expected), (index, status, reason)
            assert took < 10, f"create {index} took {took:.1f} s"
        assert len(health) >= 5 and max(health) < 1.0, health
        assert after > before, "the other tenant's outputs stopped during the burst"
        print(
            f"{HOSTILE} hostile creates: slowest {max(t for *_, t in answers):.1f} s; "
            f"/health slowest {max(health):.2f} s over {len(health)} polls; "
            f"outputs {before} -> {after}"
        )
    finally:
        feeding.clear()
        client.delete(FLOW)
        client.close()
        for topic in ("acme/app/in", "acme/app/out"):
            admin.delete(topic)
