"""Version 14 on a store that version 13 left: the hand-over's and the update mode's columns."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine, inspect, select, text
from sqlalchemy.engine import make_url

from sparkfn.store import schema
from sparkfn.store.clock import utc_now as _now
from sparkfn.store.cluster_schema import cluster_assignments
from sparkfn.store.migrations import MIGRATIONS
from sparkfn.store.registry_schema import functions
from sparkfn.store.store import Store

ADDED = {
    "cluster_assignments": {"previous_worker_id", "previous_epoch"},
    "functions": {"update_mode"},
}


def _engine_without_migrations(store_url: str) -> Engine:
    if store_url.startswith("sqlite"):
        return Store._sqlite_engine(make_url(store_url).database)
    return create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))


def test_a_version_13_store_gets_the_columns_with_its_rows_kept(
    store_url: str, data_dir: Path
) -> None:
    """Steps 5 and 13 create their tables as defined now; a store made by the release
    before had them without the new columns, which are dropped here to build it."""
    engine = _engine_without_migrations(store_url)
    now = _now()
    with engine.begin() as conn:
        for step in MIGRATIONS[:13]:
            step.apply(conn)
            conn.execute(
                schema.schema_version.insert().values(
                    version=step.number, description=step.description, applied_at=now
                )
            )
        for table, columns in ADDED.items():
            for column in sorted(columns):
                conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        conn.execute(
            text(
                "INSERT INTO functions (fqfn, version, desired, created_at, updated_at) "
                "VALUES ('public/default/f', 2, 'running', :now, :now)"
            ),
            {"now": now},
        )
        conn.execute(
            text(
                "INSERT INTO cluster_assignments (control_id, instance_id, worker_id, epoch, "
                "assigned_at) VALUES ('public/default/f', 0, 'a', 3, :now)"
            ),
            {"now": now},
        )
    engine.dispose()
    store = Store.open(store_url, data_dir)
    try:
        with store.read() as conn:
            found = inspect(conn)
            for table, columns in ADDED.items():
                assert columns <= {c["name"] for c in found.get_columns(table)}
            assert conn.execute(select(functions.c.version, functions.c.update_mode)).one() == (
                2,
                None,
            )
            row = conn.execute(
                select(
                    cluster_assignments.c.worker_id,
                    cluster_assignments.c.epoch,
                    cluster_assignments.c.previous_worker_id,
                    cluster_assignments.c.previous_epoch,
                )
            ).one()
            assert tuple(row) == ("a", 3, None, None)
    finally:
        store.close()
