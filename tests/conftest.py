"""Shared fixtures: real SQLite and PostgreSQL stores, one data directory per test.

``store_url`` / ``store`` are parametrized over both backends, so every
behaviour test that uses them runs twice (ids ``sqlite`` and ``postgresql``).
PostgreSQL is the server on 127.0.0.1:5432, database ``test``, user
``postgres``. Each session gets its own schema for ``pg_url`` and each test
its own schema for ``store_url``, selected through libpq's
``options=-csearch_path=...`` so that the store's unqualified table names land
there. Without a server the PostgreSQL cases are skipped, except under
``CI=true`` where they fail: CI must never pass by skipping.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from sparkfn.store.store import Store

PG_SERVER = "postgresql://postgres@127.0.0.1:5432/test"
BACKENDS = ["sqlite", "postgresql"]


def _pg_schema_url(schema: str) -> str:
    options = quote(f"-csearch_path={schema}", safe="-")
    return f"{PG_SERVER}?options={options}"


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


@pytest.fixture
def store(store_url: str, data_dir: Path) -> Iterator[Store]:
    """An open store on ``store_url`` with segments under ``data_dir``."""
    opened = Store.open(store_url, data_dir)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The one local SparkSession of the test run (sparkfn data sources registered)."""
    from sparkfn.runtime.spark import spark_session

    session = spark_session(master="local[2]", app_name="sparkfn-tests")
    yield session
    session.stop()
