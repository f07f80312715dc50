"""The lifecycle's shared record in the store: runs, deaths, stop requests (commands: objects.py).

Everyone who takes part in a function's lifecycle meets here, because they
live in different processes: the supervisor (driver side) starts and stops
runs and records transitions; the source reader (Spark's driver-side Python
runner) reads the stop request and the live instances to plan batches; the
sink (another runner) records end-of-stream commits and refuses batches of
dead instances; Python worker processes record deaths (``context.fatal``)
and the objects they create and close, and act on commands.

Every transition is recorded in ``function_transitions`` with its cause and
time; instance ``-1`` stands for the function as a whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, insert, select, update

from sparkfn.api.lifecycle import DeathCause, RunState
from sparkfn.runtime.lifecycle.states import (
    FINAL_STATES,
    INSTANCE_TRANSITIONS,
    RETIRE,
    RUN_TRANSITIONS,
    START_TRANSITIONS,
    IllegalTransition,
    Table,
    transition,
)
from sparkfn.store import schema, signals
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store

FUNCTION = -1  # instance id of the function as a whole in transitions

# Function and instance states (DESIGN.md 2.3), as stored: RunState values.
CREATED, STARTING, RUNNING = RunState.CREATED, RunState.STARTING, RunState.RUNNING
RESTARTING, STOPPING, STOPPED = RunState.RESTARTING, RunState.STOPPING, RunState.STOPPED
SUSPENDED, ERROR, PARKED = RunState.SUSPENDED, RunState.ERROR, RunState.PARKED
ENDED = (STOPPED, SUSPENDED, ERROR)

KINDS = ("function", "sink", "source")


def control_id(kind: str, fqfn: str) -> str:
    """The id under which a run's lifecycle records are kept.

    A function's is its FQFN (so status lookups by FQFN keep working); a
    sink's or a source's is qualified by its kind (``"sink:public/default/x"``),
    so a function, a sink and a source of the same name never share records.
    """
    if kind not in KINDS:
        msg = f"{fqfn}: kind must be one of {', '.join(KINDS)}; got {kind!r}"
        raise ValueError(msg)
    return fqfn if kind == "function" else f"{kind}:{fqfn}"


runs = schema.function_runs
instance_runs = schema.function_instance_runs
transitions = schema.function_transitions
commands = schema.function_commands
objects = schema.function_objects


@dataclass(frozen=True)
class InstanceRecord:
    """One instance's row."""

    instance_id: int
    state: str
    cause: str
    epoch: int
    restarts: int
    fatal_exceptions: int
    dead: bool
    handled: bool
    fatal: bool
    death: DeathCause | None
    died_at: datetime | None


