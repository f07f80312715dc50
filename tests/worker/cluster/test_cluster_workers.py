"""Three ``sparkfn worker start`` processes over one PostgreSQL database: a real cluster.

The module starts three workers (``w0``, ``w1``, ``w2``; ``local[1]``, a
6 s lease) on a database of its own, created here and dropped after, and a
shared data directory, and its tests run in order on that one cluster, each
leaving it smaller: a REST call to one worker stops, starts and restarts a
function that runs on another; a rebalance and ``sparkfn worker drain`` hand
two functions over from a live worker with no batch refused (one of them
``at_least_once``, with no output repeated either); a worker paused past its lease (SIGSTOP) loses
its function to another and, resumed, commits nothing and stops its stale
run; the PostgreSQL server restarted under the cluster (two functions
streaming) leaves every function running again; a worker SIGKILLed mid-stream has its function run elsewhere within
30 s; the leader SIGKILLed is replaced within 10 s with the assignment
intact. Under ``effectively_once`` every input has exactly one output
throughout. The measured failover times are printed (``-s``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy import select, update
from worker_process import SHARED_ENV, WorkerProcess, topic_counts

from sparkfn.store.cluster_schema import cluster_leader, cluster_workers
from sparkfn.store.schema import function_runs
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from sparkfn.worker.cluster.members import owner
from sparkfn.worker.cluster.membership import DEFAULT_CAPACITY
from waiting import until

SERVER = "postgresql://postgres@127.0.0.1:5432"
ECHO = Path(__file__).resolve().parents[2] / "runtime" / "funcs" / "named_echo.py"
BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"
# 6 s, not the 3 s the failover figures in docs/cluster.md were measured with: on a loaded
# two-core CI box a worker's Python can starve for seconds (three xdist workers' JVMs
# starting), and a real lapse moves a run off a live worker by a fence, not a hand-over,
# failing the drain test that is not about the lease (its at_least_once outputs may repeat).
# The failover tests still see a lease run out, a little later (their limits hold).
LEASE = 6.0
WORKERS = 3

# One xdist worker runs the module, in order, on its one cluster, in the brokers' group:
# beside the brokers' tests its three workers' JVMs made a hand-over miss 180 s under
# the full suite. Its PostgreSQL restart runs only when asked
# (SPARKFN_TESTS_RESTART_POSTGRES=1, as the brokers' tests' does): every other test on
# the suite's other workers uses that server too.
pytestmark = [pytest.mark.long_running(600), pytest.mark.xdist_group("brokers")]


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """A PostgreSQL database of this module's own, dropped after it."""
    name = f"sparkfn_cluster_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{SERVER}/{name}"
    finally:
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class Cluster:
    """The module's workers by id, and a store of the test's own on their database."""

    workers: dict[str, WorkerProcess]
    store: Store
    gone: set[str] = field(default_factory=set)
    # Every feed started, stopped with the module at the latest (a failed test's too).
    feeds: list[Feed] = field(default_factory=list)

    def live(self) -> dict[str, WorkerProcess]:
        return {k: w for k, w in self.workers.items() if k not in self.gone}

    def get(self, path: str, via: str | None = None) -> Any:
        worker = self.live()[via] if via else next(iter(self.live().values()))
        response = httpx.get(worker.url + path, timeout=30)
        response.raise_for_status()
        return response.json()

    def owner(self, name: str) -> str | None:
        found = owner(self.store, f"public/default/{name}")
        return found[0] if found is not None else None

    def running_on(self, worker_id: str) -> list[str]:
        """What the worker's own process runs (not the assignment: its runs)."""
        url = self.workers[worker_id].url + "/admin/v2/worker-stats/functionsmetrics"
        return [m["name"].rsplit(":", 1)[0] for m in httpx.get(url, timeout=30).json()]

    def leader(self) -> str | None:
        try:
            return str(self.get("/admin/v2/worker/cluster/leader")["workerId"])
        except httpx.HTTPStatusError:
            return None


