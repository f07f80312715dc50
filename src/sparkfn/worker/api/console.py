"""The worker's web console, and the few read-only routes it needs beside the REST API.

The console is a single-page app (``console/`` at the repository's root,
Preact and Vite; its build is committed in ``sparkfn/worker/console_dist``).
The worker serves its page at ``/`` and its files under ``/console/assets/``,
on the REST API's port; neither holds data, so both are public, as the
OpenAPI viewers are. Everything the page shows it reads from the REST API
with the token the user gives it, so auth is the API's.

The routes below are the ones the REST API lacked for a console:

==========  =====================================================  ==================================
verb        path                                                   what
==========  =====================================================  ==================================
GET         ``/admin/v3/functions``                                a page of every function, with
                                                                   its state and its instances'
GET         ``/admin/v3/functions/{tenant}/{namespace}/{name}/``   the lifecycle record: each
            ``transitions``                                        transition, its cause and time
GET         ``/admin/v3/worker``                                   version, Spark, uptime, states
==========  =====================================================  ==================================

A tenant admin's listings show its own tenant only; ``/admin/v3/worker`` spans
every tenant and is for superusers. Tenants and namespaces are
:mod:`sparkfn.worker.api.tenants_api`.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, HTMLResponse
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from sqlalchemy import and_, case, func, select

import sparkfn
from sparkfn.api.errors import NotFoundError
from sparkfn.api.lifecycle import RunState
from sparkfn.runtime.lifecycle.control import transitions_of
from sparkfn.store import registry_schema, schema
from sparkfn.worker.api.params import Name, Namespace, Offset, Tenant
from sparkfn.worker.auth.access import Caller
from sparkfn.worker.auth.tokens import Principal
from sparkfn.worker.service import Worker

# The built app (committed; `make console` rebuilds it from console/).
DIST = Path(str(resources.files("sparkfn.worker"))) / "console_dist"
ASSETS = "/console/assets"
MAX_PAGE = 500
# What the console calls a function whose run row says RUNNING with the park stop mode.
_STATE_PATTERN = "^(" + "|".join(s.value for s in RunState) + ")$"


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class InstanceSummary(_Camel):
    """One instance's state, as its run row has it."""

    instance_id: int
    state: str
    cause: str


class FunctionSummary(_Camel):
    """One function of a listing: its current version and where its run is."""

    fqfn: str
    tenant: str
    namespace: str
    name: str
    version: int
    desired: str  # running | stopped: what the worker restores
    state: str  # a RunState (PARKED among them); CREATED before the first run
    parallelism: int
    instances: list[InstanceSummary]


class FunctionPage(_Camel):
    """A page of the function listing, and how many functions match in all."""

    total: int
    offset: int
    limit: int
    states: dict[str, int]  # of every function the caller may see, search aside
    functions: list[FunctionSummary]


class Transition(_Camel):
    """One recorded state change of a function (``instance`` null) or of one instance."""

    instance: int | None
    from_state: str | None = None
    to_state: str
    cause: str
    at: str | None


class WorkerInfo(_Camel):
    """The worker: its version, its Spark, how long it has run and its functions by state."""

    worker_id: str
    version: str
    spark_version: str | None
    spark_master: str
    spark_ui_url: str | None  # None until Spark started, or with spark.ui.enabled false
    started_at: datetime
    uptime_seconds: float
    auth_enabled: bool
    store: str  # sqlite | postgresql
    functions_by_state: dict[str, int]


def console_router(worker: Worker) -> APIRouter:
    """The console's page and files, and its read-only routes (see the module docstring)."""
    router = APIRouter()

    # HEAD as GET: a public page is public to a HEAD too (FastAPI adds no HEAD to a GET).
    @router.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    def page() -> HTMLResponse:
        """The web console's page (public: it reads the API with the user's token)."""
        index = DIST / "index.html"
        if not index.is_file():
            return HTMLResponse(_NOT_BUILT, status_code=503)
        return HTMLResponse(index.read_text(encoding="utf-8"))

    @router.api_route(ASSETS + "/{asset}", methods=["GET", "HEAD"], include_in_schema=False)
    def asset(asset: str) -> FileResponse:
        """One of the console's built files (public), named by its content's hash."""
        found = DIST / "assets" / asset
        if "/" in asset or asset.startswith(".") or not found.is_file():
            msg = f"the console has no file {asset!r}"
            raise NotFoundError(msg)
        # Names carry a content hash: a file never changes under its name.
        return FileResponse(found, headers={"Cache-Control": "public, max-age=31536000"})

    @router.get("/admin/v3/functions", response_model=FunctionPage, tags=["console"])
    def list_all(
        caller: Caller,
        search: Annotated[str, Query(max_length=400)] = "",
        namespace: Annotated[
            str | None, Query(pattern=r"^[^/]+/[^/]+$", description="Only tenant/namespace.")
        ] = None,
        state: Annotated[
            str | None, Query(pattern=_STATE_PATTERN, description="A RunState (PARKED among them).")
        ] = None,
        offset: Offset = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    ) -> FunctionPage:
        """Every function the caller may see, by FQFN, a page at a time.

        ``search`` is a substring of the FQFN, any case; ``namespace`` keeps
        one ``tenant/namespace``; ``state`` one state.
        """
        return _page(worker, caller, search, namespace, state, offset, limit)

    @router.get(
        "/admin/v3/functions/{tenant}/{namespace}/{name}/transitions",
        response_model=list[Transition],
        tags=["console"],
    )
    def transitions(tenant: Tenant, namespace: Namespace, name: Name) -> list[Transition]:
        """The function's lifecycle record, oldest first: each transition with its cause and time."""
        fqfn = f"{tenant}/{namespace}/{name}"
        worker.registry.get(fqfn)  # 404 function_not_found
        return [
            Transition(
                instance=row["instance"],
                from_state=row["from"],
                to_state=row["to"],
                cause=row["cause"],
                at=row["at"],
            )
            for row in transitions_of(worker.open_store(), fqfn)
        ]

    @router.get("/admin/v3/worker", response_model=WorkerInfo, tags=["console"])
    def worker_info() -> WorkerInfo:
        """The worker's version, Spark master and UI, uptime, and functions per state."""
        spark = worker.spark_if_started
        ui = spark.sparkContext.uiWebUrl if spark is not None else None
        store = worker.open_store()
        return WorkerInfo(
            worker_id=worker.settings.worker_id,
            version=sparkfn.__version__,
            spark_version=spark.version if spark is not None else None,
            spark_master=worker.settings.spark_master,
            spark_ui_url=ui,
            started_at=datetime.fromtimestamp(worker.started_at, UTC),
            uptime_seconds=time.time() - worker.started_at,
            auth_enabled=worker.settings.auth_enabled,
            store=store.engine.dialect.name,
            functions_by_state=_state_counts(worker, None),
        )

    return router


