"""A run moved off a live worker is handed over: its new owner starts it once the old run ended.

>>> handover = Handover(store, deadline=2 * shutdown_timeout + lease)
>>> handover.waits_for("public/default/f", epoch)   # why not start it yet, or None
"worker a's run (epoch 4) has not ended (RUNNING)"

When the leader moves a run off a worker whose lease still runs (a drain, a
join taking its share), it does not fence the run: the assignment row names
the worker it left (``previous_worker_id``) and the run epoch that worker
runs (``previous_epoch``). That worker sees the run is no longer assigned to
it and suspends it, committing its batch in flight. The new owner starts the
run once any of these holds:

* the old run's record has ended (``SUSPENDED``, ``STOPPED``, ``ERROR``) or
  is a newer run's (its epoch moved on);
* the old owner's lease has run out (it died or was paused meanwhile), or it
  joined again since the move (a restarted process does not run the old run;
  one that was fenced and rejoined has its leftover fenced by the new start);
* the hand-over's deadline has passed, counted on the new owner's clock from
  the first round that saw the move (the old owner's stop is bounded by twice
  its shutdown timeout; the deadline adds a lease to that).

The start itself begins a new run epoch (``begin_run``), so whatever is left
of the old run after a deadline or a lapse is fenced then: its commits are
refused. A run moved off a departed worker names no previous owner and is
started at once: a failover is never slowed by a hand-over.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import and_, select

from sparkfn.api.lifecycle import RunState
from sparkfn.store.cluster_schema import cluster_assignments, cluster_workers
from sparkfn.store.schema import function_runs
from sparkfn.store.store import Store
from sparkfn.worker.cluster.clock import store_now

log = logging.getLogger(__name__)

# A run record in one of these states has ended: its owner commits nothing more.
_ENDED = frozenset({RunState.CREATED, RunState.STOPPED, RunState.SUSPENDED, RunState.ERROR})


def old_run(store: Store, control_id: str) -> tuple[str, int, str] | None:
    """The run that the new owner of ``control_id`` must wait for: (its worker, its run
    epoch, its state), or None when there is none (no hand-over pending, the old owner's
    lease ran out or it joined again since, or its run has ended or was replaced)."""
    table, workers, runs = cluster_assignments, cluster_workers, function_runs
    with store.read() as conn:
        now = store_now(conn)
        row = conn.execute(
            select(table.c.previous_worker_id, table.c.previous_epoch, runs.c.epoch, runs.c.state)
            .select_from(
                table.join(
                    workers,
                    and_(
                        workers.c.worker_id == table.c.previous_worker_id,
                        workers.c.lease_expires_at > now,
                        # rejoined since (a restart): its old process's run is not its own
                        workers.c.joined_at <= table.c.assigned_at,
                    ),
                ).join(runs, runs.c.fqfn == table.c.control_id)
            )
            .where(table.c.control_id == control_id, table.c.instance_id == 0)
        ).first()
    if row is None or row.previous_epoch is None or row.epoch != row.previous_epoch:
        return None
    if RunState(row.state) in _ENDED:
        return None
    return str(row.previous_worker_id), int(row.epoch), str(row.state)


class Handover:
    """The new owner's side of hand-overs: whether to wait, with a deadline per move."""

    def __init__(self, store: Store, *, deadline: float) -> None:
        self.store = store
        self.deadline = deadline
        # (control id, assignment epoch) -> monotonic time the wait began
        self._since: dict[tuple[str, int], float] = {}

    def waits_for(self, control_id: str, epoch: int) -> str | None:
        """Why run ``control_id``, assigned here in ``epoch``, should not start yet (the old
        owner's run is still live), or None: start it."""
        found = old_run(self.store, control_id)
        key = (control_id, epoch)
        if found is None:
            self._since.pop(key, None)
            return None
        worker, run_epoch, state = found
        if key not in self._since:
            log.info(
                "%s is handed over here: waiting for worker %s's run (epoch %d, %s) to end",
                control_id, worker, run_epoch, state,
            )  # fmt: skip
        since = self._since.setdefault(key, time.monotonic())
        waited = time.monotonic() - since
        if waited >= self.deadline:
            self._since.pop(key, None)
            log.warning(
                "%s: worker %s's run (epoch %d) is still %s after %.0f s; starting it here, "
                "which fences that run", control_id, worker, run_epoch, state, waited,
            )  # fmt: skip
            return None
        return f"worker {worker}'s run (epoch {run_epoch}) has not ended ({state})"

    def pending(self) -> bool:
        """Whether a hand-over is being waited for (the loop looks again sooner)."""
        return bool(self._since)

    def forget(self, keep: set[str]) -> None:
        """Drop the waits of runs no longer assigned here (all but ``keep``)."""
        for key in [k for k in self._since if k[0] not in keep]:
            del self._since[key]
