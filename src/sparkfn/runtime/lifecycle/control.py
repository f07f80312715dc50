"""The lifecycle's shared record in the store: runs, deaths, stop requests (commands: objects.py).

Everyone who takes part in a function's lifecycle meets here, because they
live in different processes: the supervisor (driver side) starts and stops
runs and records transitions; the source reader (Spark's driver-side Python
runner) reads the stop request and the live instances to plan batches; the
sink (another runner) records end-of-stream commits and refuses batches of
dead instances; Python worker processes record deaths (``context.fatal``)
and the objects they create and close, and act on commands.

This module writes the record; :mod:`.records` names its tables and reads
it, and :mod:`.moves` is the one checked move of a state that every writer
here goes through (both are re-exported: ``control.read_control``,
``control.set_state``). Every transition is recorded in
``function_transitions`` with its cause and time; instance ``-1``
(:data:`FUNCTION`) stands for the function as a whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from sqlalchemy import Connection, and_, insert, select, update

from sparkfn.api.errors import StaleRunError
from sparkfn.api.lifecycle import DeathCause
from sparkfn.runtime.lifecycle.moves import Moves, move, set_state
from sparkfn.runtime.lifecycle.records import (
    CREATED,
    ENDED,
    ERROR,
    FUNCTION,
    KINDS,
    PARKED,
    RESTARTING,
    RUNNING,
    STARTING,
    STOPPED,
    STOPPING,
    SUSPENDED,
    InstanceRecord,
    RunControl,
    commands,
    control_id,
    epochs_of,
    instance_runs,
    live_state,
    objects,
    read_control,
    read_controls,
    runs,
    transitions,
    transitions_of,
)
from sparkfn.runtime.lifecycle.states import (
    FINAL_STATES,
    RETIRE,
    START_TRANSITIONS,
    IllegalTransition,
)
from sparkfn.store import signals
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store

__all__ = [
    "CREATED",
    "ENDED",
    "ERROR",
    "FUNCTION",
    "KINDS",
    "PARKED",
    "RESTARTING",
    "RUNNING",
    "STARTING",
    "STOPPED",
    "STOPPING",
    "SUSPENDED",
    "InstanceRecord",
    "Moves",
    "RunControl",
    "begin_run",
    "clear_stop",
    "commands",
    "control_id",
    "count_restart",
    "epochs_of",
    "instance_runs",
    "live_state",
    "mark_handled",
    "move_run",
    "next_epoch",
    "objects",
    "read_control",
    "read_controls",
    "record_death",
    "record_final_commit",
    "renew_final",
    "request_stop",
    "revive",
    "runs",
    "set_state",
    "transitions",
    "transitions_of",
]


# --- runs ---------------------------------------------------------------------------


def begin_run(store: Store, fqfn: str, kind: str, parallelism: int, cause: str) -> int:
    """A (re)start by a user: clear the stop request and deaths, bump the epoch; returns it."""
    now = utc_now()
    with store.write() as conn:
        signals.hint_on_commit(conn, signals.control_hint(fqfn))
        row = conn.execute(select(runs).where(runs.c.fqfn == fqfn)).first()
        epoch = (row.epoch + 1) if row is not None else 1
        values = {
            "kind": kind,
            "epoch": epoch,
            "parallelism": parallelism,
            "stop_mode": None,
            "drain_target": None,
            "restarts": 0,
            "updated_at": now,
        }
        if row is None:
            conn.execute(
                insert(runs).values(
                    fqfn=fqfn, state=CREATED, cause="", final_seq=0, final_committed=0, **values
                )
            )
        else:
            conn.execute(update(runs).where(runs.c.fqfn == fqfn).values(**values))
        beyond = instance_runs.c.instance_id >= parallelism
        retired = select(instance_runs.c.instance_id).where(
            and_(instance_runs.c.fqfn == fqfn, beyond, instance_runs.c.state != STOPPED)
        )
        for i in conn.execute(retired).scalars().all():  # the run shrank: they end with it
            move(conn, fqfn, i, STOPPED, f"{cause} (parallelism {parallelism})", RETIRE)
        conn.execute(
            update(instance_runs)
            .where(and_(instance_runs.c.fqfn == fqfn, beyond))
            .values(dead=False, updated_at=now)
        )
        for i in range(parallelism):
            _ensure_instance(conn, fqfn, i, epoch)
            conn.execute(
                update(instance_runs)
                .where(and_(instance_runs.c.fqfn == fqfn, instance_runs.c.instance_id == i))
                .values(epoch=epoch, dead=False, handled=False, fatal=False, updated_at=now)
            )
        if row is not None and row.state != CREATED and row.state not in FINAL_STATES:
            # its process ended without recording the run's end: this start supersedes it
            cause = (
                f"{cause} (the run of epoch {row.epoch} was left {row.state}: its process ended)"
            )
        move(conn, fqfn, FUNCTION, STARTING, cause, START_TRANSITIONS)
        for i in range(parallelism):
            move(conn, fqfn, i, STARTING, cause, START_TRANSITIONS)
    return epoch


def next_epoch(store: Store, fqfn: str) -> int:
    """A restart of the query by the supervisor: a new epoch, deaths of revived instances stay."""
    with store.write() as conn:
        conn.execute(
            update(runs)
            .where(runs.c.fqfn == fqfn)
            .values(epoch=runs.c.epoch + 1, updated_at=utc_now())
        )
        epoch = int(conn.execute(select(runs.c.epoch).where(runs.c.fqfn == fqfn)).scalar_one())
    return epoch


def _ensure_instance(conn: Connection, fqfn: str, instance_id: int, epoch: int) -> None:
    found = conn.execute(
        select(instance_runs.c.instance_id).where(
            and_(instance_runs.c.fqfn == fqfn, instance_runs.c.instance_id == instance_id)
        )
    ).first()
    if found is None:
        conn.execute(
            insert(instance_runs).values(
                fqfn=fqfn,
                instance_id=instance_id,
                state=CREATED,
                cause="",
                epoch=epoch,
                restarts=0,
                fatal_exceptions=0,
                dead=False,
                handled=False,
                fatal=False,
                updated_at=utc_now(),
            )
        )


def request_stop(
    store: Store,
    fqfn: str,
    mode: str,
    drain_target: dict[str, int] | None = None,
    *,
    epoch: int | None = None,
) -> int:
    """Ask the reader to stop admitting input (``drain``: up to ``drain_target``).

    Returns the end-of-stream sequence number the final batch will carry;
    the sink sets ``final_committed`` to it when that batch commits. With
    ``epoch``, the stop of that run only: :class:`StaleRunError` and nothing
    written if a newer run took the record (in a cluster, the leader moved
    the run to another worker), checked in the same transaction as the write.
    """
    with store.write() as conn:
        signals.hint_on_commit(conn, signals.control_hint(fqfn))
        query = select(runs).where(runs.c.fqfn == fqfn)
        if conn.dialect.name == "postgresql":
            query = query.with_for_update()  # a bump of the epoch waits, or is seen
        row = conn.execute(query).first()
        if row is None:
            msg = f"{fqfn}: no record to move to {STOPPING} (it was never started, or was deleted)"
            raise IllegalTransition(msg)
        if epoch is not None and row.epoch != epoch:
            msg = f"{fqfn}: the {mode} of run epoch {epoch} came after a newer run (epoch {row.epoch})"
            raise StaleRunError(msg)
        seq = row.final_seq + (0 if mode == "cancel" else 1)
        conn.execute(
            update(runs)
            .where(runs.c.fqfn == fqfn)
            .values(
                stop_mode=mode,
                drain_target=json.dumps(drain_target) if drain_target is not None else None,
                final_seq=seq,
                updated_at=utc_now(),
            )
        )
        move(conn, fqfn, FUNCTION, STOPPING, f"{mode} requested")
    return int(seq)


def renew_final(store: Store, fqfn: str) -> int | None:
    """Ask for a new end-of-stream batch of the stop under way; its sequence number.

    A drain's final batch that a poison hunt starts again cut short is
    replayed from Spark's checkpoint with the old number: it then ends
    nothing, and the reader reads on to the drain's target. ``None``: no
    drain or suspend is under way.
    """
    with store.write() as conn:
        signals.hint_on_commit(conn, signals.control_hint(fqfn))
        row = conn.execute(select(runs).where(runs.c.fqfn == fqfn)).one_or_none()
        if row is None or row.stop_mode not in ("drain", "suspend"):
            return None
        seq = int(row.final_seq) + 1
        conn.execute(
            update(runs).where(runs.c.fqfn == fqfn).values(final_seq=seq, updated_at=utc_now())
        )
    return seq


def clear_stop(store: Store, fqfn: str) -> None:
    """Forget a stop request (the run ended, or a restart follows)."""
    with store.write() as conn:
        signals.hint_on_commit(conn, signals.control_hint(fqfn))
        conn.execute(
            update(runs)
            .where(runs.c.fqfn == fqfn)
            .values(stop_mode=None, drain_target=None, updated_at=utc_now())
        )


def move_run(
    conn: Connection, fqfn: str, state: str, cause: str, *, only_from: frozenset[str]
) -> bool:
    """Move the run to ``state`` in the caller's transaction if it is in one of
    ``only_from`` and no stop is asked; whether it moved (parking, waking).

    ``False`` is the race parking meets, an outcome its caller acts on: a stop
    was asked, or the run moved on (a drain of a parked run took it from
    ``PARKED`` to ``STOPPING``). A move the run's table forbids, or of a
    record that is not there, raises :class:`~.states.IllegalTransition`.
    """
    query = select(runs.c.state, runs.c.stop_mode).where(runs.c.fqfn == fqfn)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()  # as the reader's read of it in its plan
    row = conn.execute(query).first()
    if row is None:
        msg = f"{fqfn}: no record to move to {state} (it was never started, or was deleted)"
        raise IllegalTransition(msg)
    if row.state not in only_from or row.stop_mode is not None:
        return False
    move(conn, fqfn, FUNCTION, state, cause, current=row.state)
    return True


def record_final_commit(conn: Connection, fqfn: str) -> None:
    """The sink committed the end-of-stream batch (inside the batch's transaction)."""
    signals.hint_on_commit(conn, signals.control_hint(fqfn))
    conn.execute(
        update(runs)
        .where(runs.c.fqfn == fqfn)
        .values(final_committed=runs.c.final_seq, updated_at=utc_now())
    )


# --- deaths --------------------------------------------------------------------------


def record_death(
    store: Store, fqfn: str, instance_id: int, cause: DeathCause, *, fatal: bool, epoch: int
) -> bool:
    """An instance died in ``epoch``; the first death of an epoch wins. True if recorded."""
    with store.write() as conn:
        signals.hint_on_commit(conn, signals.control_hint(fqfn))
        _ensure_instance(conn, fqfn, instance_id, epoch)
        row = conn.execute(
            select(instance_runs).where(
                and_(instance_runs.c.fqfn == fqfn, instance_runs.c.instance_id == instance_id)
            )
        ).one()
        if row.dead and row.epoch == epoch:
            return False
        conn.execute(
            update(instance_runs)
            .where(and_(instance_runs.c.fqfn == fqfn, instance_runs.c.instance_id == instance_id))
            .values(
                dead=True,
                handled=False,
                fatal=fatal,
                epoch=epoch,
                fatal_exceptions=row.fatal_exceptions + (1 if fatal else 0),
                death_type=cause.type,
                death_message=cause.message,
                death_traceback=cause.traceback,
                death_origin=cause.origin,
                death_thread=cause.thread,
                died_at=utc_now(),
            )
        )
        what = "fatal" if fatal else "failed"
        if row.state not in (STOPPED, SUSPENDED):  # a death after its end does not reopen it
            move(conn, fqfn, instance_id, ERROR, f"{what}: {cause} ({cause.origin})")
    return True


def mark_handled(store: Store, fqfn: str, instance_ids: Iterable[int]) -> None:
    """The supervisor acted on these deaths."""
    with store.write() as conn:
        signals.hint_on_commit(conn, signals.control_hint(fqfn))
        for i in instance_ids:
            conn.execute(
                update(instance_runs)
                .where(and_(instance_runs.c.fqfn == fqfn, instance_runs.c.instance_id == i))
                .values(handled=True, updated_at=utc_now())
            )


def revive(store: Store, fqfn: str, instance_ids: Iterable[int], cause: str, epoch: int) -> None:
    """Instances take input again (a restart): not dead, RUNNING, restarts counted."""
    with store.write() as conn:
        signals.hint_on_commit(conn, signals.control_hint(fqfn))
        for i in instance_ids:
            conn.execute(
                update(instance_runs)
                .where(and_(instance_runs.c.fqfn == fqfn, instance_runs.c.instance_id == i))
                .values(dead=False, handled=False, epoch=epoch, updated_at=utc_now())
            )
            move(conn, fqfn, i, RUNNING, cause)


def count_restart(store: Store, fqfn: str, instance_ids: Iterable[int]) -> None:
    """Count a restart of the function and of these instances."""
    with store.write() as conn:
        conn.execute(update(runs).where(runs.c.fqfn == fqfn).values(restarts=runs.c.restarts + 1))
        for i in instance_ids:
            conn.execute(
                update(instance_runs)
                .where(and_(instance_runs.c.fqfn == fqfn, instance_runs.c.instance_id == i))
                .values(restarts=instance_runs.c.restarts + 1)
            )
