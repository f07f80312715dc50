"""Shared fixtures: real SQLite and PostgreSQL stores, one data directory per test.

``store_url`` / ``store`` are parametrized over both backends, so every
behaviour test that uses them runs twice (ids ``sqlite`` and ``postgresql``).
PostgreSQL is the server on 127.0.0.1:5432, database ``test``, user
``postgres``. Each session gets its own schema for ``pg_url`` and each test
its own schema for ``store_url``, selected through libpq's
``options=-csearch_path=...`` so that the store's unqualified table names land
there. Without a server the PostgreSQL cases are skipped, except under
``CI=true`` where they fail: CI must never pass by skipping.

Two things here are about wall time only, not about what is tested:

* Every JVM of the run (this process's SparkSession, crash-test children,
  ``sparkfn functions localrun`` subprocesses) starts with the JIT's first
  tier only and the serial GC, and maps Spark's classes from a class-data
  sharing archive made once (``tests/jvm_archive.py``): see
  :func:`pytest_configure`.
* Under xdist, tests marked ``long_running`` start first: see
  :func:`pytest_collection_modifyitems`.

One thing is about wall time and is a choice of what is tested: a test that
runs Spark (the session's, a worker process's, a localrun's, a crash test's
JVM) costs seconds to minutes of the two cores per backend, so such a test
runs on one backend only:

* marked ``@pytest.mark.backend("sqlite")`` or ``("postgresql")``, on that one;
* otherwise on the backend that a stable hash of its name picks (see
  :func:`_picked_backend`), so that about half of them run on each: every
  path of the runtime meets both stores across the suite, each test one;
* marked ``@pytest.mark.both_backends``, on both (a test of how the runtime
  uses a store, where the two backends differ: locking, planning).

The store's own tests, which decide what a crash leaves behind, and every
test without Spark run on both. ``SPARKFN_TESTS_BOTH_BACKENDS=1`` (``make
test-both-stores``) runs every Spark test on both backends.

Every wait is bounded and says what it waited for: ``waiting.until``
(``tests/waiting.py``), with each module's own timeout (bound once with
``functools.partial`` where a module waits often).
"""

from __future__ import annotations

import itertools
import os
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from sparkfn.store.store import Store
from waiting import WAIT

PG_SERVER = "postgresql://postgres@127.0.0.1:5432/test"
BACKENDS = ["sqlite", "postgresql"]