@dataclass(frozen=True)
class RunControl:
    """What the reader and the sink need to know about a run, read in one go."""

    state: str
    cause: str
    epoch: int
    stop_mode: str | None
    drain_target: dict[str, int] | None
    final_seq: int
    final_committed: int
    instances: dict[int, InstanceRecord] = field(default_factory=dict)

    def live(self, parallelism: int) -> list[int]:
        """Instances that take input: not dead in this epoch, not shut down and not
        stopping alone (an instance's own drain or suspend)."""
        return [
            i
            for i in range(parallelism)
            if (rec := self.instances.get(i)) is None
            or not (rec.dead or rec.state in ENDED or rec.state == STOPPING)
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
            _transition(conn, fqfn, i, STOPPED, f"{cause} (parallelism {parallelism})", RETIRE)
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
        _transition(conn, fqfn, FUNCTION, STARTING, cause, START_TRANSITIONS)
        for i in range(parallelism):
            _transition(conn, fqfn, i, STARTING, cause, START_TRANSITIONS)
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


def _transition(
    conn: Connection,
    fqfn: str,
    instance_id: int,
    state: str,
    cause: str,
    moves: Table | None = None,
    current: str | None = None,
) -> None:
    """Move the function (``FUNCTION``) or an instance to ``state``; record it if it changed.

    The move must be legal in ``moves`` (by default the run's table for the
    function, the instance's for an instance), and the record must exist:
    :class:`~.states.IllegalTransition` otherwise, and nothing is written.
    ``current``: the state the caller read in this transaction.
    """
    table, where = _row(fqfn, instance_id)
    what = fqfn if instance_id == FUNCTION else f"{fqfn} instance {instance_id}"
    current = current or conn.execute(select(table.c.state).where(where)).scalar()
    if current is None:
        msg = f"{what}: no record to move to {state} (it was never started, or was deleted)"
        raise IllegalTransition(msg)
    if moves is None:
        moves = RUN_TRANSITIONS if instance_id == FUNCTION else INSTANCE_TRANSITIONS
    transition(current, state, moves, what)
    conn.execute(update(table).where(where).values(state=state, cause=cause, updated_at=utc_now()))
    if current != state:
        conn.execute(
            insert(transitions).values(
                fqfn=fqfn,
                instance_id=instance_id,
                from_state=current,
                to_state=state,
                cause=cause,
                at=utc_now(),
            )
        )


def _row(fqfn: str, instance_id: int) -> tuple[Any, Any]:
    """The table and the row of the function (``FUNCTION``) or of one instance."""
    if instance_id == FUNCTION:
        return runs, runs.c.fqfn == fqfn
    return instance_runs, and_(
        instance_runs.c.fqfn == fqfn, instance_runs.c.instance_id == instance_id
    )


def set_state(
    store: Store,
    fqfn: str,
    state: str,
    cause: str,
    instance_ids: Iterable[int] = (FUNCTION,),
    *,
    keep_ended: bool = False,
    only_from: frozenset[str] | None = None,
) -> None:
    """Record a transition of the function and/or some instances.

    Every move goes through :func:`_transition`, which raises
    :class:`~.states.IllegalTransition` on an illegal one. A writer that may
    race with another says which records it leaves as they are, and they are
    left out (not moved, and not returned):
    ``keep_ended``: those already ended (a source thread's late report
    of its own end does not overwrite the end its supervisor recorded).
    ``only_from``: those in none of these states (a supervisor's late
    record of a start does not undo what an instance's own thread recorded since).
    """
    with store.write() as conn:
        signals.hint_on_commit(conn, signals.control_hint(fqfn))
        for i in instance_ids:
            table, where = _row(fqfn, i)
            current = conn.execute(select(table.c.state).where(where)).scalar()
            if current is not None and (
                (keep_ended and current in ENDED) or (only_from and current not in only_from)
            ):
                continue
            _transition(conn, fqfn, i, state, cause, current=current)


def request_stop(
    store: Store, fqfn: str, mode: str, drain_target: dict[str, int] | None = None
) -> int:
    """Ask the reader to stop admitting input (``drain``: up to ``drain_target``).

    Returns the end-of-stream sequence number the final batch will carry;
    the sink sets ``final_committed`` to it when that batch commits.
    """
    with store.write() as conn:
        signals.hint_on_commit(conn, signals.control_hint(fqfn))
        row = conn.execute(select(runs).where(runs.c.fqfn == fqfn)).one()
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
        _transition(conn, fqfn, FUNCTION, STOPPING, f"{mode} requested")
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
    ``only_from`` and no stop is asked; whether it moved (parking, waking)."""
    query = select(runs.c.state, runs.c.stop_mode).where(runs.c.fqfn == fqfn)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()  # as the reader's read of it in its plan
    row = conn.execute(query).first()
    if row is None or row.state not in only_from or row.stop_mode is not None:
        return False
    _transition(conn, fqfn, FUNCTION, state, cause, current=row.state)
    return True


def live_state(conn: Connection, control_id: str) -> str | None:
    """The state of ``control_id``'s run while it is live (not final); None otherwise."""
    run = read_control(conn, control_id)
    return None if run is None or RunState(run.state).final else run.state


def read_control(store: Store | Connection, fqfn: str) -> RunControl | None:
    """The run's control record, or ``None`` when nothing supervises ``fqfn``."""
    if isinstance(store, Store):
        with store.read() as conn:
            return read_control(conn, fqfn)
    return read_controls(store, [fqfn]).get(fqfn)


def epochs_of(conn: Connection, ids: Iterable[str], *, lock: bool = False) -> dict[str, int]:
    """``{control id: epoch}`` of many runs in one query (``lock``: for update, on
    PostgreSQL, in id order: a new run's epoch bump waits for the caller's commit)."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    query = select(runs.c.fqfn, runs.c.epoch).where(runs.c.fqfn.in_(wanted))
    if lock and conn.dialect.name == "postgresql":
        query = query.order_by(runs.c.fqfn).with_for_update()
    return {r.fqfn: r.epoch for r in conn.execute(query)}


def read_controls(conn: Connection, ids: Iterable[str]) -> dict[str, RunControl]:
    """The control records of many runs in two queries (a group's reader, every trigger)."""
    wanted = list(ids)
    if not wanted:
        return {}
    rows = conn.execute(select(runs).where(runs.c.fqfn.in_(wanted))).all()
    found: dict[str, dict[int, InstanceRecord]] = {}
    for r in conn.execute(select(instance_runs).where(instance_runs.c.fqfn.in_(wanted))):
        found.setdefault(r.fqfn, {})[r.instance_id] = _instance_record(r)
    return {
        row.fqfn: RunControl(
            state=row.state,
            cause=row.cause,
            epoch=row.epoch,
            stop_mode=row.stop_mode,
            drain_target=json.loads(row.drain_target) if row.drain_target else None,
            final_seq=row.final_seq,
            final_committed=row.final_committed,
            instances=found.get(row.fqfn, {}),
        )
        for row in rows
    }


def _instance_record(r: Any) -> InstanceRecord:
    death = (
        DeathCause(
            r.death_type,
            r.death_message or "",
            r.death_traceback or "",
            r.death_origin or "",
            r.death_thread or "",
        )
        if r.death_type
        else None
    )
    return InstanceRecord(
        r.instance_id,
        r.state,
        r.cause,
        r.epoch,
        r.restarts,
        r.fatal_exceptions,
        bool(r.dead),
        bool(r.handled),
        bool(r.fatal),
        death,
        r.died_at,
    )


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
            _transition(conn, fqfn, instance_id, ERROR, f"{what}: {cause} ({cause.origin})")
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
            _transition(conn, fqfn, i, RUNNING, cause)


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


def transitions_of(store: Store, fqfn: str) -> list[dict[str, Any]]:
    """Every recorded transition of ``fqfn``, oldest first."""
    with store.read() as conn:
        rows = conn.execute(
            select(transitions).where(transitions.c.fqfn == fqfn).order_by(transitions.c.id)
        ).all()
    return [
        {
            "instance": None if r.instance_id == FUNCTION else r.instance_id,
            "from": r.from_state,
            "to": r.to_state,
            "cause": r.cause,
            "at": r.at.isoformat() if r.at else None,
        }
        for r in rows
    ]
