"""Versions on a real worker: an update under load loses and repeats nothing; delete forgets all."""

from __future__ import annotations

import collections
import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from worker_process import SharedWorker, topic_counts

from sparkfn.state.store import all_state
from sparkfn.store import schema
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from waiting import WAIT, until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASE = {"inputs": ["in"], "output": "out", "processingGuarantees": "EFFECTIVELY_ONCE"}


def _send(client: httpx.Client, verb: str, name: str, code: Path, **config: Any) -> dict[str, Any]:
    with code.open("rb") as f:
        response = client.request(
            verb,
            f"/public/default/{name}",
            data={"functionConfig": json.dumps({**BASE, **config})},
            files={"data": (code.name, f, "text/x-python")},
        )
    assert response.status_code == 200, response.text
    return dict(response.json())


def _awaittopic_counts(
    store: Store, expected: collections.Counter[str], timeout: float = WAIT
) -> None:
    found = topic_counts(store)

    def arrived() -> bool:
        nonlocal found
        found = topic_counts(store)
        extra = found - expected
        assert not extra, f"outputs no input asked for, or repeated: {dict(extra)}"
        return found == expected

    def said() -> str:
        missing = expected - found
        return f"every output; {len(missing)} missing: {sorted(missing)[:10]}"

    until(arrived, said, timeout, every=0.5)


def _setup(store: Store) -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=2, schema_type="string")
    admin.create("out", schema_type="string")


@pytest.mark.long_running(120)
@pytest.mark.backend("sqlite")
def test_an_update_to_a_new_parallelism_under_load_loses_and_repeats_nothing(
    shared_worker: SharedWorker,
) -> None:
    store = shared_worker.store
    _setup(store)
    producer = Producer(store, "in")
    sent = 300
    stop = threading.Event()

    def produce() -> None:
        for i in range(sent):
            producer.send(f"m{i:03d}")
            time.sleep(0.02)
            if stop.is_set():
                return

    with shared_worker.client() as client:
        first = _send(client, "POST", "exclaim", EXAMPLES / "exclamation.py", parallelism=1)
        feeder = threading.Thread(target=produce)
        feeder.start()
        try:
            time.sleep(2)  # the update lands while messages flow
            second = _send(client, "PUT", "exclaim", EXAMPLES / "exclamation.py", parallelism=2)
        finally:
            feeder.join()
        assert (first["version"], second["version"]) == (1, 2)
        _awaittopic_counts(store, collections.Counter(f"m{i:03d}!" for i in range(sent)))

        status = client.get("/public/default/exclaim/status").json()
        assert status["numInstances"] == 2
        old = client.get("/public/default/exclaim", params={"version": 1}).json()
        assert (old["version"], old["parallelism"]) == (1, 1)
        assert client.get("/public/default/exclaim").json()["parallelism"] == 2
    # The run is the version it was prepared from: its group membership (the key its tasks'
    # objects are made under) says 2, so no object of version 1 serves it.
    with store.read() as conn:
        row = conn.execute(
            select(schema.group_members.c.version).where(
                schema.group_members.c.control_id == "public/default/exclaim"
            )
        ).one()
    assert row.version == "2"


@pytest.mark.long_running(90)
@pytest.mark.backend("postgresql")
def test_delete_forgets_the_function_and_a_new_one_of_its_name_starts_afresh(
    shared_worker: SharedWorker,
) -> None:
    store, data_dir = shared_worker.store, shared_worker.data_dir
    _setup(store)
    producer = Producer(store, "in")
    producer.send_batch([Message(f"a{i}".encode()) for i in range(5)])
    with shared_worker.client() as client:
        _send(
            client, "POST", "exclaim", EXAMPLES / "exclamation.py", subscriptionPosition="Earliest"
        )
        _awaittopic_counts(store, collections.Counter(f"a{i}!" for i in range(5)))

        gone = client.delete("/public/default/exclaim")
        assert gone.status_code == 200, gone.text
        assert client.get("/public/default/exclaim").json()["reason"] == "function_not_found"
        assert not (data_dir / "functions" / "public" / "default" / "exclaim").exists()
        assert all_state(store, "public/default/exclaim") == {}

        producer.send_batch([Message(f"b{i}".encode()) for i in range(5)])  # before the new one
        _send(client, "POST", "exclaim", EXAMPLES / "exclamation.py")  # position: latest
        producer.send_batch([Message(f"c{i}".encode()) for i in range(10)])
        expected = collections.Counter(
            [*(f"a{i}!" for i in range(5)), *(f"c{i}!" for i in range(10))]
        )
        _awaittopic_counts(store, expected)
