"""A worker's function logs: its per-instance files, the REST route and the CLI (issue 29, point 3).

The real app over HTTP, on both stores, with a worker in the test process
on the test run's Spark session: what the function logs through
``context.get_logger()`` is in ``<data dir>/logs/functions/...``, and
``GET .../logs`` (``?instance``, ``?tail``, ``?follow``) and ``sparkfn
functions logs NAME [--instance N] [--follow]`` give it; the log topic gets
it too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from app_server import served

from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.worker.api.app import create_app
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings
from waiting import until

CODE = Path(__file__).resolve().parents[1] / "examples" / "pulsar_funcs" / "echo_logger.py"
FUNCTIONS = "/admin/v3/functions/public/default"
CONFIG = {
    "className": "echo_logger.EchoLogger",
    "inputs": ["persistent://public/default/in"],
    "output": "persistent://public/default/out",
    "logTopic": "persistent://public/default/logs",
}


@pytest.fixture
def served_worker(
    store_url: str, data_dir: Path, spark: Any
) -> Iterator[tuple[Worker, httpx.Client]]:
    worker = Worker(WorkerSettings.resolve(data_dir=data_dir, store_url=store_url), spark=spark)
    worker.open()
    try:
        with served(create_app(worker)) as client:
            yield worker, client
    finally:
        worker.shutdown()


# the shared bounded wait (tests/waiting.py), with this module's timeout
_wait = partial(until, timeout=120.0, every=0.2)


def test_a_workers_function_logs_are_kept_and_served(
    served_worker: tuple[Worker, httpx.Client], data_dir: Path
) -> None:
    worker, client = served_worker
    created = client.post(
        f"{FUNCTIONS}/echo",
        data={"functionConfig": json.dumps(CONFIG)},
        files={"data": (CODE.name, CODE.read_bytes())},
    )
    assert created.status_code == 200, created.text
    assert client.get(f"{FUNCTIONS}/echo/logs").text == ""  # nothing logged yet
    store = worker.open_store()
    try:
        Producer(store, "in").send_batch([Message(b"one"), Message(b"two")])
        path = data_dir / "logs" / "functions" / "public" / "default" / "echo" / "instance-0.log"
        _wait(lambda: path.is_file() and path.read_text().count("\n") == 2, "log lines")

        lines = client.get(f"{FUNCTIONS}/echo/logs").text.splitlines()
        assert [line.split("] ", 1)[1] for line in lines] == ["one", "two"]
        assert all(" INFO [public/default/echo:0] " in line for line in lines), lines
        assert (
            client.get(f"{FUNCTIONS}/echo/logs", params={"instance": 0}).text.splitlines() == lines
        )
        # An instance the function does not have is a 404, as its status says.
        beyond = client.get(f"{FUNCTIONS}/echo/logs", params={"instance": 99})
        assert (beyond.status_code, beyond.json()["reason"]) == (404, "function_not_found")
        assert "has no instance 99 (instances 0 to 0)" in beyond.json()["message"]
        status = client.get(f"{FUNCTIONS}/echo/99/status")
        assert (status.status_code, status.json()["reason"]) == (404, "function_not_found")
        assert client.get(f"{FUNCTIONS}/echo/logs", params={"tail": 1}).text.splitlines() == [
            lines[1]
        ]
        # More lines asked for than there are: all of them.
        for tail in (2, 3, 1000):
            got = client.get(f"{FUNCTIONS}/echo/logs", params={"tail": tail}).text.splitlines()
            assert got == lines, tail
        missing = client.get(f"{FUNCTIONS}/nobody/logs")
        assert (missing.status_code, missing.json()["reason"]) == (404, "function_not_found")
        # The log topic has them as well, once their batch commits.
        topic = Consumer(store, "logs", initial_position="earliest")
        logged: list[bytes | None] = []
        _wait(
            lambda: (
                logged.extend(m.value for m in topic.receive(max_messages=10)) or len(logged) >= 2
            ),
            "log topic",
        )
        assert logged == [b"one", b"two"]

        # --follow: what is there, then each new line, until the client goes.
        with client.stream(
            "GET", f"{FUNCTIONS}/echo/logs", params={"follow": "true"}, timeout=120
        ) as streamed:
            got = streamed.iter_lines()
            assert [next(got), next(got)] == lines
            Producer(store, "in").send_batch([Message(b"three")])
            assert next(got).endswith("] three")

        # The CLI, as a user runs it.
        cli = [sys.executable, "-m", "sparkfn.cli.main", "functions", "logs", "echo"]
        url = ["--url", str(client.base_url).rstrip("/")]
        done = subprocess.run([*cli, *url, "--tail", "2"], capture_output=True, text=True,
                              timeout=60, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert [line.split("] ", 1)[1] for line in done.stdout.splitlines()] == ["two", "three"]
        unknown = subprocess.run([*cli[:-1], "ghost", *url], capture_output=True, text=True,
                                 timeout=60, check=False)  # fmt: skip
        assert unknown.returncode == 1
        assert unknown.stderr.startswith("error [function_not_found]: ")
    finally:
        assert client.delete(f"{FUNCTIONS}/echo").status_code == 200


def test_a_new_function_of_a_deleted_ones_name_has_none_of_its_log_lines(
    served_worker: tuple[Worker, httpx.Client], data_dir: Path
) -> None:
    worker, client = served_worker

    def create() -> None:
        made = client.post(
            f"{FUNCTIONS}/echo",
            data={"functionConfig": json.dumps(CONFIG)},
            files={"data": (CODE.name, CODE.read_bytes())},
        )
        assert made.status_code == 200, made.text

    create()
    Producer(worker.open_store(), "in").send_batch([Message(b"old secret")])
    _wait(lambda: "old secret" in client.get(f"{FUNCTIONS}/echo/logs").text, "the old line")
    assert client.delete(f"{FUNCTIONS}/echo").status_code == 200
    assert not (data_dir / "logs" / "functions" / "public" / "default" / "echo").exists()
    create()
    try:
        assert client.get(f"{FUNCTIONS}/echo/logs").text == ""
    finally:
        assert client.delete(f"{FUNCTIONS}/echo").status_code == 200
