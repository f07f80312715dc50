"""The worker's Prometheus metrics: every function's, and the worker's own.

Each registered function contributes what
:class:`~sparkfn.runtime.prometheus.FunctionMetricsCollector` reports for it
(the DESIGN.md 2.5 names, labelled ``tenant``, ``namespace``, ``name`` and
``instance_id``), merged so that each metric name is one family whatever the
number of functions. The worker adds, labelled ``worker_id``::

    sparkfn_worker_functions_registered     gauge    functions in the registry
    sparkfn_worker_functions_running        gauge    functions whose run has not ended
    sparkfn_worker_functions_restored       gauge    started again when this worker came up
    sparkfn_worker_function_starts_total    counter  runs this worker started (restore,
                                                     create, update, start, restart)
    sparkfn_worker_instance_restarts_total  counter  instance restarts of its functions
    sparkfn_worker_uptime_seconds           gauge    seconds since this worker started
    sparkfn_worker_sources_registered       gauge    sources in the registry (sinks_ too)
    sparkfn_worker_sources_running          gauge    sources whose run has not ended (sinks_ too)

and, for every source and sink running here, labelled ``tenant``,
``namespace``, ``name`` and ``instance_id``::

    sparkfn_source_received_total    counter  records read or emitted by the source
    sparkfn_source_written_total     counter  records appended to its topic
    sparkfn_source_acked_total       counter  records acknowledged to the external system
    sparkfn_source_errors_total      counter  exceptions of the source
    sparkfn_sink_received_total      counter  messages read from the sink's topics
    sparkfn_sink_written_total       counter  records written by the sink (committed batches)
    sparkfn_sink_errors_total        counter  exceptions of the sink

Everything is read from the store and the worker on every scrape; nothing is
kept between scrapes.

>>> text = metrics_text(worker)     # what GET /metrics serves
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from sparkfn.runtime.prometheus import PREFIX, FunctionMetricsCollector
from sparkfn.worker.service import Worker

WORKER_PREFIX = "sparkfn_worker_"
# The per-instance restart counter FunctionMetricsCollector reports, summed for the worker.
_RESTARTS = f"{PREFIX}restarts"


class WorkerMetricsCollector:
    """A ``prometheus_client`` collector of one worker's functions and of the worker."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def collect(self) -> Iterator[Metric]:
        """The metrics as the store and the worker have them now."""
        worker = self.worker
        store = worker.open_store()
        versions = worker.registry.current()
        families: dict[str, Metric] = {}
        for version in versions:
            for family in FunctionMetricsCollector(store, version.config).collect():
                merged = families.get(family.name)
                if merged is None:
                    families[family.name] = family
                else:
                    merged.samples.extend(family.samples)
        yield from families.values()

        restarts = families.get(_RESTARTS)
        labels = ["worker_id"]
        values = [worker.settings.worker_id]
        gauges: tuple[tuple[str, str, float], ...] = (
            ("functions_registered", "Functions in the registry.", len(versions)),
            ("functions_running", "Functions whose run has not ended.", len(worker.running())),
            (
                "functions_restored",
                "Functions started again when this worker came up.",
                len(worker.restored_functions),
            ),
            (
                "uptime_seconds",
                "Seconds since this worker started.",
                time.time() - worker.started_at,
            ),
        )
        for kind in ("source", "sink"):
            registered = len(worker.registry_for(kind).current())
            running = len(worker.running(kind))
            gauges = (
                *gauges,
                (f"{kind}s_registered", f"{kind.title()}s in the registry.", registered),
                (f"{kind}s_running", f"{kind.title()}s whose run has not ended.", running),
            )
        for name, text, value in gauges:
            gauge = GaugeMetricFamily(WORKER_PREFIX + name, text, labels=labels)
            gauge.add_metric(values, value)
            yield gauge
        counters = (
            (
                "function_starts",
                "Function runs this worker started (restore, create, update, start, restart).",
                worker.function_starts,
            ),
            (
                "instance_restarts",
                "Instance restarts of the worker's functions.",
                sum(s.value for s in restarts.samples if s.name.endswith("_total"))
                if restarts is not None
                else 0,
            ),
        )
        for name, text, value in counters:
            counter = CounterMetricFamily(WORKER_PREFIX + name, text, labels=labels)
            counter.add_metric(values, value)
            yield counter
        yield from _connector_counters(worker)


# (metric, help, the instance status field it counts) per kind of connector.
_CONNECTOR_COUNTERS = {
    "source": (
        ("received", "Records read or emitted by the source.", "num_received_from_source"),
        ("written", "Records appended to the source's topic.", "num_written"),
        ("acked", "Records acknowledged to the external system.", "num_acked"),
        ("errors", "Exceptions of the source.", "num_source_exceptions"),
    ),
    "sink": (
        ("received", "Messages read from the sink's topics.", "num_read_from_pulsar"),
        ("written", "Records written by the sink (committed batches).", "num_written_to_sink"),
        ("errors", "Exceptions of the sink.", "num_sink_exceptions"),
    ),
}


def _connector_counters(worker: Worker) -> Iterator[Metric]:
    """Per-instance counters of the sources and sinks running on ``worker``."""
    from sparkfn.api.status import SourceStatus
    from sparkfn.worker.api.connector_status import sink_status, source_status

    labels = ["tenant", "namespace", "name", "instance_id"]
    for kind, declared in _CONNECTOR_COUNTERS.items():
        families = [
            CounterMetricFamily(f"sparkfn_{kind}_{name}", text, labels=labels)
            for name, text, _ in declared
        ]
        for key in worker.running(kind):
            fqn = key.removeprefix(f"{kind}:")
            try:
                found = worker.connector_status(kind, fqn)
            except Exception:  # noqa: BLE001, S112 - deleted since it was listed: not shown
                continue
            shown = (
                source_status(found, worker.settings.worker_id)
                if isinstance(found, SourceStatus)
                else sink_status(found)
            )
            for instance in shown.instances:
                names = [*fqn.split("/"), str(instance.instance_id)]
                for family, (_, _, field) in zip(families, declared, strict=True):
                    family.add_metric(names, getattr(instance.status, field))
        yield from families


def metrics_registry(worker: Worker) -> CollectorRegistry:
    """A private registry holding only ``worker``'s metrics (not the process's defaults)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkerMetricsCollector(worker))
    return registry


def metrics_text(worker: Worker, registry: CollectorRegistry | None = None) -> bytes:
    """``worker``'s metrics in the Prometheus text format."""
    return generate_latest(registry or metrics_registry(worker))
