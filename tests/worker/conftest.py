"""Fixtures of the worker tests: real worker processes on real stores.

Three kinds:

* ``worker`` and its ``client``: a worker in the test process on the test's
  store (no Spark until a function runs), its REST app served over HTTP.
* ``worker_process``: a worker of its own on the test's store, for tests that
  stop, kill or restart it.
* ``shared_worker``: one worker per backend for this test process, started
  on first use and shared by every test that leaves it running. A test
  starts from, and leaves, an empty ``public/default``: no functions, sources,
  sinks or topics (the fixture deletes what a test made, through the worker, which
  purges state, checkpoints and subscriptions). Uploaded packages stay: a
  test that counts packages counts its own. A worker start costs a JVM and
  a SparkSession, tens of CPU-seconds on the two-core test machine; started
  once instead of once per test, the suite saves minutes.

The shared worker runs Spark on ``local[1]``, never asks a package index,
and has small package limits (``worker_process.SHARED_ENV``): the package tests rely on
all three, and the other tests do not care.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from app_server import served
from worker_process import SHARED_ENV, SharedWorker, WorkerProcess

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.worker.api.app import create_app
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings

NAMESPACE = "public/default"

# The broker helpers (tests/connectors/brokers.py), for the worker tests that reach a broker:
# the connectors' folder is on the path only when a test of theirs is collected.
sys.path.append(str(Path(__file__).resolve().parents[1] / "connectors"))
# The CLI tests' fork server (tests/cli/cli_forks.py), for the tests that run sparkfn commands.
sys.path.append(str(Path(__file__).resolve().parents[1] / "cli"))


@pytest.fixture
def worker(store_url: str, data_dir: Path) -> Iterator[Worker]:
    """A worker in this process on the test's store (see the module docstring)."""
    worker = Worker(WorkerSettings.resolve(data_dir=data_dir, store_url=store_url))
    worker.open()
    yield worker
    worker.shutdown()


@pytest.fixture
def client(worker: Worker) -> Iterator[httpx.Client]:
    """``worker``'s REST app, served over HTTP on a free port."""
    with served(create_app(worker)) as client:
        yield client


@pytest.fixture
def worker_process(store_url: str, data_dir: Path) -> Iterator[WorkerProcess]:
    """A started worker on the test's store; stopped (SIGTERM, then SIGKILL) at the end."""
    worker = WorkerProcess(data_dir, store_url).start()
    yield worker
    if worker.proc is not None and worker.proc.poll() is None:
        worker.stop()


def _start_shared(data_dir: Path, url: str) -> WorkerProcess:
    worker = WorkerProcess(data_dir, url, env=SHARED_ENV).start()
    worker.wait_ready()
    return worker


# One fixture per backend, not one parametrized fixture: pytest keeps one
# parameter of a session fixture alive at a time, so tests alternating
# between the backends would stop and start the worker each time.
@pytest.fixture(scope="session")
def _shared_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    data_dir = tmp_path_factory.mktemp("shared-worker-sqlite")
    worker = _start_shared(data_dir, f"sqlite:///{data_dir}/sparkfn.db")
    yield worker
    worker.stop()


@pytest.fixture(scope="session")
def _shared_postgresql(
    tmp_path_factory: pytest.TempPathFactory, pg_schema_urls: Callable[[], str]
) -> Iterator[WorkerProcess]:
    worker = _start_shared(tmp_path_factory.mktemp("shared-worker-postgresql"), pg_schema_urls())
    yield worker
    worker.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_worker(request: pytest.FixtureRequest) -> Iterator[SharedWorker]:
    """The shared worker of this backend, with ``public/default`` empty before and after."""
    process: WorkerProcess = request.getfixturevalue(f"_shared_{request.param}")
    if process.proc is None or process.proc.poll() is not None:
        pytest.fail(f"the shared worker is gone:\n{process.output()[-20000:]}")
    store = Store.open(process.store_url, process.data_dir)
    try:
        _empty_namespace(process, store)
        yield SharedWorker(process, store)
        _empty_namespace(process, store)
    finally:
        store.close()


def _empty_namespace(process: WorkerProcess, store: Store) -> None:
    """Delete every function, source and sink (through the worker: it purges) and topic
    of ``public/default``."""
    for kind in ("functions", "sources", "sinks"):
        with httpx.Client(base_url=f"{process.url}/admin/v3/{kind}", timeout=300) as client:
            for name in client.get(f"/{NAMESPACE}").json():
                deleted = client.delete(f"/{NAMESPACE}/{name}")
                assert deleted.status_code == 200, f"cannot delete {name}: {deleted.text}"
    admin = TopicAdmin(store)
    for topic in admin.list(*NAMESPACE.split("/")):
        admin.delete(topic.name)
