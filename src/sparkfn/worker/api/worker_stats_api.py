"""Pulsar's worker-stats routes and its list of connectors.

==========  ==========================================  =====================================
verb        path                                        what
==========  ==========================================  =====================================
GET         ``/admin/v3/functions/connectors``          every built-in connector (Pulsar's
                                                        ``ConnectorDefinition``), source and
                                                        sink classes side by side
GET         ``/admin/v2/worker-stats/functionsmetrics`` each running function instance's
                                                        stats, ``{"name", "metrics"}``
GET         ``/admin/v2/worker-stats/metrics``          the worker's own metrics as Pulsar's
                                                        ``Metrics``: ``{"metrics", "dimensions"}``
==========  ==========================================  =====================================

The worker-stats routes span every tenant: superusers only.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from sparkfn.api.errors import NotFoundError
from sparkfn.api.status import FunctionInstanceStatsData
from sparkfn.connectors.catalog import ConnectorDefinition, definitions
from sparkfn.worker.api.metrics import WORKER_PREFIX, metrics_registry
from sparkfn.worker.service import Worker


class WorkerFunctionInstanceStats(BaseModel):
    """Pulsar's ``WorkerFunctionInstanceStats``: ``tenant/namespace/name:instance`` and its stats."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    name: str
    metrics: FunctionInstanceStatsData


class Metrics(BaseModel):
    """Pulsar's ``Metrics``: values by name, for one set of dimensions (labels)."""

    metrics: dict[str, float]
    dimensions: dict[str, str]


def connectors() -> list[ConnectorDefinition]:
    """Every built-in connector once, a source's and a sink's classes merged by name."""
    merged: dict[str, ConnectorDefinition] = {}
    for kind in ("source", "sink"):
        for found in definitions(kind):
            known = merged.get(found.name)
            if known is None:
                merged[found.name] = found
                continue
            update = {
                k: v
                for k, v in found.model_dump().items()
                if k.endswith(("_class", "_config_class")) and v is not None
            }
            fields = [*known.config_field_definitions, *found.config_field_definitions]
            merged[found.name] = known.model_copy(
                update={**update, "config_field_definitions": fields}
            )
    return [merged[name] for name in sorted(merged)]


def worker_stats_router(worker: Worker) -> APIRouter:
    """The routes above, over ``worker``."""
    router = APIRouter(tags=["worker-stats"])
    registry = metrics_registry(worker)

    @router.get(
        "/admin/v3/functions/connectors",
        response_model=list[ConnectorDefinition],
        response_model_by_alias=True,
    )
    def list_connectors() -> list[ConnectorDefinition]:
        """Every built-in connector (Pulsar's ``functions/connectors``)."""
        return connectors()

    @router.get(
        "/admin/v2/worker-stats/functionsmetrics",
        response_model=list[WorkerFunctionInstanceStats],
        response_model_by_alias=True,
    )
    def functions_metrics() -> list[WorkerFunctionInstanceStats]:
        """Each instance's stats of every function running here."""
        found: list[WorkerFunctionInstanceStats] = []
        for fqfn in sorted(worker.running("function")):
            try:
                stats = worker.stats(fqfn)
            except NotFoundError:
                continue  # deleted since it was listed
            found.extend(
                WorkerFunctionInstanceStats(name=f"{fqfn}:{one.instance_id}", metrics=one.metrics)
                for one in stats.instances
            )
        return found

    @router.get("/admin/v2/worker-stats/metrics", response_model=list[Metrics])
    def worker_metrics() -> list[Metrics]:
        """The worker's own Prometheus metrics, grouped by their labels."""
        grouped: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}
        for family in registry.collect():
            for sample in family.samples:
                if sample.name.startswith(WORKER_PREFIX):
                    labels = tuple(sorted(sample.labels.items()))
                    grouped.setdefault(labels, {})[sample.name] = float(sample.value)
        return [
            Metrics(metrics=values, dimensions=dict(labels)) for labels, values in grouped.items()
        ]

    return router
