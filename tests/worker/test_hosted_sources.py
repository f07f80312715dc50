"""Sources hosted by the worker, over its real REST app and a real store (both backends).

A source runs on threads of the worker process (no Spark), so these tests
use the in-process ``worker`` and its ``client`` over HTTP: the lifecycle
(create, messages arrive, stop, start, drain, restart, update, delete),
Pulsar's JSON shapes, the built-ins' listing, error reasons, auth, and a
worker restart that starts the source again and loses nothing.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from app_server import served

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.autocreate import TopicCreation
from sparkfn.topics.consumer import Consumer
from sparkfn.worker.api.app import create_app
from sparkfn.worker.auth.tokens import Principal, Role, TokenKeys
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings
from waiting import until

SOURCES = "/admin/v3/sources/public/default"
GENERATOR = {
    "archive": "builtin://generator",
    "topicName": "out",
    "configs": {"rate": 400},
    "processingGuarantees": "EFFECTIVELY_ONCE",
}
WAIT_S = 60.0


def _values(store: Store, topic: str = "out") -> list[str]:
    consumer = Consumer(store, topic, initial_position="earliest")
    found = []
    while batch := consumer.receive(max_messages=10_000):
        found += [m.value.decode() for m in batch if m.value is not None]
    return found


# the shared bounded wait (tests/waiting.py), with this module's timeout
_until = partial(until, timeout=WAIT_S)


def _create(client: httpx.Client, name: str, config: dict[str, Any]) -> httpx.Response:
    return client.post(f"{SOURCES}/{name}", data={"sourceConfig": json.dumps(config)})


def _state(client: httpx.Client, name: str) -> str:
    return str(client.get(f"{SOURCES}/{name}/status").json()["state"])


def _stable(store: Store) -> int:
    """The topic's count once it stops growing (a stopped source appends nothing more)."""
    last = -1

    def settled() -> bool:
        nonlocal last
        now, before = len(_values(store)), last
        last = now
        return now == before

    until(settled, lambda: f"the topic to stop growing (at {last})", WAIT_S, every=0.5)
    return last


