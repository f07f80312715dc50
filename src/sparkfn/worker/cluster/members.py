"""The cluster as the REST API shows it: the live workers and the leader, read from the store.

A worker is live while its lease runs (on the store's clock). The leader
is the worker recorded by the last leader election, while its lease runs:
a leader that died shows as none until the next one takes the lock, a few
seconds later.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from sparkfn.store.cluster_schema import cluster_leader, cluster_workers
from sparkfn.store.store import Store
from sparkfn.worker.cluster.clock import store_now


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
