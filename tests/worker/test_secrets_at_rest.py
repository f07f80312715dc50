"""Secrets at rest (sparkfn.store.sealed): the store's rows hold them sealed, an older
store's clear values still read and are sealed at the worker's start, and a worker without
the key answers a clear error naming the function and the field, never a 500.

Real stores (SQLite and PostgreSQL), the worker's REST app over HTTP.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select, update

from sparkfn.api.errors import SecretsKeyError
from sparkfn.config.connector import SinkConfig
from sparkfn.config.function import FunctionConfig
from sparkfn.store import registry_schema
from sparkfn.store.sealed import KEY_ENV, KEY_FILE, new_key, reseal
from sparkfn.store.store import Store
from sparkfn.worker.registry import Registry
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings

SECRET = "s3cret-never-in-a-row"
PASSWORD = "pg-password-never-in-a-row"
SINK = {
    "name": "vault",
    "inputs": ["vault-in"],
    "sink_type": "redis",
    "configs": {
        "redisHosts": "127.0.0.1:6379",
        "redisPassword": PASSWORD,
        "url": f"postgresql://app:{PASSWORD}x@db:5432/orders",
        "nested": {"apiToken": SECRET},
        "streamName": "plain-and-visible",
    },
    "secrets": {"apiKey": SECRET},
}


@contextmanager
def _opened(url: str, data_dir: Path) -> Iterator[Store]:
    """A second store on the same database, with a data directory (and key) of its own."""
    store = Store.open(url, data_dir)
    try:
        yield store
    finally:
        store.close()


def _row(store: Store, key: str) -> str:
    table = registry_schema.function_versions
    with store.read() as conn:
        found = conn.execute(select(table.c.config).where(table.c.fqfn == key)).scalar_one()
    return str(found)


def _greet() -> FunctionConfig:
    return FunctionConfig.build(
        name="greet", py="greet.py", inputs=["greet-in"], secrets={"username": SECRET}
    )


def test_every_secret_is_sealed_in_the_row_and_reads_back_whole(store: Store) -> None:
    Registry(store).create(_greet(), package_digest=None, who="t")
    Registry(store, SinkConfig).create(SinkConfig.build(**SINK), package_digest=None, who="t")

    for key in ("public/default/greet", "sink:public/default/vault"):
        row = _row(store, key)
        assert SECRET not in row and PASSWORD not in row, row
    assert "plain-and-visible" in _row(store, "sink:public/default/vault")  # the rest as it is
    key_file = store.data_dir / KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600

    assert Registry(store).get("public/default/greet").config.secrets == {"username": SECRET}
    sink = Registry(store, SinkConfig).get("public/default/vault").config
    assert sink.configs == SINK["configs"]
    assert sink.secrets == {"apiKey": SECRET}


def test_a_clear_row_of_an_older_sparkfn_reads_and_is_sealed_at_the_workers_start(
    store: Store,
) -> None:
    Registry(store).create(_greet(), package_digest=None, who="t")
    table = registry_schema.function_versions
    with store.write() as conn:  # as sparkfn before sealing stored it
        conn.execute(
            update(table)
            .where(table.c.fqfn == "public/default/greet")
            .values(config=_greet().model_dump_json())
        )
    assert SECRET in _row(store, "public/default/greet")
    assert Registry(store).get("public/default/greet").config.secrets == {"username": SECRET}

    assert reseal(store) == 1
    assert SECRET not in _row(store, "public/default/greet")
    assert Registry(store).get("public/default/greet").config.secrets == {"username": SECRET}
    assert reseal(store) == 0  # nothing left to seal


def test_a_rotated_key_opens_the_old_rows_and_reseal_moves_them_to_the_new_one(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = new_key(), new_key()
    env = monkeypatch
    env.setenv(KEY_ENV, old)
    with _opened(store_url, tmp_path / "a") as store:
        Registry(store).create(_greet(), package_digest=None, who="t")
        before = _row(store, "public/default/greet")
    env.setenv(KEY_ENV, f"{new},{old}")  # the new key seals, the old one still opens
    with _opened(store_url, tmp_path / "b") as store:
        assert Registry(store).get("public/default/greet").config.secrets == {"username": SECRET}
        assert reseal(store) == 1
        assert _row(store, "public/default/greet") != before
    env.setenv(KEY_ENV, new)  # the old key retired
    with _opened(store_url, tmp_path / "c") as store:
        assert Registry(store).get("public/default/greet").config.secrets == {"username": SECRET}


def test_a_worker_without_the_key_answers_a_clear_error_naming_the_function_and_field(
    worker: Worker, client: httpx.Client, store_url: str, tmp_path: Path
) -> None:
    # Another worker (its own data directory, so its own key) registered these.
    with _opened(store_url, tmp_path / "elsewhere") as other:
        Registry(other).create(_greet(), package_digest=None, who="t")
        Registry(other, SinkConfig).create(SinkConfig.build(**SINK), package_digest=None, who="t")

    for path, named, field in (
        ("/admin/v3/functions/public/default/greet", "function public/default/greet", "username"),
        ("/admin/v3/sinks/public/default/vault", "sink public/default/vault", "apiKey"),
    ):
        answer = client.get(path)
        assert answer.status_code == 503, answer.text
        body = answer.json()
        assert body["reason"] == "secrets_key_unusable"
        assert named in body["message"] and f"secrets.{field}" in body["message"]
        assert KEY_ENV in body["message"]
        assert SECRET not in answer.text and PASSWORD not in answer.text

    with pytest.raises(SecretsKeyError, match="secrets.username"):
        Registry(worker.open_store()).get("public/default/greet")
    # Left out of what the worker lists and restarts, not a failure of the whole list.
    assert Registry(worker.open_store()).current() == []
    assert client.get("/metrics").status_code == 200


def test_a_key_that_is_no_key_stops_the_worker_at_its_start_naming_where_it_came_from(
    store_url: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "not-a-key")
    worker = Worker(WorkerSettings.resolve(data_dir=data_dir, store_url=store_url))
    with pytest.raises(SecretsKeyError, match=f"{KEY_ENV} is not a base64 256-bit key"):
        worker.open()
