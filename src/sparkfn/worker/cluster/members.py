"""The cluster as the REST API shows it: the live workers and the leader, read from the store.

A worker is live while its lease runs (on the store's clock). The leader
is the worker recorded by the last leader election, while its lease runs:
a leader that died shows as none until the next one takes the lock, a few
seconds later.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select, update

from sparkfn.api.lifecycle import RunState
from sparkfn.store.cluster_schema import cluster_assignments, cluster_leader, cluster_workers
from sparkfn.store.registry_schema import functions
from sparkfn.store.schema import function_runs
from sparkfn.store.store import Store
from sparkfn.worker.cluster.clock import store_now

# A run in these states runs no instance (CREATED: never started).
_NOT_RUNNING = (RunState.CREATED, RunState.STOPPED, RunState.SUSPENDED, RunState.ERROR)


@dataclass(frozen=True)
class WorkerInfo:
    """One live worker, as Pulsar's ``WorkerInfo`` names it."""

    worker_id: str
    host: str
    port: int


def live_workers(store: Store) -> list[WorkerInfo]:
    """Every worker whose lease runs, by worker id."""
    table = cluster_workers
    with store.read() as conn:
        now = store_now(conn)
        rows = conn.execute(
            select(table.c.worker_id, table.c.host, table.c.port)
            .where(table.c.lease_expires_at > now)
            .order_by(table.c.worker_id)
        ).all()
    return [WorkerInfo(row.worker_id, row.host, row.port) for row in rows]


def current_leader(store: Store) -> tuple[WorkerInfo, int] | None:
    """The leader and its term, or None while no live worker leads."""
    workers = cluster_workers
    with store.read() as conn:
        now = store_now(conn)
        row = conn.execute(
            select(workers.c.worker_id, workers.c.host, workers.c.port, cluster_leader.c.term)
            .join(cluster_leader, cluster_leader.c.worker_id == workers.c.worker_id)
            .where(cluster_leader.c.id == 1, workers.c.lease_expires_at > now)
        ).first()
    if row is None:
        return None
    return WorkerInfo(row.worker_id, row.host, row.port), int(row.term)


def owner(store: Store, control_id: str) -> tuple[str, WorkerInfo | None] | None:
    """Who runs ``control_id`` (instance 0: a run is one instance of the assignment):
    its worker id and, while that worker's lease runs, where it serves; None when
    the run is assigned to nobody (stopped, never placed, or waiting for room)."""
    table, workers = cluster_assignments, cluster_workers
    with store.read() as conn:
        now = store_now(conn)
        row = conn.execute(
            select(table.c.worker_id, workers.c.host, workers.c.port, workers.c.lease_expires_at)
            .select_from(
                table.outerjoin(
                    workers,
                    (workers.c.worker_id == table.c.worker_id) & (workers.c.lease_expires_at > now),
                )
            )
            .where(table.c.control_id == control_id, table.c.instance_id == 0)
        ).first()
    if row is None or not row.worker_id:
        return None
    live = WorkerInfo(row.worker_id, row.host, row.port) if row.host is not None else None
    return row.worker_id, live


def placed(store: Store, control_id: str) -> str | None:
    """The worker that runs ``control_id`` and keeps it: one whose lease runs and that has
    room (capacity above 0). None when the run is assigned to nobody, to a departed
    worker, or to a drained one: the leader's next round moves it, if a worker has room."""
    table, workers = cluster_assignments, cluster_workers
    with store.read() as conn:
        now = store_now(conn)
        found = conn.execute(
            select(table.c.worker_id)
            .join(workers, workers.c.worker_id == table.c.worker_id)
            .where(
                table.c.control_id == control_id,
                table.c.instance_id == 0,
                workers.c.lease_expires_at > now,
                workers.c.capacity > 0,
            )
        ).scalar_one_or_none()
    return str(found) if found else None


def assignments(store: Store) -> dict[str, list[str]]:
    """Each worker's assigned instances, Pulsar's way: ``{worker id: ["t/n/f:0", ...]}``
    (a source's or sink's with its kind first, ``sink:t/n/s:0``: names are per kind)."""
    table, runs = cluster_assignments, function_runs
    with store.read() as conn:
        rows = conn.execute(
            select(table.c.worker_id, table.c.control_id, func.coalesce(runs.c.parallelism, 1))
            .select_from(table.outerjoin(runs, runs.c.fqfn == table.c.control_id))
            .where(table.c.worker_id != "")
            .order_by(table.c.worker_id, table.c.control_id)
        ).all()
    found: dict[str, list[str]] = {}
    for worker_id, control_id, parallelism in rows:
        found.setdefault(worker_id, []).extend(f"{control_id}:{i}" for i in range(parallelism))
    return found


def room(store: Store, placing: str | None = None) -> tuple[int, int, int]:
    """The live workers: how many, their capacity in all, and the runs assigned to them
    that should run (a stopped run's assignment is dropped by the leader's next round),
    but for ``placing``: the run room is looked for (on a drained worker it needs room
    elsewhere, not beside itself)."""
    workers, table, registered = cluster_workers, cluster_assignments, functions
    with store.read() as conn:
        now = store_now(conn)
        live = conn.execute(
            select(func.count(), func.coalesce(func.sum(workers.c.capacity), 0)).where(
                workers.c.lease_expires_at > now
            )
        ).one()
        used = conn.execute(
            select(func.count())
            .select_from(
                table.join(workers, workers.c.worker_id == table.c.worker_id).join(
                    registered, registered.c.fqfn == table.c.control_id
                )
            )
            .where(
                workers.c.lease_expires_at > now,
                registered.c.desired == "running",
                table.c.control_id != (placing or ""),
            )
        ).scalar_one()
    return int(live[0]), int(live[1]), int(used)


def own_assignments(store: Store, worker_id: str) -> dict[str, list[str]]:
    """A SQLite store's one worker runs every run that has not ended: its instances, in
    :func:`assignments`' shape (no leader assigns them, so no assignment row names them)."""
    runs, ended = function_runs, [s.value for s in _NOT_RUNNING]
    with store.read() as conn:
        rows = conn.execute(
            select(runs.c.fqfn, func.coalesce(runs.c.parallelism, 1))
            .where(runs.c.state.not_in(ended))
            .order_by(runs.c.fqfn)
        ).all()
    names = [f"{cid}:{i}" for cid, parallelism in rows for i in range(parallelism)]
    return {worker_id: names} if names else {}


def drain(store: Store, worker_id: str) -> bool:
    """Give ``worker_id`` no more room (capacity 0): the leader's next round moves its
    instances to the others. False if no such worker is a member."""
    with store.write() as conn:
        done = conn.execute(
            update(cluster_workers)
            .where(cluster_workers.c.worker_id == worker_id)
            .values(capacity=0)
        )
    return done.rowcount == 1


def drain_status(store: Store, worker_id: str) -> str:
    """Pulsar's drain status of ``worker_id``: ``NOT_RUN`` (not drained), ``RUNNING``
    (instances still assigned to it) or ``SUCCESS`` (none left)."""
    table = cluster_workers
    with store.read() as conn:
        capacity = conn.execute(
            select(table.c.capacity).where(table.c.worker_id == worker_id)
        ).scalar_one_or_none()
        left = conn.execute(
            select(func.count())
            .select_from(cluster_assignments)
            .where(cluster_assignments.c.worker_id == worker_id)
        ).scalar_one()
    if capacity is not None and capacity > 0:
        return "NOT_RUN"
    return "RUNNING" if left else "SUCCESS"
