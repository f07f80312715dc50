"""Prometheus metrics of one function, read from the store on every scrape.

The names are Pulsar's, each served twice: with ``sparkfn_`` for ``pulsar_``,
and as Pulsar names it (``pulsar_function_received_total``, ...), so a
dashboard made for Pulsar Functions reads them; every sample is labelled
``tenant``, ``namespace``, ``name`` and ``instance_id``::

    sparkfn_function_received_total                  counter
    sparkfn_function_processed_successfully_total    counter
    sparkfn_function_user_exceptions_total           counter
    sparkfn_function_system_exceptions_total         counter
    sparkfn_function_dead_lettered_total             counter
    sparkfn_function_restarts_total                  counter (when run info is given)
    sparkfn_function_process_latency_ms              summary (_sum, _count)
    sparkfn_function_last_invocation                 gauge, ms since the epoch (0: never)
    sparkfn_function_received_total_1min             gauge, and the same for
    sparkfn_function_processed_successfully_total_1min, _user_exceptions_total_1min,
    sparkfn_function_system_exceptions_total_1min
    sparkfn_function_process_latency_ms_1min         summary (_sum, _count)
    sparkfn_function_user_metric_<name>              summary of ``record_metric(name, v)``
    sparkfn_function_user_metric_<name>_min / _max   gauges

The counts are the committed ones: a batch shows up when its transaction
commits, never twice, so a counter never runs ahead of the outputs.

>>> server = serve_metrics(9094, store, config)     # http://HOST:9094/metrics
>>> server.close()
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from sparkfn.api.errors import ConfigError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.metrics_store import instance_recent, instance_totals
from sparkfn.store.store import Store

PREFIX = "sparkfn_function_"
# The same metrics under Pulsar's names, for dashboards made for Pulsar Functions.
PULSAR_PREFIX = "pulsar_function_"
LABELS = ("tenant", "namespace", "name", "instance_id")

# (metric suffix, column in the stats tables, help text)
_COUNTERS = (
    ("received", "received", "Messages received by the instance."),
    ("processed_successfully", "processed_successfully", "Messages processed without error."),
    ("user_exceptions", "user_exceptions", "Exceptions raised by the user's function."),
    ("system_exceptions", "system_exceptions", "Exceptions raised by sparkfn itself."),
    ("dead_lettered", "dead_lettered", "Messages sent to the dead letter topic or dropped."),
)
# The store keeps per-batch rows for these only, so only these have 1-minute variants.
_RECENT_COUNTERS = _COUNTERS[:4]
_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]")
# How long close() waits for the server thread to end, in seconds.
_CLOSE_TIMEOUT = 5.0


def metric_name(user_metric: str) -> str:
    """The Prometheus name of a user metric: ``record_metric("p99 ms")`` → ``..._p99_ms``."""
    cleaned = _INVALID_NAME_CHARS.sub("_", user_metric)
    return f"{PREFIX}user_metric_{cleaned}"


class FunctionMetricsCollector:
    """A ``prometheus_client`` collector for one function.

    ``collect`` is called by the HTTP server's thread on every scrape; it
    runs two reads against the store and keeps nothing between scrapes.
    Every instance of the function has samples, zero before its first batch.
    """

    def __init__(self, store: Store, config: FunctionConfig) -> None:
        self.store = store
        self.config = config

    def collect(self) -> Iterator[Metric]:
        """The function's metrics as they are committed in the store now, each under
        sparkfn's name and Pulsar's (:data:`PULSAR_PREFIX`)."""
        for family in self._families():
            yield family
            yield pulsar_twin(family)

    def _families(self) -> Iterator[Metric]:
        cfg = self.config
        totals = instance_totals(self.store, cfg.fqfn)
        recent = instance_recent(self.store, cfg.fqfn)
        counters = {
            column: CounterMetricFamily(f"{PREFIX}{suffix}", text, labels=LABELS)
            for suffix, column, text in _COUNTERS
        }
        recent_gauges = {
            column: GaugeMetricFamily(
                f"{PREFIX}{suffix}_total_1min", f"{text} Over the last minute.", labels=LABELS
            )
            for suffix, column, text in _RECENT_COUNTERS
        }
        latency = SummaryMetricFamily(
            f"{PREFIX}process_latency_ms",
            "Time the user's function took per message, in milliseconds.",
            labels=LABELS,
        )
        latency_1min = SummaryMetricFamily(
            f"{PREFIX}process_latency_ms_1min",
            "Time the user's function took per message over the last minute, in milliseconds.",
            labels=LABELS,
        )
        last_invocation = GaugeMetricFamily(
            f"{PREFIX}last_invocation",
            "When the function last ran, in milliseconds since the epoch (0: never).",
            labels=LABELS,
        )
        restarts = CounterMetricFamily(
            f"{PREFIX}restarts", "Times the instance was restarted.", labels=LABELS
        )
        fatal = CounterMetricFamily(
            f"{PREFIX}fatal_exceptions",
            "Fatal errors (context.fatal, connector errors) that terminated the instance.",
            labels=LABELS,
        )
        record = control.read_control(self.store, cfg.fqfn)
        runs = record.instances if record is not None else {}
        user: dict[str, tuple[SummaryMetricFamily, GaugeMetricFamily, GaugeMetricFamily]] = {}

        for instance_id in range(cfg.parallelism):
            labels = [cfg.tenant, cfg.namespace, cfg.name, str(instance_id)]
            total = totals.get(instance_id, {})
            last = recent.get(instance_id, {})
            for column, counter in counters.items():
                counter.add_metric(labels, int(total.get(column) or 0))
            for column, gauge in recent_gauges.items():
                gauge.add_metric(labels, int(last.get(column) or 0))
            latency.add_metric(
                labels,
                int(total.get("latency_count") or 0),
                float(total.get("latency_ms_sum") or 0),
            )
            latency_1min.add_metric(
                labels, int(last.get("latency_count") or 0), float(last.get("latency_ms_sum") or 0)
            )
            last_invocation.add_metric(labels, int(total.get("last_invocation_ms") or 0))
            run = runs.get(instance_id)
            if run is not None:
                restarts.add_metric(labels, run.restarts)
                fatal.add_metric(labels, run.fatal_exceptions)
            for name, summary in sorted(total.get("user_metrics", {}).items()):
                prom = metric_name(name)
                if prom not in user:
                    text = f"User metric {name!r} from record_metric"
                    user[prom] = (
                        SummaryMetricFamily(prom, f"{text}.", labels=LABELS),
                        GaugeMetricFamily(f"{prom}_min", f"{text}: smallest value.", labels=LABELS),
                        GaugeMetricFamily(f"{prom}_max", f"{text}: largest value.", labels=LABELS),
                    )
                observed, smallest, largest = user[prom]
                observed.add_metric(labels, summary.count, summary.sum)
                if summary.min is not None:
                    smallest.add_metric(labels, summary.min)
                if summary.max is not None:
                    largest.add_metric(labels, summary.max)

        yield from counters.values()
        yield latency
        yield last_invocation
        yield from recent_gauges.values()
        yield latency_1min
        if runs:
            yield restarts
            yield fatal
        for user_families in user.values():
            yield from user_families


def pulsar_twin(family: Metric) -> Metric:
    """``family`` under Pulsar's name (``pulsar_function_...``), samples and all."""
    renamed = family.name.replace(PREFIX, PULSAR_PREFIX, 1)
    twin = Metric(renamed, family.documentation, family.type, family.unit)
    twin.samples = [
        s._replace(name=s.name.replace(PREFIX, PULSAR_PREFIX, 1)) for s in family.samples
    ]
    return twin


class MetricsServer:
    """A running ``/metrics`` HTTP endpoint; :meth:`close` stops it (idempotent)."""

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self._closed = False

    @property
    def port(self) -> int:
        """The port it listens on (the chosen one when started with port 0)."""
        return int(self._server.server_port)

    def close(self) -> None:
        """Stop serving and wait for the server thread to end."""
        if self._closed:
            return
        self._closed = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(_CLOSE_TIMEOUT)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def serve_metrics(
    port: int,
    store: Store,
    config: FunctionConfig,
    *,
    addr: str = "0.0.0.0",
) -> MetricsServer:
    """Serve ``config``'s metrics at ``http://addr:port/metrics`` from a daemon thread.

    The registry is private, so the process's default metrics (and other
    functions') are not mixed in. Port 0 picks a free port; see
    :attr:`MetricsServer.port`. Raises :class:`ConfigError` if the port
    cannot be used.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FunctionMetricsCollector(store, config))
    try:
        server, thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        msg = (
            f"function {config.fqfn}: cannot serve metrics on {addr}:{port}: {exc.strerror or exc}"
        )
        raise ConfigError(msg) from exc
    return MetricsServer(server, thread)
