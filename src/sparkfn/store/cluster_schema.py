"""The cluster's tables (version 13, 14): its workers, its leader and what each is assigned.

Kept apart from :mod:`sparkfn.store.schema` (which holds every other table)
but on the same :data:`~sparkfn.store.schema.metadata`, so a fresh store is
created with them and :mod:`sparkfn.store.migrations` adds them to an old one.
Times that decide membership (``lease_expires_at``) are the store's clock,
never a worker's: see :mod:`sparkfn.worker.cluster.membership`.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, Integer, PrimaryKeyConstraint, String, Table

from sparkfn.store.schema import metadata

# One row per worker that joined: written when it joins, its lease renewed by
# every heartbeat. A worker whose lease is past is not a member any more.
cluster_workers = Table(
    "cluster_workers",
    metadata,
    Column("worker_id", String(256), primary_key=True),
    Column("host", String(256), nullable=False),
    Column("port", Integer, nullable=False),
    # A new value each time the worker (re)joins: a worker that was out and
    # came back is a new member, not the one whose work was moved.
    Column("incarnation", String(64), nullable=False),
    Column("capacity", Integer, nullable=False),
    # PostgreSQL: the backend pid of the session that holds (or waits for) the
    # leader lock, so a candidate can end the session of a leader whose lease
    # is past (a paused process keeps its session open). None on SQLite.
    Column("lock_pid", Integer, nullable=True),
    Column("joined_at", DateTime(timezone=True), nullable=False),
    Column("heartbeat_at", DateTime(timezone=True), nullable=False),
    Column("lease_expires_at", DateTime(timezone=True), nullable=False),
)

# At most one row (id 1): who took the leader lock last, and the term, which
# grows by one with every new leader.
cluster_leader = Table(
    "cluster_leader",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("worker_id", String(256), nullable=False),
    Column("term", BigInteger, nullable=False),
    Column("elected_at", DateTime(timezone=True), nullable=False),
)

# One row per instance of a function, source or sink (its control id and
# instance id): the worker it is assigned to and the assignment's epoch, which
# grows every time the owner changes (sparkfn.worker.cluster.assignment).
# Version 14: a run moved off a live worker names it and the run epoch it ran,
# so the new owner waits for that run to end (sparkfn.worker.cluster.handover).
cluster_assignments = Table(
    "cluster_assignments",
    metadata,
    Column("control_id", String(400), nullable=False),
    Column("instance_id", Integer, nullable=False),
    Column("worker_id", String(256), nullable=False),
    Column("epoch", BigInteger, nullable=False),
    Column("assigned_at", DateTime(timezone=True), nullable=False),
    Column("previous_worker_id", String(256), nullable=True),
    Column("previous_epoch", BigInteger, nullable=True),
    PrimaryKeyConstraint("control_id", "instance_id"),
)

CLUSTER_TABLES = (cluster_workers, cluster_leader, cluster_assignments)
