"""Pulsar's worker-cluster routes, answered from the store's membership table.

==========  =================================  ===================================
verb        path                               what
==========  =================================  ===================================
GET         ``/admin/v2/worker/cluster``        every live worker: ``workerId``,
                                               ``workerHostname``, ``port``
GET         ``/admin/v2/worker/cluster/leader`` the leader, in the same shape; 503
                                               ``no_leader`` while none leads
GET         ``/admin/v2/worker/assignments``    ``{workerId: ["t/n/f:0", ...]}``
PUT         ``/admin/v2/worker/drain``          drain a worker (``workerId``, default
                                               this one): its instances move
GET         ``/admin/v2/worker/drain``          ``{"status": NOT_RUN|RUNNING|SUCCESS}``
==========  =================================  ===================================

Pulsar's ``/admin/v2/worker/leader/drain`` (both verbs) is the same route here.

Any worker answers them all, since they are read from (and written to) the store
(:mod:`sparkfn.worker.cluster.members`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from sparkfn.worker.cluster.members import (
    WorkerInfo,
    assignments,
    current_leader,
    drain,
    drain_status,
    live_workers,
    own_assignments,
)
from sparkfn.worker.http import ErrorBody, error_response
from sparkfn.worker.service import Worker


class PulsarWorkerInfo(BaseModel):
    """Pulsar's ``WorkerInfo``: a worker's id and where it serves."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    worker_id: str
    worker_hostname: str
    port: int

    @classmethod
    def of(cls, info: WorkerInfo) -> PulsarWorkerInfo:
        """The Pulsar shape of ``info``."""
        return cls(worker_id=info.worker_id, worker_hostname=info.host, port=info.port)


# A worker's id in a query (the worker drained; default: the one asked).
WorkerId = Annotated[str | None, Query(alias="workerId", max_length=256)]


class DrainStatus(BaseModel):
    """Pulsar's ``LongRunningProcessStatus``: ``NOT_RUN``, ``RUNNING`` or ``SUCCESS``."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    status: str
    last_error: str = ""


def cluster_router(worker: Worker) -> APIRouter:
    """The ``/admin/v2/worker/cluster`` routes over ``worker``'s store."""
    router = APIRouter(tags=["cluster"])

    @router.get("/cluster", response_model=list[PulsarWorkerInfo], response_model_by_alias=True)
    def cluster() -> list[PulsarWorkerInfo]:
        """The workers whose lease runs, by id."""
        return [PulsarWorkerInfo.of(info) for info in live_workers(worker.open_store())]

    @router.get(
        "/cluster/leader",
        response_model=PulsarWorkerInfo,
        response_model_by_alias=True,
        responses={503: {"model": ErrorBody, "description": "No live worker leads now."}},
    )
    def leader() -> PulsarWorkerInfo | JSONResponse:
        """The worker that holds the leader lock."""
        found = current_leader(worker.open_store())
        if found is None:
            return error_response(
                503,
                "no_leader",
                "no live worker leads the cluster now; one takes over within seconds",
            )
        return PulsarWorkerInfo.of(found[0])

    @router.get("/assignments", response_model=dict[str, list[str]])
    def assigned() -> dict[str, list[str]]:
        """Which worker runs which instance (a SQLite store's one worker: all that run)."""
        store = worker.open_store()
        if store.dialect == "sqlite":
            return own_assignments(store, worker.settings.worker_id)
        return assignments(store)

    def target(worker_id: str | None) -> str:
        return worker_id or worker.settings.worker_id

    not_member: dict[int | str, dict[str, Any]] = {
        404: {"model": ErrorBody, "description": "No such worker is a member."}
    }

    @router.put("/drain", status_code=204, responses=not_member)
    @router.put("/leader/drain", status_code=204, responses=not_member, include_in_schema=False)
    def drain_worker(worker_id: WorkerId = None) -> Response:
        """Drain a worker: the leader moves its instances to the others (it takes no more
        until it restarts)."""
        if worker.cluster is None:
            return error_response(
                409, "not_a_cluster", "a SQLite store has one worker: there is nowhere to drain to"
            )
        if not drain(worker.open_store(), target(worker_id)):
            return error_response(
                404, "worker_not_found", f"worker {target(worker_id)!r} is not a member"
            )
        worker.cluster.changed()
        return Response(status_code=204)

    @router.get("/drain", response_model=DrainStatus, response_model_by_alias=True)
    @router.get("/leader/drain", response_model=DrainStatus, include_in_schema=False)
    def drain_progress(worker_id: WorkerId = None) -> DrainStatus:
        """Pulsar's ``LongRunningProcessStatus`` of a worker's drain."""
        return DrainStatus(status=drain_status(worker.open_store(), target(worker_id)))

    return router
