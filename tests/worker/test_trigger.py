"""trigger over HTTP: one value in, the output it gave back, or why not.

The running case is the shared ``sparkfn worker start`` process with a function
on Spark (both stores), which also shows /ready and /metrics of a worker
that runs a function. The refusals that need no run use the app in this
process over a real store.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from app_server import served
from prometheus_client.parser import text_string_to_metric_families
from worker_process import SharedWorker

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.rows import TRIGGER_PROPERTY
from sparkfn.topics.admin import TopicAdmin
from sparkfn.worker.api.app import create_app
from sparkfn.worker.registry import Registry
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings
from waiting import until

FUNCTIONS = "/admin/v3/functions/public/default"
TOPICS = "/admin/v2/persistent/public/default"
# Returns nothing for "skip", fails on "boom", else exclaims.
PICKY = """
def process(input):
    if input == "skip":
        return None
    if input == "boom":
        raise ValueError("no booms here")
    return input + "!"
"""


def _wait_ready(client: httpx.Client, timeout: float = 120) -> dict[str, Any]:
    answer = until(
        lambda: (found := client.get("/ready")).status_code == 200 and found,
        lambda: f"the worker ready: {client.get('/ready').text}",
        timeout,
        every=0.5,
    )
    return dict(answer.json())


def _metric(text: str, family: str, name: str) -> float:
    for found in text_string_to_metric_families(text):
        if found.name == family:
            return sum(s.value for s in found.samples if s.labels.get("name") == name)
    return 0.0


@pytest.mark.long_running(60)
def test_trigger_answers_the_output_of_the_value_it_sent(
    shared_worker: SharedWorker, tmp_path: Path
) -> None:
    code = tmp_path / "picky.py"
    code.write_text(PICKY)
    with httpx.Client(base_url=shared_worker.url, timeout=300) as client:
        for topic in ("in", "out"):
            created = client.put(f"{TOPICS}/{topic}", json={"schemaType": "string"})
            assert created.status_code == 204, created.text
        # Earliest: the input is empty, and the first trigger may come before the query starts.
        config = {
            "inputs": ["in"],
            "output": "out",
            "maxMessageRetries": 1,
            "subscriptionPosition": "Earliest",
        }
        with code.open("rb") as package:
            registered = client.post(
                f"{FUNCTIONS}/picky",
                data={"functionConfig": json.dumps(config)},
                files={"data": ("picky.py", package, "text/x-python")},
            )
        assert registered.status_code == 200, registered.text
        assert _wait_ready(client)["functionsRunning"] == 1

        # The first one waits for the query's first batch too: on a busy machine, a while.
        answer = client.post(f"{FUNCTIONS}/picky/trigger", data={"data": "hello", "timeout": 240})
        assert answer.status_code == 200, answer.text
        found = answer.json()
        assert found["inputTopic"] == "persistent://public/default/in"
        assert found["output"]["topic"] == "persistent://public/default/out"
        assert found["output"]["value"] == "hello!"
        # No internal property on the output: Pulsar's own, naming the input message.
        assert TRIGGER_PROPERTY not in found["output"]["properties"]
        assert found["output"]["properties"] == {
            "__pfn_input_topic__": "persistent://public/default/in",
            "__pfn_input_msg_id__": found["inputMessageId"],
        }

        streamed = client.post(
            f"{FUNCTIONS}/picky/trigger",
            files={"dataStream": ("value.txt", b"from a file", "text/plain")},
            data={"topic": "in"},
        )
        assert streamed.json()["output"]["value"] == "from a file!", streamed.text

        silent = client.post(f"{FUNCTIONS}/picky/trigger", data={"data": "skip", "timeout": "3"})
        assert silent.status_code == 408, silent.text
        assert silent.json()["reason"] == "trigger_timeout"
        assert "within 3 s" in silent.json()["message"]

        failed = client.post(f"{FUNCTIONS}/picky/trigger", data={"data": "boom"})
        assert failed.status_code == 422, failed.text
        assert failed.json()["reason"] == "trigger_failed"
        # Answered at its first failure: negative-acked, it comes again after the delay.
        assert (
            "(message 0:3 of public/default/in): ValueError: no booms here; it was "
            in (failed.json()["message"])
        )
        assert (
            "negative-acked and is delivered again after 60000 ms, up to 1 time(s)"
            in (failed.json()["message"])
        )

        wrong_topic = client.post(f"{FUNCTIONS}/picky/trigger", data={"data": "x", "topic": "out"})
        assert wrong_topic.status_code == 400
        assert "is not an input of function public/default/picky" in wrong_topic.text

        metrics = client.get("/metrics").text
        assert _metric(metrics, "sparkfn_function_received", "picky") == 4
        assert _metric(metrics, "sparkfn_function_processed_successfully", "picky") == 3
        # boom's one delivery so far: its redelivery is 60 s away.
        assert _metric(metrics, "sparkfn_function_user_exceptions", "picky") == 1
        running = [
            s.value
            for f in text_string_to_metric_families(metrics)
            if f.name == "sparkfn_worker_functions_running"
            for s in f.samples
        ]
        assert running == [1]


@pytest.fixture
def client(store_url: str, data_dir: Path) -> Iterator[httpx.Client]:
    worker = Worker(WorkerSettings.resolve(data_dir=data_dir, store_url=store_url))
    worker.open()
    admin = TopicAdmin(worker.open_store())
    for topic in ("a", "b", "out"):
        admin.create(topic)
    registry = Registry(worker.open_store())
    for name, output in (("quiet", None), ("idle", "out")):
        fields = {"name": name, "py": __file__, "inputs": ["a", "b"], "output": output}
        registry.create(FunctionConfig.build(**fields), package_digest=None, who="test")
    try:
        with served(create_app(worker)) as client:
            yield client
    finally:
        worker.shutdown()


def _refused(response: httpx.Response, status: int, reason: str) -> str:
    assert response.status_code == status, response.text
    assert response.json()["reason"] == reason, response.text
    return str(response.json()["message"])


def test_what_trigger_refuses_before_sending_anything(client: httpx.Client) -> None:
    message = _refused(
        client.post(f"{FUNCTIONS}/quiet/trigger", data={"data": "x"}), 400, "no_output_topic"
    )
    assert "has no output topic" in message
    message = _refused(
        client.post(f"{FUNCTIONS}/idle/trigger", data={"data": "x"}), 409, "function_not_running"
    )
    assert "start it first" in message
    _refused(
        client.post(f"{FUNCTIONS}/nope/trigger", data={"data": "x"}), 404, "function_not_found"
    )
    message = _refused(client.post(f"{FUNCTIONS}/idle/trigger"), 400, "invalid_config")
    assert "data (text) or dataStream (a file)" in message
    _refused(
        client.post(f"{FUNCTIONS}/idle/trigger", data={"data": "x", "timeout": "0"}),
        400,
        "invalid_request",
    )
    # Nothing was sent: the inputs are as empty as they were.
    assert client.get(f"{TOPICS}/a/stats").json()["msgInCounter"] == 0
