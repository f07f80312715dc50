"""A function on a real Spark standalone cluster processes every message exactly once.

Every other runtime test runs Spark in ``local`` mode, where the driver and
the executors share one JVM and the Python workers are the driver's
children. Here the module starts a standalone master and one worker from
the installed pyspark (:mod:`sparkfn.runtime.spark.standalone`, as ``sparkfn
cluster up`` does), once for both stores, and the
function's driver runs in a child process (``localrun_child.py``: this
process already hosts the session's local SparkContext, and a process can
hold only one) with ``master=spark://...``. The executor is then a JVM the
worker launched, and the function's tasks run in its Python workers, which
reach the store and the data directory on their own (same machine, so the
same URL and paths). Under xdist, each worker process that runs one of the
two cases starts a cluster of its own (about 6 s).

The input: 2 partitions x 200 messages, ``max_records_per_batch=100`` (four
batches), run by two instances under ``effectively_once``. Asserted: every
output and counter increment exactly once, the status counts each message
once, and the tasks really ran in an executor of the cluster's worker (its
application directory holds the executor's log with finished tasks), so the
test cannot pass by running locally.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sessions import session_processes
from sparkfn.runtime.spark import standalone
from sparkfn.runtime.status import function_status
from sparkfn.state.store import all_state
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer

HERE = Path(__file__).resolve().parents[1]  # tests/runtime: the child and the functions
CHILD = HERE / "localrun_child.py"
COUNTER = HERE / "funcs" / "guarantee_counter.py"

PARTITIONS = 2
PER_PARTITION = 200
PER_BATCH = 100
PARALLELISM = 2
NAME = "cluster-eo"
CHILD_TIMEOUT = 300.0

pytestmark = [pytest.mark.slow, pytest.mark.long_running(35)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group ``proc`` leads, then anything left in its session."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)
    for pid in session_processes(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return f"--- {path.name} ---\n{path.read_text(errors='replace')[-chars:]}"
    except OSError as exc:
        return f"--- {path.name}: {exc} ---"


@dataclass
class StandaloneCluster:
    """The module's cluster (:mod:`sparkfn.runtime.spark.standalone`) and the driver's environment."""

    started: standalone.Cluster
    env: dict[str, str]

    @property
    def url(self) -> str:
        return self.started.master_url

    def output(self) -> str:
        return "\n".join(_tail(Path(d.log)) for d in self.started.daemons)

    def app_dirs(self) -> set[Path]:
        """The worker's application directories (``app-<id>``), one per driver it served."""
        return set(self.started.work_dir.glob("worker-1/app-*"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """One standalone master and worker for the module (both stores' runs)."""
    root = tmp_path_factory.mktemp("standalone")
    try:
        started = standalone.start(
            root, workers=1, cores=2, memory="1g", port=_free_port(), webui_port=_free_port()
        )
    except standalone.SparkClusterError as exc:
        pytest.fail(str(exc))
    try:
        yield StandaloneCluster(started, started.env())
    finally:
        standalone.stop(root)


# --- the function's input, outputs and counters ----------------------------------


def _value(partition: int, offset: int) -> str:
    return f"m-{partition}-{offset:03d} w{offset % 7} v{(offset + partition) % 3}"


def _inputs() -> list[str]:
    return [_value(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)]


def _fill(store: Store) -> None:
    admin = TopicAdmin(store)
    admin.create("in", partitions=PARTITIONS, schema_type="string")
    admin.create("out", partitions=PARTITIONS, schema_type="string")
    producer = Producer(store, "in")
    for p in range(PARTITIONS):
        producer.send_batch(
            [Message(_value(p, o).encode()) for o in range(PER_PARTITION)], partition=p
        )


def _outputs(store: Store) -> collections.Counter[str]:
    consumer = Consumer(store, "out", initial_position="earliest")
    out: collections.Counter[str] = collections.Counter()
    while batch := consumer.receive(max_messages=10_000):
        out.update(m.value.decode() for m in batch if m.value is not None)
    return out


def _counters(store: Store) -> collections.Counter[str]:
    state = all_state(store, f"public/default/{NAME}")
    return collections.Counter({k: s.counter for k, s in state.items() if s.counter})


def _expected_counters(inputs: list[str]) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for value in inputs:
        counts.update(value.split())
    counts["messages"] = len(inputs)
    return counts


def _run_driver(
    cluster: StandaloneCluster, store: Store, tmp: Path, names: tuple[str, ...] = (NAME,)
) -> str:
    """Run the function(s) on ``cluster`` from a child driver until drained; returns its output.

    More than one name: the functions run as members of one query group.
    """
    spec = {
        "store_url": store.url,
        "data_dir": str(store.data_dir),
        "master": cluster.url,
        "group": len(names) > 1,
        "functions": [
            {
                "name": name,
                "py": str(COUNTER),
                "classname": "guarantee_counter.GuaranteeCounter",
                "inputs": ["in"],
                "output": "out",
                "subscription_position": "earliest",
                "processing_guarantees": "effectively_once",
                "max_records_per_batch": PER_BATCH,
                "parallelism": PARALLELISM,
            }
            for name in names
        ],
    }
    spec_path = tmp / "spec.json"
    spec_path.write_text(json.dumps(spec))
    # The driver reads spark-defaults.conf from here: a small executor, with
    # the test JVM options every other JVM of the run gets.
    conf_dir = tmp / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.executor.memory 512m\n"
        f"spark.executor.extraJavaOptions {os.environ.get('SPARK_SUBMIT_OPTS', '')}\n"
    )
    log = tmp / "driver.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(spec_path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**cluster.env, "SPARK_CONF_DIR": str(conf_dir)},
            start_new_session=True,
        )
    try:
        code = proc.wait(timeout=CHILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        _kill_session(proc)
    output = _tail(log, 8000)
    if code is None:
        pytest.fail(f"the driver did not end within {CHILD_TIMEOUT} s:\n{output}")
    assert code == 0, f"the driver exited with {code}:\n{output}\n{cluster.output()}"
    return output


@pytest.mark.backend("postgresql")
def test_cluster_processes_every_message_exactly_once(
    cluster: StandaloneCluster, store: Store, tmp_path: Path
) -> None:
    _fill(store)
    apps_before = cluster.app_dirs()

    output = _run_driver(cluster, store, tmp_path)

    # The tasks ran in an executor the worker launched for this driver.
    apps = cluster.app_dirs() - apps_before
    assert len(apps) == 1, f"expected one new application on the worker, found {apps}\n{output}"
    executor_logs = list(apps.pop().glob("*/stderr"))
    assert executor_logs, f"the worker's application directory has no executor log\n{output}"
    executor_log = "\n".join(p.read_text(errors="replace") for p in executor_logs)
    assert "Finished task" in executor_log, _tail(executor_logs[0])

    every = _inputs()
    assert _outputs(store) == collections.Counter(v + "!" for v in every)
    assert _counters(store) == _expected_counters(every)
    status = function_status(store, f"public/default/{NAME}", PARALLELISM)
    received = [i.status.num_received for i in status.instances]
    processed = [i.status.num_successfully_processed for i in status.instances]
    assert sum(received) == len(every), received
    assert sum(processed) == len(every), processed
    assert all(n > 0 for n in received), f"an instance processed nothing: {received}"


@pytest.mark.backend("sqlite")
def test_a_group_of_functions_runs_its_tasks_on_the_cluster_exactly_once(
    cluster: StandaloneCluster, store: Store, tmp_path: Path
) -> None:
    """Three functions in one group: one query, its tasks in the cluster's executor."""
    _fill(store)
    apps_before = cluster.app_dirs()
    names = ("counter-a", "counter-b", "counter-c")

    output = _run_driver(cluster, store, tmp_path, names)

    apps = cluster.app_dirs() - apps_before
    assert len(apps) == 1, f"expected one new application on the worker, found {apps}\n{output}"
    executor_log = "\n".join(p.read_text(errors="replace") for p in apps.pop().glob("*/stderr"))
    assert "Finished task" in executor_log, output
    every = _inputs()
    assert _outputs(store) == collections.Counter(v + "!" for v in every for _ in names)
    for name in names:
        state = all_state(store, f"public/default/{name}")
        counters = collections.Counter({k: s.counter for k, s in state.items() if s.counter})
        assert counters == _expected_counters(every), name
