"""A worker on a Spark standalone cluster that ``sparkfn cluster up`` started: every message once.

Issue 37's acceptance: the worker suite's core cases on a Spark standalone
cluster started by the test. One test, one cluster (the whole cost is two
JVMs for the cluster, the worker's driver and one executor, on two cores):

1. ``sparkfn cluster up`` (one Spark worker, one core, 512 MB) and
   ``cluster status --json``; a second ``up`` is refused.
2. ``sparkfn worker start`` on a fresh PostgreSQL schema with
   ``SPARKFN_WORKER_SPARK_MASTER`` set to the cluster's master; ``/health``
   names it.
3. Through the REST API, under ``effectively_once``: create, produce, every
   output and state counter exactly once; stop, produce, start: still
   exactly once; update to a new version (parallelism 2); delete.
4. The tasks ran in the executor the cluster's worker launched (its
   application directory holds an executor log with finished tasks), so the
   test cannot pass by running Spark locally.
5. The worker stops; ``sparkfn cluster down`` leaves no process of the
   cluster (daemons, executors, Python workers); a second ``down`` is a no-op.

The refusals that start no JVM (Java missing, a port taken, a bad size) are
separate tests.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from worker_process import WorkerProcess, free_port, topic_counts

from sparkfn.runtime.spark.standalone import Cluster, Daemon
from sparkfn.state.store import all_state
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from waiting import until

COUNTER = Path(__file__).resolve().parents[1] / "runtime" / "funcs" / "guarantee_counter.py"
NAME = "counter"
CONFIG = {
    "inputs": ["in"],
    "output": "out",
    "processingGuarantees": "EFFECTIVELY_ONCE",
    "subscriptionPosition": "Earliest",
    "className": "guarantee_counter.GuaranteeCounter",
}
TIMEOUT = 180.0  # for outputs, states and process ends on a loaded two-core machine
wait = functools.partial(until, timeout=TIMEOUT, every=0.5)


def _sparkfn(data_dir: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sparkfn.cli.main", "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _said(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"


@pytest.fixture
def spark_conf(tmp_path: Path) -> Path:
    """A ``SPARK_CONF_DIR`` for the worker's driver: executors that fit the cluster's
    512 MB, with the test JVM options every other JVM of the run gets."""
    conf = tmp_path / "spark-conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "spark.executor.memory 512m\n"
        f"spark.executor.extraJavaOptions {os.environ.get('SPARK_SUBMIT_OPTS', '')}\n"
    )
    return conf


@pytest.fixture
def cluster_data(tmp_path: Path) -> Iterator[Path]:
    """The data directory ``sparkfn cluster up`` records its cluster in; down at the end."""
    data = tmp_path / "cluster-data"
    data.mkdir()
    yield data
    _sparkfn(data, "cluster", "down")


def _send(client: httpx.Client, verb: str, **more: Any) -> dict[str, Any]:
    with COUNTER.open("rb") as code:
        response = client.request(
            verb,
            f"/public/default/{NAME}",
            data={"functionConfig": json.dumps({**CONFIG, **more})},
            files={"data": (COUNTER.name, code, "text/x-python")},
        )
    assert response.status_code == 200, response.text
    return dict(response.json())


def _post(client: httpx.Client, action: str) -> None:
    response = client.post(f"/public/default/{NAME}/{action}")
    assert response.status_code in (200, 204), response.text


def _values(first: int, count: int) -> list[str]:
    return [f"m-{i:04d} w{i % 5}" for i in range(first, first + count)]


def _exactly_once(store: Store, sent: list[str], worker: WorkerProcess) -> None:
    """Every input one output and its words' counters once; nothing more, ever."""
    expected = collections.Counter(v + "!" for v in sent)

    def outputs_match() -> bool:
        found = topic_counts(store)
        extra = found - expected
        assert not extra, f"outputs repeated or not asked for: {dict(extra)}"
        return found == expected

    def said() -> str:
        found = sum(topic_counts(store).values())
        status = httpx.get(f"{worker.url}/admin/v3/functions/public/default/{NAME}/status")
        return (
            f"{len(sent)} outputs, once each (found {found}); status {status.text}\n"
            f"{worker.output()[-4000:]}"
        )

    wait(outputs_match, said)
    words: collections.Counter[str] = collections.Counter()
    for value in sent:
        words.update(value.split())
    words["messages"] = len(sent)
    state = all_state(store, f"public/default/{NAME}")
    counters = collections.Counter({k: s.counter for k, s in state.items() if s.counter})
    assert counters == words