# A test JVM lives for seconds to minutes and runs tiny batches: compiling
# hot code with C2 and running parallel GC threads cost more CPU than they
# save (about a third of a child JVM's CPU on the two-core test machine).
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def pytest_configure(config: pytest.Config) -> None:
    """Set the environment every Spark of the run inherits (see the module docstring).

    ``SPARK_SUBMIT_OPTS`` the user set is left alone. Spark's Python workers
    import pyspark without its zip as sparkfn's ``spark_session`` arranges it
    for users; set here, the crash-test children and CLI subprocesses inherit
    it too.
    """
    if "SPARK_SUBMIT_OPTS" not in os.environ:
        options = TEST_JVM_OPTIONS
        # Made once, before xdist starts its workers (they inherit the environment).
        if "PYTEST_XDIST_WORKER" not in os.environ and not config.option.collectonly:
            from jvm_archive import QUIET, class_archive

            archive = class_archive(TEST_JVM_OPTIONS)
            if archive is not None:
                options = f"{options} {QUIET} -XX:SharedArchiveFile={archive}"
        os.environ["SPARK_SUBMIT_OPTS"] = options
    from sparkfn.runtime.spark.session import use_project_interpreter

    # Not zygote=True here: every session of the run (this process's, the
    # children's) starts its own zygote, as a user's would.
    use_project_interpreter()
    os.environ.pop("PYSPARK_PYTHON", None)  # see above


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, list the ``long_running`` tests first, longest module first, each before a
    short one.

    With ``--maxschedchunk=1`` (pyproject.toml) an xdist worker holds two
    tests, the one it runs and the next, and is sent one more each time it
    finishes one. Listed so, every long test starts on the first worker that
    frees up; left where its module puts it, a long test that starts last
    keeps the whole run waiting for it. Each worker collects the same order.
    """
    kept = [item for item in items if _on_its_backend(item)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    if config.getvalue("loadgroup"):
        _name_groups(items)

    def seconds(item: pytest.Item) -> float:
        marker = item.get_closest_marker("long_running")
        return float(marker.args[0]) if marker is not None else 0.0

    # A module's long tests stay together, in their order: split by short tests (of
    # its xdist group, say), they would make its module-scoped fixtures (a cluster of
    # worker processes) again for each test.
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        if seconds(item) > 0:
            modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    chunks = sorted(modules.values(), key=lambda chunk: max(map(seconds, chunk)), reverse=True)
    short = iter([i for i in items if seconds(i) == 0])
    ordered: list[pytest.Item] = []
    for chunk in chunks:
        ordered.extend(chunk)
        ordered.extend(itertools.islice(short, len(chunk)))
    ordered.extend(short)
    items[:] = ordered


def _name_groups(items: list[pytest.Item]) -> None:
    """Give each ``xdist_group`` test the ``@group`` suffix ``--dist loadgroup`` sends by.

    pytest-xdist 3.8 sets it on ``item._nodeid``, which pytest 9.2 no longer reads (a
    node's id is ``item._id``): every group's tests were dealt out one by one, so the
    ``brokers`` group's tests ran side by side, and the cluster module's three-worker
    cluster, module-scoped, was made again on each xdist worker that got one of its tests
    (84 s of setup, three times, in a full run). Does nothing where the suffix is there.
    """
    from _pytest.nodeid import NodeId

    for item in items:
        names = sorted(
            {
                str(m.args[0]) if m.args else str(m.kwargs.get("name", "default"))
                for m in item.iter_markers("xdist_group")
            }
        )
        if names and "@" not in item.nodeid:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")  # noqa: SLF001


# The parametrized fixtures whose parameter is a backend's name.
BACKEND_FIXTURES = ("store_url", "shared_worker")


# A test that asks for one of these runs Spark (see the module docstring).
SPARK_FIXTURES = ("spark", "shared_worker", "worker_process", "run_until_drained")


def _on_its_backend(item: pytest.Item) -> bool:
    """False for a case of a Spark test on another backend than its one (module docstring)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or not any(name in callspec.params for name in BACKEND_FIXTURES):
        return True
    marker = item.get_closest_marker("backend")
    if marker is not None:
        (wanted,) = marker.args
        if wanted not in BACKENDS:
            raise pytest.UsageError(f"{item.nodeid}: backend({wanted!r}): not one of {BACKENDS}")
    elif _runs_spark(item) and not _both_backends(item):
        wanted = _picked_backend(item)
    else:
        return True
    return all(callspec.params.get(name, wanted) == wanted for name in BACKEND_FIXTURES)


def _runs_spark(item: pytest.Item) -> bool:
    fixtures = getattr(item, "fixturenames", ())
    return item.get_closest_marker("slow") is not None or any(
        name in fixtures for name in SPARK_FIXTURES
    )


def _both_backends(item: pytest.Item) -> bool:
    return item.get_closest_marker("both_backends") is not None or os.environ.get(
        "SPARKFN_TESTS_BOTH_BACKENDS", ""
    ) not in ("", "0")


def _picked_backend(item: pytest.Item) -> str:
    """The backend of an unmarked Spark test: by a hash of its module, name and other
    parameters, the same on every run and every xdist worker."""
    callspec = getattr(item, "callspec", None)
    others = sorted(
        f"{name}={value}"
        for name, value in (callspec.params.items() if callspec is not None else ())
        if name not in BACKEND_FIXTURES
    )
    key = f"{item.path.name}::{getattr(item, 'originalname', item.name)}[{','.join(others)}]"
    return BACKENDS[zlib.crc32(key.encode()) % len(BACKENDS)]


def _pg_schema_url(schema: str) -> str:
    options = quote(f"-csearch_path={schema}", safe="-")
    # The application name tags every connection to the schema: see _drop_schema.
    return f"{PG_SERVER}?options={options}&application_name={schema}"


def _pg_unavailable(reason: str) -> None:
    msg = f"PostgreSQL at {PG_SERVER} is not reachable: {reason}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{msg} (CI=true: PostgreSQL tests must run, not skip)", pytrace=False)
    pytest.skip(f"{msg}; start it to run the PostgreSQL cases")


