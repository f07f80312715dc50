"""A worker creates a function's topics on first use, unless its setting says not (issue 29, point 1).

The real app over HTTP, on both stores, with a worker in the test process
on the test run's Spark session: a function registered with topics nobody
created runs (its topics made with the store's defaults) and processes a
message; a worker started with ``allow_auto_topic_creation: false`` refuses
the same registration with the clear error and creates nothing. Sources and
sinks likewise (issue 30): a source's output and a sink's inputs.
"""

from __future__ import annotations

import json
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
from sparkfn.worker.api.app import create_app
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings
from waiting import until

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
        got = until(
            lambda: [m.value for m in consumer.receive(max_messages=10)],
            "an output on out",
            120,
            every=0.2,
        )
        assert got == [b"hello!"]
    finally:
        assert client.delete(f"{FUNCTIONS}/exclaim").status_code == 200


def test_a_workers_sources_and_sinks_get_their_topics_unless_it_says_not(
    served_worker: tuple[Worker, httpx.Client],
) -> None:
    """As a function's: a Pulsar user's ``sources create --destination-topic-name raw`` and
    ``sinks create --inputs raw`` work with topics nobody created."""
    worker, client = served_worker
    store = worker.open_store()
    TopicCreation.write(store, schema_type="string")
    source = {
        "archive": "builtin://generator",
        "topicName": "persistent://public/default/generated",
        "configs": {"rate": 20},
    }
    sink = {"archive": "builtin://stdout", "inputs": ["persistent://public/default/printed"]}

    def create(kind: str, config: dict[str, Any]) -> httpx.Response:
        form = {f"{kind}Config": json.dumps(config)}
        return client.post(f"/admin/v3/{kind}s/public/default/{kind}-x", data=form)

    # Refused for its configs, a source creates no topic, even where topics are created.
    bad = create("source", {**source, "configs": {"rate": -1}})
    assert (bad.status_code, bad.json()["reason"]) == (400, "invalid_config"), bad.text
    assert _topics(store) == []
    made_source, made_sink = create("source", source), create("sink", sink)
    if not worker.settings.allow_auto_topic_creation:
        for made, kind, field, topic in (
            (made_source, "source", "topicName", "generated"),
            (made_sink, "sink", "inputs", "printed"),
        ):
            assert made.status_code == 400, made.text
            assert made.json() == {
                "reason": "invalid_config",
                "message": f"{kind} public/default/{kind}-x: {field} topic public/default/{topic} "
                "does not exist; create it first (topics are not created on first use here)",
            }
        assert _topics(store) == []
        assert client.get("/admin/v3/sources/public/default").json() == []
        assert client.get("/admin/v3/sinks/public/default").json() == []
        return
    try:
        assert made_source.status_code == 200, made_source.text
        assert made_sink.status_code == 200, made_sink.text
        assert _topics(store) == ["public/default/generated", "public/default/printed"]
        for info in TopicAdmin(store).list():
            assert (info.partitions, info.schema_type) == (1, SchemaType.STRING)
        reader = Consumer(store, "generated", initial_position="earliest")
        until(
            lambda: reader.receive(max_messages=10),
            "the generator to append a record",
            60,
            every=0.2,
        )
    finally:
        for kind in ("source", "sink"):
            client.delete(f"/admin/v3/{kind}s/public/default/{kind}-x")
