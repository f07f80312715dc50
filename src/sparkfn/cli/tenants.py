"""``sparkfn tenants`` and ``sparkfn namespaces``: pulsar-admin's commands, on a worker.

::

    sparkfn tenants list
    sparkfn tenants create acme --admin-roles alice --allowed-clusters sparkfn
    sparkfn tenants get acme
    sparkfn tenants update acme --admin-roles alice,bob
    sparkfn namespaces create acme/sales
    sparkfn namespaces list acme
    sparkfn namespaces topics acme/sales
    sparkfn namespaces delete acme/sales
    sparkfn tenants delete acme

sparkfn needs neither made first (a function or topic under
``tenant/namespace`` makes both); ``create`` records one that holds nothing
yet, and ``delete`` forgets one that holds nothing (:mod:`sparkfn.worker.tenants`).
Output is pulsar-admin's: names one a line, ``get`` as indented JSON.
"""

from __future__ import annotations

from typing import Annotated

import typer

from sparkfn.cli.admin_client import DEFAULT_URL, TOKEN_ENV, URL_ENV, Call, OutputFormat, show

tenants_app = typer.Typer(
    name="tenants", help="List, create, update and delete tenants.", no_args_is_help=True
)
namespaces_app = typer.Typer(
    name="namespaces", help="List, create and delete namespaces.", no_args_is_help=True
)

Url = Annotated[str, typer.Option("--url", envvar=URL_ENV, help="The worker's REST API.")]
Token = Annotated[
    str | None,
    typer.Option("--token", envvar=TOKEN_ENV, help="A bearer token.", show_default=False),
]
TenantArg = Annotated[str, typer.Argument(metavar="TENANT", show_default=False)]
NamespaceArg = Annotated[str, typer.Argument(metavar="TENANT/NAMESPACE", show_default=False)]


def _call(url: str, token: str | None) -> Call:
    return Call(url, token, OutputFormat.PULSAR, "")


def _parts(text: str) -> tuple[str, str]:
    tenant, _, namespace = text.strip().partition("/")
    if not tenant or not namespace or "/" in namespace:
        msg = f"{text!r} is not a namespace: give it as tenant/namespace (public/default)"
        raise typer.BadParameter(msg, param_hint="'TENANT/NAMESPACE'")
    return tenant, namespace


@tenants_app.command("list")
def list_tenants(url: Url = DEFAULT_URL, token: Token = None) -> None:
    """List the tenants, one a line."""
    call = _call(url, token)
    with call.client() as client:
        show(call, client.json("GET", "/admin/v2/tenants"), str)


@tenants_app.command("get")
def get_tenant(tenant: TenantArg, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """Show a tenant's adminRoles and allowedClusters."""
    call = _call(url, token)
    with call.client() as client:
        show(call, client.json("GET", f"/admin/v2/tenants/{tenant}"), str)


@tenants_app.command("create")
def create_tenant(
    tenant: TenantArg,
    admin_roles: Annotated[
        str, typer.Option("--admin-roles", "-r", help="Comma-separated roles (recorded).")
    ] = "",
    allowed_clusters: Annotated[
        str, typer.Option("--allowed-clusters", "-c", help="Comma-separated clusters (recorded).")
    ] = "",
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Create a tenant with no namespace yet."""
    body = {
        "adminRoles": [r for r in admin_roles.split(",") if r],
        "allowedClusters": [c for c in allowed_clusters.split(",") if c],
    }
    with _call(url, token).client() as client:
        client.request("PUT", f"/admin/v2/tenants/{tenant}", json=body)


@tenants_app.command("update")
def update_tenant(
    tenant: TenantArg,
    admin_roles: Annotated[
        str | None,
        typer.Option(
            "--admin-roles", "-r", help="Comma-separated roles; omitted: kept as they are."
        ),
    ] = None,
    allowed_clusters: Annotated[
        str | None,
        typer.Option(
            "--allowed-clusters", "-c", help="Comma-separated clusters; omitted: kept as they are."
        ),
    ] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Update a tenant's admin roles and allowed clusters (pulsar-admin's: what is not
    given stays)."""
    with _call(url, token).client() as client:
        current = client.json("GET", f"/admin/v2/tenants/{tenant}")
        body = {
            "adminRoles": _split(admin_roles) if admin_roles is not None else current["adminRoles"],
            "allowedClusters": _split(allowed_clusters)
            if allowed_clusters is not None
            else current["allowedClusters"],
        }
        client.request("POST", f"/admin/v2/tenants/{tenant}", json=body)


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


@tenants_app.command("delete")
def delete_tenant(tenant: TenantArg, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """Delete a tenant that holds nothing."""
    with _call(url, token).client() as client:
        client.request("DELETE", f"/admin/v2/tenants/{tenant}")


@namespaces_app.command("list")
def list_namespaces(tenant: TenantArg, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """List a tenant's namespaces, one a line (tenant/namespace)."""
    call = _call(url, token)
    with call.client() as client:
        show(call, client.json("GET", f"/admin/v2/namespaces/{tenant}"), str)


@namespaces_app.command("create")
def create_namespace(namespace: NamespaceArg, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """Create a namespace of an existing tenant."""
    tenant, name = _parts(namespace)
    with _call(url, token).client() as client:
        client.request("PUT", f"/admin/v2/namespaces/{tenant}/{name}")


@namespaces_app.command("delete")
def delete_namespace(namespace: NamespaceArg, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """Delete a namespace that holds nothing."""
    tenant, name = _parts(namespace)
    with _call(url, token).client() as client:
        client.request("DELETE", f"/admin/v2/namespaces/{tenant}/{name}")


@namespaces_app.command("topics")
def namespace_topics(namespace: NamespaceArg, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """List a namespace's topics, one a line."""
    tenant, name = _parts(namespace)
    call = _call(url, token)
    with call.client() as client:
        show(call, client.json("GET", f"/admin/v2/namespaces/{tenant}/{name}/topics"), str)
