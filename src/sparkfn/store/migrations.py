"""Versioned schema migrations.

The store records every applied step in ``sparkfn_schema_version``. Opening a
store applies the steps it has not seen, in order, each in its own
transaction, so a user upgrading sparkfn keeps their data. A fresh store is
created from the current :mod:`schema` and stamped with the latest version.

Adding a step: append a :class:`Migration` with the next number whose
``apply`` changes an existing store from the previous version to the new one
(explicit DDL through ``conn``), and change :mod:`schema` to the result. Never
edit a step that has shipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, inspect, select

from sparkfn.api.errors import SchemaVersionError
from sparkfn.store import cluster_schema, registry_schema, schema


@dataclass(frozen=True)
class Migration:
    """One numbered step from version ``number - 1`` to ``number``."""

    number: int
    description: str
    apply: Callable[[Connection], None]


def _initial(conn: Connection) -> None:
    later = (
        *schema.FUNCTION_TABLES,
        *schema.LIFECYCLE_TABLES,
        *schema.SUBSCRIPTION_TABLES,
        *registry_schema.REGISTRY_TABLES,
        *schema.TOPIC_SCHEMA_TABLES,
        *schema.SUBSCRIPTION_OWNER_TABLES,
        *schema.GROUP_TABLES,
        *registry_schema.PACKAGE_OWNER_TABLES,
        *schema.STORE_SETTINGS_TABLES,
        *cluster_schema.CLUSTER_TABLES,
    )
    tables = [t for t in schema.metadata.sorted_tables if t not in later]
    schema.metadata.create_all(conn, tables=tables)


def _functions(conn: Connection) -> None:
    # These tables are new in version 2, so their current definitions are
    # the version-2 ones; freeze them here if they ever change.
    for table in schema.FUNCTION_TABLES:
        table.create(conn, checkfirst=True)


def _lifecycle(conn: Connection) -> None:
    # New in version 3; freeze the definitions here if they ever change.
    for table in schema.LIFECYCLE_TABLES:
        table.create(conn, checkfirst=True)


def _subscription_plans(conn: Connection) -> None:
    # New in version 4; freeze the definition here if it ever changes.
    for table in schema.SUBSCRIPTION_TABLES:
        table.create(conn, checkfirst=True)


def _registry(conn: Connection) -> None:
    # New in version 5; freeze the definitions here if they ever change.
    for table in registry_schema.REGISTRY_TABLES:
        table.create(conn, checkfirst=True)


def _topic_schemas(conn: Connection) -> None:
    # New in version 6; freeze the definition here if it ever changes.
    for table in schema.TOPIC_SCHEMA_TABLES:
        table.create(conn, checkfirst=True)


def _package_paths(conn: Connection) -> None:
    # New in version 7; freeze the definition here if it ever changes.
    for table in registry_schema.PACKAGE_PATH_TABLES:
        table.create(conn, checkfirst=True)


# Version 8: on SQLite, ids of these tables are never reused. Without
# AUTOINCREMENT SQLite hands out max(id) + 1, so once a delete purged a
# function's rows, the next command could get an id a worker's control
# thread had already read past, and the thread never saw it (the objects
# of a function deleted and created again under its name were not closed).
# PostgreSQL's sequences never go back. The definitions are frozen here.
_AUTOINCREMENT_TABLES = {
    "function_commands": (
        "id INTEGER PRIMARY KEY AUTOINCREMENT, fqfn VARCHAR(400) NOT NULL, "
        "instances TEXT NOT NULL, command VARCHAR(32) NOT NULL, epoch INTEGER NOT NULL, "
        "issued_at DATETIME NOT NULL",
        "id, fqfn, instances, command, epoch, issued_at",
        (),
    ),
    "function_objects": (
        "id INTEGER PRIMARY KEY AUTOINCREMENT, fqfn VARCHAR(400) NOT NULL, "
        "instance_id INTEGER NOT NULL, epoch INTEGER NOT NULL, host VARCHAR(256) NOT NULL, "
        "pid INTEGER NOT NULL, created_at DATETIME NOT NULL, closed_at DATETIME, "
        "closed_by VARCHAR(64), close_error TEXT",
        "id, fqfn, instance_id, epoch, host, pid, created_at, closed_at, closed_by, close_error",
        ("CREATE INDEX ix_function_objects ON function_objects (fqfn, closed_at)",),
    ),
}


def _ids_never_reused(conn: Connection) -> None:
    if conn.dialect.name != "sqlite":
        return
    for table, (columns, names, indexes) in _AUTOINCREMENT_TABLES.items():
        conn.exec_driver_sql(f"CREATE TABLE {table}_v8 ({columns})")
        conn.exec_driver_sql(f"INSERT INTO {table}_v8 ({names}) SELECT {names} FROM {table}")
        conn.exec_driver_sql(f"DROP TABLE {table}")
        conn.exec_driver_sql(f"ALTER TABLE {table}_v8 RENAME TO {table}")
        for index in indexes:
            conn.exec_driver_sql(index)


def _subscription_owners(conn: Connection) -> None:
    # New in version 9; freeze the definition here if it ever changes. An
    # existing subscription has no owner yet: its next plan claims it.
    for table in schema.SUBSCRIPTION_OWNER_TABLES:
        table.create(conn, checkfirst=True)


def _groups(conn: Connection) -> None:
    # New in version 10; freeze the definition here if it ever changes.
    for table in schema.GROUP_TABLES:
        table.create(conn, checkfirst=True)


def _package_owners(conn: Connection) -> None:
    # New in version 11; freeze the definition here if it ever changes. The
    # packages stored so far are held by the tenants that can name them: by
    # an upload path under the tenant, or as the package of its function.
    for table in registry_schema.PACKAGE_OWNER_TABLES:
        table.create(conn, checkfirst=True)
    packages, paths, versions = (
        registry_schema.packages,
        registry_schema.package_paths,
        registry_schema.function_versions,
    )
    held: dict[tuple[str, str], dict[str, object]] = {}
    named = select(paths.c.path, paths.c.digest, paths.c.uploaded_by, paths.c.uploaded_at)
    for row in conn.execute(named.order_by(paths.c.uploaded_at)):
        if "/" in row.path:
            owner = row.path.split("/", 1)[0]
            held.setdefault((row.digest, owner), {"by": row.uploaded_by, "at": row.uploaded_at})
    used = select(versions.c.fqfn, versions.c.package_digest, versions.c.created_by,
                  versions.c.created_at).where(versions.c.package_digest.is_not(None))  # fmt: skip
    for row in conn.execute(used.order_by(versions.c.created_at)):
        owner = row.fqfn.split("/", 1)[0]
        held.setdefault((row.package_digest, owner), {"by": row.created_by, "at": row.created_at})
    filenames = dict(conn.execute(select(packages.c.digest, packages.c.filename)).tuples().all())
    rows = [
        {"digest": digest, "owner": owner, "filename": filenames[digest],
         "uploaded_by": who["by"], "uploaded_at": who["at"]}
        for (digest, owner), who in held.items()
        if digest in filenames
    ]  # fmt: skip
    if rows:
        conn.execute(registry_schema.package_owners.insert(), rows)


def _store_settings(conn: Connection) -> None:
    # New in version 12; freeze the definition here if it ever changes. No
    # row means every setting's default.
    for table in schema.STORE_SETTINGS_TABLES:
        table.create(conn, checkfirst=True)


def _cluster(conn: Connection) -> None:
    # New in version 13; freeze the definitions here if they ever change.
    for table in cluster_schema.CLUSTER_TABLES:
        table.create(conn, checkfirst=True)


# Version 14: the columns it adds, frozen here (name, type on both backends).
_HANDOVER_COLUMNS = (
    ("cluster_assignments", "previous_worker_id", "VARCHAR(256)"),
    ("cluster_assignments", "previous_epoch", "BIGINT"),
    ("functions", "update_mode", "VARCHAR(16)"),
)


def _handover(conn: Connection) -> None:
    # A moved run's previous owner (a graceful hand-over) and an update's stop mode:
    # nullable columns, null in every existing row (no hand-over pending, drain). Steps 5
    # and 13 create their tables as schema.py defines them now, with these columns: a
    # store that went through them in this release has them already.
    found = inspect(conn)
    for table, column, kind in _HANDOVER_COLUMNS:
        if column not in {c["name"] for c in found.get_columns(table)}:
            conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _initial),
    Migration(2, "function state, stats, exceptions and at-most-once claims", _functions),
    Migration(3, "lifecycle: runs, instance deaths, transitions, commands, objects", _lifecycle),
    Migration(
        4, "queries keep their position in subscriptions: planned batches", _subscription_plans
    ),
    Migration(5, "the worker's registry: functions, their versions, packages", _registry),
    Migration(6, "topic schemas: the definition of each avro topic", _topic_schemas),
    Migration(7, "package upload paths: the digest each uploaded path names", _package_paths),
    Migration(8, "command and object ids are never reused (SQLite)", _ids_never_reused),
    Migration(
        9, "a subscription is read by one owner: the run that claimed it", _subscription_owners
    ),
    Migration(10, "query groups: the functions one streaming query serves", _groups),
    Migration(11, "package owners: the tenants that hold each stored package", _package_owners),
    Migration(12, "store settings: topic creation on first use", _store_settings),
    Migration(13, "the cluster: workers and their leases, the leader, assignments", _cluster),
    Migration(
        14, "a moved run's previous owner; an update's stop mode when its owner is away", _handover
    ),
)


def current_version(conn: Connection) -> int:
    """The highest applied step, or 0 for an empty database."""
    if not inspect(conn).has_table(schema.schema_version.name):
        return 0
    found = conn.execute(select(schema.schema_version.c.version)).scalars().all()
    return max(found, default=0)


def upgrade(
    conn_factory: Callable[[], AbstractContextManager[Connection]],
    steps: Sequence[Migration] = MIGRATIONS,
) -> int:
    """Apply the pending ``steps``; returns the version the store is at.

    ``conn_factory`` opens a connection with a write transaction begun; each
    step runs and is recorded in its own transaction.
    """
    latest = steps[-1].number
    with conn_factory() as conn:
        version = current_version(conn)
        if version > latest:
            msg = (
                f"the store is at schema version {version} but this sparkfn knows "
                f"versions up to {latest}; upgrade sparkfn"
            )
            raise SchemaVersionError(msg)
        if version == 0:
            # A fresh store: the current schema is every step applied.
            schema.metadata.create_all(conn)
            now = datetime.now(UTC)
            conn.execute(
                schema.schema_version.insert(),
                [
                    {"version": m.number, "description": m.description, "applied_at": now}
                    for m in steps
                ],
            )
            conn.commit()
            return latest
    for step in steps:
        if step.number <= version:
            continue
        with conn_factory() as conn:
            # Another process may have applied it since we looked; the step's
            # transaction holds the migration lock, so check again under it.
            if current_version(conn) >= step.number:
                continue
            step.apply(conn)
            conn.execute(
                schema.schema_version.insert().values(
                    version=step.number, description=step.description, applied_at=datetime.now(UTC)
                )
            )
            conn.commit()
    return latest
