"""pulsar-admin's admin surface on the shared worker, typed as a Pulsar user types it
(issue 38, point 10).

Tenants and namespaces (``tenants``/``namespaces`` commands and their REST
routes), rewinding a function's subscription (``functions stop``, ``topics
reset-cursor``, ``functions start``) with ``topics stats``, ``subscriptions``
and ``peek-messages`` along the way, a restart starting the stats from zero,
and the worker's ``functions/connectors`` and ``worker-stats`` routes.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from test_admin_cli import Sparkfn
from worker_process import SharedWorker

from waiting import until

pytestmark = pytest.mark.slow


def _cli(worker: SharedWorker) -> Sparkfn:
    """The CLI on the worker, its topics commands on the worker's store."""
    cli = Sparkfn(worker.url, worker.data_dir)
    cli.env["SPARKFN_STORE_URL"] = worker.process.store_url
    return cli


EXCLAIM = Path(__file__).resolve().parents[2] / "examples" / "exclamation.py"
IN = "persistent://public/default/rewind-in"
OUT = "persistent://public/default/rewind-out"
SUB = "public/default/rewinder"  # a function's subscription: tenant/namespace/name
TARGET = ("--tenant", "public", "--namespace", "default", "--name", "rewinder")


def test_tenants_and_namespaces_as_pulsar_admin_has_them(shared_worker: SharedWorker) -> None:
    cli = _cli(shared_worker)
    assert "public" in cli.ok("tenants", "list").stdout.splitlines()
    cli.ok("tenants", "create", "acme", "--admin-roles", "alice", "--allowed-clusters", "c1")
    assert json.loads(cli.ok("tenants", "get", "acme").stdout) == {
        "adminRoles": ["alice"],
        "allowedClusters": ["c1"],
    }
    cli.fail("tenant_already_exists", "tenants", "create", "acme")
    cli.ok("namespaces", "create", "acme/sales")
    assert cli.ok("namespaces", "list", "acme").stdout == "acme/sales\n"
    cli.fail("not_empty", "tenants", "delete", "acme")
    cli.ok("topics", "create", "persistent://acme/sales/orders")
    assert cli.ok("namespaces", "topics", "acme/sales").stdout == (
        "persistent://acme/sales/orders\n"
    )
    cli.fail("not_empty", "namespaces", "delete", "acme/sales")
    cli.ok("topics", "delete", "persistent://acme/sales/orders", "--yes")
    cli.ok("namespaces", "delete", "acme/sales")
    cli.ok("tenants", "delete", "acme")
    cli.fail("tenant_not_found", "tenants", "get", "acme")
    cli.fail("tenant_not_found", "namespaces", "create", "nobody/ns")
    # A sink's or source's registry key never shows as a tenant.
    with httpx.Client(base_url=shared_worker.url) as client:
        tenants = client.get("/admin/v2/tenants").json()
    assert all(":" not in tenant for tenant in tenants), tenants


def test_a_function_is_rewound_with_reset_cursor_and_restart_zeroes_its_stats(
    shared_worker: SharedWorker,
) -> None:
    cli = _cli(shared_worker)
    cli.ok("topics", "create-partitioned-topic", IN, "-p", "2")
    cli.ok("topics", "produce", IN, "-m", "a,b,c")
    cli.ok(
        "functions", "create", *TARGET, "--py", str(EXCLAIM), "--classname", "exclamation",
        "--inputs", IN, "--output", OUT, "--subs-position", "Earliest",
    )  # fmt: skip

    def outputs() -> list[str]:
        ran = cli.ok("topics", "consume", OUT, "--json", "--position", "earliest")
        return sorted(json.loads(line)["value"] for line in ran.stdout.splitlines() if line)

    until(lambda: outputs() == ["a!", "b!", "c!"], lambda: f"outputs {outputs()}", 240)
    assert cli.ok("topics", "subscriptions", IN).stdout == f"{SUB}\n"
    stats = json.loads(cli.ok("topics", "stats", IN).stdout)
    assert (stats["msgInCounter"], stats["subscriptions"][SUB]["msgBacklog"]) == (3, 0)
    listed = cli.ok("topics", "list", "public/default").stdout.splitlines()
    assert {f"{IN}-partition-0", f"{IN}-partition-1", OUT} <= set(listed)

    # While the function runs, its cursor is not moved under it.
    cli.fail("subscription_busy", "topics", "reset-cursor", IN, "-s", SUB, "-m", "earliest")
    cli.ok("functions", "stop", *TARGET)
    until(
        lambda: cli.run("topics", "reset-cursor", IN, "-s", SUB, "-m", "earliest").returncode == 0,
        "the stopped function's subscription to reset",
        120,
    )
    peeked = cli.ok("topics", "peek-messages", IN, "-s", SUB, "-n", "3").stdout
    assert peeked.count("Message ID: ") == 3 and "|00000000| 61 " in peeked
    assert json.loads(cli.ok("topics", "stats", IN).stdout)["subscriptions"][SUB] == {
        "msgBacklog": 3
    }
    cli.ok("functions", "start", *TARGET)
    until(lambda: len(outputs()) == 6, lambda: f"outputs after the rewind {outputs()}", 240)
    assert outputs() == ["a!", "a!", "b!", "b!", "c!", "c!"]

    # Pulsar's restart starts an instance's stats from zero.
    def processed() -> int:
        body = json.loads(cli.ok("functions", "stats", *TARGET).stdout)
        return int(body["processedSuccessfullyTotal"])

    until(lambda: processed() == 6, lambda: f"{processed()} processed, not 6", 120)
    cli.ok("functions", "restart", *TARGET)
    assert processed() == 0
    cli.ok("functions", "delete", *TARGET)


