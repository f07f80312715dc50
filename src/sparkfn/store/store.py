"""The metadata store: one SQLAlchemy Core code path over SQLite or PostgreSQL.

>>> store = Store.open("sqlite:////tmp/sparkfn-doc/sparkfn.db", data_dir="/tmp/sparkfn-doc")
>>> with store.write() as conn:
...     pass  # one transaction; committed on exit, rolled back on error

SQLite runs in WAL mode with ``BEGIN IMMEDIATE`` write transactions, so
writers from many processes queue on the database lock instead of failing on
lock upgrades. PostgreSQL write transactions lock the rows they change with
``SELECT ... FOR UPDATE`` (see :meth:`Store.lock_partitions`).

A ``Store`` is cheap to open but holds a connection pool: open one per
process (executors do so lazily, see :func:`Store.cached`) and ``close`` it.

A write that fails for want of space raises
:class:`~sparkfn.api.errors.StorageFullError`, one the store cannot take now
:class:`~sparkfn.api.errors.StoreUnavailableError` (:mod:`sparkfn.store.failures`);
either is rolled back whole, and :attr:`Store.health` remembers it until a
write succeeds again.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    and_,
    create_engine,
    delete,
    event,
    insert,
    select,
    text,
    tuple_,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from sparkfn.api.errors import DataDirError, StorageFullError, StoreError, StoreUnavailableError
from sparkfn.config.settings import Settings
from sparkfn.store import migrations, schema, signals
from sparkfn.store.failures import WriteHealth, storage_failure
from sparkfn.store.private import private_dir, private_file
from sparkfn.store.sealed import Sealer

_PG_MIGRATION_LOCK = 0x5350_4B46  # "SPKF": serialises concurrent first opens
# What probe_write writes: more than a database page, so that it needs pages
# (and disk) of its own rather than room left in a page already written.
PROBE_BYTES = 16 * 1024
PROBE_FQFN = "sparkfn/internal/write-probe"


def _normalise_url(url: str) -> str:
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _make_dir(path: Path, what: str, error: type[StoreError]) -> None:
    """Create ``path`` if needed, or raise ``error`` naming it and the reason."""
    if path.exists() and not path.is_dir():
        msg = f"{what} {path} is not a directory"
        raise error(msg)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"{what} {path} cannot be created: {exc.strerror or exc}"
        raise error(msg) from exc


class Store:
    """Connection to the metadata store plus the data directory for segments."""

    def __init__(self, url: str, data_dir: Path, engine: Engine) -> None:
        self.url = url
        self.data_dir = data_dir
        self.engine = engine
        self.dialect = engine.dialect.name
        self.health = WriteHealth()
        self.sealer = Sealer(data_dir)
        """Seals the secrets of the configs stored here (:mod:`sparkfn.store.sealed`)."""

    @classmethod
    def open(
        cls,
        url: str | None = None,
        data_dir: str | Path | None = None,
        *,
        steps: Sequence[migrations.Migration] = migrations.MIGRATIONS,
    ) -> Store:
        """Open (creating or upgrading as needed) the store at ``url``."""
        settings = Settings.resolve(data_dir, url)
        _make_dir(settings.data_dir, "data directory", DataDirError)
        try:
            private_dir(settings.data_dir)  # 0700: it holds users' code, messages and logs
        except OSError as exc:
            msg = (
                f"data directory {settings.data_dir} cannot be made private: {exc.strerror or exc}"
            )
            raise DataDirError(msg) from exc
        if not os.access(settings.data_dir, os.W_OK | os.X_OK):
            msg = f"data directory {settings.data_dir} is not writable"
            raise DataDirError(msg)
        try:
            sa_url = make_url(_normalise_url(settings.store_url))
        except ArgumentError as exc:
            msg = f"store URL {settings.store_url!r} is not a valid database URL: {exc}"
            raise StoreError(msg) from exc
        if sa_url.get_backend_name() == "sqlite":
            engine = cls._sqlite_engine(sa_url.database)
        elif sa_url.get_backend_name() == "postgresql":
            engine = create_engine(sa_url, pool_pre_ping=True, pool_size=4, max_overflow=8)
        else:
            msg = (
                f"store URL {settings.store_url!r}: backend "
                f"{sa_url.get_backend_name()!r} is not supported (use sqlite or postgresql)"
            )
            raise StoreError(msg)
        store = cls(settings.store_url, settings.data_dir, engine)
        try:
            if not store._at_version(steps[-1].number):
                migrations.upgrade(store._migration_connection, steps)
        except OperationalError as exc:
            engine.dispose()
            failure = storage_failure(exc, f"the store at {settings.store_url!r}")
            if isinstance(failure, StorageFullError):
                raise failure from exc
            msg = f"cannot open the store at {settings.store_url!r}: {exc.orig}"
            raise (StoreError if failure is None else StoreUnavailableError)(msg) from exc
        except Exception:
            engine.dispose()
            raise
        return store

    @staticmethod
    def _sqlite_engine(database: str | None) -> Engine:
        if not database or database == ":memory:":
            msg = "the SQLite store needs a file path (it is shared between processes)"
            raise StoreError(msg)
        _make_dir(Path(database).parent, "SQLite store directory", StoreError)
        try:
            # 0600 before SQLite opens it: it holds every config, secrets too;
            # its -wal and -shm files take the same mode, once they exist.
            for path in (database, f"{database}-wal", f"{database}-shm"):
                if path == database or Path(path).exists():
                    private_file(Path(path))
        except OSError as exc:
            msg = f"SQLite store {database} cannot be made private: {exc.strerror or exc}"
            raise StoreError(msg) from exc
        engine = create_engine(
            f"sqlite:///{database}",
            connect_args={"timeout": 60, "check_same_thread": False},
        )

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Take over transaction control from pysqlite so BEGIN IMMEDIATE works.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            mode = conn.info.get("sqlite_begin", "DEFERRED")
            conn.exec_driver_sql(f"BEGIN {mode}")

        return engine

    def _at_version(self, latest: int) -> bool:
        """Whether the store is already at ``latest``, read without the migration lock.

        Every source runner and Spark worker opens the store; taking the lock
        (SQLite's write lock, PostgreSQL's advisory lock) for a store that
        needs nothing would queue each open behind any write in progress.
        Versions only grow, so a store seen at ``latest`` stays there; any
        other answer goes through :func:`migrations.upgrade`, under the lock.
        """
        with self.engine.connect() as conn:
            return migrations.current_version(conn) == latest

    @contextmanager
    def _migration_connection(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            if self.dialect == "sqlite":
                conn.info["sqlite_begin"] = "IMMEDIATE"
            try:
                conn.begin()
                if self.dialect == "postgresql":
                    conn.execute(
                        text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK}
                    )
                yield conn
            finally:
                conn.info.pop("sqlite_begin", None)

    @contextmanager
    def write(self, *, recorded: bool = True) -> Iterator[Connection]:
        """A write transaction: committed when the block exits, rolled back on error.

        A transaction that fails for want of space or of a store (its own
        statements, its commit, or a file the block writes) raises
        :class:`StorageFullError` or :class:`StoreUnavailableError`. With
        ``recorded=False`` its outcome leaves :attr:`health` as it is: a
        cluster heartbeat, a small write every few seconds, must not say
        writes go through again while larger ones still fail.
        """
        recording = self._recording("the store") if recorded else nullcontext()
        with recording, self.engine.connect() as conn:
            if self.dialect == "sqlite":
                conn.info["sqlite_begin"] = "IMMEDIATE"
            try:
                with conn.begin():
                    yield conn
            except BaseException:
                signals.discard(conn)
                raise
            finally:
                conn.info.pop("sqlite_begin", None)
            signals.touch_pending(conn, self.data_dir)

    @contextmanager
    def writing_files(self, what: str) -> Iterator[None]:
        """Around writes of files under the data dir (``what`` names them for the message).

        An ``OSError`` for a full disk or quota becomes :class:`StorageFullError`,
        one for a read-only or failing disk :class:`StoreUnavailableError`;
        either is recorded in :attr:`health`, as a success is.
        """
        with self._recording(what):
            yield

    @contextmanager
    def _recording(self, what: str) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            failure = storage_failure(exc, what)
            if failure is None:
                raise
            self.health.failed(failure)
            if failure is exc:
                raise
            raise failure from exc
        self.health.succeeded()

    def probe_write(self) -> None:
        """Write (and remove) a little in the store and a file in the data dir, or raise.

        What ``/ready`` does while :attr:`health` says writes fail: a success
        clears it. Both writes need fresh space, :data:`PROBE_BYTES` each;
        the store's row is deleted in the transaction that wrote it, so
        nobody sees it.
        """
        table = schema.function_state
        key = uuid.uuid4().hex
        probe = os.urandom(PROBE_BYTES)  # incompressible: as large on disk as it says
        with self.write() as conn:
            conn.execute(
                insert(table).values(
                    fqfn=PROBE_FQFN, key=key, value=probe, updated_at=datetime.now(UTC)
                )
            )
            conn.execute(delete(table).where(and_(table.c.fqfn == PROBE_FQFN, table.c.key == key)))
        path = self.data_dir / f".write-probe-{key}"
        with self.writing_files(f"a probe file in the data directory {self.data_dir}"):
            try:
                with open(path, "wb") as handle:
                    handle.write(probe)
                    handle.flush()
                    os.fsync(handle.fileno())
            finally:
                path.unlink(missing_ok=True)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only transaction with a consistent snapshot."""
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def lock_partitions(
        self, conn: Connection, topic_id: int, partition_ids: Sequence[int]
    ) -> dict[int, tuple[int, int]]:
        """Lock the partition rows for appends; returns ``{partition: (start, next)}``.

        Rows are locked in partition order so concurrent multi-partition
        commits cannot deadlock. On SQLite the IMMEDIATE transaction already
        holds the database write lock.
        """
        table = schema.partitions
        query = (
            select(table.c.partition, table.c.start_offset, table.c.next_offset)
            .where(and_(table.c.topic_id == topic_id, table.c.partition.in_(sorted(partition_ids))))
            .order_by(table.c.partition)
        )
        if self.dialect == "postgresql":
            query = query.with_for_update()
        return {row.partition: (row.start_offset, row.next_offset) for row in conn.execute(query)}

    def lock_partitions_many(
        self, conn: Connection, keys: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], tuple[int, int]]:
        """:meth:`lock_partitions` of many topics at once: ``{(topic id, partition): (start,
        next)}``, locked in (topic id, partition) order."""
        table = schema.partitions
        wanted = sorted(set(keys))
        if not wanted:
            return {}
        query = (
            select(table.c.topic_id, table.c.partition, table.c.start_offset, table.c.next_offset)
            .where(tuple_(table.c.topic_id, table.c.partition).in_(wanted))
            .order_by(table.c.topic_id, table.c.partition)
        )
        if self.dialect == "postgresql":
            query = query.with_for_update()
        return {
            (row.topic_id, row.partition): (row.start_offset, row.next_offset)
            for row in conn.execute(query)
        }

    def path(self, location: str) -> Path:
        """Absolute path of a segment location stored relative to the data dir."""
        return self.data_dir / location

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    # Executors and other long-lived processes share one Store per (url, data dir).
    _cache: dict[tuple[str, str, int], Store] = {}
    _cache_lock = threading.Lock()

    @classmethod
    def cached(cls, url: str, data_dir: str | Path) -> Store:
        """The process-wide ``Store`` for ``url``, opened on first use."""
        key = (url, str(data_dir), os.getpid())
        with cls._cache_lock:
            store = cls._cache.get(key)
            if store is None:
                store = cls._cache[key] = cls.open(url, data_dir)
            return store
