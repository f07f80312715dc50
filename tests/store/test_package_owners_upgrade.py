"""Version 11 on a store that version 10 left: each package is held by the tenants that name it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy import Engine, create_engine, select
from sqlalchemy.engine import make_url

from sparkfn.store import registry_schema, schema
from sparkfn.store.clock import utc_now as _now
from sparkfn.store.migrations import MIGRATIONS
from sparkfn.store.store import Store


def _engine_without_migrations(store_url: str) -> Engine:
    if store_url.startswith("sqlite"):
        return Store._sqlite_engine(make_url(store_url).database)
    return create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))


def _digest(n: int) -> str:
    return f"sha256:{n:064x}"


def _version_10_store(store_url: str) -> None:
    """Three packages: one named by a tenant's path and another tenant's function, one by a
    path under a team, one by nothing."""
    engine = _engine_without_migrations(store_url)
    early = _now() - timedelta(hours=1)
    with engine.begin() as conn:
        for step in MIGRATIONS[:10]:
            step.apply(conn)
            conn.execute(
                schema.schema_version.insert().values(
                    version=step.number, description=step.description, applied_at=_now()
                )
            )
        conn.execute(
            registry_schema.packages.insert(),
            [
                {"digest": _digest(n), "filename": f"p{n}.py", "kind": "py", "size_bytes": 1,
                 "uploaded_by": "first", "uploaded_at": early}
                for n in (1, 2, 3)
            ],
        )  # fmt: skip
        conn.execute(
            registry_schema.package_paths.insert(),
            [
                {"path": "tenant-a/fn.py", "digest": _digest(1), "uploaded_by": "alice",
                 "uploaded_at": early},
                {"path": "team/lib.py", "digest": _digest(2), "uploaded_by": "ops",
                 "uploaded_at": early},
                {"path": "loose", "digest": _digest(3), "uploaded_by": "ops",
                 "uploaded_at": early},
            ],
        )  # fmt: skip
        conn.execute(
            registry_schema.function_versions.insert(),
            [
                {"fqfn": "tenant-b/default/f", "version": 1, "config": "{}",
                 "package_digest": _digest(1), "created_by": "bob", "created_at": early},
                {"fqfn": "tenant-b/default/g", "version": 1, "config": "{}",
                 "package_digest": None, "created_by": "bob", "created_at": early},
            ],
        )  # fmt: skip
    engine.dispose()


def test_a_version_10_store_upgrades_with_its_packages_held_by_who_names_them(
    store_url: str, data_dir: Path
) -> None:
    _version_10_store(store_url)
    store = Store.open(store_url, data_dir)
    try:
        with store.read() as conn:
            versions = conn.execute(select(schema.schema_version.c.version)).scalars().all()
            assert sorted(versions) == [m.number for m in MIGRATIONS]
            owners = registry_schema.package_owners
            rows = conn.execute(
                select(owners.c.digest, owners.c.owner, owners.c.filename, owners.c.uploaded_by)
            ).all()
    finally:
        store.close()
    assert sorted(tuple(row) for row in rows) == [
        (_digest(1), "tenant-a", "p1.py", "alice"),
        (_digest(1), "tenant-b", "p1.py", "bob"),
        (_digest(2), "team", "p2.py", "ops"),
    ]