def test_connectors_and_worker_stats_routes(shared_worker: SharedWorker) -> None:
    with httpx.Client(base_url=shared_worker.url, timeout=60) as client:
        connectors = client.get("/admin/v3/functions/connectors")
        assert connectors.status_code == 200, connectors.text
        by_name = {c["name"]: c for c in connectors.json()}
        assert by_name["rabbitmq"]["sourceClass"] and by_name["rabbitmq"]["sinkClass"]
        stats = client.get("/admin/v2/worker-stats/functionsmetrics")
        assert stats.status_code == 200, stats.text
        assert all(":" in one["name"] and "receivedTotal" in one["metrics"] for one in stats.json())
        metrics = client.get("/admin/v2/worker-stats/metrics")
        assert metrics.status_code == 200, metrics.text
        assert any(
            name.startswith("sparkfn_worker_") for m in metrics.json() for name in m["metrics"]
        )


def test_tenants_update_and_partitioned_stats_as_pulsar_admin_has_them(
    shared_worker: SharedWorker,
) -> None:
    cli = _cli(shared_worker)
    cli.ok("tenants", "create", "acme2", "-r", "alice", "-c", "c1")
    # pulsar-admin's update: what is not given stays as it is.
    cli.ok("tenants", "update", "acme2", "--admin-roles", "alice,bob")
    assert json.loads(cli.ok("tenants", "get", "acme2").stdout) == {
        "adminRoles": ["alice", "bob"],
        "allowedClusters": ["c1"],
    }
    cli.ok("tenants", "update", "acme2", "-c", "c2")
    assert json.loads(cli.ok("tenants", "get", "acme2").stdout) == {
        "adminRoles": ["alice", "bob"],
        "allowedClusters": ["c2"],
    }
    cli.fail("tenant_not_found", "tenants", "update", "nosuch", "-r", "x")
    with httpx.Client(base_url=shared_worker.url, timeout=60) as client:
        empty = {"adminRoles": [], "allowedClusters": []}
        assert client.post("/admin/v2/tenants/acme2", json=empty).status_code == 204
        assert client.get("/admin/v2/tenants/acme2").json() == empty
        missing = client.post("/admin/v2/tenants/nosuch", json=empty)
        assert (missing.status_code, missing.json()["reason"]) == (404, "tenant_not_found")
    cli.ok("tenants", "delete", "acme2")

    topic = "persistent://public/default/pstats"
    cli.ok("topics", "create-partitioned-topic", topic, "-p", "2")
    cli.ok("topics", "produce", topic, "-m", "a,b,c")
    whole = json.loads(cli.ok("topics", "partitioned-stats", topic).stdout)
    assert whole["metadata"] == {"partitions": 2}
    assert (whole["msgInCounter"], whole["partitions"]) == (3, {})
    each = json.loads(cli.ok("topics", "partitioned-stats", topic, "--per-partition").stdout)
    assert sorted(each["partitions"]) == [f"{topic}-partition-0", f"{topic}-partition-1"]
    assert sum(p["msgInCounter"] for p in each["partitions"].values()) == 3
    with httpx.Client(base_url=shared_worker.url, timeout=60) as client:
        path = "/admin/v2/persistent/public/default/pstats/partitioned-stats"
        assert client.get(path, params={"perPartition": "false"}).json()["partitions"] == {}
        assert sorted(client.get(path).json()["partitions"]) == sorted(each["partitions"])
