"""The assignment in the store: read by every worker, written by the leader, term-fenced.

>>> current = read_assignments(store)
>>> plan = rebalance(workers, current)
>>> write_plan(store, current, plan, term=member.term)   # only the rows that changed

A leader writes in its own term only: the write locks the ``cluster_leader``
row and finds its term there, or raises :class:`StaleLeaderError` and
writes nothing, so a leader that was replaced while paused never overwrites
its successor's plan.

The same transaction **fences the runs** an instance leaves a departed
worker for: for every instance given to a new worker whose previous owner's
lease ran out, the run epoch of its control id (``function_runs``) grows by
one, so a batch of the run on the worker it left (paused, partitioned, or
dead) is refused by the commit's epoch check (``StaleRunError``) from the
moment the plan is written, before the new worker has started anything.

An instance moved off a **live** worker (a drain, a join) is not fenced: its
row names that worker and the run epoch it runs (``previous_worker_id``,
``previous_epoch``), the worker suspends the run (it is no longer assigned
to it) and the new owner starts it once that run has ended
(:mod:`sparkfn.worker.cluster.handover`): its batch in flight is committed,
not refused and done again.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, delete, insert, select, tuple_, update

from sparkfn.api.errors import StaleLeaderError
from sparkfn.store.cluster_schema import cluster_assignments, cluster_leader
from sparkfn.store.schema import function_runs
from sparkfn.store.store import Store
from sparkfn.worker.cluster.assignment import Assignment, InstanceKey, Plan
from sparkfn.worker.cluster.clock import store_now

DELETE_SLICE = 500  # (control id, instance id) pairs per DELETE


def read_assignments(store: Store, worker_id: str | None = None) -> list[Assignment]:
    """Every instance's assignment, or only those of ``worker_id``."""
    table = cluster_assignments
    query = select(
        table.c.control_id, table.c.instance_id, table.c.worker_id, table.c.epoch,
        table.c.previous_worker_id,
    )  # fmt: skip
    if worker_id is not None:
        query = query.where(table.c.worker_id == worker_id)
    with store.read() as conn:
        rows = conn.execute(query).all()
    return [
        Assignment(
            InstanceKey(row.control_id, row.instance_id),
            row.worker_id or None,
            row.epoch,
            row.previous_worker_id,
        )  # fmt: skip
        for row in rows
    ]


def assignment_of(store: Store, control_id: str) -> Assignment | None:
    """The assignment of run ``control_id`` (instance 0: a run is placed whole), or None."""
    table = cluster_assignments
    with store.read() as conn:
        row = conn.execute(
            select(table.c.worker_id, table.c.epoch, table.c.previous_worker_id).where(
                table.c.control_id == control_id, table.c.instance_id == 0
            )
        ).first()
    if row is None:
        return None
    return Assignment(
        InstanceKey(control_id, 0), row.worker_id or None, row.epoch, row.previous_worker_id
    )


def write_plan(
    store: Store,
    before: Iterable[Assignment],
    plan: Plan,
    *,
    term: int,
    removed: Iterable[InstanceKey] = (),
) -> int:
    """Write the assignments ``plan`` changed from ``before`` (and delete those of
    ``removed``) in one transaction; returns how many rows it wrote or deleted. Raises
    :class:`StaleLeaderError` outside ``term``. The runs of instances given to a new
    worker are fenced in the same transaction, or, moved off a live worker, handed over
    (the module docstring)."""
    was = {item.instance: item for item in before}
    changed = [item for key, item in plan.assignments.items() if was.get(key) != item]
    gone = sorted(set(removed))
    given = [
        item
        for item in changed
        if item.worker_id is not None
        and (was.get(item.instance) is None or was[item.instance].worker_id != item.worker_id)
    ]
    moved = sorted({item.instance.control_id for item in given if item.previous is None})
    handed = sorted({item.instance.control_id for item in given if item.previous is not None})
    with store.write() as conn:
        found = conn.execute(
            select(cluster_leader.c.term).where(cluster_leader.c.id == 1).with_for_update()
        ).scalar_one_or_none()
        if found != term:
            msg = f"leader of term {term} may not write the assignment: the term is now {found}"
            raise StaleLeaderError(msg)
        if not changed and not gone:
            return 0
        table = cluster_assignments
        keys = [(item.instance.control_id, item.instance.instance_id) for item in changed]
        keys += [(key.control_id, key.instance_id) for key in gone]
        # In slices: one IN list of 10,000 pairs overflows PostgreSQL's parser stack.
        for start in range(0, len(keys), DELETE_SLICE):
            pairs = keys[start : start + DELETE_SLICE]
            conn.execute(
                delete(table).where(tuple_(table.c.control_id, table.c.instance_id).in_(pairs))
            )
        for start in range(0, len(moved), DELETE_SLICE):
            conn.execute(
                update(function_runs)
                .where(function_runs.c.fqfn.in_(moved[start : start + DELETE_SLICE]))
                .values(epoch=function_runs.c.epoch + 1)
            )
        if not changed:
            return len(gone)
        ran = _run_epochs(conn, handed)
        now = store_now(conn)
        # An instance waiting for room has the worker id "" (the column is not nullable).
        conn.execute(
            insert(table),
            [
                {"control_id": item.instance.control_id, "instance_id": item.instance.instance_id,
                 "worker_id": item.worker_id or "", "epoch": item.epoch, "assigned_at": now,
                 "previous_worker_id": item.previous,
                 "previous_epoch": ran.get(item.instance.control_id) if item.previous else None}
                for item in changed
            ],
        )  # fmt: skip
    return len(changed) + len(gone)


def _run_epochs(conn: Connection, control_ids: list[str]) -> dict[str, int]:
    """The run epoch of each of ``control_ids`` that has a run record (the one its
    previous owner runs, read in the plan's transaction)."""
    found: dict[str, int] = {}
    for start in range(0, len(control_ids), DELETE_SLICE):
        rows = conn.execute(
            select(function_runs.c.fqfn, function_runs.c.epoch).where(
                function_runs.c.fqfn.in_(control_ids[start : start + DELETE_SLICE])
            )
        ).all()
        found.update({row.fqfn: int(row.epoch) for row in rows})
    return found
