"""Topics over HTTP: create, list, describe, produce, peek, unsubscribe and delete, on both stores.

The real app, served by uvicorn in this process, over a real store (no Spark
run is needed for topics). Each answer is checked against what the store
holds, through the same classes the CLI uses.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from sparkfn.runtime.lifecycle import control
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import SchemaType
from sparkfn.topics.producer import Producer
from sparkfn.worker.service import Worker

ADMIN = "/admin/v2/persistent/acme/sales"
PRODUCE = "/topics/persistent/acme/sales"
AVRO = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}


def _error(response: httpx.Response, status: int, reason: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["reason"] == reason, body
    return str(body["message"])


def test_create_list_describe_and_delete(client: httpx.Client, worker: Worker) -> None:
    assert client.put(f"{ADMIN}/plain").status_code == 204
    assert client.put(f"{ADMIN}/orders/partitions", json=3).status_code == 204
    created = client.put(
        f"{ADMIN}/events/partitions",
        json={"partitions": 2, "schemaType": "json", "retentionMs": 60_000},
    )
    assert created.status_code == 204, created.text

    assert client.get(ADMIN).json() == [
        "persistent://acme/sales/events",
        "persistent://acme/sales/orders",
        "persistent://acme/sales/plain",
    ]
    assert client.get(f"{ADMIN}/orders/partitions").json() == {"partitions": 3}
    assert client.get(f"{ADMIN}/plain/partitions").json() == {"partitions": 1}
    events = TopicAdmin(worker.open_store()).get("acme/sales/events")
    assert (events.partitions, events.schema_type, events.retention_ms) == (
        2,
        SchemaType.JSON,
        60_000,
    )

    stats = client.get(f"{ADMIN}/events/stats").json()
    assert stats["topic"] == "persistent://acme/sales/events"
    assert stats["metadata"] == {"partitions": 2}
    assert (stats["schemaType"], stats["retentionMs"], stats["msgInCounter"]) == ("json", 60_000, 0)

    assert client.delete(f"{ADMIN}/events").status_code == 204
    assert client.delete(f"{ADMIN}/orders/partitions").status_code == 204
    assert client.get(ADMIN).json() == ["persistent://acme/sales/plain"]
    _error(client.get(f"{ADMIN}/events/stats"), 404, "topic_not_found")


def test_creation_errors_are_4xx_with_a_reason(client: httpx.Client) -> None:
    assert client.put(f"{ADMIN}/orders").status_code == 204
    assert "already exists" in _error(client.put(f"{ADMIN}/orders"), 409, "topic_exists")
    message = _error(client.put(f"{ADMIN}/big/partitions", json=5000), 400, "invalid_config")
    assert "between 1 and 1024; got 5000" in message
    _error(client.put(f"{ADMIN}/big/partitions", json={"partitions": 0}), 400, "invalid_request")
    # A name no topic can have is refused at the edge, as every route's names are.
    message = _error(client.put("/admin/v2/persistent/acme/sales/bad name"), 400, "invalid_request")
    assert "path.topic" in message
    assert "'bad name'" in message
    message = _error(
        client.put(f"{ADMIN}/records", json={"schemaType": "avro"}), 400, "invalid_config"
    )
    assert "avro topic needs a schema definition" in message
    _error(client.put(f"{ADMIN}/x", json={"schemaType": "xml"}), 400, "invalid_request")
    _error(client.put(f"{ADMIN}/x", json={"partitionz": 2}), 400, "invalid_request")


def test_produce_checks_every_value_and_appends_all_or_nothing(
    client: httpx.Client, worker: Worker
) -> None:
    client.put(f"{ADMIN}/events/partitions", json={"partitions": 2, "schemaType": "json"})
    bad = client.post(
        f"{PRODUCE}/events",
        json={"messages": [{"payload": {"ok": 1}}, {"payload": "{not json"}]},
    )
    assert "messages[1]" in _error(bad, 400, "invalid_payload")
    assert client.get(f"{ADMIN}/events/stats").json()["msgInCounter"] == 0

    sent = client.post(
        f"{PRODUCE}/events",
        json={
            "producerName": "checkout",
            "messages": [
                {"payload": {"id": 1}, "key": "alice", "sequenceId": 1},
                {
                    "payload": "[1, 2]",
                    "key": "alice",
                    "properties": {"trace": "t-1"},
                    "eventTime": "2026-01-02T03:04:05+01:00",
                    "sequenceId": 2,
                },
                {"payload": {"id": 1}, "key": "alice", "sequenceId": 2},  # a duplicate
            ],
        },
    )
    assert sent.status_code == 200, sent.text
    acks = sent.json()["messagePublishResults"]
    assert [a["errorCode"] for a in acks] == [0, 0, 0]
    assert acks[2]["messageId"] is None
    received = Consumer(worker.open_store(), "acme/sales/events", initial_position="earliest")
    by_id = {m.message_id: m for m in received.receive(100)}
    assert set(by_id) == {acks[0]["messageId"], acks[1]["messageId"]}
    first, second = by_id[acks[0]["messageId"]], by_id[acks[1]["messageId"]]
    assert (first.value, first.key, first.producer, first.sequence_id) == (
        b'{"id":1}',
        "alice",
        "checkout",
        1,
    )
    assert (second.value, second.properties) == (b"[1, 2]", {"trace": "t-1"})
    assert second.event_time is not None
    assert second.event_time.isoformat().startswith("2026-01-02T02:04:05")

    to_one = client.post(f"{PRODUCE}/events/partitions/1", json={"messages": [{"payload": 7}]})
    assert to_one.json()["messagePublishResults"][0]["messageId"].startswith("1:")
    _error(
        client.post(f"{PRODUCE}/events/partitions/2", json={"messages": [{"payload": 7}]}),
        400,
        "invalid_config",
    )
    message = _error(
        client.post(f"{PRODUCE}/events", json={"messages": [{"payload": 1, "sequenceId": 1}]}),
        400,
        "invalid_config",
    )
    assert "producerName" in message
    _error(client.post(f"{PRODUCE}/nope", json={"messages": []}), 404, "topic_not_found")


def test_produce_encodes_by_the_topic_schema(client: httpx.Client, worker: Worker) -> None:
    client.put(f"{ADMIN}/words", json={"schemaType": "string"})
    client.put(f"{ADMIN}/orders", json={"schemaType": "avro", "schema": AVRO})
    assert client.post(f"{PRODUCE}/words", json={"messages": [{"payload": "hé"}]}).is_success
    assert "str or bytes" in _error(
        client.post(f"{PRODUCE}/words", json={"messages": [{"payload": 12}]}),
        400,
        "invalid_payload",
    )
    order = {"id": 7, "item": "book"}
    assert client.post(f"{PRODUCE}/orders", json={"messages": [{"payload": order}]}).is_success
    _error(
        client.post(f"{PRODUCE}/orders", json={"messages": [{"payload": {"id": "x"}}]}),
        400,
        "invalid_payload",
    )
    peeked = client.get(f"{ADMIN}/orders/examinemessage", params={"initialPosition": "earliest"})
    assert peeked.json()["value"] == order
    word = client.get(f"{ADMIN}/words/examinemessage").json()
    assert (word["value"], base64.b64decode(word["valueBase64"])) == ("hé", "hé".encode())


def _produce(client: httpx.Client, topic: str, values: list[Any], partition: int) -> None:
    body = {"messages": [{"payload": json.dumps(v)} for v in values]}
    assert client.post(f"{PRODUCE}/{topic}/partitions/{partition}", json=body).is_success


def test_peek_after_a_subscription_and_examine_from_either_end(
    client: httpx.Client, store: Store, worker: Worker
) -> None:
    client.put(f"{ADMIN}/events/partitions", json={"partitions": 2, "schemaType": "json"})
    _produce(client, "events", [0, 1, 2], partition=0)
    _produce(client, "events", [10, 11], partition=1)
    audit = Consumer(worker.open_store(), "acme/sales/events", subscription="audit")
    assert audit.receive(100) == []  # a new subscription starts at the end...
    _produce(client, "events", [3], partition=0)
    _produce(client, "events", [12], partition=1)

    assert client.get(f"{ADMIN}/events/subscriptions").json() == ["audit"]
    peek = f"{ADMIN}/events/subscription/audit/position"
    # ...so it has two messages to read, partition 0's first; peeking does not move it.
    assert [client.get(f"{peek}/{n}").json()["value"] for n in (1, 2, 1)] == [3, 12, 3]
    message = _error(client.get(f"{peek}/3"), 404, "not_found")
    assert "has 2 message(s) after subscription 'audit'" in message
    _error(
        client.get(f"{ADMIN}/events/subscription/other/position/1"), 404, "subscription_not_found"
    )
    _error(client.get(f"{peek}/0"), 400, "invalid_request")

    stats = client.get(f"{ADMIN}/events/partitioned-stats").json()
    assert stats["subscriptions"] == {"audit": {"msgBacklog": 2}}
    part = stats["partitions"]["persistent://acme/sales/events-partition-1"]
    assert (part["startOffset"], part["endOffset"], part["subscriptions"]) == (
        0,
        3,
        {"audit": {"msgBacklog": 1}},
    )

    examine = f"{ADMIN}/events/examinemessage"
    earliest = {"initialPosition": "earliest", "partition": 1}
    assert client.get(examine, params={**earliest, "messagePosition": 2}).json()["value"] == 11
    latest = {"initialPosition": "latest", "partition": 0}
    found = client.get(examine, params={**latest, "messagePosition": 1}).json()
    assert (found["value"], found["messageId"]) == (3, "0:3")
    assert "partition=0..1" in _error(client.get(examine), 400, "invalid_config")
    _error(client.get(examine, params={**latest, "messagePosition": 5}), 404, "not_found")
    _error(client.get(examine, params={"partition": 2}), 400, "invalid_config")


def test_an_avro_records_bytes_read_back_as_base64(client: httpx.Client, worker: Worker) -> None:
    schema = {
        "type": "record",
        "name": "Blob",
        "fields": [{"name": "id", "type": "long"}, {"name": "data", "type": "bytes"}],
    }
    client.put(f"{ADMIN}/blobs", json={"schemaType": "avro", "schema": schema})
    Producer(worker.open_store(), "acme/sales/blobs").send({"id": 1, "data": b"\xff\x00"})
    found = client.get(f"{ADMIN}/blobs/examinemessage")
    assert found.status_code == 200, found.text
    assert found.json()["value"] == {"id": 1, "data": base64.b64encode(b"\xff\x00").decode()}


def test_a_nul_character_in_a_path_or_query_is_a_400_on_both_stores(client: httpx.Client) -> None:
    # Found by the OpenAPI fuzz test: PostgreSQL cannot compare text holding
    # a NUL, so a download of such a path was a 500 there (a 404 on SQLite).
    for url in (
        "/admin/v3/functions/download?path=a%00b",
        f"{ADMIN}/a%00b/stats",
        "/admin/v3/functions/public/default/f%00x/status",
    ):
        message = _error(client.get(url), 400, "invalid_request")
        assert "NUL characters are not allowed" in message, message


# --- unsubscribe ----------------------------------------------------------------------

FUNCTION_SUB = "acme/sales/f"  # a function's default subscription name: it holds slashes
FUNCTION_SUB_PATH = "acme%2Fsales%2Ff"


def _plan(store: Store, name: str, topics: list[str], owner: str | None) -> subscription.Plan:
    """What a run's source does first: claim ``name``, create its cursors, plan a batch
    of every message."""
    admin = TopicAdmin(store)
    infos = [admin.get(f"acme/sales/{topic}") for topic in topics]
    ends = {(info.id, s.partition): s.end_offset for info in infos for s in admin.stats(info.name)}
    with store.write() as conn:
        return subscription.plan_batch(
            conn, name, infos, "earliest", epoch=1, spark_start="s", spark_end="e", ends=ends,
            owner=owner,
        )  # fmt: skip


def _cursor_topics(store: Store, name: str) -> set[int]:
    with store.read() as conn:
        return {topic_id for topic_id, _ in subscription.cursors(conn, name)}


def _owner_and_plan(store: Store, name: str) -> tuple[str | None, subscription.Plan | None]:
    with store.read() as conn:
        return subscription.owner_of(conn, name), subscription.read_plan(conn, name)


def test_unsubscribe_removes_one_topics_cursors_then_the_subscription(
    client: httpx.Client, store: Store
) -> None:
    client.put(f"{ADMIN}/in-a/partitions", json=2)
    client.put(f"{ADMIN}/in-b")
    b = TopicAdmin(store).get("acme/sales/in-b").id
    _plan(store, FUNCTION_SUB, ["in-a", "in-b"], owner=FUNCTION_SUB)
    assert client.get(f"{ADMIN}/in-a/subscriptions").json() == [FUNCTION_SUB]

    gone = client.delete(f"{ADMIN}/in-a/subscription/{FUNCTION_SUB_PATH}")
    assert gone.status_code == 204, gone.text
    # Only this topic's cursors went: the subscription still reads in-b, owned and planned.
    assert client.get(f"{ADMIN}/in-a/subscriptions").json() == []
    assert client.get(f"{ADMIN}/in-b/subscriptions").json() == [FUNCTION_SUB]
    assert _cursor_topics(store, FUNCTION_SUB) == {b}
    owner, plan = _owner_and_plan(store, FUNCTION_SUB)
    assert owner == FUNCTION_SUB
    assert plan is not None
    message = _error(
        client.delete(f"{ADMIN}/in-a/subscription/{FUNCTION_SUB_PATH}"),
        404,
        "subscription_not_found",
    )
    assert message == f"topic acme/sales/in-a has no subscription {FUNCTION_SUB!r}"

    # Its last topic: the plan and the owner's claim go with the cursors.
    assert client.delete(f"{ADMIN}/in-b/subscription/{FUNCTION_SUB}").status_code == 204
    assert _cursor_topics(store, FUNCTION_SUB) == set()
    assert _owner_and_plan(store, FUNCTION_SUB) == (None, None)
    assert client.get(f"{ADMIN}/in-b/stats").json()["subscriptions"] == {}

    _error(client.delete(f"{ADMIN}/nope/subscription/x"), 404, "topic_not_found")
    _error(client.delete(f"{ADMIN}/in-b/subscription/x"), 404, "subscription_not_found")
    _error(client.delete(f"{ADMIN}/in-b/subscription/"), 400, "invalid_request")
    _error(
        client.delete(f"{ADMIN}/in-b/subscription/x", params={"force": "maybe"}),
        400,
        "invalid_request",
    )


def test_a_plain_consumers_subscription_is_unsubscribed(
    client: httpx.Client, worker: Worker
) -> None:
    client.put(f"{ADMIN}/events")
    _produce(client, "events", [1, 2, 3], partition=0)
    audit = Consumer(
        worker.open_store(), "acme/sales/events", subscription="audit", initial_position="earliest"
    )
    assert [m.value for m in audit.receive(2)] == [b"1", b"2"]
    audit.acknowledge()
    assert client.delete(f"{ADMIN}/events/subscription/audit").status_code == 204
    assert client.get(f"{ADMIN}/events/subscriptions").json() == []
    # A consumer of the name starts over, as a new subscription does.
    again = Consumer(
        worker.open_store(), "acme/sales/events", subscription="audit", initial_position="earliest"
    )
    assert [m.value for m in again.receive(1)] == [b"1"]


@pytest.mark.parametrize("kind", ["function", "sink"])
def test_unsubscribe_is_refused_while_the_owners_run_is_live_unless_forced(
    client: httpx.Client, store: Store, kind: str
) -> None:
    for topic in ("in-a", "in-b"):
        client.put(f"{ADMIN}/{topic}")
        _produce(client, topic, [1, 2], partition=0)
    owner = control.control_id(kind, "acme/sales/f")
    plan = _plan(store, FUNCTION_SUB, ["in-a", "in-b"], owner=owner)
    control.begin_run(store, owner, kind, 1, "started")
    url = f"{ADMIN}/in-a/subscription/{FUNCTION_SUB_PATH}"

    for state in (control.STARTING, control.RUNNING, control.STOPPING):
        control.set_state(store, owner, state, "test")
        message = _error(client.delete(url), 412, "subscription_busy")
        assert f"{kind} acme/sales/f, which is {state}" in message, message
        assert "acme/sales/in-a" in message
    assert len(_cursor_topics(store, FUNCTION_SUB)) == 2
    _error(client.delete(url, params={"force": "false"}), 412, "subscription_busy")

    forced = client.delete(url, params={"force": "true"})
    assert forced.status_code == 204, forced.text
    assert client.get(f"{ADMIN}/in-a/subscriptions").json() == []
    assert client.get(f"{ADMIN}/in-b/subscriptions").json() == [FUNCTION_SUB]
    # The run's batch in flight read in-a from a cursor that is gone: its commit
    # is discarded, and in-b's cursor stays where the batch started.
    assert [(s.start, s.end) for s in plan.spans] == [(0, 2), (0, 2)]
    with store.write() as conn:
        assert subscription.commit_plan(conn, FUNCTION_SUB, plan.epoch, owner=owner) is None
    b = TopicAdmin(store).get("acme/sales/in-b").id
    with store.read() as conn:
        assert subscription.cursors(conn, FUNCTION_SUB) == {(b, 0): 0}

    # Once the run has ended, no force is needed.
    control.set_state(store, owner, control.STOPPED, "test")
    assert client.delete(f"{ADMIN}/in-b/subscription/{FUNCTION_SUB_PATH}").status_code == 204
    assert _owner_and_plan(store, FUNCTION_SUB) == (None, None)
