"""A refused create or update leaves nothing behind (issue 28, point 1).

The real app over HTTP, on both stores, with a worker in the test process
on the test run's Spark session: a create refused for its Spark settings,
a missing topic, code that does not load, a bad config or a bad package
leaves no registry row, no package (directory or row), no subscription, no
lifecycle record and no topic, so the same create without the bad part then
succeeds; a refused update leaves the running version as it was. On
PostgreSQL, a create or a start that no worker of the cluster has room for
is refused (``no_worker_capacity``) and nothing looks running.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from app_server import served
from sqlalchemy import func, select, update

from sparkfn.store import registry_schema, schema
from sparkfn.store.cluster_schema import cluster_workers
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.worker.api.app import create_app
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings
from waiting import until

EXCLAIM = Path(__file__).resolve().parents[2] / "examples" / "exclamation.py"
FUNCTIONS = "/admin/v3/functions/public/default"
BASE = {"inputs": ["in"], "output": "out"}
# Spark refuses it on a running session (it checks the value when it is set).
BAD_SPARK_CONF = {"spark.sql.shuffle.partitions": "-1"}


@pytest.fixture
def worker(store_url: str, data_dir: Path, spark: Any) -> Iterator[Worker]:
    worker = Worker(WorkerSettings.resolve(data_dir=data_dir, store_url=store_url), spark=spark)
    worker.open()
    yield worker
    worker.shutdown()


@pytest.fixture
def client(worker: Worker) -> Iterator[httpx.Client]:
    with served(create_app(worker)) as client:
        yield client


def _send(
    client: httpx.Client,
    verb: str,
    name: str,
    config: dict[str, Any],
    code: tuple[str, bytes] | None = ("exclaim.py", EXCLAIM.read_bytes()),
) -> httpx.Response:
    files = {"data": code} if code is not None else None
    return client.request(
        verb, f"{FUNCTIONS}/{name}", data={"functionConfig": json.dumps(config)}, files=files
    )


def _refused(response: httpx.Response, status: int, reason: str, says: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert (body["reason"], says in body["message"]) == (reason, True), body


def _count(store: Store, table: Any, *where: Any) -> int:
    with store.read() as conn:
        query = select(func.count()).select_from(table)
        return int(conn.execute(query.where(*where) if where else query).scalar_one())


def _assert_nothing_left(worker: Worker, name: str, topics: list[str]) -> None:
    store = worker.open_store()
    fqfn = f"public/default/{name}"
    assert worker.registry.names("public", "default") == []
    assert _count(store, registry_schema.function_versions) == 0
    assert _count(store, registry_schema.packages) == 0
    assert _count(store, registry_schema.package_owners) == 0
    packages_dir = worker.settings.packages_dir
    assert not packages_dir.exists() or list(packages_dir.iterdir()) == [], list(
        packages_dir.iterdir()
    )
    assert _count(store, schema.subscriptions, schema.subscriptions.c.name == fqfn) == 0
    assert _count(store, schema.subscription_owners) == 0
    assert _count(store, schema.function_runs, schema.function_runs.c.fqfn == fqfn) == 0
    assert sorted(str(t.name) for t in TopicAdmin(store).list()) == sorted(
        f"public/default/{t}" for t in topics
    )
    assert worker.running() == []


def _created(client: httpx.Client, name: str, config: dict[str, Any]) -> None:
    created = _send(client, "POST", name, config)
    assert created.status_code == 200, created.text
    assert created.json()["version"] == 1
    deleted = client.delete(f"{FUNCTIONS}/{name}")
    assert deleted.status_code == 200, deleted.text


def test_a_refused_create_leaves_nothing_and_the_good_create_then_succeeds(
    worker: Worker, client: httpx.Client
) -> None:
    admin = TopicAdmin(worker.open_store())
    admin.create("in", schema_type="string")
    admin.create("out", schema_type="string")
    topics = ["in", "out"]

    spark_conf = {**BASE, "sparkConf": BAD_SPARK_CONF}
    refused = _send(client, "POST", "conf", spark_conf)
    _refused(refused, 400, "invalid_config", "cannot be set on a running Spark session")
    _assert_nothing_left(worker, "conf", topics)
    _created(client, "conf", BASE)
    _forget_packages(worker)  # a deleted function's package stays; the cases below count from none

    off = {**BASE, "inputs": ["nowhere"], "autoCreateTopics": False}
    missing = _send(client, "POST", "topic", off)
    _refused(missing, 400, "invalid_config", "inputs topic public/default/nowhere does not exist")
    _assert_nothing_left(worker, "topic", topics)

    broken = _send(client, "POST", "code", BASE, ("broken.py", b"def process(x)\n    return x\n"))
    _refused(broken, 400, "function_load_error", "broken.py")
    _assert_nothing_left(worker, "code", topics)

    bad_field = _send(client, "POST", "field", {**BASE, "parallelism": 0})
    _refused(bad_field, 400, "invalid_config", "parallelism")
    _assert_nothing_left(worker, "field", topics)

    no_class = _send(client, "POST", "klass", {**BASE, "className": "exclaim.nothing"})
    _refused(no_class, 400, "function_load_error", "nothing")
    _assert_nothing_left(worker, "klass", topics)

    not_zip = _send(client, "POST", "zip", BASE, ("fn.zip", b"def process(x):\n    return x\n"))
    _refused(not_zip, 400, "invalid_package", "is not a zip archive")
    _assert_nothing_left(worker, "zip", topics)

    for name in ("topic", "code", "field", "klass", "zip"):
        _created(client, name, BASE)


def _forget_packages(worker: Worker) -> None:
    with worker.open_store().write() as conn:
        conn.execute(registry_schema.packages.delete())
        conn.execute(registry_schema.package_owners.delete())
    shutil.rmtree(worker.settings.packages_dir)


def test_a_refused_update_leaves_the_running_version_as_it_was(
    worker: Worker, client: httpx.Client
) -> None:
    admin = TopicAdmin(worker.open_store())
    admin.create("in", schema_type="string")
    admin.create("out", schema_type="string")
    created = _send(client, "POST", "f", BASE)
    assert created.status_code == 200, created.text
    digest = created.json()["packageDigest"]
    _wait_running(client, "f")
    before = client.get(f"{FUNCTIONS}/f").json()

    cases = [
        ({**BASE, "sparkConf": BAD_SPARK_CONF}, None, "invalid_config", "running Spark session"),
        (
            {**BASE, "output": "nowhere", "autoCreateTopics": False},
            None,
            "invalid_config",
            "does not exist",
        ),  # fmt: skip
        (BASE, ("broken.py", b"def process(x)\n"), "function_load_error", "broken.py"),
    ]
    for config, code, reason, says in cases:
        response = _send(client, "PUT", "f", config, code)
        _refused(response, 400, reason, says)
        assert client.get(f"{FUNCTIONS}/f").json() == before
        assert worker.running() == ["public/default/f"]
        assert client.get(f"{FUNCTIONS}/f/status").json()["numRunning"] == 1
        store = worker.open_store()
        assert _count(store, registry_schema.packages) == 1
        assert [p.name for p in worker.settings.packages_dir.iterdir()] == [
            digest.removeprefix("sha256:")
        ]


def _wait_running(client: httpx.Client, name: str, timeout: float = 120) -> None:
    until(
        lambda: client.get(f"{FUNCTIONS}/{name}/status").json().get("numRunning") == 1,
        lambda: f"{name} running: {client.get(f'{FUNCTIONS}/{name}/status').text}",
        timeout,
        every=0.2,
    )


FQFN = "public/default/full"


def _room(store: Store, worker_id: str, capacity: int) -> None:
    with store.write() as conn:
        conn.execute(
            update(cluster_workers)
            .where(cluster_workers.c.worker_id == worker_id)
            .values(capacity=capacity)
        )


def test_a_create_or_start_no_worker_has_room_for_is_refused_and_nothing_looks_running(
    worker: Worker, client: httpx.Client
) -> None:
    """Every live worker at its capacity (here the one worker drained): a create is refused
    with 503 ``no_worker_capacity`` and leaves nothing, a start of a stopped function is
    refused and it stays stopped, instead of a success while nothing runs."""
    store = worker.open_store()
    if store.dialect == "sqlite":
        return  # one worker runs everything: no capacity to run out of
    TopicAdmin(store).create("in", schema_type="string")
    worker_id = worker.settings.worker_id
    _room(store, worker_id, 0)
    refused = _send(client, "POST", "full", BASE)
    _refused(refused, 503, "no_worker_capacity", "no worker of the cluster has room for it")
    _assert_nothing_left(worker, "full", ["in"])
    _room(store, worker_id, 10)
    created = _send(client, "POST", "full", BASE)
    assert created.status_code == 200, created.text
    assert client.post(f"{FUNCTIONS}/full/stop").status_code == 204
    until(lambda: worker.running() == [], "full stopped", 60)
    assert worker.cluster is not None
    until(lambda: worker.cluster.owner_of(FQFN) is None, "full's assignment dropped", 30)
    _room(store, worker_id, 0)
    started = client.post(f"{FUNCTIONS}/full/start")
    _refused(started, 503, "no_worker_capacity", "function public/default/full was not started")
    assert worker.registry.record(FQFN).desired.value == "stopped"
    status = client.get(f"{FUNCTIONS}/full/status").json()
    assert status["numRunning"] == 0, status
    _room(store, worker_id, 10)
    assert client.post(f"{FUNCTIONS}/full/start").status_code == 204
    until(lambda: client.get(f"{FUNCTIONS}/full/status").json()["numRunning"] == 1, "runs", 60)
    assert client.delete(f"{FUNCTIONS}/full").status_code == 200
