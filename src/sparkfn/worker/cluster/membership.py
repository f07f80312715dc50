"""A worker's membership in its store's cluster: the lease, the leader lock, fencing.

>>> member = Membership(store, "host-a:6750", host="host-a", port=6750)
>>> member.start()          # joins; a thread renews the lease and stands for leader
>>> member.is_leader, member.state
>>> member.close()          # leaves: the row goes, the leader lock is released

The protocol (docs/cluster.md):

* **Lease.** Each worker has a row in ``cluster_workers``. Every heartbeat
  (``lease / 3`` seconds) sets ``lease_expires_at`` to the store's clock plus
  the lease, in one statement, so workers' clocks never decide who is alive.
* **Leader.** A PostgreSQL worker keeps one connection of its own, outside the
  pool, and tries ``pg_try_advisory_lock`` on it each round; the holder is the
  leader (recorded with a term that grows by one per leader in
  ``cluster_leader``). The lock goes with the session: when the leader's
  process dies its connection closes and the next round of another worker
  takes it, within seconds. A paused leader keeps its session open, so a
  candidate that finds the holder's lease past ends the holder's session
  (``pg_terminate_backend``) and takes the lock the round after.
* **Fencing.** A heartbeat renews the lease only while it runs on the store's
  clock: one that finds it ran out (a pause past the lease) puts the worker
  out. While the store does not answer, a worker measures its lease from the
  moment it sent its last heartbeat that was written, which is no later than
  the store's clock when it was written: once that is more than a lease ago
  it considers itself out (no other worker can consider it alive longer).
  Out, it gives up the leader lock and calls ``on_fenced``; when a heartbeat
  is written again it rejoins as a new incarnation. A heartbeat merely late
  (its thread starved under load) that is still written does not fence.
  Whoever acts on the membership (the assignment, later the runs) must stop
  on ``on_fenced``.
* **SQLite** serves one worker: the first takes an exclusive lock on a file
  beside the database and is its own leader; a second is refused with
  :class:`~sparkfn.api.errors.ConfigError` naming the first.

Which thread calls what: :meth:`start` and :meth:`close` the worker's; the
heartbeat thread everything else, including ``on_fenced`` and ``on_leader``
(keep them short). :meth:`close` is idempotent.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from sparkfn.api.errors import ConfigError
from sparkfn.store.cluster_schema import cluster_workers
from sparkfn.store.store import Store
from sparkfn.worker.cluster import leader_lock
from sparkfn.worker.cluster.clock import store_clock, store_now
from sparkfn.worker.cluster.single import SingleWorkerLock

log = logging.getLogger(__name__)

DEFAULT_LEASE = 10.0  # seconds
DEFAULT_CAPACITY = 10_000  # instances a worker takes (WorkerSettings.capacity)


class MemberState(enum.Enum):
    """Where a worker stands in its cluster."""

    # Not started, or started and its first heartbeat not written yet.
    JOINING = "joining"
    # Its lease is current: it may act as a member (and as leader, with the lock).
    MEMBER = "member"
    # No heartbeat written for longer than the lease: fenced, acts as nothing.
    OUT = "out"
    # Closed: its row is gone and it never acts again.
    LEFT = "left"


class Beat(enum.Enum):
    """What one heartbeat found."""

    WRITTEN = "written"  # the lease runs on
    LAPSED = "lapsed"  # the lease had run out (or the row is not ours): out, rejoin
    FAILED = "failed"  # the store did not take it: the lease runs down


class Membership:
    """One worker's membership in the cluster of ``store`` (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        worker_id: str,
        *,
        host: str,
        port: int,
        capacity: int = DEFAULT_CAPACITY,
        lease: float = DEFAULT_LEASE,
        on_fenced: Callable[[], None] | None = None,
        on_leader: Callable[[bool], None] | None = None,
    ) -> None:
        if lease <= 0:
            msg = f"worker {worker_id}: the lease must be more than 0 seconds, got {lease}"
            raise ConfigError(msg)
        self.store = store
        self.worker_id = worker_id
        self.host, self.port, self.capacity, self.lease = host, port, capacity, lease
        self.on_fenced = on_fenced
        self.on_leader = on_leader
        self.state = MemberState.JOINING
        self.incarnation = ""
        self.is_leader = False
        self.term = 0  # the leader term this worker holds, when it leads
        self._lock: leader_lock.LeaderLock | None = None
        self._single: SingleWorkerLock | None = None
        self._written_at = 0.0  # monotonic time the last written heartbeat was sent
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the worker's thread ------------------------------------------------------

    def start(self) -> None:
        """Join (raises :class:`ConfigError` if the id or a SQLite store is taken) and
        start the heartbeat thread."""
        if self.store.dialect == "sqlite":
            self._single = SingleWorkerLock.take(self.store, self.worker_id)
        try:
            self.join()
        except BaseException:
            self._release_single()
            raise
        self._round()
        self._thread = threading.Thread(
            target=self._beat, name=f"sparkfn-membership-{self.worker_id}", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Leave: stop the heartbeat, release the leader lock, remove this worker's row."""
        if self.state is MemberState.LEFT:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.lease)
        self._step_down()
        try:
            with self.store.write(recorded=False) as conn:
                conn.execute(
                    delete(cluster_workers).where(
                        cluster_workers.c.worker_id == self.worker_id,
                        cluster_workers.c.incarnation == self.incarnation,
                    )
                )
        except Exception as exc:  # the store may be gone; the lease ends the row anyway
            log.warning("worker %s could not remove its membership row: %s", self.worker_id, exc)
        self._release_single()
        self.state = MemberState.LEFT

    # --- joining and the heartbeat ------------------------------------------------

    def join(self) -> None:
        """Write this worker's row with a new incarnation and a fresh lease (:meth:`start`
        does; called alone, nothing renews it).

        A row of the same id whose lease is current belongs to a live worker:
        refused, since two workers of one id would take each other's work.
        Unless that worker is known dead: on SQLite, this worker holds the
        store's lock; on PostgreSQL, its leader-lock session is gone (a worker
        restarted at once after a crash needs not wait for the old lease).
        """
        incarnation = uuid.uuid4().hex
        sent = time.monotonic()
        with self.store.write(recorded=False) as conn:
            now = store_now(conn)
            row = conn.execute(
                select(cluster_workers)
                .where(cluster_workers.c.worker_id == self.worker_id)
                .with_for_update()
            ).first()
            if row is not None and self._held_by_another(conn, row, now):
                msg = (
                    f"worker id {self.worker_id!r} is in use by a live worker at "
                    f"{row.host}:{row.port} (its lease runs until {row.lease_expires_at}); "
                    "give this worker another --worker-id (SPARKFN_WORKER_WORKER_ID)"
                )
                raise ConfigError(msg)
            values: dict[str, Any] = {
                "host": self.host,
                "port": self.port,
                "incarnation": incarnation,
                # A drained worker (capacity 0) stays drained when it rejoins.
                "capacity": 0
                if row is not None and row.incarnation == self.incarnation and row.capacity == 0
                else self.capacity,
                "lock_pid": None,
                "joined_at": now,
                "heartbeat_at": now,
                "lease_expires_at": now + timedelta(seconds=self.lease),
            }
            if row is None:
                conn.execute(insert(cluster_workers).values(worker_id=self.worker_id, **values))
            else:
                conn.execute(
                    update(cluster_workers)
                    .where(cluster_workers.c.worker_id == self.worker_id)
                    .values(**values)
                )
        self.incarnation = incarnation
        self._written_at = sent
        self.state = MemberState.MEMBER
        log.info("worker %s joined the cluster (incarnation %s)", self.worker_id, incarnation)

    def _held_by_another(self, conn: Connection, row: Any, now: datetime) -> bool:
        if row.incarnation == self.incarnation or _aware(row.lease_expires_at) <= now:
            return False
        if self._single is not None:
            return False
        return row.lock_pid is None or leader_lock.session_alive(conn, row.lock_pid)

    def _beat(self) -> None:
        while not self._stop.wait(self.lease / 3):
            self._round()

    def _round(self) -> None:
        """One heartbeat and, for a member, one try at the leader lock.

        A heartbeat that comes late (this thread starved of CPU under load, a pause
        shorter than the lease) is tried before the worker fences itself: written, the
        lease had not run out on the store's clock, by which every other worker judges,
        so nobody took over and the worker stays a member (same incarnation, leading
        on). Only a lapsed lease, or one past on its own clock while the store does not
        answer, fences it."""
        written = self.heartbeat()
        if written is Beat.LAPSED:
            self._fence()
        elif written is Beat.FAILED and time.monotonic() - self._written_at > self.lease:
            self._fence()  # cut off past the lease: others may have taken over
        if written is not Beat.FAILED and self.state is MemberState.OUT:
            self._rejoin()
        if self.state is MemberState.MEMBER and not self._stop.is_set():
            self._try_lead()

    def heartbeat(self) -> Beat:
        """Renew the lease, unless it ran out before (then LAPSED) or cannot be written.

        The heartbeat thread calls it every ``lease / 3`` seconds: one
        transaction of one statement on the store (two on PostgreSQL, with
        the statement timeout that keeps a blocked write shorter than the lease).
        """
        sent = time.monotonic()
        table = cluster_workers
        try:
            with self.store.write(recorded=False) as conn:
                if conn.dialect.name == "postgresql":  # a blocked write must not outlast the lease
                    timeout_ms = int(self.lease * 1000 / 3)
                    conn.exec_driver_sql(f"SET LOCAL statement_timeout = {timeout_ms}")
                now = store_clock(conn)
                done = conn.execute(
                    update(table)
                    .where(
                        table.c.worker_id == self.worker_id,
                        table.c.incarnation == self.incarnation,
                        table.c.lease_expires_at > now,
                    )
                    .values(heartbeat_at=now, lease_expires_at=now + timedelta(seconds=self.lease))
                )
            if done.rowcount != 1:  # removed, taken over, or seen as gone by the others
                return Beat.LAPSED
        except Exception as exc:  # a store that does not answer: the lease runs on
            log.warning("worker %s: heartbeat not written: %s", self.worker_id, exc)
            return Beat.FAILED
        self._written_at = sent
        return Beat.WRITTEN

    def _rejoin(self) -> None:
        try:
            self.join()
        except Exception as exc:
            log.warning("worker %s could not rejoin yet: %s", self.worker_id, exc)

    def _fence(self) -> None:
        """Out: no heartbeat written for longer than the lease. Stop acting on anything."""
        if self.state is not MemberState.MEMBER:
            return
        log.error(
            "worker %s wrote no heartbeat for over its lease (%.1f s): out of the cluster",
            self.worker_id,
            self.lease,
        )
        self.state = MemberState.OUT
        self._step_down()
        if self.on_fenced is not None:
            self.on_fenced()

    # --- the leader ---------------------------------------------------------------

    def _try_lead(self) -> None:
        if self._single is not None:  # SQLite: the only worker is the leader
            if not self.is_leader:
                self.term = leader_lock.record_leader(self.store, self.worker_id)
                self._became(True)
            return
        try:
            if self._lock is None:
                self._lock = leader_lock.LeaderLock.open(self.store, self.worker_id)
            if self.is_leader:
                if not self._lock.held():
                    log.warning("worker %s lost the leader lock", self.worker_id)
                    self._step_down()
                return
            if self._lock.try_acquire():
                self.term = leader_lock.record_leader(self.store, self.worker_id)
                self._became(True)
            else:
                self._lock.end_expired_holder()
        except Exception as exc:  # the store or the lock's session failed: try next round
            log.warning("worker %s: leader lock round failed: %s", self.worker_id, exc)
            self._step_down()

    def _step_down(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None
        if self.is_leader:
            self._became(False)

    def _became(self, leader: bool) -> None:
        self.is_leader = leader
        log.info("worker %s %s", self.worker_id, "is the leader" if leader else "is not the leader")
        if self.on_leader is not None:
            self.on_leader(leader)

    def _release_single(self) -> None:
        if self._single is not None:
            self._single.release()
            self._single = None


def _aware(value: Any) -> Any:
    """A datetime read back from SQLite has lost its UTC zone: give it back."""
    return value.replace(tzinfo=UTC) if getattr(value, "tzinfo", 1) is None else value
