"""The one checked, recorded move of a stored control record (a run's or an instance's state).

Every writer of a stored state goes through :func:`move`: the supervisor
(through :func:`set_state`), a source's instances reporting their runner
threads' moves, a user's start (:func:`~.control.begin_run`), a stop request,
a death, a revival and parking (:func:`~.control.move_run`). :func:`move`
checks the move with :func:`~.states.transition`, which raises
:class:`~.states.IllegalTransition` on an illegal one (a missing record is
refused too), and records every change in ``function_transitions`` with its
cause and time; nothing is written when it raises.

**Races are outcomes, not exceptions.** A writer that may meet a record
another writer moved on (a source thread's late report of its own end,
after its supervisor recorded the end; an instance that died while it was
asked to stop alone) says which records it leaves as they are, by a rule of
:func:`set_state` (``keep_ended``, ``keep_other_ends``, ``only_from``). Those records are not
moved, and :func:`set_state` returns them in :attr:`Moves.kept` with the
state they hold, for the caller to act on; the rule applies to instances
only: the run's own record is always moved strictly.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sqlalchemy import Connection, insert, select, update

from sparkfn.runtime.lifecycle.records import ENDED, FUNCTION, row_of, transitions
from sparkfn.runtime.lifecycle.states import (
    INSTANCE_TRANSITIONS,
    RUN_TRANSITIONS,
    IllegalTransition,
    Table,
    transition,
)
from sparkfn.store import signals
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store

_LOG = logging.getLogger("sparkfn.lifecycle")


def move(
    conn: Connection,
    fqfn: str,
    instance_id: int,
    state: str,
    cause: str,
    moves: Table | None = None,
    current: str | None = None,
) -> str:
    """Move the function (``FUNCTION``) or an instance to ``state``; record it if it changed.

    The move must be legal in ``moves`` (by default the run's table for the
    function, the instance's for an instance), and the record must exist:
    :class:`~.states.IllegalTransition` otherwise, and nothing is written.
    ``current``: the state the caller read in this transaction. Returns the
    state the record was in.
    """
    table, where = row_of(fqfn, instance_id)
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
    return current


@dataclass(frozen=True)
class Moves:
    """What :func:`set_state` did: the records it moved (or found in the state
    already), and those its race rule left as they were, with the state they hold."""

    moved: tuple[int, ...] = ()
    kept: Mapping[int, str] = field(default_factory=dict)


def set_state(
    store: Store,
    fqfn: str,
    state: str,
    cause: str,
    instance_ids: Iterable[int] = (FUNCTION,),
    *,
    keep_ended: bool = False,
    keep_other_ends: bool = False,
    only_from: frozenset[str] | None = None,
) -> Moves:
    """Move the function and/or some instances to ``state``, in one transaction.

    Every move goes through :func:`move`, which raises
    :class:`~.states.IllegalTransition` on an illegal one. A writer that may
    race with another names the instances it leaves as they are; they are
    not moved, and come back in :attr:`Moves.kept`:
    ``keep_ended``: those already ended (a source thread's late report of
    its own end does not overwrite the end its supervisor recorded).
    ``keep_other_ends``: those ended in another state than ``state`` (a run
    that ends leaves an instance that ended before it, stopped alone or shut
    down, as it was; one already in ``state`` takes the new cause).
    ``only_from``: those in none of these states (a supervisor's late record
    of a start does not undo what an instance's own thread recorded since).
    The run's own record (``FUNCTION``) is always moved, strictly.
    """
    moved: list[int] = []
    kept: dict[int, str] = {}
    with store.write() as conn:
        signals.hint_on_commit(conn, signals.control_hint(fqfn))
        for i in instance_ids:
            table, where = row_of(fqfn, i)
            current = conn.execute(select(table.c.state).where(where)).scalar()
            ended = current in ENDED and (keep_ended or (keep_other_ends and current != state))
            if (
                i != FUNCTION
                and current is not None
                and (ended or (only_from is not None and current not in only_from))
            ):
                kept[i] = current
                continue
            move(conn, fqfn, i, state, cause, current=current)
            moved.append(i)
    if kept:
        _LOG.debug("%s: %s (%s) left as they were: %s", fqfn, state, cause, kept)
    return Moves(tuple(moved), kept)
