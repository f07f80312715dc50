"""Pulsar's worker-cluster routes, answered from the store's membership table.

==========  =================================  ===================================
verb        path                               what
==========  =================================  ===================================
GET         ``/admin/v2/worker/cluster``        every live worker: ``workerId``,
                                               ``workerHostname``, ``port``
GET         ``/admin/v2/worker/cluster/leader`` the leader, in the same shape; 503
                                               ``no_leader`` while none leads
==========  =================================  ===================================

Any worker answers both, since both are read from the store
(:mod:`sparkfn.worker.cluster.members`).
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from sparkfn.worker.cluster.members import WorkerInfo, current_leader, live_workers
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

    return router