@pytest.fixture(scope="session")
def pg_server() -> str:
    """The PostgreSQL server URL (no schema), after checking it answers."""
    try:
        with psycopg.connect(PG_SERVER, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        _pg_unavailable(str(exc).strip())
    return PG_SERVER


def _create_schema(server: str) -> str:
    schema = f"sparkfn_t_{uuid.uuid4().hex}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return schema


def _drop_schema(server: str, schema: str) -> None:
    with psycopg.connect(server, autocommit=True) as conn:
        # Spark keeps its Python workers for the whole session, and each keeps
        # the connection pool of every store it opened (Store.cached): without
        # this, idle connections to finished tests' schemas pile up until the
        # server refuses new clients.
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            [schema],
        )
        # A stuck connection should fail the teardown, not hang the run.
        conn.execute("SET lock_timeout = '30s'")
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="session")
def pg_url(pg_server: str) -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a schema private to this session."""
    schema = _create_schema(pg_server)
    url = _pg_schema_url(schema)
    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT current_schema()").fetchone()
    if found is None or found[0] != schema:
        msg = f"the URL {url!r} did not select schema {schema!r}; current_schema() is {found!r}"
        raise RuntimeError(msg)
    try:
        yield url
    finally:
        _drop_schema(pg_server, schema)


@pytest.fixture(scope="session")
def pg_schema_urls(pg_server: str) -> Iterator[Callable[[], str]]:
    """``make()`` -> the URL of a new PostgreSQL schema; all are dropped when the session ends.

    For session-scoped stores of their own (a worker process shared by tests),
    apart from ``pg_url``'s schema, which other session fixtures use.
    """
    made: list[str] = []

    def make() -> str:
        made.append(_create_schema(pg_server))
        return _pg_schema_url(made[-1])

    try:
        yield make
    finally:
        for schema in made:
            _drop_schema(pg_server, schema)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A fresh data directory (segments live here; the SQLite file too)."""
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture(params=BACKENDS, ids=BACKENDS)
def store_url(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[str]:
    """A store URL for an empty store: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{data_dir}/sparkfn.db"
        return
    server: str = request.getfixturevalue("pg_server")
    schema = _create_schema(server)
    try:
        yield _pg_schema_url(schema)
    finally:
        _drop_schema(server, schema)


def _opened(url: str, data_dir: Path) -> Iterator[Store]:
    opened = Store.open(url, data_dir)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def store(store_url: str, data_dir: Path) -> Iterator[Store]:
    """An open store on ``store_url`` with segments under ``data_dir``."""
    yield from _opened(store_url, data_dir)


@pytest.fixture
def sqlite_store(data_dir: Path) -> Iterator[Store]:
    """A SQLite store, for tests whose use of the store needs no second backend."""
    yield from _opened(f"sqlite:///{data_dir}/sparkfn.db", data_dir)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The one local SparkSession of the test run (sparkfn data sources registered)."""
    from sparkfn.runtime.spark.session import spark_session

    session = spark_session(master="local[2]", app_name="sparkfn-tests")
    yield session
    session.stop()


@pytest.fixture
def run_until_drained(spark: object) -> Callable[..., Any]:
    """``run(config, store, timeout=WAIT)``: a :class:`~sparkfn.FunctionRun` of ``config`` on the
    session's Spark until its input is drained; returns the finished run."""
    from sparkfn.runtime.function_run import FunctionRun

    def run(config: Any, store: Store, timeout: float = WAIT) -> FunctionRun:
        local = FunctionRun(config, store=store, spark=spark)
        try:
            drained = local.start(until_drained=True).wait(timeout=timeout)
        finally:
            local.close()
        assert drained, f"{config.fqfn} did not drain in {timeout} s"
        return local

    return run


# The real Pulsar client, as a user may have it installed beside sparkfn (issue 29):
# installed from PyPI into a directory of its own, never into the project's venv.
PULSAR_CLIENT = "pulsar-client==3.13.0"


@pytest.fixture(scope="session")
def pulsar_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the real ``pulsar`` package, for a child's ``PYTHONPATH``.

    PyPI must answer: without it the tests that use this are skipped, except
    under ``CI=true``, where they fail.
    """
    import subprocess
    import sys

    target = tmp_path_factory.mktemp("pulsar-client")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         str(target), PULSAR_CLIENT],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        reason = f"cannot install {PULSAR_CLIENT}: {done.stderr.strip()[-500:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return target
