"""The operations routes of the worker: liveness, readiness and Prometheus metrics.

==========  ============  ==================================================
verb        path          what
==========  ============  ==================================================
GET         ``/health``   200 while the process serves requests (liveness)
GET         ``/ready``    200 once the worker can run functions; else 503
GET         ``/metrics``  every function's metrics and the worker's, in
                          Prometheus text format (:mod:`sparkfn.worker.metrics`)
==========  ============  ==================================================

Ready means: the restore of the functions that were running has finished,
the store answers a query, writes go through and the SparkSession is up and
answers. A 503 is an :class:`~sparkfn.worker.http.ErrorBody` whose ``reason``
says which is not (``restoring``, ``store_unavailable``, ``storage_full``,
``spark_unavailable``).

Writes go through unless the worker's last write failed for want of space
or of a store (:attr:`sparkfn.store.store.Store.health`); then each ``/ready``
tries a small write of its own (:meth:`~sparkfn.store.store.Store.probe_write`),
and the worker is ready again as soon as one succeeds, or any other write does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from sqlalchemy import literal, select

from sparkfn.api.errors import SparkfnError
from sparkfn.worker.http import ErrorBody, error_response
from sparkfn.worker.metrics import metrics_registry, metrics_text
from sparkfn.worker.service import Worker


class Health(BaseModel):
    """The body of ``/health``."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    status: str
    worker_id: str
    uptime_seconds: float


class Readiness(BaseModel):
    """The body of a ready ``/ready``."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    status: str
    worker_id: str
    functions_running: int
    functions_restored: int


@dataclass(frozen=True)
class NotReady:
    """Why the worker is not ready: a stable reason and what was found."""

    reason: str
    message: str


def not_ready(worker: Worker) -> NotReady | None:
    """The first reason ``worker`` is not ready, or None when it is."""
    if not worker.restored.is_set():
        return NotReady(
            "restoring",
            "the worker is still starting Spark and the functions that were running",
        )
    try:
        store = worker.open_store()  # closed once the worker shuts down
        with store.read() as conn:
            conn.execute(select(literal(1))).scalar_one()
    except Exception as exc:  # any failure means the same thing: no store
        return NotReady("store_unavailable", f"the store does not answer: {exc}")
    if store.health.failure is not None:
        try:
            store.probe_write()
        except Exception as exc:  # whatever stops a small write stops the worker's
            reason = exc.reason if isinstance(exc, SparkfnError) else "store_unavailable"
            return NotReady(reason, f"writes fail: {exc}")
    spark = worker.spark_if_started
    if spark is None:
        why = worker.spark_error or "no SparkSession was started"
        return NotReady("spark_unavailable", f"Spark did not start: {why}")
    try:
        spark.sparkContext.statusTracker().getActiveJobsIds()
    except Exception as exc:  # a stopped context, a JVM that is gone
        return NotReady("spark_unavailable", f"Spark does not answer: {exc}")
    return None


def ops_router(worker: Worker) -> APIRouter:
    """The ``/health``, ``/ready`` and ``/metrics`` routes."""
    router = APIRouter(tags=["operations"])
    registry = metrics_registry(worker)

    @router.get("/health", response_model=Health)
    def health() -> Health:
        """Liveness: 200 while the worker process serves requests."""
        return Health(
            status="alive",
            worker_id=worker.settings.worker_id,
            uptime_seconds=time.time() - worker.started_at,
        )

    # HEAD as GET (FastAPI adds no HEAD to a GET route), kept out of the document.
    router.add_api_route("/health", health, methods=["HEAD"], include_in_schema=False)

    @router.get(
        "/ready",
        response_model=Readiness,
        responses={503: {"model": ErrorBody, "description": "Not ready, and why."}},
    )
    def ready() -> Readiness | JSONResponse:
        """Readiness: 200 once restore has finished and the store and Spark answer; else 503."""
        problem = not_ready(worker)
        if problem is not None:
            return error_response(503, problem.reason, problem.message)
        return Readiness(
            status="ready",
            worker_id=worker.settings.worker_id,
            functions_running=len(worker.running()),
            functions_restored=len(worker.restored_functions),
        )

    @router.get(
        "/metrics",
        response_class=Response,
        responses={
            200: {
                "description": "Prometheus text exposition format.",
                "content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
            }
        },
    )
    def metrics() -> Response:
        """Every function's metrics and the worker's own, in Prometheus text format."""
        return Response(metrics_text(worker, registry), media_type=CONTENT_TYPE_LATEST)

    return router
