"""Pulsar's tenant and namespace routes (:mod:`sparkfn.worker.tenants` keeps them).

==========  =============================================  ==================================
verb        path                                           what
==========  =============================================  ==================================
GET         ``/admin/v2/tenants``                          every tenant (a tenant admin: its own)
GET         ``/admin/v2/tenants/{tenant}``                 ``TenantInfo``
PUT         ``/admin/v2/tenants/{tenant}``                 create; 409 if it exists
POST        ``/admin/v2/tenants/{tenant}``                 update its ``TenantInfo``; 404 if none
DELETE      ``/admin/v2/tenants/{tenant}``                 delete; 409 if not empty
GET         ``/admin/v2/namespaces/{tenant}``              ``["tenant/namespace", ...]``
PUT         ``/admin/v2/namespaces/{tenant}/{namespace}``  create; 404 without the tenant
DELETE      ``/admin/v2/namespaces/{tenant}/{namespace}``  delete; 409 if not empty
GET         ``/admin/v2/namespaces/{tenant}/{namespace}``  ``/topics``: the namespace's topics
            ``/topics``
==========  =============================================  ==================================

As every route under ``{tenant}``, a tenant's routes are a superuser's or its
tenant admin's (:mod:`sparkfn.worker.auth.access`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from sparkfn.topics.admin import TopicAdmin
from sparkfn.worker import tenants as registry
from sparkfn.worker.api.params import Namespace, Tenant
from sparkfn.worker.auth.access import Caller
from sparkfn.worker.service import Worker

MAX_ROLES = 100  # entries of adminRoles or allowedClusters


class TenantInfo(BaseModel):
    """Pulsar's ``TenantInfo``: recorded and shown; sparkfn's access is its tokens'."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    admin_roles: list[Annotated[str, Field(max_length=256)]] = Field(
        default_factory=list, max_length=MAX_ROLES
    )
    allowed_clusters: list[Annotated[str, Field(max_length=256)]] = Field(
        default_factory=list, max_length=MAX_ROLES
    )


def tenants_router(worker: Worker) -> APIRouter:
    """The ``/admin/v2/tenants`` and ``/admin/v2/namespaces`` routes."""
    router = APIRouter(tags=["tenants"])
    store = worker.open_store()

    @router.get("/admin/v2/tenants", response_model=list[str])
    def list_tenants(caller: Caller) -> list[str]:
        """Every tenant, sorted (a tenant admin's: its own)."""
        found = registry.tenants(store)
        return found if caller.is_superuser else [t for t in found if t == caller.tenant]

    @router.get(
        "/admin/v2/tenants/{tenant}", response_model=TenantInfo, response_model_by_alias=True
    )
    def get_tenant(tenant: Tenant) -> TenantInfo:
        """The tenant's ``adminRoles`` and ``allowedClusters``; 404 if there is none."""
        return TenantInfo.model_validate(registry.tenant_info(store, tenant))

    @router.put("/admin/v2/tenants/{tenant}", status_code=204, response_class=Response)
    def create_tenant(
        tenant: Tenant, info: Annotated[TenantInfo | None, Body()] = None
    ) -> Response:
        """Create a tenant with no namespace yet (409 ``tenant_already_exists``)."""
        given = info or TenantInfo()
        registry.create_tenant(store, tenant, given.admin_roles, given.allowed_clusters)
        return Response(status_code=204)

    @router.post("/admin/v2/tenants/{tenant}", status_code=204, response_class=Response)
    def update_tenant(tenant: Tenant, info: Annotated[TenantInfo, Body()]) -> Response:
        """Replace the tenant's ``TenantInfo`` (404 ``tenant_not_found``), as Pulsar's update."""
        registry.update_tenant(store, tenant, info.admin_roles, info.allowed_clusters)
        return Response(status_code=204)

    @router.delete("/admin/v2/tenants/{tenant}", status_code=204, response_class=Response)
    def delete_tenant(tenant: Tenant) -> Response:
        """Delete an empty tenant (409 ``not_empty`` while it holds anything)."""
        registry.delete_tenant(store, tenant)
        return Response(status_code=204)

    @router.get("/admin/v2/namespaces/{tenant}", response_model=list[str])
    def list_namespaces(tenant: Tenant) -> list[str]:
        """The tenant's namespaces, ``tenant/namespace``, sorted; 404 without the tenant."""
        registry.tenant_info(store, tenant)
        return sorted(f"{t}/{ns}" for t, ns in registry.namespaces_of(store) if t == tenant)

    namespace_path = "/admin/v2/namespaces/{tenant}/{namespace}"

    @router.put(namespace_path, status_code=204, response_class=Response)
    def create_namespace(tenant: Tenant, namespace: Namespace) -> Response:
        """Create a namespace (409 ``namespace_already_exists``; 404 without the tenant)."""
        registry.create_namespace(store, tenant, namespace)
        return Response(status_code=204)

    @router.delete(namespace_path, status_code=204, response_class=Response)
    def delete_namespace(tenant: Tenant, namespace: Namespace) -> Response:
        """Delete an empty namespace (409 ``not_empty`` while it holds anything)."""
        registry.delete_namespace(store, tenant, namespace)
        return Response(status_code=204)

    @router.get(namespace_path + "/topics", response_model=list[str])
    def namespace_topics(tenant: Tenant, namespace: Namespace) -> list[str]:
        """The namespace's topics, ``persistent://`` names, sorted."""
        return [
            f"persistent://{info.name}"
            for info in TopicAdmin(store).list(tenant=tenant, namespace=namespace)
        ]

    return router
