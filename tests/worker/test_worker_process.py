"""A real worker process over HTTP: submit a function, watch it work, survive a SIGKILL."""

from __future__ import annotations

import collections
import json
import signal
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from worker_process import SharedWorker, WorkerProcess, topic_counts

from sparkfn.runtime.lifecycle import control
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from waiting import until

EXCLAIM = Path(__file__).resolve().parents[2] / "examples" / "exclamation.py"
CONFIG = {
    "inputs": ["in"],
    "output": "out",
    "processingGuarantees": "EFFECTIVELY_ONCE",
    "subscriptionPosition": "Earliest",
}


def _produce(store: Store, first: int, count: int) -> None:
    Producer(store, "in").send_batch(
        [Message(f"m{i:03d}".encode()) for i in range(first, first + count)]
    )


def _register(
    client: httpx.Client, name: str, code_path: Path = EXCLAIM, **more: Any
) -> httpx.Response:
    with code_path.open("rb") as code:
        return client.post(
            f"/public/default/{name}",
            data={"functionConfig": json.dumps({**CONFIG, **more})},
            files={"data": (code_path.name, code, "text/x-python")},
        )


def _wait_processed(
    client: httpx.Client, name: str, count: int, timeout: float = 120
) -> dict[str, Any]:
    status: dict[str, Any] = {}

    def done() -> dict[str, Any] | None:
        nonlocal status
        status = client.get(f"/public/default/{name}/status").json()
        processed = sum(
            i["status"]["numSuccessfullyProcessed"] for i in status.get("instances", [])
        )
        return status if processed >= count else None

    return until(done, lambda: f"{name} to process {count} messages: {status}", timeout, every=0.5)


@pytest.mark.long_running(90)
@pytest.mark.backend("sqlite")
def test_a_submitted_function_runs_and_resumes_after_a_sigkill(
    worker_process: WorkerProcess, store: Store
) -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=2, schema_type="string")
    admin.create("out", schema_type="string")
    admin.create("out2", schema_type="string")
    _produce(store, 0, 10)

    with worker_process.client() as client:
        assert _register(client, "second", output="out2").status_code == 200
        created = _register(client, "exclaim")
        assert created.status_code == 200, created.text
        info = created.json()
        assert (info["fqfn"], info["version"]) == ("public/default/exclaim", 1)
        assert info["packageDigest"].startswith("sha256:")
        assert client.get("/public/default").json() == ["exclaim", "second"]

        status = _wait_processed(client, "exclaim", 10)
        assert status["numInstances"] == 1 and status["numRunning"] == 1
        assert status["instances"][0]["status"]["state"] == "RUNNING"
        assert (
            status["instances"][0]["status"]["workerId"]
            == f"{socket.gethostname()}:{worker_process.port}"
        )
        again = _register(client, "exclaim")  # the name is taken: said before the code is loaded
        assert (again.status_code, again.json()["reason"]) == (409, "function_already_exists")

    worker_process.stop(signal.SIGKILL)
    _produce(store, 10, 10)
    worker_process.start()
    with worker_process.client() as client:
        _wait_processed(client, "exclaim", 10)
        expected = collections.Counter(f"m{i:03d}!" for i in range(20))
        until(
            lambda: (topic_counts(store), topic_counts(store, "out2")) == (expected, expected),
            lambda: f"each output once: {topic_counts(store)}, {topic_counts(store, 'out2')}",
            120,
            every=0.5,
        )
    # SIGTERM suspends the function: it resumes exactly there with the next worker.
    assert worker_process.stop() in (0, -signal.SIGTERM), worker_process.output()
    for name in ("exclaim", "second"):
        record = control.read_control(store, f"public/default/{name}")
        assert record is not None and record.state == control.SUSPENDED, worker_process.output()


def test_errors_carry_a_reason_and_the_right_status(shared_worker: SharedWorker) -> None:
    TopicAdmin(shared_worker.store).create("in", schema_type="string")
    with shared_worker.client() as client:
        missing = client.get("/public/default/nope/status")
        assert missing.status_code == 404
        assert missing.json()["reason"] == "function_not_found"

        bad = _register(client, "bad", processingGuarantees="SOMETIMES")
        assert bad.status_code == 400
        assert bad.json()["reason"] == "invalid_config"
        assert "processing_guarantees" in bad.json()["message"]
        assert "sometimes" in bad.json()["message"]

        unknown_topic = _register(client, "lost", inputs=["nowhere"], autoCreateTopics=False)
        assert unknown_topic.status_code == 400
        assert unknown_topic.json()["reason"] == "invalid_config"
        assert (
            "inputs topic public/default/nowhere does not exist" in unknown_topic.json()["message"]
        )
        assert client.get("/public/default").json() == []


@pytest.mark.long_running(60)
def test_a_shutdown_worker_policy_stops_the_worker_and_suspends_the_others(
    worker_process: WorkerProcess, store: Store
) -> None:
    admin = TopicAdmin(store)
    admin.create("in", schema_type="string")
    admin.create("out", schema_type="string")
    doomed = Path(__file__).parent / "funcs" / "fatal_on_message.py"
    with worker_process.client() as client:
        assert _register(client, "steady").status_code == 200
        policy = {"failure_policy": {"on_fatal": "SHUTDOWN_WORKER"}}
        assert _register(client, "doomed", doomed, **policy).status_code == 200
        _produce(store, 0, 1)
        assert worker_process.proc is not None
        worker_process.proc.wait(timeout=180)  # the worker takes itself out

    doomed_record = control.read_control(store, "public/default/doomed")
    steady_record = control.read_control(store, "public/default/steady")
    assert doomed_record is not None and doomed_record.state == control.ERROR
    assert "SHUTDOWN_WORKER" in doomed_record.cause, worker_process.output()
    assert steady_record is not None and steady_record.state == control.SUSPENDED
    assert "asked the worker to shut down" in worker_process.output()