@pytest.mark.slow
@pytest.mark.long_running(90)
@pytest.mark.backend("postgresql")
def test_a_worker_on_a_standalone_cluster_processes_every_message_exactly_once(
    cluster_data: Path, store: Store, data_dir: Path, spark_conf: Path
) -> None:
    up = _sparkfn(
        cluster_data, "cluster", "up", "--workers", "1", "--cores", "1", "--memory", "512m",
        "--port", str(free_port()), "--webui-port", str(free_port()),
    )  # fmt: skip
    assert up.returncode == 0, _said(up)
    shown = _sparkfn(cluster_data, "cluster", "status", "--json")
    assert shown.returncode == 0, _said(shown)
    view = json.loads(shown.stdout)
    assert view["up"], view
    assert [(w["state"], w["cores"], w["memoryMb"]) for w in view["workers"]] == [("ALIVE", 1, 512)]
    master = view["masterUrl"]
    again = _sparkfn(cluster_data, "cluster", "up", "--port", str(free_port()))
    assert again.returncode == 1, _said(again)
    assert again.stderr.startswith("error [cluster_already_up]: "), _said(again)
    cluster = Cluster.load(cluster_data / "spark-cluster")
    assert cluster is not None

    admin = TopicAdmin(store)
    admin.create("in", partitions=2, schema_type="string")
    admin.create("out", schema_type="string")
    producer = Producer(store, "in")
    sent = _values(0, 200)
    producer.send_batch([Message(v.encode()) for v in sent])

    worker = WorkerProcess(
        data_dir,
        store.url,
        env={"SPARKFN_WORKER_SPARK_MASTER": master, "SPARK_CONF_DIR": str(spark_conf)},
    ).start()
    try:
        assert httpx.get(worker.url + "/health", timeout=30).json()["sparkMaster"] == master
        worker.wait_ready(timeout=TIMEOUT)
        with worker.client() as client:
            assert _send(client, "POST")["version"] == 1
            _exactly_once(store, sent, worker)

            _post(client, "stop")
            # A stop answers before the run has ended, and a start meanwhile finds the
            # run still there and does nothing: wait for the stop, as the CLI does.
            wait(
                lambda: client.get(f"/public/default/{NAME}/status").json()["numRunning"] == 0,
                "the function stopped",
            )
            more = _values(200, 100)
            producer.send_batch([Message(v.encode()) for v in more])
            _post(client, "start")
            sent += more
            _exactly_once(store, sent, worker)

            assert _send(client, "PUT", parallelism=2)["version"] == 2
            more = _values(300, 100)
            producer.send_batch([Message(v.encode()) for v in more])
            sent += more
            _exactly_once(store, sent, worker)
            status = client.get(f"/public/default/{NAME}/status").json()
            assert status["numInstances"] == 2, status

            gone = client.delete(f"/public/default/{NAME}")
            assert gone.status_code == 200, gone.text
            assert client.get("/public/default").json() == []
    finally:
        code = worker.stop()
    assert code in (0, -15), worker.output()[-4000:]

    # The tasks ran in the executor that the cluster's worker launched for this driver.
    executor_logs = list(cluster.work_dir.glob("worker-1/app-*/*/stderr"))
    assert executor_logs, f"no executor ran on the cluster\n{worker.output()[-4000:]}"
    assert any("Finished task" in p.read_text(errors="replace") for p in executor_logs)

    down = _sparkfn(cluster_data, "cluster", "down")
    assert down.returncode == 0, _said(down)
    assert "stopped the Spark cluster" in down.stderr, _said(down)
    assert cluster.processes() == []
    assert _sparkfn(cluster_data, "cluster", "down").returncode == 0
    gone = _sparkfn(cluster_data, "cluster", "status")
    assert gone.returncode == 3, _said(gone)


def test_up_without_java_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(Path(sys.executable).parent)  # python, and no java
    result = subprocess.run(
        [sys.executable, "-m", "sparkfn.cli.main", "--data-dir", str(tmp_path), "cluster", "up"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, _said(result)
    assert result.stderr.splitlines()[-1].startswith("error [invalid_config]: java was not found")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "spark-cluster" / "cluster.json").exists()


def test_up_on_a_taken_port_names_the_option(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _sparkfn(
            tmp_path, "cluster", "up", "--port", str(free_port()), "--webui-port", str(port)
        )
    assert result.returncode == 1, _said(result)
    assert f"error [invalid_config]: port {port} on 127.0.0.1 is in use" in result.stderr
    assert "--webui-port" in result.stderr, _said(result)
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [("--memory", "512", "--memory must be a size"), ("--workers", "0", "--workers must be")],
)
def test_bad_settings_are_refused_before_anything_starts(
    tmp_path: Path, option: str, value: str, said: str
) -> None:
    result = _sparkfn(tmp_path, "cluster", "up", option, value)
    assert result.returncode == 1, _said(result)
    assert said in result.stderr, _said(result)
    assert not (tmp_path / "spark-cluster" / "cluster.json").exists()


def test_down_and_status_without_a_cluster(tmp_path: Path) -> None:
    down = _sparkfn(tmp_path, "cluster", "down")
    assert down.returncode == 0, _said(down)
    assert "no Spark cluster is up" in down.stderr
    shown = _sparkfn(tmp_path, "cluster", "status", "--json")
    assert shown.returncode == 3, _said(shown)
    assert json.loads(shown.stdout)["up"] is False


def test_down_never_signals_a_pid_that_is_no_longer_the_daemon(tmp_path: Path) -> None:
    """A recorded pid now naming another process (its start time differs) is left alone."""
    bystander = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        root = tmp_path / "spark-cluster"
        root.mkdir()
        record = Cluster(
            root=str(root), token="0123456789abcdef", host="127.0.0.1", port=7077,
            webui_port=8080, workers=1, cores=1, memory="1g", python=sys.executable,
            daemons=[Daemon("master", bystander.pid, 1, 7077, 8080, str(root / "master.log"))],
        )  # fmt: skip
        record.save()
        shown = _sparkfn(tmp_path, "cluster", "status")
        assert shown.returncode == 3, _said(shown)
        assert "NOT RUNNING" in shown.stdout, _said(shown)
        down = _sparkfn(tmp_path, "cluster", "down")
        assert down.returncode == 0, _said(down)
        assert "had stopped already" in down.stderr, _said(down)
        assert bystander.poll() is None, "down signalled a process it did not start"
        assert not (root / "cluster.json").exists()
    finally:
        bystander.kill()
        bystander.wait()
