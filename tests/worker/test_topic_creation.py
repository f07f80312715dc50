"""A worker creates a function's topics on first use, unless its setting says not (issue 29, point 1).

The real app over HTTP, on both stores, with a worker in the test process
on the test run's Spark session: a function registered with topics nobody
created runs (its topics made with the store's defaults) and processes a
message; a worker started with ``allow_auto_topic_creation: false`` refuses
the same registration with the clear error and creates nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from app_server import served

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.autocreate import TopicCreation
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message, SchemaType
from sparkfn.topics.producer import Producer
from sparkfn.worker.app import create_app
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings

EXCLAIM = Path(__file__).resolve().parents[2] / "examples" / "exclamation.py"
FUNCTIONS = "/admin/v3/functions/public/default"
CONFIG = {
    "inputs": ["persistent://public/default/in"],
    "output": "persistent://public/default/out",
    "logTopic": "persistent://public/default/log",
    "subscriptionPosition": "Earliest",
}


@pytest.fixture(params=[True, False], ids=["creates", "does-not-create"])
def served_worker(
    request: pytest.FixtureRequest, store_url: str, data_dir: Path, spark: Any
) -> Iterator[tuple[Worker, httpx.Client]]:
    settings = WorkerSettings.resolve(
        data_dir=data_dir, store_url=store_url, allow_auto_topic_creation=request.param
    )
    worker = Worker(settings, spark=spark)
    worker.open()
    try:
        with served(create_app(worker)) as client:
            yield worker, client
    finally:
        worker.shutdown()


def _register(client: httpx.Client) -> httpx.Response:
    return client.post(
        f"{FUNCTIONS}/exclaim",
        data={"functionConfig": json.dumps(CONFIG)},
        files={"data": ("exclaim.py", EXCLAIM.read_bytes())},
    )


def _topics(store: Store) -> list[str]:
    return sorted(str(t.name) for t in TopicAdmin(store).list())


def test_a_workers_functions_get_their_topics_unless_it_says_not(
    served_worker: tuple[Worker, httpx.Client],
) -> None:
    worker, client = served_worker
    store = worker.open_store()
    TopicCreation.write(store, schema_type="string")  # the store's defaults are used
    response = _register(client)
    if not worker.settings.allow_auto_topic_creation:
        assert response.status_code == 400, response.text
        assert response.json() == {
            "reason": "invalid_config",
            "message": "function public/default/exclaim: inputs topic public/default/in does "
            "not exist; create it first (topics are not created on first use here)",
        }
        assert _topics(store) == []
        assert client.get(FUNCTIONS).json() == []
        return
    assert response.status_code == 200, response.text
    try:
        assert _topics(store) == ["public/default/in", "public/default/log", "public/default/out"]
        for info in TopicAdmin(store).list():
            assert (info.partitions, info.schema_type) == (1, SchemaType.STRING)
        Producer(store, "in").send_batch([Message(b"hello")])
        consumer = Consumer(store, "out", initial_position="earliest")
        got: list[bytes | None] = []
        deadline = time.monotonic() + 120
        while not got and time.monotonic() < deadline:
            got = [m.value for m in consumer.receive(max_messages=10)]
            time.sleep(0.2)
        assert got == [b"hello!"]
    finally:
        assert client.delete(f"{FUNCTIONS}/exclaim").status_code == 200
