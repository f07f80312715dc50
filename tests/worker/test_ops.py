"""Liveness, readiness and metrics of a worker: the real app over a real store.

Readiness waits for the restore of functions and needs the store and Spark
to answer; /metrics reports every registered function under one family per
metric name, and the worker's own numbers. (A worker process running a
function is tests/worker/test_trigger.py.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from app_server import served
from prometheus_client.parser import text_string_to_metric_families

from sparkfn.config.function import FunctionConfig
from sparkfn.topics.admin import TopicAdmin
from sparkfn.worker.api.app import create_app
from sparkfn.worker.registry import Registry
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings

EXCLAIM = Path(__file__).resolve().parents[2] / "examples" / "exclamation.py"


@pytest.fixture
def worker(store_url: str, data_dir: Path, spark: Any) -> Iterator[Worker]:
    worker = Worker(WorkerSettings.resolve(data_dir=data_dir, store_url=store_url), spark=spark)
    worker.open()
    yield worker
    if worker.store is not None:
        worker.shutdown()


@pytest.fixture
def client(worker: Worker) -> Iterator[httpx.Client]:
    with served(create_app(worker)) as client:
        yield client


def test_ready_only_after_restore_and_not_once_the_store_is_gone(
    worker: Worker, client: httpx.Client
) -> None:
    assert client.get("/health").json()["status"] == "alive"
    restoring = client.get("/ready")
    assert restoring.status_code == 503
    assert restoring.json()["reason"] == "restoring"

    assert worker.restore() == []  # nothing to start again; Spark is the test session's
    ready = client.get("/ready")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {
        "status": "ready",
        "workerId": worker.settings.worker_id,
        "functionsRunning": 0,
        "functionsRestored": 0,
    }

    worker.shutdown()  # closes the store, as SIGTERM does before the server stops
    gone = client.get("/ready")
    assert gone.status_code == 503
    assert gone.json()["reason"] == "store_unavailable"
    assert client.get("/health").status_code == 200  # alive while it serves


def _register(worker: Worker, name: str, parallelism: int) -> None:
    config = FunctionConfig.build(
        tenant="acme",
        namespace="ops",
        name=name,
        py=str(EXCLAIM),
        inputs=["acme/ops/in"],
        output="acme/ops/out",
        parallelism=parallelism,
    )
    Registry(worker.open_store()).create(config, package_digest=None, who="test")


def test_metrics_cover_every_registered_function_in_one_family_per_name(
    worker: Worker, client: httpx.Client
) -> None:
    admin = TopicAdmin(worker.open_store())
    admin.create("acme/ops/in")
    admin.create("acme/ops/out")
    _register(worker, "one", parallelism=1)
    _register(worker, "two", parallelism=2)

    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    received = families["sparkfn_function_received"]
    assert received.type == "counter"
    assert sorted(
        (s.labels["tenant"], s.labels["namespace"], s.labels["name"], s.labels["instance_id"])
        for s in received.samples
    ) == [("acme", "ops", "one", "0"), ("acme", "ops", "two", "0"), ("acme", "ops", "two", "1")]
    assert {s.value for s in received.samples} == {0}
    assert response.text.count("# TYPE sparkfn_function_received_total counter") == 1

    worker_samples = {
        s.name: s
        for name, family in families.items()
        if name.startswith("sparkfn_worker_")
        for s in family.samples
    }
    assert worker_samples["sparkfn_worker_functions_registered"].value == 2
    assert worker_samples["sparkfn_worker_functions_running"].value == 0
    assert worker_samples["sparkfn_worker_function_starts_total"].value == 0
    assert worker_samples["sparkfn_worker_instance_restarts_total"].value == 0
    assert worker_samples["sparkfn_worker_uptime_seconds"].value > 0
    assert {s.labels["worker_id"] for s in worker_samples.values()} == {worker.settings.worker_id}
