"""The run's stored control record, as its readers see it: states, instances, transitions.

:mod:`~sparkfn.runtime.lifecycle.control` writes the record (every move of
a state goes through :mod:`~sparkfn.runtime.lifecycle.moves`); this module
names its tables and reads it: the supervisor, the reader planning a batch
and the sink committing one all read :class:`RunControl`. Every name here
is also reachable as ``control.<name>``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, select

from sparkfn.api.lifecycle import DeathCause, RunState
from sparkfn.store import schema
from sparkfn.store.store import Store

FUNCTION = -1  # instance id of the function as a whole in transitions

# Function and instance states (DESIGN.md 2.3), as stored: RunState values.
CREATED, STARTING, RUNNING = RunState.CREATED, RunState.STARTING, RunState.RUNNING
RESTARTING, STOPPING, STOPPED = RunState.RESTARTING, RunState.STOPPING, RunState.STOPPED
SUSPENDED, ERROR, PARKED = RunState.SUSPENDED, RunState.ERROR, RunState.PARKED
ENDED = (STOPPED, SUSPENDED, ERROR)

KINDS = ("function", "sink", "source")

runs = schema.function_runs
instance_runs = schema.function_instance_runs
transitions = schema.function_transitions
commands = schema.function_commands
objects = schema.function_objects


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


def row_of(fqfn: str, instance_id: int) -> tuple[Any, Any]:
    """The table and the row of the function (``FUNCTION``) or of one instance."""
    if instance_id == FUNCTION:
        return runs, runs.c.fqfn == fqfn
    return instance_runs, and_(
        instance_runs.c.fqfn == fqfn, instance_runs.c.instance_id == instance_id
    )


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


def read_controls(
    conn: Connection, ids: Iterable[str], *, lock: bool = False
) -> dict[str, RunControl]:
    """The control records of many runs in two queries (a group's reader, every trigger).

    ``lock``: for update, on PostgreSQL, the runs' rows then their instances'
    in id order: a move of one of them (an instance's ``STOPPING``) waits for
    the caller's commit, or the caller reads it once it is committed.
    """
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    run_rows = select(runs).where(runs.c.fqfn.in_(wanted))
    instance_rows = select(instance_runs).where(instance_runs.c.fqfn.in_(wanted))
    if lock and conn.dialect.name == "postgresql":
        run_rows = run_rows.order_by(runs.c.fqfn).with_for_update()
        order = (instance_runs.c.fqfn, instance_runs.c.instance_id)
        instance_rows = instance_rows.order_by(*order).with_for_update()
    rows = conn.execute(run_rows).all()
    found: dict[str, dict[int, InstanceRecord]] = {}
    for r in conn.execute(instance_rows):
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


def record_rows(conn: Connection, ids: Iterable[str]) -> dict[str, tuple[Any, ...]]:
    """Each run's control record as its raw rows, to compare with an earlier read.

    Two reads are equal where :func:`read_controls` would give equal records
    (every column it reads is here; ``updated_at`` is not), at under half its
    cost: nothing is decoded (the supervisors' shared record watch reads a
    thousand records every few seconds to see which changed).
    """
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    run_cols = [c for c in runs.c if c.name != "updated_at"]
    instance_cols = [c for c in instance_runs.c if c.name != "updated_at"]
    at, at_instance = run_cols.index(runs.c.fqfn), instance_cols.index(instance_runs.c.fqfn)
    found: dict[str, list[Any]] = {
        r[at]: [tuple(r)] for r in conn.execute(select(*run_cols).where(runs.c.fqfn.in_(wanted)))
    }
    instance_rows = (
        select(*instance_cols)
        .where(instance_runs.c.fqfn.in_(wanted))
        .order_by(instance_runs.c.fqfn, instance_runs.c.instance_id)
    )
    for r in conn.execute(instance_rows):
        rows = found.get(r[at_instance])
        if rows is not None:  # as read_controls: instances without their run's row are no record
            rows.append(tuple(r))
    return {fqfn: tuple(rows) for fqfn, rows in found.items()}


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
