"""The worker's registry: which functions, sources and sinks are submitted, every version of
each, and what should run.

One registry serves all three kinds (:class:`Registry` of ``FunctionConfig``,
``SourceConfig`` or ``SinkConfig``), in the same tables: a function is kept
under its FQFN, a source under ``source:<tenant/namespace/name>`` and a sink
under ``sink:<...>`` (the control ids of their runs, see
:func:`sparkfn.runtime.control.control_id`), so a source may share its name
with a function, as their runs' records already do.

A function is registered once (version 1) and updated into new versions;
each version keeps the full config, the digest of the package its code
came in, who made it and when, so any earlier version can be shown again.
``desired`` is what the worker keeps true across its own restarts:
a ``running`` function is started again when a worker comes up.

>>> registry = Registry(store)
>>> v1 = registry.create(config, package_digest="sha256:...", who="alice")
>>> registry.get("public/default/exclaim").version
1
>>> Registry(store, SourceConfig).names("public", "default")
['gen']
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Generic, TypeVar, overload

from sqlalchemy import Connection, Join, Row, Select, and_, delete, select, update

from sparkfn.api.errors import (
    FunctionExistsError,
    FunctionNotFoundError,
    SecretsKeyError,
    SinkExistsError,
    SinkNotFoundError,
    SourceExistsError,
    SourceNotFoundError,
)
from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.config.function import FunctionConfig
from sparkfn.config.topics_pattern import STORED_CONTEXT
from sparkfn.store import registry_schema
from sparkfn.store.clock import utc_now
from sparkfn.store.sealed import open_config, seal_config
from sparkfn.store.store import Store
from sparkfn.topics import subscription

log = logging.getLogger(__name__)

_functions = registry_schema.functions
_versions = registry_schema.function_versions

# The config of one kind of registered thing: a function, a source or a sink.
C = TypeVar("C", FunctionConfig, SourceConfig, SinkConfig)
HostedConfig = FunctionConfig | SourceConfig | SinkConfig

# What each config is called, the errors for its absence and its taken name.
KINDS: dict[type[Any], tuple[str, type[FunctionNotFoundError], type[FunctionExistsError]]] = {
    FunctionConfig: ("function", FunctionNotFoundError, FunctionExistsError),
    SourceConfig: ("source", SourceNotFoundError, SourceExistsError),
    SinkConfig: ("sink", SinkNotFoundError, SinkExistsError),
}


def kind_of(config: HostedConfig) -> str:
    """``function``, ``source`` or ``sink``."""
    return KINDS[type(config)][0]


def fqn_of(config: HostedConfig) -> str:
    """``tenant/namespace/name`` of a function, source or sink."""
    return config.fqfn if isinstance(config, FunctionConfig) else config.fqn


def registry_key(kind: str, fqn: str) -> str:
    """The registry row's key: a function's FQFN, ``source:<fqn>``, ``sink:<fqn>``."""
    return fqn if kind == "function" else f"{kind}:{fqn}"


class Desired(StrEnum):
    """What a worker keeps true for a function, across its own restarts."""

    RUNNING = "running"
    STOPPED = "stopped"


@dataclass(frozen=True)
class Version(Generic[C]):
    """One version of a function, source or sink: its config and the package its code came in."""

    fqfn: str  # tenant/namespace/name
    version: int
    config: C
    package_digest: str | None
    created_by: str
    created_at: datetime


FunctionVersion = Version[FunctionConfig]


@dataclass(frozen=True)
class FunctionRecord:
    """A registered function: its current version and what should run."""

    fqfn: str
    version: int
    desired: Desired
    created_at: datetime
    updated_at: datetime


class Registry(Generic[C]):
    """Functions (or sources, or sinks: ``model``) submitted to the worker(s) of one store."""

    @overload
    def __init__(self: Registry[FunctionConfig], store: Store) -> None: ...

    @overload
    def __init__(self, store: Store, model: type[C]) -> None: ...

    def __init__(self, store: Store, model: type[Any] = FunctionConfig) -> None:
        self.store = store
        self.model: type[C] = model
        self.kind, self.missing, self._taken = KINDS[model]

    def key(self, fqfn: str) -> str:
        """The row key of ``fqfn`` (``tenant/namespace/name``) in this registry."""
        return registry_key(self.kind, fqfn)

    def create(self, config: C, *, package_digest: str | None, who: str) -> Version[C]:
        """Register ``config`` as version 1; :class:`FunctionExistsError` if the name is taken."""
        now = utc_now()
        fqfn = fqn_of(config)
        with self.store.write() as conn:
            if _record(conn, self.key(fqfn)) is not None:
                raise self._exists(fqfn)
            conn.execute(
                _functions.insert().values(
                    fqfn=self.key(fqfn),
                    version=1,
                    desired=Desired.RUNNING.value,
                    created_at=now,
                    updated_at=now,
                )
            )
            return self._add_version(conn, config, 1, package_digest, who, now)

    def check_free(self, fqfn: str) -> None:
        """:class:`FunctionExistsError` if ``fqfn`` is registered already."""
        with self.store.read() as conn:
            if _record(conn, self.key(fqfn)) is not None:
                raise self._exists(fqfn)

    def check_subscription_free(self, config: FunctionConfig | SinkConfig) -> None:
        """:class:`SubscriptionInUseError` if another function reads ``config.subscription``.

        Another registered function's current config names it, or another run
        owns it in the store (a ``localrun``, a sink, a plain reader: see
        :mod:`sparkfn.topics.subscription`). An early answer, not the guard:
        of two registrations at once both may pass, and then the first plan
        of the one that plans second is refused.
        """
        name = config.subscription
        fqfn = fqn_of(config)
        owner = self.key(fqfn)
        query = select(_versions.c.fqfn, _versions.c.config).select_from(_current())
        query = self._of_kind(query)
        with self.store.read() as conn:
            for key, stored in conn.execute(query):
                # Read from the stored JSON, not from each config validated (a create beside
                # 1,000 functions took 67 ms): a function's or sink's default subscription
                # is its registry key (``tenant/ns/name``, ``sink:tenant/ns/name``).
                taken = json.loads(stored).get("subscription_name") or key
                other = key.removeprefix(f"{self.kind}:")
                if other != fqfn and taken == name:
                    raise subscription.in_use_error(name, other, fqfn)
            subscription.check_free(conn, name, owner)

    def update(
        self, config: C, *, package_digest: str | None, who: str, mode: str | None = None
    ) -> Version[C]:
        """Make ``config`` the function's next version; :class:`FunctionNotFoundError` if
        absent. ``mode`` is how the version before ends (an update's stop mode, kept for
        an owner that ends it later; None: drain)."""
        now = utc_now()
        fqfn = fqn_of(config)
        with self.store.write() as conn:
            record = _record(conn, self.key(fqfn), lock=True)
            if record is None:
                raise self._not_found(fqfn)
            version = record.version + 1
            conn.execute(
                update(_functions)
                .where(_functions.c.fqfn == self.key(fqfn))
                .values(version=version, updated_at=now, update_mode=mode)
            )
            return self._add_version(conn, config, version, package_digest, who, now)

    def withdraw(self, version: Version[C]) -> None:
        """Forget ``version``, the current one, whose start failed: the one before is current."""
        key = self.key(version.fqfn)
        with self.store.write() as conn:
            record = _record(conn, key, lock=True)
            if record is None or record.version != version.version or version.version < 2:
                return  # changed meanwhile, or a first version (delete it instead)
            conn.execute(
                delete(_versions).where(
                    _versions.c.fqfn == key, _versions.c.version == version.version
                )
            )
            conn.execute(
                update(_functions)
                .where(_functions.c.fqfn == key)
                .values(version=version.version - 1, updated_at=utc_now())
            )

    def delete(self, fqfn: str) -> list[Version[C]]:
        """Forget the function and its versions; returns them (newest first)."""
        key = self.key(fqfn)
        with self.store.write() as conn:
            if _record(conn, key, lock=True) is None:
                raise self._not_found(fqfn)
            found = self._versions_of(conn, fqfn)
            conn.execute(delete(_versions).where(_versions.c.fqfn == key))
            conn.execute(delete(_functions).where(_functions.c.fqfn == key))
            return found

    def record(self, fqfn: str) -> FunctionRecord:
        """The function's registry row; :class:`FunctionNotFoundError` if absent."""
        with self.store.read() as conn:
            found = _record(conn, self.key(fqfn))
        if found is None:
            raise self._not_found(fqfn)
        return found

    def get(self, fqfn: str, version: int | None = None) -> Version[C]:
        """The current version of ``fqfn``, or the numbered one."""
        with self.store.read() as conn:
            record = _record(conn, self.key(fqfn))
            if record is None:
                raise self._not_found(fqfn)
            wanted = record.version if version is None else version
            rows = self._versions_of(conn, fqfn, wanted)
        if not rows:
            msg = (
                f"{self.kind} {fqfn} has no version {wanted} "
                f"(its versions are 1 to {record.version})"
            )
            raise self.missing(msg)
        return rows[0]

    def versions(self, fqfn: str) -> list[Version[C]]:
        """Every version of ``fqfn``, newest first."""
        with self.store.read() as conn:
            if _record(conn, self.key(fqfn)) is None:
                raise self._not_found(fqfn)
            return self._versions_of(conn, fqfn)

    def names(self, tenant: str, namespace: str) -> list[str]:
        """The names (not FQFNs) of the functions registered in ``tenant/namespace``, sorted."""
        prefix = self.key(f"{tenant}/{namespace}/")
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
                .where(_functions.c.fqfn == self.key(fqfn))
                .values(desired=desired.value, updated_at=utc_now())
            )
            if done.rowcount == 0:
                raise self._not_found(fqfn)

    def wanted_running(self) -> list[Version[C]]:
        """The current version of every function that should run."""
        return self.current(Desired.RUNNING)

    def current(self, desired: Desired | None = None) -> list[Version[C]]:
        """The current version of every function (or of those ``desired`` so), by FQFN.

        One whose secrets do not open with the worker's key is left out, and logged
        (:class:`SecretsKeyError`); ``get`` of it answers that error."""
        query = select(_versions).select_from(_current()).order_by(_versions.c.fqfn)
        if desired is not None:
            query = query.where(_functions.c.desired == desired.value)
        query = self._of_kind(query)
        with self.store.read() as conn:
            rows = conn.execute(query).all()
        found: list[Version[C]] = []
        for row in rows:
            try:
                found.append(self._version(row))
            except SecretsKeyError as exc:  # one unreadable config must not hide the others
                log.error("left out of the %ss listed: %s", self.kind, exc)
        return found

    def _of_kind(self, query: Select[Any]) -> Select[Any]:
        """``query`` narrowed to this registry's kind of rows."""
        if self.kind == "function":  # the others' keys have a "kind:" prefix; FQFNs none
            return query.where(_functions.c.fqfn.not_like("%:%"))
        return query.where(_functions.c.fqfn.startswith(f"{self.kind}:", autoescape=True))

    def _exists(self, fqfn: str) -> FunctionExistsError:
        return self._taken(f"{self.kind} {fqfn} exists already; update it or delete it first")

    def _not_found(self, fqfn: str) -> FunctionNotFoundError:
        return self.missing(f"{self.kind} {fqfn} does not exist")

    def _add_version(
        self,
        conn: Connection,
        config: C,
        version: int,
        package_digest: str | None,
        who: str,
        now: datetime,
    ) -> Version[C]:
        fqfn = fqn_of(config)
        conn.execute(
            _versions.insert().values(
                fqfn=self.key(fqfn),
                version=version,
                # Its secrets sealed: the row never holds them in the clear.
                config=json.dumps(seal_config(config.model_dump(mode="json"), self.store.sealer)),
                package_digest=package_digest,
                created_by=who,
                created_at=now,
            )
        )
        return Version(fqfn, version, config, package_digest, who, now)

    def _versions_of(
        self, conn: Connection, fqfn: str, version: int | None = None
    ) -> list[Version[C]]:
        query = select(_versions).where(_versions.c.fqfn == self.key(fqfn))
        if version is not None:
            query = query.where(_versions.c.version == version)
        rows = conn.execute(query.order_by(_versions.c.version.desc())).all()
        return [self._version(row) for row in rows]

    def _version(self, row: Row[Any]) -> Version[C]:
        fqfn = row.fqfn.removeprefix(f"{self.kind}:") if self.kind != "function" else row.fqfn
        stored = open_config(json.loads(row.config), self.store.sealer, f"{self.kind} {fqfn}")
        return Version(
            fqfn=fqfn,
            version=row.version,
            config=self.model.model_validate(stored, context={STORED_CONTEXT: True}),
            package_digest=row.package_digest,
            created_by=row.created_by,
            created_at=row.created_at,
        )


def _current() -> Join:
    """Every registered function's current version row, joined to its function row."""
    return _versions.join(
        _functions,
        and_(_functions.c.fqfn == _versions.c.fqfn, _functions.c.version == _versions.c.version),
    )


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


def desired_states(store: Store) -> dict[str, tuple[int, Desired]]:
    """Every registered run's current version and desired state, by registry key (which
    is its control id): one light read, for the cluster's rounds."""
    with store.read() as conn:
        rows = conn.execute(select(_functions.c.fqfn, _functions.c.version, _functions.c.desired))
        return {row.fqfn: (int(row.version), Desired(row.desired)) for row in rows}
