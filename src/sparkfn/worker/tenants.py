"""Tenants and namespaces, as Pulsar's admin API shows them.

sparkfn needs no tenant or namespace made first: a function, connector or
topic under ``tenant/namespace`` makes both exist. ``tenants create`` and
``namespaces create`` (Pulsar's habit) record one with nothing in it yet, in
the store's settings (one JSON document under :data:`KEY`), so it is listed
until it is deleted; ``public/default`` always exists, as in Pulsar. A
tenant or namespace that holds anything cannot be deleted (409
``not_empty``), as in Pulsar.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from sparkfn.api.errors import (
    NamespaceExistsError,
    NamespaceNotFoundError,
    NotEmptyError,
    TenantExistsError,
    TenantNotFoundError,
)
from sparkfn.config.names import DEFAULT_NAMESPACE, DEFAULT_TENANT
from sparkfn.store import registry_schema, schema
from sparkfn.store.clock import utc_now
from sparkfn.store.store import Store

KEY = "tenants"  # {tenant: {"adminRoles": [...], "allowedClusters": [...], "namespaces": [...]}}
_settings = schema.store_settings


def in_use(conn: Connection) -> set[tuple[str, str]]:
    """``(tenant, namespace)`` of every function, connector and topic."""
    topics = conn.execute(select(schema.topics.c.tenant, schema.topics.c.namespace).distinct())
    found = {(str(t), str(ns)) for t, ns in topics.all()}
    for fqfn in conn.execute(select(registry_schema.functions.c.fqfn)).scalars():
        # A connector's key is kind:tenant/namespace/name; names hold no colon.
        tenant, namespace, _ = str(fqfn).rsplit(":", 1)[-1].split("/", 2)
        found.add((tenant, namespace))
    return found


def _recorded(conn: Connection, *, lock: bool = False) -> dict[str, dict[str, Any]]:
    query = select(_settings.c.value).where(_settings.c.key == KEY)
    if lock and conn.dialect.name == "postgresql":
        query = query.with_for_update()
    text = conn.execute(query).scalar()
    return {} if text is None else dict(json.loads(text))


def _record(conn: Connection, tenants: dict[str, dict[str, Any]]) -> None:
    text = json.dumps(tenants, sort_keys=True)
    if not tenants:
        conn.execute(delete(_settings).where(_settings.c.key == KEY))
        return
    changed = conn.execute(
        update(_settings).where(_settings.c.key == KEY).values(value=text, updated_at=utc_now())
    )
    if not changed.rowcount:
        conn.execute(insert(_settings).values(key=KEY, value=text, updated_at=utc_now()))


def namespaces_of(store: Store) -> set[tuple[str, str]]:
    """Every ``(tenant, namespace)`` there is: used, recorded, and ``public/default``."""
    with store.read() as conn:
        found = in_use(conn)
        recorded = _recorded(conn)
    found.add((DEFAULT_TENANT, DEFAULT_NAMESPACE))
    for tenant, info in recorded.items():
        found.update((tenant, ns) for ns in info.get("namespaces", []))
    return found


def tenants(store: Store) -> list[str]:
    """Every tenant there is, sorted."""
    with store.read() as conn:
        recorded = set(_recorded(conn))
    return sorted({t for t, _ in namespaces_of(store)} | recorded)


def tenant_info(store: Store, tenant: str) -> dict[str, Any]:
    """Pulsar's ``TenantInfo`` of ``tenant``: ``adminRoles``, ``allowedClusters``."""
    with store.read() as conn:
        info = _recorded(conn).get(tenant)
    if info is None and tenant not in tenants(store):
        msg = f"tenant {tenant} does not exist (no function, topic or tenants create made it)"
        raise TenantNotFoundError(msg)
    info = info or {}
    return {
        "adminRoles": list(info.get("adminRoles", [])),
        "allowedClusters": list(info.get("allowedClusters", [])),
    }


def create_tenant(store: Store, tenant: str, admin_roles: list[str], clusters: list[str]) -> None:
    """Record ``tenant``; :class:`TenantExistsError` if it exists."""
    if tenant in tenants(store):
        msg = f"tenant {tenant} already exists"
        raise TenantExistsError(msg)
    with store.write() as conn:
        recorded = _recorded(conn, lock=True)
        if tenant in recorded:
            msg = f"tenant {tenant} already exists"
            raise TenantExistsError(msg)
        recorded[tenant] = {
            "adminRoles": admin_roles,
            "allowedClusters": clusters,
            "namespaces": [],
        }
        _record(conn, recorded)


def update_tenant(store: Store, tenant: str, admin_roles: list[str], clusters: list[str]) -> None:
    """Replace ``tenant``'s ``adminRoles`` and ``allowedClusters`` (Pulsar's ``updateTenant``);
    :class:`TenantNotFoundError` if it does not exist. Its namespaces stay."""
    tenant_info(store, tenant)  # it exists
    with store.write() as conn:
        recorded = _recorded(conn, lock=True)
        info = recorded.setdefault(tenant, {"namespaces": []})
        info.update({"adminRoles": admin_roles, "allowedClusters": clusters})
        _record(conn, recorded)


def delete_tenant(store: Store, tenant: str) -> None:
    """Forget ``tenant``: :class:`NotEmptyError` while it holds anything."""
    tenant_info(store, tenant)  # it exists
    with store.write() as conn:
        used = sorted(f"{t}/{ns}" for t, ns in in_use(conn) if t == tenant)
        recorded = _recorded(conn, lock=True)
        kept = recorded.get(tenant, {}).get("namespaces", [])
        if used or kept or tenant == DEFAULT_TENANT:
            names = ", ".join(used + [f"{tenant}/{ns}" for ns in kept]) or f"{tenant}/default"
            msg = f"tenant {tenant} still has namespaces ({names}); delete them first"
            raise NotEmptyError(msg)
        recorded.pop(tenant, None)
        _record(conn, recorded)


def create_namespace(store: Store, tenant: str, namespace: str) -> None:
    """Record ``tenant/namespace``; the tenant must exist (Pulsar's rule)."""
    tenant_info(store, tenant)
    if (tenant, namespace) in namespaces_of(store):
        msg = f"namespace {tenant}/{namespace} already exists"
        raise NamespaceExistsError(msg)
    with store.write() as conn:
        recorded = _recorded(conn, lock=True)
        info = recorded.setdefault(
            tenant, {"adminRoles": [], "allowedClusters": [], "namespaces": []}
        )
        info["namespaces"] = sorted({*info.get("namespaces", []), namespace})
        _record(conn, recorded)


def delete_namespace(store: Store, tenant: str, namespace: str) -> None:
    """Forget ``tenant/namespace``: :class:`NotEmptyError` while it holds anything."""
    if (tenant, namespace) not in namespaces_of(store):
        msg = f"namespace {tenant}/{namespace} does not exist"
        raise NamespaceNotFoundError(msg)
    with store.write() as conn:
        if (tenant, namespace) in in_use(conn) or (tenant, namespace) == (
            DEFAULT_TENANT,
            DEFAULT_NAMESPACE,
        ):
            msg = (
                f"namespace {tenant}/{namespace} is not empty (it holds functions, "
                "connectors or topics); delete them first"
            )
            raise NotEmptyError(msg)
        recorded = _recorded(conn, lock=True)
        info = recorded.get(tenant)
        if info is not None:
            info["namespaces"] = [ns for ns in info.get("namespaces", []) if ns != namespace]
            _record(conn, recorded)
