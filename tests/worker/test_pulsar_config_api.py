"""A worker reads a Pulsar ``functionConfig`` as ``FunctionConfig.from_yaml`` reads a file.

The shared worker process (both stores): the config is read by the same function as
a YAML file and the CLI flags, so the same fields are mapped, the same ones
warned about (the warnings come back in the answer) and an unknown field is
refused by name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from worker_process import SharedWorker

from sparkfn.config.function import FunctionConfig
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from waiting import until

CODE = Path(__file__).resolve().parents[1] / "examples" / "pulsar_funcs" / "classic_exclamation.py"
PULSAR_CONFIG = {
    "className": "classic_exclamation.ClassicExclamation",
    "inputs": ["persistent://public/default/in"],
    "output": "persistent://public/default/out",
    "runtime": "PYTHON",
    "autoAck": True,
    "subName": "exclaimer",
    "subscriptionPosition": "Earliest",
    "customSerdeInputs": {"persistent://public/default/in": "serde.IdentitySerDe"},
    "resources": {"cpu": 2, "ram": 1073741824, "disk": 10737418240},
    "pulsarCompat": True,  # sparkfn's own field, in camelCase
}


def _register(client: httpx.Client, name: str, config: dict[str, Any]) -> httpx.Response:
    with CODE.open("rb") as code:
        return client.post(
            f"/public/default/{name}",
            data={"functionConfig": json.dumps(config)},
            files={"data": (CODE.name, code, "text/x-python")},
        )


@pytest.mark.slow
@pytest.mark.long_running(60)
def test_a_pulsar_config_registers_with_the_warnings_localrun_gives(
    shared_worker: SharedWorker,
) -> None:
    store = shared_worker.store
    admin = TopicAdmin(store)
    for topic in ("in", "out"):
        admin.create(topic)  # sparkfn's defaults
    with shared_worker.client() as client:
        unknown = _register(client, "typo", {**PULSAR_CONFIG, "autoAckk": True})
        assert unknown.status_code == 400, unknown.text
        assert unknown.json()["reason"] == "invalid_config"
        assert "autoAckk: Extra inputs are not permitted" in unknown.json()["message"]
        for field, value, problem in [
            (
                "windowConfig",
                {"windowLengthCount": 3, "slidingIntervalDurationMs": 5},
                "window_config: slidingIntervalDurationMs slides a time window",
            ),
            ("windowConfig", {"windowLenghtCount": 3}, "windowConfig.windowLenghtCount: not a"),
            ("timeoutMs", -1, "timeout_ms: Input should be greater than or equal to 1"),
            ("producerConfig", {"compressionType": "SNAPPY"}, "with LZ4 or ZSTD only"),
        ]:
            refused = _register(client, "refused", {**PULSAR_CONFIG, field: value})
            assert refused.status_code == 400, refused.text
            assert refused.json()["reason"] == "invalid_config"
            assert problem in refused.json()["message"], refused.json()

        created = _register(client, "exclaim", PULSAR_CONFIG)
        assert created.status_code == 200, created.text
        info = created.json()
        # The same reading as a file's, plus what a worker cannot honour.
        local, local_warnings = FunctionConfig.assemble(PULSAR_CONFIG, {"name": "exclaim"})
        assert info["warnings"] == [
            *local_warnings,
            "resources: the functions of a worker share its Spark session, whose settings "
            "(spark.task.cpus, spark.executor.pyspark.memory) decide; ignored",
        ]
        assert sorted(w.split(":")[0] for w in local_warnings) == [
            "resources.disk",
            "runtime",
        ]
        # Pulsar's FunctionConfig JSON back, sparkfn's own fields alongside.
        assert info["subName"] == "exclaimer"
        assert info["inputSpecs"] == {
            "persistent://public/default/in": {
                "regexPattern": False,
                "serdeClassName": "serde.IdentitySerDe",
            }
        }
        assert info["resources"] == {"cpu": 2.0, "ram": 1073741824, "disk": 10737418240}
        assert "sparkConf" not in info  # none: the worker's session decides
        assert info["pulsarCompat"] is True
        assert local.resources.cpu == 2.0

        Producer(store, "in").send(b"hello")
        _await_output(store, [b"hello!"])
        assert client.get("/public/default/exclaim").json()["warnings"] == []


def _await_output(store: Store, expected: list[bytes], timeout: float = 120.0) -> None:
    found: list[bytes | None] = []

    def arrived() -> bool:
        nonlocal found
        consumer = Consumer(store, "out", initial_position="earliest")
        found = [m.value for m in consumer.receive(max_messages=100)]
        return found == expected

    until(arrived, lambda: f"out to hold {expected}, not {found}", timeout, every=0.5)


WINDOWS = Path(__file__).resolve().parents[1] / "runtime" / "funcs" / "windows.py"


@pytest.mark.slow
@pytest.mark.long_running(30)
def test_a_window_function_runs_on_a_worker(shared_worker: SharedWorker) -> None:
    """Pulsar's windowConfig over REST: the worker runs it (in a query of its own)."""
    store = shared_worker.store
    admin = TopicAdmin(store)
    for topic in ("win-in", "win-out"):
        admin.create(topic, schema_type="string")
    config = {
        "className": "windows.Joined",
        "inputs": ["persistent://public/default/win-in"],
        "output": "persistent://public/default/win-out",
        "subscriptionPosition": "Earliest",
        "windowConfig": {"windowLengthCount": 2},
    }
    with shared_worker.client() as client:
        with WINDOWS.open("rb") as code:
            created = client.post(
                "/public/default/windowed",
                data={"functionConfig": json.dumps(config)},
                files={"data": (WINDOWS.name, code, "text/x-python")},
            )
        assert created.status_code == 200, created.text
        assert created.json()["windowConfig"]["windowLengthCount"] == 2  # Pulsar's shape
        try:
            Producer(store, "win-in").send_batch([Message(v.encode()) for v in "abcd"])

            def windows() -> list[bytes | None]:
                consumer = Consumer(store, "win-out", initial_position="earliest")
                found = [m.value for m in consumer.receive(max_messages=100)]
                return found if len(found) >= 2 else []

            assert until(windows, "two windows on win-out", 120, every=0.5) == [
                b"a,b|-",
                b"c,d|-",
            ]
        finally:
            client.delete("/public/default/windowed")