def _state_column() -> Any:
    """The console's state of a function, in SQL: its run's state, or CREATED."""
    runs = schema.function_runs
    return case(
        (runs.c.state.is_(None), RunState.CREATED.value),
        else_=runs.c.state,
    )


def _visible(caller: Principal | None) -> Any:
    functions = registry_schema.functions
    if caller is None or caller.is_superuser:
        return functions.c.fqfn.is_not(None)
    return functions.c.fqfn.startswith(f"{caller.tenant}/", autoescape=True)


def _joined() -> Any:
    functions, runs = registry_schema.functions, schema.function_runs
    return functions.outerjoin(runs, runs.c.fqfn == functions.c.fqfn)


def _state_counts(worker: Worker, caller: Principal | None) -> dict[str, int]:
    state = _state_column()
    query = (
        select(state, func.count()).select_from(_joined()).where(_visible(caller)).group_by(state)
    )
    with worker.open_store().read() as conn:
        return {str(s): int(n) for s, n in conn.execute(query).all()}


def _page(
    worker: Worker,
    caller: Principal,
    search: str,
    namespace: str | None,
    state: str | None,
    offset: int,
    limit: int,
) -> FunctionPage:
    functions, versions = registry_schema.functions, registry_schema.function_versions
    instance_runs = schema.function_instance_runs
    state_col = _state_column().label("console_state")
    where = [_visible(caller)]
    if namespace is not None:
        where.append(functions.c.fqfn.startswith(f"{namespace}/", autoescape=True))
    if search:
        where.append(functions.c.fqfn.icontains(search, autoescape=True))
    if state is not None:
        where.append(_state_column() == state)
    query = (
        select(
            functions.c.fqfn,
            functions.c.version,
            functions.c.desired,
            state_col,
            versions.c.config,
        )
        .select_from(
            _joined().join(
                versions,
                and_(
                    versions.c.fqfn == functions.c.fqfn,
                    versions.c.version == functions.c.version,
                ),
            )
        )
        .where(*where)
        .order_by(functions.c.fqfn)
        .offset(offset)
        .limit(limit)
    )
    count = select(func.count()).select_from(_joined()).where(*where)
    with worker.open_store().read() as conn:
        rows = conn.execute(query).all()
        total = int(conn.execute(count).scalar_one())
        fqfns = [r.fqfn for r in rows]
        instances: dict[str, list[InstanceSummary]] = {}
        if fqfns:
            for inst in conn.execute(
                select(instance_runs)
                .where(instance_runs.c.fqfn.in_(fqfns))
                .order_by(instance_runs.c.fqfn, instance_runs.c.instance_id)
            ).all():
                instances.setdefault(inst.fqfn, []).append(
                    InstanceSummary(
                        instance_id=inst.instance_id, state=inst.state, cause=inst.cause
                    )
                )
    page = []
    for row in rows:
        tenant, namespace, name = row.fqfn.split("/", 2)
        config: dict[str, Any] = json.loads(row.config)
        page.append(
            FunctionSummary(
                fqfn=row.fqfn,
                tenant=tenant,
                namespace=namespace,
                name=name,
                version=row.version,
                desired=row.desired,
                state=row.console_state,
                parallelism=int(config.get("parallelism", 1)),
                instances=instances.get(row.fqfn, []),
            )
        )
    return FunctionPage(
        total=total,
        offset=offset,
        limit=limit,
        states=_state_counts(worker, caller),
        functions=page,
    )


_NOT_BUILT = """<!doctype html><meta charset="utf-8"><title>sparkfn console</title>
<p>The console's build is missing from this installation: run <code>make console</code>
(it needs npm) in the repository.
The REST API works without it; see <a href="/docs">/docs</a>.</p>"""
