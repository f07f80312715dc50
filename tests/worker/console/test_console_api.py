"""The REST routes the console reads beside Pulsar's, over HTTP on a real store (both backends).

A listing of every function a page at a time, searched and filtered by
state; a function's lifecycle record; the worker's facts; Pulsar's tenant
and namespace lists. And the console's page and files, public like /docs.
"""

from __future__ import annotations

import time

import httpx

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.lifecycle import control
from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.topics.admin import TopicAdmin
from sparkfn.worker.registry import Registry
from sparkfn.worker.service import Worker


def _register(worker: Worker, fqfn: str) -> None:
    tenant, namespace, name = fqfn.split("/")
    config = FunctionConfig(
        tenant=tenant, namespace=namespace, name=name, inputs=["in"], classname="m.F", parallelism=2
    )
    Registry(worker.open_store()).create(config, package_digest=None, who="test")


def _run_row(worker: Worker, fqfn: str, state: str, instance_state: str | None = None) -> None:
    """A run row as the supervisor writes it, so the listing has a run state to show
    (a parked run's instances stay ``RUNNING``: ``instance_state``)."""
    now = utc_now()
    with worker.open_store().write() as conn:
        conn.execute(
            schema.function_runs.insert().values(
                fqfn=fqfn,
                kind="function",
                state=state,
                cause="test",
                epoch=1,
                parallelism=2,
                stop_mode=None,
                drain_target=None,
                final_seq=0,
                final_committed=0,
                restarts=0,
                updated_at=now,
            )
        )
        for instance in range(2):
            conn.execute(
                schema.function_instance_runs.insert().values(
                    fqfn=fqfn,
                    instance_id=instance,
                    state=instance_state or state,
                    cause="test",
                    epoch=1,
                    restarts=0,
                    fatal_exceptions=0,
                    dead=False,
                    handled=False,
                    fatal=False,
                    updated_at=now,
                )
            )


def test_the_listing_pages_searches_and_filters_every_function(
    worker: Worker, client: httpx.Client
) -> None:
    for i in range(120):
        _register(worker, f"public/default/fn-{i:03d}")
    _register(worker, "acme/orders/enrich")
    _run_row(worker, "public/default/fn-001", "RUNNING")
    _run_row(worker, "public/default/fn-002", "PARKED", instance_state="RUNNING")
    _run_row(worker, "public/default/fn-003", "ERROR")

    first = client.get("/admin/v3/functions", params={"limit": 50}).json()
    assert first["total"] == 121
    assert len(first["functions"]) == 50
    assert first["functions"][0]["fqfn"] == "acme/orders/enrich"
    assert first["states"] == {"CREATED": 118, "RUNNING": 1, "PARKED": 1, "ERROR": 1}
    last = client.get("/admin/v3/functions", params={"offset": 100, "limit": 50}).json()
    assert [f["name"] for f in last["functions"]] == [f"fn-{i:03d}" for i in range(99, 120)]

    found = client.get("/admin/v3/functions", params={"search": "FN-00"}).json()
    assert [f["name"] for f in found["functions"]] == [f"fn-00{i}" for i in range(10)]
    fn = {f["name"]: f for f in found["functions"]}
    assert fn["fn-001"]["state"] == "RUNNING"
    assert [i["state"] for i in fn["fn-001"]["instances"]] == ["RUNNING", "RUNNING"]
    assert fn["fn-002"]["state"] == "PARKED"
    assert fn["fn-000"] | {"instances": []} == {
        "fqfn": "public/default/fn-000",
        "tenant": "public",
        "namespace": "default",
        "name": "fn-000",
        "version": 1,
        "desired": "running",
        "state": "CREATED",
        "parallelism": 2,
        "instances": [],
    }
    acme = client.get("/admin/v3/functions", params={"namespace": "acme/orders"}).json()
    assert [f["fqfn"] for f in acme["functions"]] == ["acme/orders/enrich"]
    assert client.get("/admin/v3/functions", params={"namespace": "acme"}).status_code == 400
    errors = client.get("/admin/v3/functions", params={"state": "ERROR"}).json()

    assert [f["fqfn"] for f in errors["functions"]] == ["public/default/fn-003"]
    assert errors["total"] == 1
    # A search is a substring, not a pattern: '%' and '_' are plain characters.
    assert client.get("/admin/v3/functions", params={"search": "fn_0"}).json()["total"] == 0

    bad = client.get("/admin/v3/functions", params={"state": "running"})
    assert bad.status_code == 400
    assert bad.json()["reason"] == "invalid_request"
    assert "state" in bad.json()["message"]
    assert client.get("/admin/v3/functions", params={"limit": 501}).status_code == 400


def test_tenants_namespaces_lifecycle_record_and_worker_facts(
    worker: Worker, client: httpx.Client
) -> None:
    _register(worker, "acme/orders/enrich")
    TopicAdmin(worker.open_store()).create("billing/invoices/sent")
    # public/default always exists, as in Pulsar.
    assert client.get("/admin/v2/tenants").json() == ["acme", "billing", "public"]
    assert client.get("/admin/v2/namespaces/billing").json() == ["billing/invoices"]
    nobody = client.get("/admin/v2/namespaces/nobody")
    assert (nobody.status_code, nobody.json()["reason"]) == (404, "tenant_not_found")

    assert client.get("/admin/v3/functions/acme/orders/enrich/transitions").json() == []
    with worker.open_store().write() as conn:
        conn.execute(
            schema.function_transitions.insert().values(
                fqfn="acme/orders/enrich",
                instance_id=control.FUNCTION,
                from_state="CREATED",
                to_state="STARTING",
                cause="start",
                at=utc_now(),
            )
        )
    [step] = client.get("/admin/v3/functions/acme/orders/enrich/transitions").json()
    assert (step["instance"], step["fromState"], step["toState"], step["cause"]) == (
        None,
        "CREATED",
        "STARTING",
        "start",
    )
    missing = client.get("/admin/v3/functions/acme/orders/gone/transitions")
    assert missing.status_code == 404
    assert missing.json()["reason"] == "function_not_found"

    info = client.get("/admin/v3/worker").json()
    assert info["workerId"] == worker.settings.worker_id
    assert info["version"] == "0.1.0"
    assert info["sparkMaster"] == worker.settings.spark_master
    assert info["sparkVersion"] is None  # no function ran: this worker has not started Spark
    assert info["store"] in ("sqlite", "postgresql")
    assert info["functionsByState"] == {"CREATED": 1}
    assert 0 <= info["uptimeSeconds"] < time.time() - worker.started_at + 1


def test_the_page_and_its_files_are_served_and_nothing_else(client: httpx.Client) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assets = [part.split('"')[0] for part in page.text.split('="/console/assets/')[1:]]
    assert len(assets) == 2, page.text  # the script and the stylesheet
    for asset in assets:
        served = client.get(f"/console/assets/{asset}")
        assert served.status_code == 200
        assert "max-age" in served.headers["cache-control"]
    for bad in ("nothing.js", "..%2Findex.html", ".hidden"):
        missing = client.get(f"/console/assets/{bad}")
        assert missing.status_code == 404, bad
    # Nothing from a network: the page names no other host.
    assert "http" not in page.text
