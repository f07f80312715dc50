"""Opening the store and its transactions, on both backends."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import insert, select, text

from sparkfn.api.errors import DataDirError, SparkfnError, StoreError
from sparkfn.store import schema
from sparkfn.store.clock import utc_now as _now
from sparkfn.store.migrations import MIGRATIONS
from sparkfn.store.store import Store


def _version_rows(store: Store) -> list[int]:
    with store.read() as conn:
        return list(conn.execute(select(schema.schema_version.c.version)).scalars())


def test_open_creates_the_data_dir(store_url: str, tmp_path: Path) -> None:
    data_dir = tmp_path / "not" / "yet"
    if store_url.startswith("sqlite"):
        store_url = f"sqlite:///{data_dir}/sparkfn.db"
    store = Store.open(store_url, data_dir)
    try:
        assert data_dir.is_dir()
        assert store.data_dir == data_dir.resolve()
        assert store.path("segments/x.arrow") == data_dir.resolve() / "segments/x.arrow"
    finally:
        store.close()


def test_backend_dialect(store: Store, store_url: str) -> None:
    assert store.dialect == store_url.split(":", 1)[0]


def test_sqlite_runs_in_wal_mode(data_dir: Path) -> None:
    store = Store.open(f"sqlite:///{data_dir}/sparkfn.db", data_dir)
    try:
        with store.read() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        store.close()


def test_write_commits_on_exit(store: Store) -> None:
    with store.write() as conn:
        conn.execute(
            insert(schema.sink_commits).values(
                sink_id="s", batch_id=1, commit_id="c", committed_at=_now()
            )
        )
    with store.read() as conn:
        assert conn.execute(select(schema.sink_commits.c.batch_id)).scalars().all() == [1]


def test_write_rolls_back_on_error(store: Store) -> None:
    with pytest.raises(RuntimeError, match="boom"), store.write() as conn:
        conn.execute(
            insert(schema.sink_commits).values(
                sink_id="s", batch_id=1, commit_id="c", committed_at=_now()
            )
        )
        raise RuntimeError("boom")
    with store.read() as conn:
        assert conn.execute(select(schema.sink_commits.c.batch_id)).scalars().all() == []


def test_a_second_store_sees_committed_writes(store: Store, store_url: str, data_dir: Path) -> None:
    other = Store.open(store_url, data_dir)
    try:
        with store.write() as conn:
            conn.execute(
                insert(schema.sink_commits).values(
                    sink_id="s", batch_id=7, commit_id="c", committed_at=_now()
                )
            )
        with other.read() as conn:
            assert conn.execute(select(schema.sink_commits.c.batch_id)).scalars().all() == [7]
    finally:
        other.close()


def test_store_cached_is_one_per_process(store_url: str, data_dir: Path) -> None:
    first = Store.cached(store_url, data_dir)
    try:
        assert Store.cached(store_url, data_dir) is first
        assert _version_rows(first) == [m.number for m in MIGRATIONS]
    finally:
        first.close()
        with Store._cache_lock:
            for key in [k for k, v in Store._cache.items() if v is first]:
                del Store._cache[key]


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("not a url", "is not a valid database URL"),
        ("mysql://u@localhost/db", "backend 'mysql' is not supported"),
        ("sqlite:///:memory:", "needs a file path"),
        ("sqlite://", "needs a file path"),
    ],
)
def test_bad_urls_raise_store_error(url: str, fragment: str, data_dir: Path) -> None:
    with pytest.raises(StoreError, match=fragment) as caught:
        Store.open(url, data_dir)
    assert isinstance(caught.value, SparkfnError)
    assert isinstance(caught.value, RuntimeError)
    assert caught.value.reason == "store_error"


def test_unusable_directories_raise_errors_naming_them(tmp_path: Path) -> None:
    a_file = tmp_path / "plain-file"
    a_file.write_text("")
    with pytest.raises(
        DataDirError, match=re.escape(f"data directory {a_file} is not a directory")
    ):
        Store.open(None, a_file)
    with pytest.raises(DataDirError, match="data directory /proc/forbidden cannot be created"):
        Store.open(None, "/proc/forbidden")
    url = "sqlite:////proc/forbidden/sparkfn.db"
    with pytest.raises(
        StoreError, match="SQLite store directory /proc/forbidden cannot be created"
    ):
        Store.open(url, tmp_path)


def test_unreachable_postgresql_raises_store_error(data_dir: Path) -> None:
    url = "postgresql://postgres@127.0.0.1:1/test?connect_timeout=2"
    with pytest.raises(StoreError, match=r"cannot open the store at 'postgresql://postgres@"):
        Store.open(url, data_dir)


def test_settings_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    monkeypatch.setenv("SPARKFN_DATA_DIR", str(data_dir))
    monkeypatch.delenv("SPARKFN_STORE_URL", raising=False)
    store = Store.open()
    try:
        assert store.data_dir == data_dir.resolve()
        assert store.url == f"sqlite:///{data_dir.resolve() / 'sparkfn.db'}"
        assert (data_dir / "sparkfn.db").is_file()
    finally:
        store.close()


def test_postgresql_url_selects_its_schema(pg_url: str, data_dir: Path) -> None:
    store = Store.open(pg_url, data_dir)
    try:
        with store.read() as conn:
            schema_name = conn.execute(text("SELECT current_schema()")).scalar_one()
            tables = conn.execute(
                text("SELECT table_name FROM information_schema.tables WHERE table_schema = :s"),
                {"s": schema_name},
            ).scalars()
            assert schema_name.startswith("sparkfn_t_")
            assert {"topics", "segments", "sparkfn_schema_version"} <= set(tables)
    finally:
        store.close()
