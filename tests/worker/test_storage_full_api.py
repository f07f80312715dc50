"""A worker on a full disk: 507 ``{reason, message}`` on every write, not ready, nothing lost.

Real failures: the worker's SQLite store at its page limit (everywhere) and,
as root, a data directory on a tmpfs filled to its last byte (see
``tests/full_disk.py``). Only the readiness test starts Spark (the test
session's): ``/ready`` is 200 only with Spark up.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from app_server import served

from full_disk import SqlitePageLimit, fill, small_filesystem
from sparkfn.store.store import Store
from sparkfn.topics.consumer import Consumer
from sparkfn.worker.api.app import create_app
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings

ADMIN = "/admin/v2/persistent/public/default"
PRODUCE = "/topics/persistent/public/default"
FUNCTIONS = "/admin/v3/functions/public/default"
EXCLAIM = Path(__file__).resolve().parents[2] / "examples" / "exclamation.py"


def _worker(data_dir: Path, spark: Any = None) -> Worker:
    settings = WorkerSettings.resolve(
        data_dir=data_dir, store_url=f"sqlite:///{data_dir}/sparkfn.db"
    )
    worker = Worker(settings, spark=spark)
    worker.open()
    return worker


@pytest.fixture
def worker(data_dir: Path) -> Iterator[Worker]:
    """A worker in this process on a SQLite store; no Spark."""
    worker = _worker(data_dir)
    yield worker
    worker.shutdown()


def _values(count: int, size: int = 20_000) -> list[str]:
    return [os.urandom(size // 2).hex() for _ in range(count)]


def _produce(client: httpx.Client, topic: str, values: list[str]) -> httpx.Response:
    return client.post(f"{PRODUCE}/{topic}", json={"messages": [{"payload": v} for v in values]})


def _stored(store: Store, topic: str) -> list[str]:
    consumer = Consumer(store, f"public/default/{topic}", initial_position="earliest")
    out: list[str] = []
    while batch := consumer.receive(max_messages=10_000):
        out.extend(m.value.decode() for m in batch if m.value is not None)
    return out


def _insufficient(response: httpx.Response, what: str) -> None:
    assert response.status_code == 507, f"{what}: {response.status_code} {response.text}"
    assert response.headers["content-type"] == "application/json", response.headers
    body = response.json()
    assert set(body) == {"reason", "message"}, body
    assert body["reason"] == "storage_full", body
    assert "no space left" in body["message"] and "nothing was written" in body["message"], body


def _produce_until_full(client: httpx.Client, topic: str, committed: list[str]) -> None:
    """Produce until the worker answers 507; what it took before joins ``committed``."""
    for _ in range(50):
        values = _values(2)  # one inline segment of 40 kB: pages in the store
        sent = _produce(client, topic, values)
        if sent.status_code != 200:
            _insufficient(sent, "produce")
            return
        committed.extend(values)
    pytest.fail("50 produces of 40 kB all went through: the store never filled")


def _create(client: httpx.Client, name: str, user_config: dict[str, str]) -> httpx.Response:
    config = {
        "inputs": ["public/default/in"],
        "output": "public/default/out",
        "userConfig": user_config,
    }
    return client.post(
        f"{FUNCTIONS}/{name}",
        data={"functionConfig": json.dumps(config)},
        files={"data": (EXCLAIM.name, EXCLAIM.read_bytes())},
    )


def _upload(client: httpx.Client, path: str) -> httpx.Response:
    return client.post(
        "/admin/v3/functions/upload",
        data={"path": path},
        files={"data": ("fn.py", f"# {os.urandom(8).hex()}\n{EXCLAIM.read_text()}".encode())},
    )


def _upload_until_full(client: httpx.Client) -> None:
    """Upload packages under long paths until the store has no page left for their rows."""
    for n in range(200):
        uploaded = _upload(client, f"team/{n:04d}/{'p' * 900}.py")
        if uploaded.status_code != 200:
            _insufficient(uploaded, "package upload")
            return
    pytest.fail("200 uploads all went through: the store never filled")


def test_a_full_store_answers_507_to_produce_create_and_upload_and_loses_nothing(
    worker: Worker,
) -> None:
    store = worker.open_store()
    limit = SqlitePageLimit(store)
    with served(create_app(worker)) as client:
        for topic in ("in", "out"):
            made = client.put(f"{ADMIN}/{topic}", json={"schemaType": "string"})
            assert made.is_success, made.text
        committed: list[str] = []
        for _ in range(3):
            values = _values(10)
            assert _produce(client, "in", values).status_code == 200
            committed.extend(values)
        limit.fill()

        _produce_until_full(client, "in", committed)
        # A config of 40 kB needs pages of its own, as a segment does: none is left.
        _insufficient(_create(client, "upper", {"words": "w" * 40_000}), "functions create")
        assert client.get(f"{FUNCTIONS}").json() == []
        _upload_until_full(client)  # a package's rows fit until their pages are full too
        assert _stored(store, "in") == committed  # every message committed before, in order

        limit.lift()
        later = _values(2)
        assert _produce(client, "in", later).status_code == 200
        assert _upload(client, "team/fn.py").status_code == 200
        assert _stored(store, "in") == committed + later


def test_ready_is_503_while_writes_find_no_space_and_200_once_they_do(
    data_dir: Path, spark: Any
) -> None:
    worker = _worker(data_dir, spark)
    try:
        limit = SqlitePageLimit(worker.open_store())
        with served(create_app(worker)) as client:
            assert worker.restore() == []  # nothing to start again; Spark is the test session's
            assert client.get("/ready").status_code == 200
            assert client.put(f"{ADMIN}/in", json={"schemaType": "string"}).is_success
            committed: list[str] = []
            limit.fill()
            _produce_until_full(client, "in", committed)

            for _ in range(2):  # each /ready tries a write of its own, and it fails again
                ready = client.get("/ready")
                assert ready.status_code == 503, ready.text
                assert ready.json()["reason"] == "storage_full", ready.json()
                assert ready.json()["message"].startswith("writes fail: no space left"), (
                    ready.json()
                )
            assert client.get("/health").status_code == 200  # alive all the while

            limit.lift()
            ready = client.get("/ready")
            assert ready.status_code == 200, ready.text
            assert ready.json()["status"] == "ready"
            later = _values(1)
            assert _produce(client, "in", later).status_code == 200
            assert _stored(worker.open_store(), "in") == committed + later
    finally:
        worker.shutdown()


def test_a_full_disk_answers_507_to_segment_and_package_writes(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "disk", size="16m") as disk:
        worker = _worker(disk / "data")
        try:
            with served(create_app(worker)) as client:
                assert client.put(f"{ADMIN}/big", json={"schemaType": "string"}).is_success
                committed = _values(2, 300_000)  # over the inline limit: a segment file each
                assert _produce(client, "big", committed).status_code == 200
                filler = fill(disk)

                refused = _produce(client, "big", _values(1, 300_000))
                _insufficient(refused, "produce to a segment file")
                assert "No space left on device" in refused.json()["message"]
                _insufficient(_upload(client, "team/fn.py"), "package upload")
                assert not list((disk / "data").rglob("*.tmp")), "a failed write left a file"

                filler.unlink()
                later = _values(1, 300_000)
                assert _produce(client, "big", later).status_code == 200
                assert _upload(client, "team/fn.py").status_code == 200
                assert _stored(worker.open_store(), "big") == committed + later
        finally:
            worker.shutdown()
