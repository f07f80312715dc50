"""A full disk or store: a write fails whole with ``storage_full``, nothing committed is lost.

Real failures only: SQLite at its page limit (``SQLITE_FULL``), PostgreSQL's
own ``disk_full`` (SQLSTATE 53100) and a terminated connection (57P01), and,
as root, a real tmpfs filled to its last byte under segment files and under a
PostgreSQL tablespace (see ``tests/full_disk.py``).
"""

from __future__ import annotations

import errno
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from sqlalchemy import text

from full_disk import SqlitePageLimit, fill, small_filesystem
from sparkfn.api.errors import StorageFullError, StoreUnavailableError
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.producer import Producer

# Inline segments (under 64 KiB) live in the store: a few of these fill pages.
VALUE = 20_000
# A segment file (over the inline limit).
BIG = 200_000


def _values(count: int, size: int = VALUE) -> list[bytes]:
    return [os.urandom(size) for _ in range(count)]


def _read_all(store: Store, topic: str) -> list[bytes]:
    from sparkfn.topics.consumer import Consumer

    consumer = Consumer(store, topic, initial_position="earliest")
    out: list[bytes] = []
    while batch := consumer.receive(max_messages=10_000):
        out.extend(m.value for m in batch if m.value is not None)
    return out


def _send(producer: Producer, values: list[bytes]) -> None:
    producer.send_batch(producer.encode(values))


def _fail_until_full(
    producer: Producer, committed: list[bytes], attempts: int = 50
) -> StorageFullError:
    """Send until the store refuses for want of space; that error.

    What went through before is added to ``committed``.
    """
    for _ in range(attempts):
        values = _values(2)  # one inline segment of 40 kB: pages in the store
        try:
            _send(producer, values)
        except StorageFullError as exc:
            return exc
        committed.extend(values)
    pytest.fail(f"{attempts} appends of 40 kB all went through: the store never filled")


def test_a_full_sqlite_store_refuses_a_write_whole_and_keeps_what_was_committed(
    sqlite_store: Store,
) -> None:
    TopicAdmin(sqlite_store).create("full")
    producer = Producer(sqlite_store, "full")
    committed = _values(30)
    for start in range(0, 30, 10):
        _send(producer, committed[start : start + 10])
    limit = SqlitePageLimit(sqlite_store)
    limit.fill()

    full = _fail_until_full(producer, committed)
    assert full.reason == "storage_full"
    assert isinstance(full, OSError) and full.errno == errno.ENOSPC
    assert "database or disk is full" in str(full) and "nothing was written" in str(full)
    assert sqlite_store.health.failure is full
    with pytest.raises(StorageFullError):
        sqlite_store.probe_write()  # what /ready does: still full
    assert _read_all(sqlite_store, "full") == committed  # every committed message, in order

    limit.lift()
    sqlite_store.probe_write()
    assert sqlite_store.health.failure is None
    later = _values(3)
    _send(producer, later)
    assert _read_all(sqlite_store, "full") == committed + later


def test_postgresql_disk_full_and_a_lost_connection_are_their_own_errors(
    pg_url: str, data_dir: Path
) -> None:
    store = Store.open(pg_url, data_dir)
    try:
        with (
            pytest.raises(StorageFullError, match="PostgreSQL 53100") as full,
            store.write() as conn,
        ):
            # The server's own error of class 53100, as it raises it when a file cannot grow.
            conn.execute(
                text(
                    "DO $$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device'"
                    " USING ERRCODE = 'disk_full'; END $$"
                )
            )
        assert full.value.reason == "storage_full"
        assert store.health.failure is full.value

        with pytest.raises(StoreUnavailableError, match="57P01") as lost, store.write() as conn:
            conn.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))
        assert lost.value.reason == "store_unavailable"
        assert store.health.failure is lost.value

        store.probe_write()  # a new connection: writes go through again
        assert store.health.failure is None
    finally:
        store.close()


def test_a_segment_file_on_a_full_disk_is_storage_full_and_leaves_no_file(
    tmp_path: Path,
) -> None:
    with small_filesystem(tmp_path / "disk") as disk:
        data_dir = disk / "data"
        store = Store.open(f"sqlite:///{data_dir}/sparkfn.db", data_dir)
        try:
            TopicAdmin(store).create("big")
            producer = Producer(store, "big")
            committed = _values(3, BIG)
            _send(producer, committed[:1])
            _send(producer, committed[1:])
            filler = fill(disk)
            with pytest.raises(StorageFullError, match="No space left on device") as full:
                _send(producer, _values(1, BIG))
            assert "segment file segments/" in str(full.value), full.value
            segment_dirs = data_dir / "segments"
            assert not list(segment_dirs.rglob("*.tmp")), "a failed write left its temp file"
            assert store.health.failure is full.value
            with pytest.raises(StorageFullError):
                store.probe_write()

            filler.unlink()
            store.probe_write()
            assert store.health.failure is None
            assert _read_all(store, "big") == committed
            later = _values(1, BIG)
            _send(producer, later)
            assert _read_all(store, "big") == committed + later
        finally:
            store.close()


@pytest.fixture
def pg_small_tablespace(pg_server: str) -> Iterator[tuple[str, Path]]:
    """A PostgreSQL schema whose tables live on an 8 MiB tmpfs: ``(store URL, the mount)``.

    The mount is outside pytest's private temporary directory, which the
    server's ``postgres`` user cannot enter.
    """
    mount = Path(f"/tmp/sparkfn-pg-space-{uuid.uuid4().hex}")  # noqa: S108
    with small_filesystem(mount, owner="postgres") as disk:
        name = f"sparkfn_full_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"CREATE TABLESPACE {name} LOCATION '{disk}'")
            conn.execute(f'CREATE SCHEMA "{name}"')
        options = quote(f"-csearch_path={name} -cdefault_tablespace={name}", safe="-")
        try:
            yield f"{pg_server}?options={options}&application_name={name}", disk
        finally:
            with psycopg.connect(pg_server, autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = %s",
                    [name],
                )
                conn.execute(f'DROP SCHEMA "{name}" CASCADE')
                conn.execute(f"DROP TABLESPACE {name}")
    mount.rmdir()


def test_postgresql_on_a_full_disk_refuses_a_write_whole_and_keeps_what_was_committed(
    pg_small_tablespace: tuple[str, Path], data_dir: Path
) -> None:
    url, disk = pg_small_tablespace
    store = Store.open(url, data_dir)
    try:
        TopicAdmin(store).create("full")
        producer = Producer(store, "full")
        committed = _values(20)
        _send(producer, committed[:10])
        _send(producer, committed[10:])
        filler = fill(disk)
        full = _fail_until_full(producer, committed)
        assert "PostgreSQL 53100" in str(full), full
        assert _read_all(store, "full") == committed

        filler.unlink()
        store.probe_write()
        later = _values(3)
        _send(producer, later)
        assert _read_all(store, "full") == committed + later
    finally:
        store.close()


def test_small_filesystem_is_really_full(tmp_path: Path) -> None:
    """The helper's own check: a filled tmpfs refuses the next byte with ENOSPC."""
    with small_filesystem(tmp_path / "disk", size="1m") as disk:
        filler = fill(disk)
        with pytest.raises(OSError) as refused:  # noqa: PT011 -- the errno is what is checked
            (disk / "one-more").write_bytes(b"x" * 4096)
        assert refused.value.errno == errno.ENOSPC
        filler.unlink()
        (disk / "one-more").write_bytes(b"x" * 4096)
    assert subprocess.run(["mountpoint", "-q", str(disk)], check=False).returncode != 0