def test_a_hosted_generator_runs_stops_drains_restarts_updates_and_is_deleted(
    client: httpx.Client, worker: Worker, store: Store
) -> None:
    TopicAdmin(store).create("out", schema_type="string")
    made = _create(client, "gen", GENERATOR)
    assert made.status_code == 200, made.text
    shown = made.json()
    assert shown["processingGuarantees"] == "EFFECTIVELY_ONCE"
    assert shown["archive"] == "builtin://generator"
    assert (shown["topicName"], shown["version"]) == ("public/default/out", 1)
    _until(lambda: len(_values(store)) >= 100, "the first 100 messages")
    status = client.get(f"{SOURCES}/gen/status").json()
    assert (status["numInstances"], status["numRunning"], status["state"]) == (1, 1, "RUNNING")
    instance = status["instances"][0]["status"]
    assert instance["running"] and instance["numWritten"] > 0 and instance["workerId"]
    assert client.get(f"{SOURCES}/gen/0/status").json()["numReceivedFromSource"] > 0
    assert client.get(f"{SOURCES}").json() == ["gen"]
    metrics = client.get("/metrics").text
    assert 'sparkfn_worker_sources_running{worker_id="' in metrics
    written = [
        line
        for line in metrics.splitlines()
        if line.startswith("sparkfn_source_written_total{") and 'name="gen"' in line
    ]
    assert written and float(written[0].rsplit(" ", 1)[1]) > 0, written

    for action, final in (("stop", "SUSPENDED"), ("drain", "STOPPED"), ("suspend", "SUSPENDED")):
        assert client.post(f"{SOURCES}/gen/{action}").status_code == 204
        _until(lambda final=final: _state(client, "gen") == final, f"{action} -> {final}")
        stopped_at = _stable(store)
        time.sleep(1.0)
        assert len(_values(store)) == stopped_at  # stopped means stopped
        assert client.post(f"{SOURCES}/gen/start").status_code == 204
        _until(lambda n=stopped_at: len(_values(store)) > n + 50, f"messages after {action}")

    assert client.post(f"{SOURCES}/gen/restart").status_code == 204
    _until(lambda: _state(client, "gen") == "RUNNING", "the restart")
    assert client.post(f"{SOURCES}/gen/suspend").status_code == 204
    _until(lambda: _state(client, "gen") == "SUSPENDED", "the suspend")
    values = _values(store)
    # effectively_once: every stop and start resumed the generator's sequence, nothing twice
    # and nothing skipped.
    twice = [v for v, n in collections.Counter(values).items() if n > 1]
    assert not twice, twice
    assert set(values) == {f"message-{i}" for i in range(len(values))}
    updated = client.put(
        f"{SOURCES}/gen", data={"sourceConfig": json.dumps({**GENERATOR, "parallelism": 2})}
    )
    assert updated.status_code == 200, updated.text
    assert (updated.json()["version"], updated.json()["parallelism"]) == (2, 2)
    assert _state(client, "gen") == "SUSPENDED"  # an update keeps a stopped source stopped
    assert client.post(f"{SOURCES}/gen/start").status_code == 204
    _until(lambda: client.get(f"{SOURCES}/gen/status").json()["numRunning"] == 2, "2 instances")
    # A generator rescaled deals its indexes anew (instance k of P makes k, k+P, ...): what
    # was appended before stays, and the new instances go on past it.
    _until(lambda: set(values) < set(_values(store)), "new messages from 2 instances")
    assert client.post(f"{SOURCES}/gen/1/stop").status_code == 204
    _until(lambda: client.get(f"{SOURCES}/gen/1/status").json()["state"] == "STOPPED", "instance 1")
    assert client.get(f"{SOURCES}/gen/0/status").json()["running"]
    assert client.post(f"{SOURCES}/gen/1/start").status_code == 204
    _until(lambda: client.get(f"{SOURCES}/gen/1/status").json()["running"], "instance 1 back")
    # Suspended alone, it ends as a whole source's suspend would; instance 0 runs on.
    assert client.post(f"{SOURCES}/gen/1/suspend").status_code == 204
    _until(
        lambda: client.get(f"{SOURCES}/gen/1/status").json()["state"] == "SUSPENDED",
        "instance 1 suspended",
    )
    assert client.get(f"{SOURCES}/gen/0/status").json()["running"]
    assert client.post(f"{SOURCES}/gen/1/start").status_code == 204
    _until(lambda: client.get(f"{SOURCES}/gen/1/status").json()["running"], "instance 1 again")
    assert client.post(f"{SOURCES}/gen/drain").status_code == 204
    _until(lambda: _state(client, "gen") == "STOPPED", "the last drain")
    assert client.get(f"{SOURCES}/gen", params={"version": 1}).json()["parallelism"] == 1
    deleted = client.delete(f"{SOURCES}/gen")
    assert deleted.status_code == 200
    gone = client.get(f"{SOURCES}/gen")
    assert (gone.status_code, gone.json()["reason"]) == (404, "source_not_found")
    assert worker.running(None) == []


def test_refusals_have_stable_reasons_and_leave_nothing(client: httpx.Client, store: Store) -> None:
    TopicAdmin(store).create("out", schema_type="string")
    TopicCreation.write(store, enabled=False)  # a missing topic is refused, not created
    cases = [
        ({**GENERATOR, "topicName": "nowhere"}, 400, "invalid_config", "topicName topic"),
        ({**GENERATOR, "archive": "builtin://nope"}, 400, "connector_load_error", "'nope'"),
        ({**GENERATOR, "parallelism": 0}, 400, "invalid_config", "parallelism"),
        ({**GENERATOR, "configs": {"rate": -1}}, 400, "invalid_config", "rate"),
        ({**GENERATOR, "archive": "/tmp/x.py"}, 400, "invalid_config", "archive"),
    ]
    for config, status, reason, named in cases:
        refused = _create(client, "bad", config)
        assert (refused.status_code, refused.json()["reason"]) == (status, reason), refused.text
        assert named in refused.json()["message"] and "bad" in refused.json()["message"]
    assert client.get(SOURCES).json() == []
    assert client.post(f"{SOURCES}/bad/start").json()["reason"] == "source_not_found"
    assert _create(client, "twice", GENERATOR).status_code == 200
    again = _create(client, "twice", GENERATOR)
    assert (again.status_code, again.json()["reason"]) == (409, "source_already_exists")
    for verb in ("stop", "drain", "suspend"):
        body = client.post(f"{SOURCES}/twice/7/{verb}").json()
        assert body["reason"] == "source_not_found" and "no instance 7" in body["message"]
    assert client.post(f"{SOURCES}/twice/stop").status_code == 204
    _until(lambda: _state(client, "twice") == "SUSPENDED", "the stop")
    TopicAdmin(store).delete("out")  # its topic gone, a start fails: ERROR in status
    started = client.post(f"{SOURCES}/twice/start")
    assert (started.status_code, started.json()["reason"]) == (400, "invalid_config")
    assert client.get(f"{SOURCES}/twice/status").json()["state"] == "ERROR"
    assert client.delete(f"{SOURCES}/twice").status_code == 200


