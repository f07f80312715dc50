"""The leader lock: a PostgreSQL advisory lock held on a session of its own.

The session is one connection opened outside the store's pool (a pool
would hand it to other work and could close it), in autocommit, with TCP
keepalives on both ends so that the server notices a dead machine within
seconds, not hours. The lock is taken with ``pg_try_advisory_lock`` and lives
as long as the session: when the leader's process dies, the server ends the
session and the lock is free.

The key is the pair (:data:`LOCK_CLASS`, the CRC-32 of the store's schema):
advisory locks are per database, and several stores may share a database in
schemas of their own.
"""

from __future__ import annotations

import zlib
from typing import Any

from sqlalchemy import Connection, insert, select, text, update

from sparkfn.store.cluster_schema import cluster_leader, cluster_workers
from sparkfn.store.store import Store
from sparkfn.worker.cluster.clock import store_now

LOCK_CLASS = 0x53504B4C  # "SPKL"
# The server-side keepalive of the lock's session (seconds): a leader whose
# machine vanished loses the lock within idle + interval * count.
KEEPALIVE = {"tcp_keepalives_idle": 5, "tcp_keepalives_interval": 2, "tcp_keepalives_count": 3}


class LeaderLock:
    """One worker's session for the leader lock (PostgreSQL only)."""

    def __init__(self, conn: Any, key: int, worker_id: str) -> None:
        self._conn = conn
        self.key = key
        self.worker_id = worker_id
        self.pid: int = conn.execute("SELECT pg_backend_pid()").fetchone()[0]

    @classmethod
    def open(cls, store: Store, worker_id: str) -> LeaderLock:
        """Open the session and record its backend pid in the worker's row."""
        cargs, cparams = store.engine.dialect.create_connect_args(store.engine.url)
        conn = store.engine.dialect.connect(
            *cargs, **cparams, keepalives=1, keepalives_idle=5, keepalives_interval=2,
            keepalives_count=3, connect_timeout=10,
        )  # fmt: skip
        try:
            conn.autocommit = True
            for name, value in KEEPALIVE.items():
                conn.execute(f"SET {name} = {int(value)}")
            schema = conn.execute("SELECT current_schema()").fetchone()[0]
            lock = cls(conn, zlib.crc32(str(schema).encode()) & 0x7FFF_FFFF, worker_id)
            with store.write(recorded=False) as write:
                write.execute(
                    update(cluster_workers)
                    .where(cluster_workers.c.worker_id == worker_id)
                    .values(lock_pid=lock.pid)
                )
        except BaseException:
            conn.close()
            raise
        return lock

    def try_acquire(self) -> bool:
        """Take the lock if it is free (never waits)."""
        row = self._conn.execute(
            "SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, self.key)
        ).fetchone()
        return bool(row[0])

    def held(self) -> bool:
        """Whether this session still holds the lock (False once the session was ended)."""
        try:
            row = self._conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 2 "
                "AND pid = pg_backend_pid()",
                (LOCK_CLASS, self.key),
            ).fetchone()
        except Exception:  # the session is gone: so is the lock
            return False
        return bool(row[0])

    def end_expired_holder(self) -> str | None:
        """End the session of a holder whose worker's lease is past; returns that worker's id.

        A paused leader (SIGSTOP, a long GC, a partition its kernel still
        answers keepalives through) keeps its session and the lock; its lease
        says it is gone, so the lock is taken from it. Needs the right to
        signal the holder's backend: the same database role, or
        ``pg_signal_backend``.
        """
        row = self._conn.execute(
            "SELECT l.pid, w.worker_id FROM pg_locks l JOIN cluster_workers w ON w.lock_pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.classid::bigint = %s "
            "AND l.objid::bigint = %s AND l.objsubid = 2 AND w.lease_expires_at < clock_timestamp()",
            (LOCK_CLASS, self.key),
        ).fetchone()
        if row is None:
            return None
        self._conn.execute("SELECT pg_terminate_backend(%s)", (row[0],))
        return str(row[1])

    def close(self) -> None:
        """End the session, which releases the lock (idempotent)."""
        try:
            self._conn.close()
        except Exception:  # already broken: closed is what we wanted
            return


def session_alive(conn: Connection, pid: int) -> bool:
    """Whether the PostgreSQL backend ``pid`` (a worker's leader-lock session) still runs."""
    found = conn.execute(
        text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
    )
    return bool(found.scalar_one())


def record_leader(store: Store, worker_id: str) -> int:
    """Record ``worker_id`` as the leader in a new term; returns the term."""
    with store.write(recorded=False) as conn:
        now = store_now(conn)
        row = conn.execute(
            select(cluster_leader.c.term).where(cluster_leader.c.id == 1).with_for_update()
        ).first()
        term = (row.term if row is not None else 0) + 1
        values = {"worker_id": worker_id, "term": term, "elected_at": now}
        if row is None:
            conn.execute(insert(cluster_leader).values(id=1, **values))
        else:
            conn.execute(update(cluster_leader).where(cluster_leader.c.id == 1).values(**values))
    return int(term)
