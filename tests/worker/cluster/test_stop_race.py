"""A stop of a run that the leader is moving to another worker at that moment.

The stale-run check and the stop's write are one transaction: the stop reads
the run's record locked (on PostgreSQL) and writes only in its own epoch. So
a stop read before the leader's bump and written after it (the supervisor
checked the epoch, then the leader moved the run, then the stop was written)
is refused with ``StaleRunError`` instead of asking the newer run, on the
worker the run moved to, to stop.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text, update

from sparkfn.api.errors import StaleRunError
from sparkfn.runtime.lifecycle import control
from sparkfn.store.schema import function_runs
from sparkfn.store.store import Store
from sparkfn.worker.cluster.assignment import Assignment, InstanceKey, Plan
from sparkfn.worker.cluster.assignment_store import read_assignments, write_plan
from sparkfn.worker.cluster.leader_lock import record_leader
from waiting import until

FQFN = "public/default/moving"


def _placed_on_a(store: Store) -> tuple[int, int]:
    """The run begun on worker ``a``: (its epoch, the leader's term)."""
    epoch = control.begin_run(store, FQFN, "function", 1, "started on a")
    term = record_leader(store, "a")
    key = InstanceKey(FQFN, 0)
    write_plan(store, [], Plan({key: Assignment(key, "a", 1)}, 0, 1), term=term)
    record = control.read_control(store, FQFN)  # placing it fenced the run begun before
    assert record is not None and record.epoch > epoch
    return record.epoch, term


def _move_to_b(store: Store, term: int) -> None:
    key = InstanceKey(FQFN, 0)
    write_plan(
        store, read_assignments(store), Plan({key: Assignment(key, "b", 2)}, 1, 0), term=term
    )


def test_a_stop_of_a_run_moved_since_its_check_is_refused(store: Store) -> None:
    old, term = _placed_on_a(store)
    _move_to_b(store, term)  # the leader's bump, after the stop's check of the epoch
    with pytest.raises(StaleRunError, match=f"run epoch {old} came after a newer run"):
        control.request_stop(store, FQFN, "suspend", epoch=old)
    record = control.read_control(store, FQFN)
    assert record is not None and record.epoch == old + 1
    assert record.stop_mode is None  # the newer run is not asked to stop
    assert record.state == control.STARTING
    assert control.request_stop(store, FQFN, "suspend", epoch=old + 1) == 1  # its own: taken


@pytest.mark.backend("postgresql")
def test_a_stop_waits_for_the_leaders_bump_in_flight_and_then_sees_it(store: Store) -> None:
    """The race itself: the leader's transaction has bumped the epoch, not committed yet,
    when the stale run's stop reads the record. Unlocked, the read saw the old epoch and
    the stop then overwrote the newer run's record; locked, it waits and is refused."""
    old, _ = _placed_on_a(store)
    refused: list[BaseException] = []
    done = threading.Event()

    def stop() -> None:
        try:
            control.request_stop(store, FQFN, "drain", epoch=old)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            refused.append(exc)
        done.set()

    # The leader's move, in flight (a connection of its own: the store's writes are serial).
    with store.engine.connect() as conn, conn.begin():
        conn.execute(
            update(function_runs)
            .where(function_runs.c.fqfn == FQFN)
            .values(epoch=function_runs.c.epoch + 1)
        )
        me = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        # pg_locks, not pg_stat_activity: that one is a snapshot for the whole transaction.
        blocked = text(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND :me = ANY(pg_blocking_pids(pid))"
        )
        thread = threading.Thread(target=stop)
        thread.start()
        # The stop has read the record and waits on the move's row lock (unlocked, it read
        # the old epoch and waits at its write; locked, it waits at its read).
        until(lambda: conn.execute(blocked, {"me": me}).scalar_one(), "the stop waiting", 30)
    thread.join(30)
    assert done.is_set()
    assert len(refused) == 1 and isinstance(refused[0], StaleRunError), refused
    record = control.read_control(store, FQFN)
    assert record is not None and record.stop_mode is None and record.state == control.STARTING