def test_the_built_ins_are_listed_with_their_config_fields(client: httpx.Client) -> None:
    sources = {d["name"]: d for d in client.get("/admin/v3/sources/builtinsources").json()}
    assert {"generator", "file"} <= set(sources)
    fields = {f["fieldName"]: f for f in sources["generator"]["configFieldDefinitions"]}
    assert fields["rate"]["attributes"]["required"] == "false"
    sinks = {d["name"]: d for d in client.get("/admin/v3/sinks/builtinsinks").json()}
    assert {"file", "stdout", "postgres"} <= set(sinks)
    path = {f["fieldName"]: f for f in sinks["file"]["configFieldDefinitions"]}["path"]
    assert path["attributes"]["required"] == "true"
    one = client.get("/admin/v3/sinks/postgres/configdefinition").json()
    assert any(f["fieldName"] == "table" for f in one)
    unknown = client.get("/admin/v3/sources/nope/configdefinition")
    assert (unknown.status_code, unknown.json()["reason"]) == (400, "connector_load_error")
    assert "known: file, generator" in unknown.json()["message"]
    for name, found in sources.items():  # every built-in shows its fields
        assert found["configFieldDefinitions"], name


def test_a_restarted_worker_starts_its_sources_again_and_keeps_stopped_ones_stopped(
    store_url: str, data_dir: Path, store: Store, spark: Any
) -> None:
    TopicAdmin(store).create("out", schema_type="string")
    settings = WorkerSettings.resolve(data_dir=data_dir, store_url=store_url)
    first = Worker(settings, spark=spark)
    first.open()
    with served(create_app(first)) as client:
        gen = {**GENERATOR, "configs": {"count": 3000, "rate": 200}}
        assert _create(client, "gen", gen).status_code == 200
        idle = {**GENERATOR, "configs": {"rate": 5, "value": "idle-{index}"}}
        assert _create(client, "idle", idle).status_code == 200
        assert client.post(f"{SOURCES}/idle/stop").status_code == 204
        _until(lambda: len(_values(store)) >= 300, "the first messages")
        assert _state(client, "gen") == "RUNNING"
    first.shutdown()  # suspends gen: what it read is appended and acked
    second = Worker(settings, spark=spark)
    second.open()
    try:
        assert second.restore() == ["source:public/default/gen"]
        assert second.restored_connectors == ["source:public/default/gen"]
        _until(lambda: len([v for v in _values(store) if v.startswith("message-")]) >= 3000, "all")
        made = collections.Counter(_values(store))
        assert set(made) >= {f"message-{i}" for i in range(3000)} and max(made.values()) == 1
        _until(lambda: not second.running("source"), "the generator's end (a drain)")
    finally:
        second.shutdown()
    third = Worker(settings, spark=spark)
    third.open()
    try:  # a source that read its input to the end is not started to read it again
        assert third.restore() == []
        assert third.registry_for("source").record("public/default/gen").desired.value == "stopped"
    finally:
        third.shutdown()


SECRET = "a-worker-secret-for-the-tests-0123456789"


@pytest.fixture
def authed(data_dir: Path, store: Store) -> Iterator[httpx.Client]:
    settings = WorkerSettings.resolve(
        data_dir=data_dir, store_url=str(store.url), auth_enabled=True, token_secret_key=SECRET
    )
    worker = Worker(settings)
    worker.open()
    try:
        with served(create_app(worker)) as client:
            yield client
    finally:
        worker.shutdown()


