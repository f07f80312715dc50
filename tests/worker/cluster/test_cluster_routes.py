"""Pulsar's worker-cluster routes, and a worker's place in its store's cluster."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
from brokers import wait_for
from worker_process import free_port

from sparkfn.runtime.lifecycle import control
from sparkfn.worker.cluster.membership import Membership
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings

CLUSTER = "/admin/v2/worker/cluster"


def _info(worker: Worker) -> dict[str, object]:
    return {"workerId": worker.settings.worker_id, "workerHostname": "127.0.0.1", "port": 6750}


def test_a_worker_is_its_clusters_member_and_leader(worker: Worker, client: httpx.Client) -> None:
    base = str(client.base_url).rstrip("/")
    assert httpx.get(base + CLUSTER).json() == [_info(worker)]
    assert httpx.get(base + CLUSTER + "/leader").json() == _info(worker)


def test_the_cluster_lists_every_live_worker_and_one_leader(
    worker: Worker, client: httpx.Client
) -> None:
    store = worker.open_store()
    if store.dialect == "sqlite":
        return  # one worker only: test_membership covers the refusal of a second
    other = Membership(store, "zz-other", host="10.0.0.2", port=7000, lease=3.0)
    other.start()
    base = str(client.base_url).rstrip("/")
    other_info = {"workerId": "zz-other", "workerHostname": "10.0.0.2", "port": 7000}
    try:
        assert httpx.get(base + CLUSTER).json() == [_info(worker), other_info]
        assert httpx.get(base + CLUSTER + "/leader").json() == _info(worker)
        assert worker.membership is not None and not other.is_leader
        worker.membership.close()  # the leader leaves; the other takes over within a round
        wait_for(
            lambda: httpx.get(base + CLUSTER + "/leader").json() == other_info, "a new leader", 10
        )
        assert httpx.get(base + CLUSTER).json() == [other_info]
    finally:
        other.close()
    answer = httpx.get(base + CLUSTER + "/leader")  # nobody is left
    assert (answer.status_code, answer.json()["reason"]) == (503, "no_leader")


def test_a_second_worker_on_a_sqlite_store_says_so_and_exits(data_dir: Path) -> None:
    settings = WorkerSettings.resolve(data_dir=data_dir, worker_id="first")
    first = Worker(settings)
    first.open()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "sparkfn.cli.main", "--data-dir", str(data_dir),
             "worker", "start", "--port", str(free_port()), "--worker-id", "second"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        first.shutdown()
    assert done.returncode != 0
    assert "is in use by another worker (worker first, pid" in done.stderr, done.stderr
    assert "a SQLite store serves one worker" in done.stderr
    assert "Traceback" not in done.stderr
    again = Worker(settings)  # the first gone, the store takes a worker again
    again.open()
    again.shutdown()


def test_the_assignments_and_a_drain_answer_in_pulsars_shapes(
    worker: Worker, client: httpx.Client
) -> None:
    base = str(client.base_url).rstrip("/") + "/admin/v2/worker"
    assert httpx.get(base + "/assignments").json() == {}
    drain = httpx.put(base + "/drain")
    if worker.open_store().dialect == "sqlite":
        assert (drain.status_code, drain.json()["reason"]) == (409, "not_a_cluster")
        return
    assert drain.status_code == 204
    assert httpx.get(base + "/drain").json() == {"status": "SUCCESS", "lastError": ""}
    assert httpx.get(base + "/leader/drain", params={"workerId": "nobody"}).json()["status"] == (
        "SUCCESS"
    )
    missing = httpx.put(base + "/leader/drain", params={"workerId": "nobody"})
    assert (missing.status_code, missing.json()["reason"]) == (404, "worker_not_found")


def test_a_sqlite_workers_assignments_are_every_run_it_runs(
    worker: Worker, client: httpx.Client
) -> None:
    """No leader assigns a SQLite store's one worker its runs: the route lists what runs."""
    store = worker.open_store()
    if store.dialect != "sqlite":
        return  # the leader's assignment rows answer there (test_cluster_workers)
    base = str(client.base_url).rstrip("/") + "/admin/v2/worker/assignments"
    control.begin_run(store, "public/default/two", "function", 2, "started")
    control.begin_run(store, "sink:public/default/one", "sink", 1, "started")
    ended = control.begin_run(store, "public/default/gone", "function", 1, "started")
    control.set_state(store, "public/default/gone", control.RUNNING, "running")
    control.set_state(store, "public/default/gone", control.STOPPING, "stop requested")
    control.set_state(store, "public/default/gone", control.STOPPED, "stopped by user")
    me = worker.settings.worker_id
    assert ended and httpx.get(base).json() == {
        me: ["public/default/two:0", "public/default/two:1", "sink:public/default/one:0"]
    }
