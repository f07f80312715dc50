"""The store's clock, as the cluster reads it: leases are measured on it, never on a worker's."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import ColumnElement, Connection, DateTime, func, select

from sparkfn.store.clock import utc_now


def store_now(conn: Connection) -> datetime:
    """The current time on the store's clock (PostgreSQL's ``clock_timestamp()``).

    A SQLite store is a file on this machine with one worker, whose clock is
    the store's.
    """
    if conn.dialect.name == "postgresql":
        found: datetime = conn.execute(select(func.clock_timestamp())).scalar_one()
        return found.astimezone(UTC)
    return utc_now()


def store_clock(conn: Connection) -> ColumnElement[datetime] | datetime:
    """The store's clock inside a statement: ``clock_timestamp()`` on PostgreSQL (read by
    the statement itself, no round trip of its own), this machine's on SQLite."""
    if conn.dialect.name == "postgresql":
        return func.clock_timestamp(type_=DateTime(timezone=True))
    return utc_now()