def test_auth_refuses_sources_and_sinks_as_it_refuses_functions(
    authed: httpx.Client, store: Store
) -> None:
    keys = TokenKeys.load(secret_key=SECRET)
    alice = Principal("alice", Role.TENANT_ADMIN, "a")
    admin_a = {"Authorization": "Bearer " + keys.issue(alice, timedelta(hours=1))}
    TopicAdmin(store).create("a/default/out", schema_type="string")
    body = {"sourceConfig": json.dumps({**GENERATOR, "topicName": "public/default/out"})}
    none = authed.post("/admin/v3/sources/a/default/gen", data=body)
    assert (none.status_code, none.json()["reason"]) == (401, "unauthorized")
    other = authed.post("/admin/v3/sinks/b/default/s", data={}, headers=admin_a)
    assert (other.status_code, other.json()["reason"]) == (403, "forbidden")
    foreign = authed.post("/admin/v3/sources/a/default/gen", data=body, headers=admin_a)
    assert (foreign.status_code, foreign.json()["reason"]) == (403, "forbidden")
    assert "outside tenant 'a'" in foreign.json()["message"]
    own = {"sourceConfig": json.dumps({**GENERATOR, "topicName": "a/default/out"})}
    made = authed.post("/admin/v3/sources/a/default/gen", data=own, headers=admin_a)
    assert made.status_code == 200, made.text
    assert authed.get("/admin/v3/sources/builtinsources", headers=admin_a).status_code == 200
    assert authed.delete("/admin/v3/sources/a/default/gen", headers=admin_a).status_code == 200


COUNTING = Path(__file__).resolve().parent / "funcs" / "counting_source.py"


def test_a_source_in_a_package_keeps_its_code_across_a_config_only_update(
    client: httpx.Client, store: Store
) -> None:
    TopicAdmin(store).create("out", schema_type="string")
    config = {
        "topicName": "out",
        "configs": {"count": 50},
        "className": "counting_source.CountingSource",
    }
    with COUNTING.open("rb") as code:
        made = client.post(
            f"{SOURCES}/mine",
            data={"sourceConfig": json.dumps(config)},
            files={"data": (COUNTING.name, code, "text/x-python")},
        )
    assert made.status_code == 200, made.text
    digest = made.json()["packageDigest"]
    assert digest.startswith("sha256:") and made.json()["archive"] == digest
    _until(lambda: len(_values(store)) == 50, "the 50 records")
    _until(lambda: _state(client, "mine") == "STOPPED", "the end of its stream (a drain)")
    again = {**config, "configs": {"count": 20, "prefix": "m"}}
    updated = client.put(f"{SOURCES}/mine", data={"sourceConfig": json.dumps(again)})
    assert updated.status_code == 200, updated.text
    assert (updated.json()["version"], updated.json()["packageDigest"]) == (2, digest)
    # The source is still meant to run (its input ended, nobody stopped it), so the
    # update starts version 2 by itself; a start now would read its input again.
    _until(lambda: len(_values(store)) == 70, "the 20 records of version 2")
    _until(lambda: _state(client, "mine") == "STOPPED", "the end of version 2's stream")
    assert _stable(store) == 70
    assert sorted(_values(store))[:1] == ["m-0"]
    assert client.get(f"{SOURCES}/mine", params={"version": 1}).json()["configs"] == {"count": 50}


def test_a_source_whose_policy_says_shutdown_worker_stops_the_worker(
    client: httpx.Client, worker: Worker, store: Store
) -> None:
    TopicAdmin(store).create("out", schema_type="string")
    asked = threading.Event()
    worker.on_shutdown_request = asked.set
    config = {
        "topicName": "out",
        "className": "counting_source.FailingSource",
        "failurePolicy": {"on_fatal": "SHUTDOWN_WORKER"},
    }
    with COUNTING.open("rb") as code:
        made = client.post(
            f"{SOURCES}/failing",
            data={"sourceConfig": json.dumps(config)},
            files={"data": (COUNTING.name, code, "text/x-python")},
        )
    assert made.status_code == 200, made.text
    assert asked.wait(WAIT_S), "the worker was not asked to shut down"
    status = _until(
        lambda: (s := client.get(f"{SOURCES}/failing/status").json())["state"] == "ERROR" and s,
        "the source's ERROR",
    )
    death = status["instances"][0]["status"]
    assert "ConnectionError: the upstream is gone" in death["error"]
    assert death["deathException"]["origin"] == "connector" and death["numSourceExceptions"] == 1