@pytest.fixture(scope="module")
def cluster(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    data_dir = tmp_path_factory.mktemp("cluster") / "data"
    data_dir.mkdir()
    env = {
        **SHARED_ENV,
        "SPARKFN_WORKER_LEASE": str(LEASE),
        "SPARKFN_WORKER_PARK_IDLE_AFTER": "0",
        "SPARKFN_WORKER_SHUTDOWN_TIMEOUT": "10",
    }
    workers = {
        f"w{i}": WorkerProcess(data_dir, database, env={**env, "SPARKFN_WORKER_WORKER_ID": f"w{i}"})
        for i in range(WORKERS)
    }
    try:
        for worker in workers.values():
            worker.start(timeout=180)
        for worker in workers.values():
            worker.wait_ready(timeout=300)
        store = Store.open(database, data_dir)
        cluster = Cluster(workers, store)
        yield cluster
        for feed in cluster.feeds:
            feed.stop()
        store.close()
    finally:
        for worker in workers.values():
            if worker.proc is not None:
                worker.proc.send_signal(signal.SIGCONT)
                worker.stop(signal.SIGKILL)


def _create(
    worker: WorkerProcess, name: str, topic: str, guarantee: str = "EFFECTIVELY_ONCE"
) -> None:
    config = {
        "inputs": [topic],
        "output": f"{topic}-out",
        "className": "named_echo.NamedEcho",
        "processingGuarantees": guarantee,
        "subscriptionPosition": "Earliest",
    }
    with ECHO.open("rb") as code, worker.client() as client:
        response = client.post(
            f"/public/default/{name}",
            data={"functionConfig": json.dumps(config)},
            files={"data": (ECHO.name, code, "text/x-python")},
        )
    assert response.status_code == 200, response.text


class Feed:
    """A steady producer of ``m0, m1, ...`` to a topic, on a thread."""

    def __init__(self, store: Store, topic: str) -> None:
        self.producer = Producer(store, topic)
        self.sent: list[str] = []
        self._stop = threading.Event()
        # Held while a batch is sent: whoever takes it stops the feed between two batches.
        self.sending = threading.Lock()
        self._thread = threading.Thread(target=self._feed, daemon=True)
        self._thread.start()

    def _feed(self) -> None:
        while not self._stop.is_set():
            with self.sending:
                values = [f"m{i}" for i in range(len(self.sent), len(self.sent) + 5)]
                self.producer.send_batch([Message(v.encode()) for v in values])
                self.sent.extend(values)
            time.sleep(0.1)

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(30)
        return self.sent


def _outputs(cluster: Cluster, topic: str) -> int:
    return sum(topic_counts(cluster.store, f"{topic}-out").values())


def _stream(cluster: Cluster, name: str, guarantee: str = "EFFECTIVELY_ONCE") -> tuple[str, Feed]:
    """A function ``name`` running on some worker over a steady feed; returns its owner."""
    topic = f"in-{name}"
    admin = TopicAdmin(cluster.store)
    admin.create(topic, schema_type="string")
    admin.create(f"{topic}-out", schema_type="string")
    _create(next(iter(cluster.live().values())), name, topic, guarantee)
    feed = Feed(cluster.store, topic)
    cluster.feeds.append(feed)
    until(lambda: _outputs(cluster, topic) >= 20, f"{name}'s first outputs", 180)
    found = cluster.owner(name)
    assert found is not None
    return found, feed


def _exactly_once(cluster: Cluster, name: str, feed: Feed) -> None:
    """Every input the feed sent has exactly one output, in the end."""
    sent = feed.stop()
    topic = f"in-{name}"
    expected = {f"{name}:{v}" for v in sent}

    def said() -> str:
        status = _status(cluster, name, next(iter(cluster.live())))
        return f"{len(sent)} outputs of {name}: {_outputs(cluster, topic)} so far; {status}"

    until(lambda: _outputs(cluster, topic) >= len(sent), said, 180)
    counts = topic_counts(cluster.store, f"{topic}-out")
    assert set(counts) == expected
    repeated = {v: n for v, n in counts.items() if n != 1}
    assert not repeated, f"repeated outputs: {sorted(repeated.items())[:10]}"


def _status(cluster: Cluster, name: str, via: str) -> dict[str, Any]:
    found: dict[str, Any] = cluster.get(f"/admin/v3/functions/public/default/{name}/status", via)
    return found


def _running(cluster: Cluster, name: str, via: str) -> bool:
    return bool(_status(cluster, name, via)["numRunning"] == 1)


def test_a_rest_call_to_one_worker_controls_a_function_on_another(cluster: Cluster) -> None:
    wait = partial(until, timeout=120)
    topic = "in-ctl"
    TopicAdmin(cluster.store).create(topic, schema_type="string")
    _create(cluster.workers["w0"], "ctl", topic)
    runner = wait(lambda: cluster.owner("ctl"), "ctl assigned")
    wait(lambda: "public/default/ctl" in cluster.running_on(runner), f"ctl running on {runner}")
    other = next(w for w in cluster.live() if w != runner)
    # Any worker shows the owner as each instance's worker.
    for via in cluster.live():
        instances = _status(cluster, "ctl", via)["instances"]
        assert [i["status"]["workerId"] for i in instances] == [runner]
    assignments = cluster.get("/admin/v2/worker/assignments", other)
    assert "public/default/ctl:0" in assignments[runner]

    base = f"{cluster.workers[other].url}/admin/v3/functions/public/default/ctl"
    assert httpx.post(f"{base}/stop", timeout=120).status_code == 204
    wait(lambda: "public/default/ctl" not in cluster.running_on(runner), f"ctl stopped on {runner}")
    wait(lambda: not _running(cluster, "ctl", other), "ctl stopped in its status")

    assert httpx.post(f"{base}/start", timeout=120).status_code == 204
    started = wait(lambda: cluster.owner("ctl"), "ctl placed again")
    wait(lambda: "public/default/ctl" in cluster.running_on(started), f"ctl running on {started}")
    epoch = _run_epoch(cluster, "public/default/ctl")
    caller = next(w for w in cluster.live() if w != started)
    restart = f"{cluster.workers[caller].url}/admin/v3/functions/public/default/ctl/restart"
    assert httpx.post(restart, timeout=120).status_code == 204
    wait(lambda: _run_epoch(cluster, "public/default/ctl") > epoch, "ctl restarted: a new run")
    wait(lambda: _running(cluster, "ctl", caller), "ctl running after its restart")
    assert cluster.owner("ctl") == started  # restarted where it runs, not moved
    with cluster.workers[caller].client() as client:
        assert client.delete("/public/default/ctl").status_code == 200
    wait(lambda: cluster.owner("ctl") is None, "ctl's assignment gone")


def _run_epoch(cluster: Cluster, control_id: str) -> int:
    with cluster.store.read() as conn:
        found = conn.execute(
            function_runs.select().where(function_runs.c.fqfn == control_id)
        ).first()
    return int(found.epoch) if found is not None else 0


def _capacity(cluster: Cluster, worker_ids: list[str], capacity: int) -> None:
    """Give workers room (or none) as a drain does: the leader's next round acts on it."""
    with cluster.store.write() as conn:
        conn.execute(
            update(cluster_workers)
            .where(cluster_workers.c.worker_id.in_(worker_ids))
            .values(capacity=capacity)
        )


def test_a_drained_worker_hands_its_functions_over_with_no_batch_refused(
    cluster: Cluster,
) -> None:
    """Two functions, one ``effectively_once`` and one ``at_least_once``, run on one worker
    (the others given no room while they are placed). Room given back, a rebalance moves
    one of them to another live worker (as a join does); ``sparkfn worker drain`` then
    moves the other. Each move is a hand-over: the worker it leaves suspends the run
    (committing its batch in flight) and the new owner starts it once that run has
    ended, so no batch is refused and redone, and under ``at_least_once`` too every input
    has exactly one output."""
    drained, *others = cluster.live()
    _capacity(cluster, others, 0)
    try:
        streams = {
            name: _stream(cluster, name, guarantee)
            for name, guarantee in (("drained", "EFFECTIVELY_ONCE"), ("alo", "ATLEAST_ONCE"))
        }
    finally:
        _capacity(cluster, others, DEFAULT_CAPACITY)  # room again: one function moves
    assert {owner for owner, _ in streams.values()} == {drained}
    marks = {w: len(p.output()) for w, p in cluster.live().items()}
    until(
        lambda: sum(cluster.owner(name) != drained for name in streams) == 1,
        "one function moved to a worker given room",
        30,
    )
    command = [sys.executable, "-m", "sparkfn.cli.main", "worker", "drain"]
    command += ["--url", cluster.workers[others[0]].url, "--worker-id", drained]
    done = subprocess.run(
        [*command, "--timeout", "90"], capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"drained worker {drained}" in done.stdout
    for name in streams:
        taker = cluster.owner(name)
        assert taker not in (None, drained)
        before = _outputs(cluster, f"in-{name}")

        def said(name: str = name, taker: str = taker) -> str:  # should it not go on
            tail = cluster.workers[taker].output()[-3000:]
            return f"outputs from {taker}; {_status(cluster, name, taker)}; its log: {tail}"

        until(lambda name=name, n=before: _outputs(cluster, f"in-{name}") > n, said, 180)
    progress = cluster.get(f"/admin/v2/worker/drain?workerId={drained}", drained)
    assert progress == {"status": "SUCCESS", "lastError": ""}
    for name, (_, feed) in streams.items():
        _exactly_once(cluster, name, feed)
    for worker_id, process in cluster.live().items():  # no run fenced, no batch refused
        logs = process.output()[marks[worker_id] :]
        # Every refusal names the newer run's epoch ("replaced by a newer run (epoch 3)",
        # "refused: a newer run (epoch 3) owns the function"); a worker's own notice that it
        # was out of its cluster for a moment (a late heartbeat on a loaded box, nothing
        # moved) says "newer run epochs" and refuses nothing: it failed this test under load.
        assert "newer run (epoch" not in logs, f"{worker_id} refused a batch: {logs[-3000:]}"
        said = ("is handed over here", "no longer assigned to it", " runs public/default/")
        print(
            f"\n{worker_id}:",
            *(line for line in logs.splitlines() if any(w in line for w in said)),
            sep="\n",
        )


def test_a_paused_worker_loses_its_function_commits_nothing_and_rejoins(cluster: Cluster) -> None:
    paused, feed = _stream(cluster, "paused")
    process = cluster.workers[paused]
    assert process.proc is not None
    topic = "in-paused"
    process.proc.send_signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        taker = until(
            lambda: (found := cluster.owner("paused")) != paused and found,
            "the paused worker's function assigned to another",
            60,
        )
        before = _outputs(cluster, topic)
        until(lambda: _outputs(cluster, topic) > before, f"outputs from {taker}", 60)
        print(
            f"\nSIGSTOP: the function ran again on {taker} {time.monotonic() - stopped_at:.1f} s later"
        )
    finally:
        process.proc.send_signal(signal.SIGCONT)
    # Resumed: it finds itself out, its stale run stops without committing, it rejoins
    # (and may be given the function back by the rebalance: a new run, in a new epoch).
    fenced = "public/default/paused: run epoch 1 was replaced by a newer run"
    until(lambda: fenced in process.output(), "its stale run fenced", 90)
    until(
        lambda: paused in {w["workerId"] for w in cluster.get("/admin/v2/worker/cluster")},
        "the paused worker back in the cluster",
        60,
    )
    assert "out of its cluster" in process.output()
    until(lambda: cluster.owner("paused"), "the function assigned", 30)
    _exactly_once(cluster, "paused", feed)


def _restart_postgresql() -> float:
    """Restart the PostgreSQL server (``benchmarks/connectors.py``'s restart, as the broker
    restart tests do); the seconds from the stop to its first answer."""
    spec = importlib.util.spec_from_file_location("bench_connectors", BENCHMARKS / "connectors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.append(str(BENCHMARKS))  # its _common
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    took: float = module.restart_broker("postgres")
    return took


def test_postgresql_restarted_under_the_cluster_loses_nothing(cluster: Cluster) -> None:
    if os.environ.get("SPARKFN_TESTS_RESTART_POSTGRES") != "1":
        pytest.skip("restarts the PostgreSQL server the suite's stores use; "
                    "SPARKFN_TESTS_RESTART_POSTGRES=1 runs it")  # fmt: skip
    streams = {name: _stream(cluster, name) for name in ("pga", "pgb")}  # name: (owner, feed)
    term = _term(cluster)
    with contextlib.ExitStack() as held:  # no input is sent while the server is down
        for _, feed in streams.values():
            held.enter_context(feed.sending)
        took = _restart_postgresql()
    restarted_at = time.monotonic()
    print(f"\nPostgreSQL restarted: down {took:.1f} s")
    # Every worker is a member again, one leads, and each function runs and commits again.
    until(lambda: len(cluster.get("/admin/v2/worker/cluster")) == WORKERS, "3 members", 120)
    until(cluster.leader, "a leader", 60)
    for name in streams:
        _flows_again(cluster, name)
    print(
        f"PostgreSQL restart: outputs again {time.monotonic() - restarted_at:.1f} s after; "
        f"leader term {term} -> {_term(cluster)}; owners {[o for o, _ in streams.values()]} -> "
        f"{[cluster.owner(name) for name in streams]}"
    )
    for name, (_, feed) in streams.items():
        _exactly_once(cluster, name, feed)


def _flows_again(cluster: Cluster, name: str) -> None:
    """``name`` commits new outputs and is RUNNING."""
    before = _outputs(cluster, f"in-{name}")
    until(lambda: _outputs(cluster, f"in-{name}") > before, f"{name}'s outputs again", 180)
    until(lambda: _running(cluster, name, next(iter(cluster.live()))), f"{name} RUNNING", 60)


def _term(cluster: Cluster) -> int:
    with cluster.store.read() as conn:
        return int(conn.execute(select(cluster_leader.c.term)).scalar_one())


def test_a_killed_workers_function_runs_elsewhere_within_30_s(cluster: Cluster) -> None:
    victim, feed = _stream(cluster, "moved")
    topic = "in-moved"
    cluster.workers[victim].stop(signal.SIGKILL)
    killed_at = time.monotonic()
    cluster.gone.add(victim)
    taker = until(
        lambda: (found := cluster.owner("moved")) != victim and found,
        "the killed worker's function assigned to another",
        30,
    )
    before = _outputs(cluster, topic)
    until(lambda: _outputs(cluster, topic) > before, f"outputs from {taker}", 30)
    took = time.monotonic() - killed_at
    print(f"\nSIGKILL: the function ran again on {taker} {took:.1f} s later")
    assert took < 30
    _exactly_once(cluster, "moved", feed)


def test_a_killed_leader_is_replaced_within_10_s_and_the_assignment_stays(
    cluster: Cluster,
) -> None:
    leader = until(cluster.leader, "a leader", 30)
    kept = {
        name: found
        for name in ("paused", "moved")
        if (found := cluster.owner(name)) is not None and found != leader
    }
    cluster.workers[leader].stop(signal.SIGKILL)
    killed_at = time.monotonic()
    cluster.gone.add(leader)
    until(lambda: (found := cluster.leader()) is not None and found != leader, "a new leader", 10)
    print(f"\nSIGKILL of the leader: a new leader {time.monotonic() - killed_at:.1f} s later")
    for name, worker_id in kept.items():
        assert cluster.owner(name) == worker_id
