"""Function state in the store: read by tasks, written by batch commits and operators.

Each function has its own key space (``fqfn``); a key has a counter, a value,
or both. Batch commits apply the net :class:`StateMutation` of every task in
the same transaction as the batch's outputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, insert, select, update

from sparkfn.state.buffer import CommittedState, StateMutation, StateReader
from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store

_T = schema.function_state


def state_reader(store: Store, fqfn: str) -> StateReader:
    """A reader of committed state, one query per key (the buffer caches keys)."""

    def read(key: str) -> CommittedState:
        with store.read() as conn:
            row = conn.execute(
                select(_T.c.counter, _T.c.value).where(and_(_T.c.fqfn == fqfn, _T.c.key == key))
            ).first()
        return CommittedState(None, None) if row is None else CommittedState(row.counter, row.value)

    return read


def get_state(store: Store, fqfn: str, key: str) -> CommittedState | None:
    """One key as committed, or ``None`` if absent."""
    with store.read() as conn:
        row = conn.execute(
            select(_T.c.counter, _T.c.value).where(and_(_T.c.fqfn == fqfn, _T.c.key == key))
        ).first()
    return None if row is None else CommittedState(row.counter, row.value)


def all_state(store: Store, fqfn: str) -> dict[str, CommittedState]:
    """Every key of a function (for tests and small key spaces)."""
    with store.read() as conn:
        rows = conn.execute(
            select(_T.c.key, _T.c.counter, _T.c.value).where(_T.c.fqfn == fqfn)
        ).all()
    return {r.key: CommittedState(r.counter, r.value) for r in rows}


def merge_mutations(batches: Iterable[Sequence[StateMutation]]) -> list[StateMutation]:
    """Fold the mutations of several tasks, in order, into one per key."""
    merged: dict[str, StateMutation] = {}
    for mutations in batches:
        for m in mutations:
            prev = merged.get(m.key)
            if prev is None or m.delete:
                merged[m.key] = StateMutation(m.key, m.delete, m.counter_delta, m.value)
                continue
            prev.counter_delta += m.counter_delta
            if m.sets_value:
                prev.value = m.value
    return list(merged.values())


def apply_mutations(conn: Connection, fqfn: str, mutations: Sequence[StateMutation]) -> None:
    """Apply net mutations inside the caller's transaction."""
    if not mutations:
        return
    now = utc_now()
    keys = [m.key for m in mutations]
    existing: dict[str, tuple[int | None, bytes | None]] = {}
    for first in range(0, len(keys), 500):
        chunk = keys[first : first + 500]
        for row in conn.execute(
            select(_T.c.key, _T.c.counter, _T.c.value).where(
                and_(_T.c.fqfn == fqfn, _T.c.key.in_(chunk))
            )
        ):
            existing[row.key] = (row.counter, row.value)
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    deletes: list[dict[str, Any]] = []
    for m in mutations:
        old = existing.get(m.key)
        if m.delete or old is None:
            counter = m.counter_delta if m.counter_delta else None
            value = m.value if m.sets_value else None
            if old is None and counter is None and value is None:
                continue
            if m.delete and counter is None and value is None:
                deletes.append({"k": m.key})
                continue
        else:
            counter = (old[0] or 0) + m.counter_delta if m.counter_delta else old[0]
            value = m.value if m.sets_value else old[1]
        change = {"k": m.key, "counter": counter, "value": value, "updated_at": now}
        (updates if old is not None else inserts).append(change)
    if deletes:
        conn.execute(delete(_T).where(and_(_T.c.fqfn == fqfn, _T.c.key == bindparam("k"))), deletes)
    if updates:
        conn.execute(
            update(_T)
            .where(and_(_T.c.fqfn == fqfn, _T.c.key == bindparam("k")))
            .values(
                counter=bindparam("counter"),
                value=bindparam("value"),
                updated_at=bindparam("updated_at"),
            ),
            updates,
        )
    if inserts:
        conn.execute(
            insert(_T),
            [
                {
                    "fqfn": fqfn,
                    "key": r["k"],
                    "counter": r["counter"],
                    "value": r["value"],
                    "updated_at": now,
                }
                for r in inserts
            ],
        )


def put_state(
    store: Store, fqfn: str, key: str, *, value: bytes | None = None, counter: int | None = None
) -> None:
    """Operator write: set a key's value and/or counter outright."""
    mutation = StateMutation(key, delete=True, counter_delta=counter or 0)
    if value is not None:
        mutation.value = value
    with store.write() as conn:
        apply_mutations(conn, fqfn, [mutation])
