"""The worker's registry: which functions are submitted, every version of each, and what should run.

A function is registered once (version 1) and updated into new versions;
each version keeps the full config, the digest of the package its code
came in, who made it and when, so any earlier version can be shown again.
``desired`` is what the worker keeps true across its own restarts:
a ``running`` function is started again when a worker comes up.

>>> registry = Registry(store)
>>> v1 = registry.create(config, package_digest="sha256:...", who="alice")
>>> registry.get("public/default/exclaim").version
1
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, Row, and_, delete, select, update

from sparkfn.api.errors import FunctionExistsError, FunctionNotFoundError
from sparkfn.config.function import FunctionConfig
from sparkfn.store import schema
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store
from sparkfn.topics import subscription

_functions = schema.functions
_versions = schema.function_versions


class Desired(StrEnum):
    """What a worker keeps true for a function, across its own restarts."""

    RUNNING = "running"
    STOPPED = "stopped"


@dataclass(frozen=True)
class FunctionVersion:
    """One version of a function: its config and the package its code came in."""

    fqfn: str
    version: int
    config: FunctionConfig
    package_digest: str | None
    created_by: str
    created_at: datetime


@dataclass(frozen=True)
class FunctionRecord:
    """A registered function: its current version and what should run."""

    fqfn: str
    version: int
    desired: Desired
    created_at: datetime
    updated_at: datetime


class Registry:
    """Functions submitted to the worker(s) of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(
        self, config: FunctionConfig, *, package_digest: str | None, who: str
    ) -> FunctionVersion:
        """Register ``config`` as version 1; :class:`FunctionExistsError` if the name is taken."""
        now = utc_now()
        with self.store.write() as conn:
            if _record(conn, config.fqfn) is not None:
                raise _exists(config.fqfn)
            conn.execute(
                _functions.insert().values(
                    fqfn=config.fqfn,
                    version=1,
                    desired=Desired.RUNNING.value,
                    created_at=now,
                    updated_at=now,
                )
            )
            return _add_version(conn, config, 1, package_digest, who, now)

    def check_free(self, fqfn: str) -> None:
        """:class:`FunctionExistsError` if ``fqfn`` is registered already."""
        with self.store.read() as conn:
            if _record(conn, fqfn) is not None:
                raise _exists(fqfn)

    def check_subscription_free(self, config: FunctionConfig) -> None:
        """:class:`SubscriptionInUseError` if another function reads ``config.subscription``.

        Another registered function's current config names it, or another run
        owns it in the store (a ``localrun``, a sink, a plain reader: see
        :mod:`sparkfn.topics.subscription`). An early answer, not the guard:
        of two registrations at once both may pass, and then the first plan
        of the one that plans second is refused.
        """
        name = config.subscription
        for other in self.current():
            if other.fqfn != config.fqfn and other.config.subscription == name:
                raise subscription.in_use_error(name, other.fqfn, config.fqfn)
        with self.store.read() as conn:
            subscription.check_free(conn, name, config.fqfn)

    def update(
        self, config: FunctionConfig, *, package_digest: str | None, who: str
    ) -> FunctionVersion:
        """Make ``config`` the function's next version; :class:`FunctionNotFoundError` if absent."""
        now = utc_now()
        with self.store.write() as conn:
            record = _record(conn, config.fqfn, lock=True)
            if record is None:
                raise _not_found(config.fqfn)
            version = record.version + 1
            conn.execute(
                update(_functions)
                .where(_functions.c.fqfn == config.fqfn)
                .values(version=version, updated_at=now)
            )
            return _add_version(conn, config, version, package_digest, who, now)

    def withdraw(self, version: FunctionVersion) -> None:
        """Forget ``version``, the current one, whose start failed: the one before is current."""
        with self.store.write() as conn:
            record = _record(conn, version.fqfn, lock=True)
            if record is None or record.version != version.version or version.version < 2:
                return  # changed meanwhile, or a first version (delete it instead)
            conn.execute(
                delete(_versions).where(
                    _versions.c.fqfn == version.fqfn, _versions.c.version == version.version
                )
            )
            conn.execute(
                update(_functions)
                .where(_functions.c.fqfn == version.fqfn)
                .values(version=version.version - 1, updated_at=utc_now())
            )

    def delete(self, fqfn: str) -> list[FunctionVersion]:
        """Forget the function and its versions; returns them (newest first)."""
        with self.store.write() as conn:
            if _record(conn, fqfn, lock=True) is None:
                raise _not_found(fqfn)
            found = _versions_of(conn, fqfn)
            conn.execute(delete(_versions).where(_versions.c.fqfn == fqfn))
            conn.execute(delete(_functions).where(_functions.c.fqfn == fqfn))
            return found

    def record(self, fqfn: str) -> FunctionRecord:
        """The function's registry row; :class:`FunctionNotFoundError` if absent."""
        with self.store.read() as conn:
            found = _record(conn, fqfn)
        if found is None:
            raise _not_found(fqfn)
        return found

    def get(self, fqfn: str, version: int | None = None) -> FunctionVersion:
        """The current version of ``fqfn``, or the numbered one."""
        with self.store.read() as conn:
            record = _record(conn, fqfn)
            if record is None:
                raise _not_found(fqfn)
            wanted = record.version if version is None else version
            rows = _versions_of(conn, fqfn, wanted)
        if not rows:
            msg = (
                f"function {fqfn} has no version {wanted} (its versions are 1 to {record.version})"
            )
            raise FunctionNotFoundError(msg)
        return rows[0]

    def versions(self, fqfn: str) -> list[FunctionVersion]:
        """Every version of ``fqfn``, newest first."""
        with self.store.read() as conn:
            if _record(conn, fqfn) is None:
                raise _not_found(fqfn)
            return _versions_of(conn, fqfn)

    def names(self, tenant: str, namespace: str) -> list[str]:
        """The names (not FQFNs) of the functions registered in ``tenant/namespace``, sorted."""
        prefix = f"{tenant}/{namespace}/"
        with self.store.read() as conn:
            rows = conn.execute(
                select(_functions.c.fqfn)
                .where(_functions.c.fqfn.startswith(prefix, autoescape=True))
                .order_by(_functions.c.fqfn)
            ).scalars()
            return [fqfn.removeprefix(prefix) for fqfn in rows if "/" not in fqfn[len(prefix) :]]

    def set_desired(self, fqfn: str, desired: Desired) -> None:
        """Record whether the function should run (kept across worker restarts)."""
        with self.store.write() as conn:
            done = conn.execute(
                update(_functions)
                .where(_functions.c.fqfn == fqfn)
                .values(desired=desired.value, updated_at=utc_now())
            )
            if done.rowcount == 0:
                raise _not_found(fqfn)

    def wanted_running(self) -> list[FunctionVersion]:
        """The current version of every function that should run."""
        return self.current(Desired.RUNNING)

    def current(self, desired: Desired | None = None) -> list[FunctionVersion]:
        """The current version of every function (or of those ``desired`` so), by FQFN."""
        query = (
            select(_versions)
            .select_from(
                _versions.join(
                    _functions,
                    and_(
                        _functions.c.fqfn == _versions.c.fqfn,
                        _functions.c.version == _versions.c.version,
                    ),
                )
            )
            .order_by(_versions.c.fqfn)
        )
        if desired is not None:
            query = query.where(_functions.c.desired == desired.value)
        with self.store.read() as conn:
            rows = conn.execute(query).all()
        return [_version(row) for row in rows]


