"""The operations routes of the worker: liveness, readiness and Prometheus metrics.

==========  ============  ==================================================
verb        path          what
==========  ============  ==================================================
GET         ``/health``   200 while the process serves requests and its Spark
                          session runs or is being started again (liveness)
GET         ``/ready``    200 once the worker can run functions; else 503
GET         ``/metrics``  every function's metrics and the worker's, in
                          Prometheus text format (:mod:`sparkfn.worker.api.metrics`)
==========  ============  ==================================================

Ready means: the restore of the functions that were running has finished,
the store answers a query, writes go through and the SparkSession is up and
answers. A 503 is an :class:`~sparkfn.worker.http.ErrorBody` whose ``reason``
says which is not (``restoring``, ``store_unavailable``, ``storage_full``,
``spark_unavailable``).

``/health`` says the SparkSession's state too (``sparkSession``: ``none``,
``up``, ``restarting``, ``failed``; :mod:`sparkfn.worker.session`), how many
times a new session was started after its JVM died, and why the last one was
lost. It answers 503 ``spark_lost`` once no new session could start (the
worker then exits non-zero): the probe to wire to a liveness check.

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
from sparkfn.runtime.lifecycle.causes import user_text
from sparkfn.worker.api.metrics import metrics_registry, metrics_text
from sparkfn.worker.http import ErrorBody, error_response
from sparkfn.worker.service import Worker
from sparkfn.worker.session import FAILED, RESTARTING


class Health(BaseModel):
    """The body of ``/health``."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    status: str
    worker_id: str
    uptime_seconds: float
    # Where its Spark runs: local[*], or a cluster's master (spark://..., k8s://...).
    spark_master: str
    # The SparkSession: none (not asked for yet), up, restarting (its JVM died), failed.
    spark_session: str
    spark_restarts: int  # new sessions started after a JVM died
    spark_lost_cause: str | None = None  # why the last session was lost


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
    if worker.session.state == RESTARTING:
        return NotReady(
            "spark_unavailable",
            f"a new Spark session is starting: {worker.session.last_loss}",
        )
    spark = worker.spark_if_started
    if spark is None:
        why = worker.spark_error or "no SparkSession was started"
        return NotReady("spark_unavailable", f"Spark did not start: {why}")
    try:
        spark.sparkContext.statusTracker().getActiveJobsIds()
    except Exception as exc:  # a stopped context, a JVM that is gone
        return NotReady("spark_unavailable", f"Spark does not answer: {user_text(str(exc))}")
    return None


def ops_router(worker: Worker) -> APIRouter:
    """The ``/health``, ``/ready`` and ``/metrics`` routes."""
    router = APIRouter(tags=["operations"])
    registry = metrics_registry(worker)

    @router.get(
        "/health",
        response_model=Health,
        responses={503: {"model": ErrorBody, "description": "No Spark session could start."}},
    )
    async def health() -> Health | JSONResponse:
        """Liveness: 200 while the worker serves requests and its Spark session runs or
        is being started again; 503 ``spark_lost`` once a new session could not start.

        On the event loop itself (it only reads attributes): a sync route waits for a
        thread of the request pool, which a burst of slow requests can hold."""
        session = worker.session
        if session.state == FAILED:
            why = session.error or "no new session started"
            message = f"Spark session lost ({session.last_loss}) and not started again: {why}"
            return error_response(503, "spark_lost", message)
        return Health(
            status="alive",
            worker_id=worker.settings.worker_id,
            uptime_seconds=time.time() - worker.started_at,
            spark_master=session.master,
            spark_session=session.state,
            spark_restarts=session.restarts,
            spark_lost_cause=session.last_loss,
        )

    # HEAD as GET (FastAPI adds no HEAD to a GET route), kept out of the document.
    router.add_api_route(
        "/health", health, methods=["HEAD"], response_model=Health, include_in_schema=False
    )

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
