"""A run its departed worker left, that no live worker has room for, waits: fenced and said so.

>>> wait_for_room(store, "public/default/f", left="w1")   # True: its record now says it waits

The leader leaves a run unassigned when its worker departed (died, paused
past its lease) and no live worker has room. The run's record still says
what the departed worker last wrote (``RUNNING``: a killed process records no
end), so ``functions status`` would show it running while nothing runs it.
The leader ends that record here, in one transaction: the run epoch grows by
one (so a paused worker that resumes commits nothing more of it, as when the
run moves to another worker) and the run and its live instances become
``SUSPENDED`` with a cause that says it waits for a worker with room. Its
next owner, once one has room, starts it as a new run from its subscription.
"""

from __future__ import annotations

from sqlalchemy import select, update

from sparkfn.runtime.lifecycle.control import (
    CREATED,
    ENDED,
    FUNCTION,
    STOPPING,
    SUSPENDED,
    instance_runs,
    runs,
)
from sparkfn.runtime.lifecycle.moves import move
from sparkfn.store import signals
from sparkfn.store.clock import utc_now
from sparkfn.store.cluster_schema import cluster_assignments
from sparkfn.store.store import Store


def waiting_cause(left: str) -> str:
    """The cause a waiting run's record shows."""
    return (
        f"waiting for a worker: no live worker of the cluster has room for it since its "
        f"worker {left} left; it starts once one has room"
    )


def wait_for_room(store: Store, control_id: str, *, left: str) -> bool:
    """End the record of run ``control_id``, which worker ``left`` ran and which waits
    unassigned; False if there was nothing to end (no record, ended already, or the run
    was given a worker meanwhile)."""
    cause = waiting_cause(left)
    with store.write() as conn:
        assigned = conn.execute(
            select(cluster_assignments.c.worker_id).where(
                cluster_assignments.c.control_id == control_id,
                cluster_assignments.c.instance_id == 0,
            )
        ).scalar_one_or_none()
        row = conn.execute(
            select(runs.c.state, runs.c.parallelism).where(runs.c.fqfn == control_id)
        ).first()
        if assigned or row is None or row.state in (*ENDED, CREATED):
            return False
        signals.hint_on_commit(conn, signals.control_hint(control_id))
        conn.execute(
            update(runs)
            .where(runs.c.fqfn == control_id)
            .values(epoch=runs.c.epoch + 1, updated_at=utc_now())
        )
        found = conn.execute(
            select(instance_runs.c.instance_id, instance_runs.c.state).where(
                instance_runs.c.fqfn == control_id
            )
        ).all()
        states = {int(r.instance_id): str(r.state) for r in found}
        for instance_id in range(row.parallelism):
            state = states.get(instance_id)
            if state is not None and state not in ENDED:
                move(conn, control_id, instance_id, SUSPENDED, cause, current=state)
        if row.state != STOPPING:
            move(conn, control_id, FUNCTION, STOPPING, cause, current=row.state)
        move(conn, control_id, FUNCTION, SUSPENDED, cause, current=STOPPING)
    return True
