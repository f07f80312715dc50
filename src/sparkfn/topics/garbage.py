"""Deferred deletion of segment files no longer referenced by the index.

Compaction, retention and topic deletion only *retire* a file: its index
rows go away in the same transaction, and the file itself is deleted after a
grace period, so a reader that looked the segment up just before can still
open it. :func:`collect` deletes retired files whose grace period is over.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, delete, insert, select

from sparkfn.store import schema
from sparkfn.store.store import Store

DEFAULT_GRACE = timedelta(minutes=5)


def retire_locations(
    conn: Connection, locations: Iterable[str], grace: timedelta = DEFAULT_GRACE
) -> None:
    """Schedule files for deletion after ``grace``, inside the caller's transaction."""
    rows = [{"location": loc, "delete_after": datetime.now(UTC) + grace} for loc in locations]
    if rows:
        conn.execute(insert(schema.garbage_files), rows)


def collect(store: Store, now: datetime | None = None) -> int:
    """Delete retired files whose grace period has passed; returns how many."""
    now = now or datetime.now(UTC)
    table = schema.garbage_files
    with store.read() as conn:
        due = [
            r.location
            for r in conn.execute(select(table.c.location).where(table.c.delete_after <= now))
        ]
    for location in due:
        store.path(location).unlink(missing_ok=True)
    if due:
        with store.write() as conn:
            conn.execute(delete(table).where(table.c.location.in_(due)))
    return len(due)
