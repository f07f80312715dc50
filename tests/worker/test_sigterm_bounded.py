"""SIGTERM stops a worker within its shutdown bound, whatever its requests and connectors
wait on (issue 41 point 3).

A real ``sparkfn worker start`` child (shutdown_timeout 3 s): a user's source
is stuck in ``open()`` on a broker that never answers, and eight creates of
built-in sources and sinks wait on that broker with the longest legal
timeouts (60 s) when SIGTERM comes. The worker must end within its bound:
the server's grace for requests (10 s) plus the runs' stop and cancel
(2 x 3 s), with room for a loaded machine; before, each such request
held the shutdown for its whole timeout.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from brokers import HOST, silent_port, wait_for
from worker_process import WorkerProcess

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin

STUCK = Path(__file__).resolve().parent / "funcs" / "stuck_source.py"
BOUND_S = 30.0  # 10 s request grace + 2 x 3 s for the runs, with room for a loaded machine


def _hostile(port: int) -> list[tuple[str, dict[str, Any]]]:
    """(route, config): built-ins whose check waits on ``port`` with 60 s timeouts."""
    where = f"{HOST}:{port}"
    nats = {"servers": f"nats://{where}", "connectTimeoutMs": 60000}
    rabbit = {"host": HOST, "port": port, "connectionTimeout": 60000, "handshakeTimeout": 60000}
    redis = {"redisHosts": where, "connectTimeout": 60000, "operationTimeout": 60000}
    mqtt = {"host": HOST, "port": port, "connectTimeoutMs": 60000}
    out = {"topicName": "out"}
    into = {"inputs": ["out"]}
    return [
        ("sources", {**out, "archive": "builtin://nats", "configs": {**nats, "stream": "S", "durableName": "d"}}),
        ("sinks", {**into, "archive": "builtin://nats", "configs": {**nats, "subject": "x"}}),
        ("sources", {**out, "archive": "builtin://rabbitmq", "configs": {**rabbit, "queueName": "q"}}),
        ("sinks", {**into, "archive": "builtin://rabbitmq", "configs": {**rabbit, "exchangeName": "e"}}),
        ("sources", {**out, "archive": "builtin://redis", "configs": {**redis, "streamName": "s"}}),
        ("sinks", {**into, "archive": "builtin://redis", "configs": redis}),
        ("sources", {**out, "archive": "builtin://mqtt", "configs": {**mqtt, "topicFilters": ["t"]}}),
        ("sinks", {**into, "archive": "builtin://mqtt", "configs": {**mqtt, "topic": "t"}}),
    ]  # fmt: skip


@pytest.mark.backend("sqlite")
def test_sigterm_stops_the_worker_in_time_with_requests_and_a_source_stuck_on_brokers(
    store: Store, data_dir: Path
) -> None:
    TopicAdmin(store).create("out", schema_type="string")
    worker = WorkerProcess(data_dir, store.url, env={"SPARKFN_WORKER_SHUTDOWN_TIMEOUT": "3"})
    worker.start()
    try:
        with silent_port() as port, httpx.Client(base_url=worker.url, timeout=120) as client:
            with STUCK.open("rb") as code:
                made = client.post(
                    "/admin/v3/sources/public/default/stuck",
                    data={
                        "sourceConfig": json.dumps({"topicName": "out", "configs": {"port": port}})
                    },
                    files={"data": (STUCK.name, code, "text/x-python")},
                )
            assert made.status_code == 200, made.text
            answers: list[int | str] = []

            def create(index: int, route: str, config: dict[str, Any]) -> None:
                form = "sourceConfig" if route == "sources" else "sinkConfig"
                try:
                    answer = client.post(
                        f"/admin/v3/{route}/public/default/hostile-{index}",
                        data={form: json.dumps(config)},
                    )
                    answers.append(answer.status_code)
                except httpx.HTTPError as exc:  # the server closed it while stopping
                    answers.append(type(exc).__name__)

            threads = [
                threading.Thread(target=create, args=(i, route, config), daemon=True)
                for i, (route, config) in enumerate(_hostile(port))
            ]
            for thread in threads:
                thread.start()
            time.sleep(1.0)  # every create is waiting on the silent broker
            assert not answers, f"answered before the broker could: {answers}"
            assert worker.proc is not None
            worker.proc.send_signal(signal.SIGTERM)
            started = time.monotonic()
            try:
                worker.proc.wait(BOUND_S)
            except subprocess.TimeoutExpired:
                pytest.fail(
                    f"the worker did not stop within {BOUND_S} s of SIGTERM:\n{worker.output()[-5000:]}"
                )
            took = time.monotonic() - started
            for thread in threads:
                thread.join(10)
            wait_for(lambda: len(answers) == len(threads), "every create to end")
        # uvicorn ends by raising the signal it caught again: -SIGTERM is a clean stop.
        assert worker.proc.returncode in (0, -signal.SIGTERM), worker.output()[-5000:]
        assert all(a == 400 or isinstance(a, str) for a in answers), answers
        print(f"stopped {took:.1f} s after SIGTERM; creates ended as {answers}")
    finally:
        if worker.proc is not None and worker.proc.poll() is None:
            worker.proc.kill()
            worker.proc.wait()
