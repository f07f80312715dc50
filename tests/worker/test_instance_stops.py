"""One instance's drain, suspend and stop over REST, on the shared worker (both stores).

docs/lifecycle.md, "One instance": the instance ends ``STOPPED`` with its
cause while the other runs on and takes its share; nothing is lost or
repeated under ``effectively_once``; ``start`` brings it back; unknown
functions and instances get the per-instance routes' 404s.
"""

from __future__ import annotations

import collections
import json
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from worker_process import SharedWorker, topic_counts

from sparkfn.runtime.lifecycle import control
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from waiting import until

pytestmark = pytest.mark.slow

EXCLAIM = Path(__file__).resolve().parents[2] / "examples" / "exclamation.py"
FN = "/public/default/ex"
WAIT_S = 120.0


# the shared bounded wait (tests/waiting.py), with this module's timeout
_until = partial(until, timeout=WAIT_S, every=0.2)


def _produce(store: Store, first: int, count: int) -> None:
    Producer(store, "in").send_batch(
        [Message(f"m{i:03d}".encode()) for i in range(first, first + count)]
    )


def _expected(count: int) -> collections.Counter[str]:
    return collections.Counter(f"m{i:03d}!" for i in range(count))


def _state(client: httpx.Client, instance: int) -> str:
    return str(client.get(f"{FN}/{instance}/status").json()["state"])


def _last_step(store: Store, instance: int) -> dict[str, Any]:
    return [t for t in control.transitions_of(store, FN[1:]) if t["instance"] == instance][-1]


@pytest.mark.long_running(40)
def test_one_instance_suspends_drains_and_starts_again_over_rest(
    shared_worker: SharedWorker,
) -> None:
    store = shared_worker.store
    TopicAdmin(store).create("in", partitions=2, schema_type="string")
    TopicAdmin(store).create("out", schema_type="string")
    _produce(store, 0, 40)
    config = {
        "inputs": ["in"],
        "output": "out",
        "parallelism": 2,
        "processingGuarantees": "EFFECTIVELY_ONCE",
        "subscriptionPosition": "Earliest",
    }
    with shared_worker.client() as client:
        with EXCLAIM.open("rb") as code:
            made = client.post(
                FN,
                data={"functionConfig": json.dumps(config)},
                files={"data": (EXCLAIM.name, code, "text/x-python")},
            )
        assert made.status_code == 200, made.text
        _until(lambda: topic_counts(store) == _expected(40), "the first 40, once each")

        assert client.post(f"{FN}/1/suspend").status_code == 204
        assert client.post(f"{FN}/1/suspend").status_code == 204  # asked again: one stop
        _until(lambda: _state(client, 1) == "STOPPED", "instance 1 suspended")
        status = client.get(f"{FN}/status").json()
        assert (status["numRunning"], status["instances"][0]["status"]["state"]) == (1, "RUNNING")
        step = _last_step(store, 1)
        assert (step["from"], step["to"]) == ("STOPPING", "STOPPED"), step
        assert step["cause"].startswith("suspended"), step
        assert client.post(f"{FN}/1/drain").status_code == 204  # stopped already: nothing
        assert _last_step(store, 1) == step
        _produce(store, 40, 40)  # instance 0 takes instance 1's share
        _until(lambda: topic_counts(store) == _expected(80), "80, once each, by instance 0")

        assert client.post(f"{FN}/1/start").status_code == 204
        _until(lambda: _state(client, 1) == "RUNNING", "instance 1 started again")
        _produce(store, 80, 40)
        assert client.post(f"{FN}/1/drain").status_code == 204
        _until(lambda: _state(client, 1) == "STOPPED", "instance 1 drained")
        assert _last_step(store, 1)["cause"].startswith("drained")
        # A drain ends after the input as of it: everything produced before is out.
        assert topic_counts(store) == _expected(120)

        # The per-instance routes' errors, for drain and suspend alike.
        for verb in ("drain", "suspend"):
            none = client.post(f"{FN}/7/{verb}")
            assert (none.status_code, none.json()["reason"]) == (404, "function_not_found")
            assert "no instance 7 (instances 0 to 1)" in none.json()["message"]
            nope = client.post(f"/public/default/nope/0/{verb}")
            assert (nope.status_code, nope.json()["reason"]) == (404, "function_not_found")
        assert client.post(f"{FN}/stop").status_code == 204
        _until(lambda: client.get(f"{FN}/status").json()["state"] == "SUSPENDED", "the stop")
        assert _state(client, 1) == "STOPPED"  # stopped alone, it stays so
        idle = client.post(f"{FN}/0/suspend")
        assert (idle.status_code, idle.json()["reason"]) == (404, "function_not_found")
        assert "is not running" in idle.json()["message"]
        # A start asked while a stop is still ending comes after it, not lost in it.
        assert client.post(f"{FN}/start").status_code == 204
        _until(lambda: client.get(f"{FN}/status").json()["state"] == "RUNNING", "running")
        assert client.post(f"{FN}/stop").status_code == 204
        assert client.post(f"{FN}/start").status_code == 204  # at once: the stop has not ended
        _until(lambda: client.get(f"{FN}/status").json()["numRunning"] == 2, "started again")
        _produce(store, 120, 10)
        _until(lambda: topic_counts(store) == _expected(130), "the start's outputs, once each")
