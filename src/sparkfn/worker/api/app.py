"""The worker's REST API: the FastAPI app over a :class:`~sparkfn.worker.service.Worker`.

Each group of routes lives in a module of its own; :mod:`sparkfn.worker.api.functions_api`
has the function routes on Pulsar's v3 paths, :mod:`sparkfn.worker.api.packages_api`
the package routes. Errors are
:class:`~sparkfn.worker.http.ErrorBody` with a stable ``reason``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.to_thread
from fastapi import FastAPI

from sparkfn.worker.api.cluster_api import cluster_router
from sparkfn.worker.api.connectors_api import connectors_router
from sparkfn.worker.api.console import console_router
from sparkfn.worker.api.forward import Forward
from sparkfn.worker.api.functions_api import functions_router
from sparkfn.worker.api.logs_api import logs_router
from sparkfn.worker.api.openapi import complete_openapi
from sparkfn.worker.api.ops_api import ops_router
from sparkfn.worker.api.packages_api import BodyLimit, packages_router
from sparkfn.worker.api.produce_api import produce_router
from sparkfn.worker.api.tenants_api import tenants_router
from sparkfn.worker.api.topics_api import topics_router
from sparkfn.worker.api.trigger import trigger_router
from sparkfn.worker.api.worker_stats_api import worker_stats_router
from sparkfn.worker.auth.access import AUTH_RESPONSES, app_dependencies, install_auth
from sparkfn.worker.auth.origins import RequestOrigins, default_hosts
from sparkfn.worker.http import ErrorBody, NoNulCharacters, install_error_handlers
from sparkfn.worker.service import Worker


def create_app(worker: Worker, *, shutdown_worker: bool = False) -> FastAPI:
    """The FastAPI app over ``worker``; with ``shutdown_worker`` the app's shutdown stops it.

    The server's graceful shutdown (SIGTERM, Ctrl+C) runs the app's shutdown
    before the process ends, so the worker's functions are suspended (or
    drained) there.
    """

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if shutdown_worker:
            # A thread of its own: the request threads may all be taken by stuck requests.
            await anyio.to_thread.run_sync(worker.shutdown, limiter=anyio.CapacityLimiter(1))

    app = FastAPI(
        lifespan=lifespan,
        title="sparkfn worker",
        summary="Pulsar-style functions on Spark: register, run and inspect them.",
        responses={
            400: {"model": ErrorBody},
            404: {"model": ErrorBody},
            409: {"model": ErrorBody},
            413: {"model": ErrorBody},
            503: {"model": ErrorBody, "description": "The store cannot take writes now."},
            507: {"model": ErrorBody, "description": "A write found no space (storage_full)."},
            **(AUTH_RESPONSES if worker.settings.auth_enabled else {}),
        },
        dependencies=app_dependencies(auth_enabled=worker.settings.auth_enabled),
    )
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_upload_bytes=worker.settings.max_upload_bytes)
    app.add_middleware(NoNulCharacters)
    keys = worker.settings.token_keys() if worker.settings.auth_enabled else None
    install_auth(app, keys)  # every route, including those included below
    # Before auth (the owner checks the token) and after the Host and Origin check below.
    app.add_middleware(Forward, worker=worker)
    settings = worker.settings
    # Added last, so it runs first: a foreign Host or Origin reaches nothing, auth on or off.
    app.add_middleware(
        RequestOrigins, allowed_hosts=settings.allowed_hosts or default_hosts(settings.host)
    )
    app.include_router(packages_router(worker))
    # Before the function routes: GET /admin/v3/functions/{tenant}/{namespace}/{name}/transitions
    # is the console's, and it and /admin/v3/functions must not be taken for other routes.
    app.include_router(console_router(worker))
    app.include_router(tenants_router(worker))
    app.include_router(worker_stats_router(worker))  # before /admin/v3/functions/{tenant}/...
    app.include_router(functions_router(worker), prefix="/admin/v3/functions")
    app.include_router(trigger_router(worker), prefix="/admin/v3/functions")
    app.include_router(logs_router(worker), prefix="/admin/v3/functions")
    app.include_router(connectors_router(worker, "source"), prefix="/admin/v3/sources")
    app.include_router(connectors_router(worker, "sink"), prefix="/admin/v3/sinks")
    app.include_router(topics_router(worker), prefix="/admin/v2/persistent")
    app.include_router(produce_router(worker), prefix="/topics/persistent")
    app.include_router(ops_router(worker))
    app.include_router(cluster_router(worker), prefix="/admin/v2/worker")
    complete_openapi(app)
    return app