def _exists(fqfn: str) -> FunctionExistsError:
    return FunctionExistsError(f"function {fqfn} exists already; update it or delete it first")


def _not_found(fqfn: str) -> FunctionNotFoundError:
    return FunctionNotFoundError(f"function {fqfn} does not exist")


def _record(conn: Connection, fqfn: str, *, lock: bool = False) -> FunctionRecord | None:
    query = select(_functions).where(_functions.c.fqfn == fqfn)
    if lock:
        query = query.with_for_update()
    row = conn.execute(query).first()
    if row is None:
        return None
    return FunctionRecord(
        fqfn=row.fqfn,
        version=row.version,
        desired=Desired(row.desired),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _add_version(
    conn: Connection,
    config: FunctionConfig,
    version: int,
    package_digest: str | None,
    who: str,
    now: datetime,
) -> FunctionVersion:
    conn.execute(
        _versions.insert().values(
            fqfn=config.fqfn,
            version=version,
            config=config.model_dump_json(),
            package_digest=package_digest,
            created_by=who,
            created_at=now,
        )
    )
    return FunctionVersion(config.fqfn, version, config, package_digest, who, now)


def _versions_of(conn: Connection, fqfn: str, version: int | None = None) -> list[FunctionVersion]:
    query = select(_versions).where(_versions.c.fqfn == fqfn)
    if version is not None:
        query = query.where(_versions.c.version == version)
    rows = conn.execute(query.order_by(_versions.c.version.desc())).all()
    return [_version(row) for row in rows]


def _version(row: Row[Any]) -> FunctionVersion:
    return FunctionVersion(
        fqfn=row.fqfn,
        version=row.version,
        config=FunctionConfig.model_validate(json.loads(row.config)),
        package_digest=row.package_digest,
        created_by=row.created_by,
        created_at=row.created_at,
    )
