"""The runs a worker hosts, one per function, sink and source, keyed by registry key.

A function's or a sink's run is a :class:`~sparkfn.runtime.function_run.FunctionRun`
(its query, or its member of the worker's query group); a source's is a
:class:`~sparkfn.connectors.source.hosted_source.HostedSource`, its instances
threads of this process. :class:`Runs` starts them (one start at a time, so
two queries never share a run), ends them (by a stop mode, then cancelled if
late), and answers for a stopped one with a run object that is never
started, which reads its records.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkfn.api.errors import (
    ConnectorFailedError,
    FunctionFailedError,
    FunctionFailure,
    NotFoundError,
)
from sparkfn.api.lifecycle import StopMode
from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.config.function import FunctionConfig
from sparkfn.connectors.sink.sink_config import sink_function_config
from sparkfn.connectors.source.hosted_source import HostedSource
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.runtime.group.run import QueryGroup
from sparkfn.runtime.query.build import PreparedRun
from sparkfn.store.store import Store
from sparkfn.worker import preparing
from sparkfn.worker.registry import KINDS, HostedConfig, Registry, fqn_of, kind_of, registry_key
from sparkfn.worker.settings import WorkerSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The name these lines had before they left service.py: log settings keep working.
log = logging.getLogger("sparkfn.worker.service")

# One run the worker hosts: a function's or a sink's query, or a source's instances.
Run = FunctionRun | HostedSource
# The config model of each kind.
MODELS: dict[str, type[HostedConfig]] = {kind: model for model, (kind, _, _) in KINDS.items()}


class Runs:
    """The worker's runs, and starting, ending and finding them.

    :attr:`lock` guards the runs and :attr:`closing` (and the worker's
    :class:`~sparkfn.worker.placement.Placement`); once closing, a start
    fails instead of outliving the worker.
    """

    def __init__(
        self,
        settings: WorkerSettings,
        *,
        open_store: Callable[[], Store],
        spark: Callable[[], SparkSession],
        group_for: Callable[[FunctionConfig], QueryGroup | None],
        on_worker_shutdown: Callable[[FunctionFailure], None],
    ) -> None:
        self._settings = settings
        self._open_store = open_store
        self._spark = spark
        self._group_for = group_for
        self._on_worker_shutdown = on_worker_shutdown
        self._runs: dict[str, Run] = {}
        self.lock = threading.RLock()
        self._starting = threading.Lock()
        self.closing = False
        self.starts = 0  # runs this worker started: restore, create, start, ...
        # In a cluster: whether this worker may run the registry key (it is assigned
        # to it); a start of one it may not is skipped (its owner starts it).
        self.gate: Callable[[str], bool] | None = None
        # In a cluster: the id of the worker a registry key is assigned to (status shows it).
        self.owner_of: Callable[[str], str | None] | None = None
        # In a cluster: raises NoWorkerCapacityError when no worker has room for a run (a
        # create asks before it keeps anything).
        self.refuse_if_full: Callable[[str], None] | None = None

    def registry_for(self, kind: str) -> Registry[Any]:
        """The registry of ``kind`` (``function``, ``source`` or ``sink``)."""
        return Registry(self._open_store(), MODELS[kind])

    def _version_of(self, kind: str, fqn: str) -> str | None:
        """The registered version a start runs (its registry's current one), or None."""
        try:
            return str(self.registry_for(kind).record(fqn).version)
        except NotFoundError:
            return None  # started without a registry entry: a test's run

    def get(self, key: str) -> Run | None:
        """The run under ``key``, ended or not, or None."""
        with self.lock:
            return self._runs.get(key)

    def running(self, kind: str | None = "function") -> list[str]:
        """FQFNs of the functions (or sources, sinks; None: registry keys of all) whose runs
        have not ended."""
        with self.lock:
            keys = sorted(f for f, run in self._runs.items() if not ended(run))
        if kind is None:
            return keys
        return [k for k in keys if key_kind(k) == kind]

    def take_session_runs(self) -> list[FunctionRun]:
        """Take out every run of the session (the functions' and sinks' queries); the
        sources' runs stay (they do not run in Spark)."""
        with self.lock:
            keys = [key for key, run in self._runs.items() if isinstance(run, FunctionRun)]
            return [run for key in keys if isinstance(run := self._runs.pop(key), FunctionRun)]

    def close(self, mode: StopMode) -> None:
        """Stop every run by ``mode``, cancelling the late ones; a start from now on fails."""
        with self.lock:
            self.closing = True  # a start racing with this one fails instead of outliving it
            runs = list(self._runs.values())
            self._runs.clear()
        for run in runs:
            run.stop(mode, timeout=0)
        # One deadline for all the runs (not shutdown_timeout each), then one for cancelling
        # the late ones: SIGTERM ends the worker within 2 * shutdown_timeout.
        deadline = time.monotonic() + self._settings.shutdown_timeout
        late = [r for r in runs if not r.stop(mode, timeout=until(deadline))]
        for run in late:
            log.warning("%s %s did not %s in time; cancelling it", run.kind, run_fqn(run), mode)
            run.stop(StopMode.CANCEL, timeout=0)
        deadline = time.monotonic() + self._settings.shutdown_timeout
        for run in late:
            run.stop(StopMode.CANCEL, timeout=until(deadline))
        log.info("worker stopped %d run(s) (%s)", len(runs), mode)

    def start(
        self, config: HostedConfig, prepared: PreparedRun | None = None, *, checked: bool = False
    ) -> Run | None:
        """Start ``config``'s run unless the same config runs already; returns the run, or
        None in a cluster when the run is another worker's (:attr:`gate`).

        ``prepared`` / ``checked``: :func:`~sparkfn.worker.preparing.check` has just
        prepared and checked it (a create or an update), so nothing is checked twice."""
        allow = self._settings.allow_auto_topic_creation
        # One start at a time: the restore at startup and a request may both
        # want a run started, and two queries must never share it.
        kind, fqn = kind_of(config), fqn_of(config)
        key = registry_key(kind, fqn)
        query_config = self._query_config(config)
        if self.gate is not None and not self.gate(key):
            log.info("%s %s is not assigned to this worker; its owner runs it", kind, fqn)
            return None
        with self._starting:
            with self.lock:
                current = self._runs.get(key)
                if current is not None and not ended(current) and current.config == query_config:
                    return current
            run: Run
            if isinstance(query_config, SourceConfig):
                run = HostedSource(
                    query_config,
                    self._open_store(),
                    on_worker_shutdown=self._on_worker_shutdown,
                    auto_create_topics=allow,
                    validated=checked,
                )
            else:
                preparing.subscribe(self._open_store(), query_config)
                run = FunctionRun(
                    query_config,
                    store=self._open_store(),
                    spark=self._spark(),
                    kind=kind,
                    scheduler_pool=key,
                    on_worker_shutdown=self._on_worker_shutdown,
                    worker_id=self._settings.worker_id,
                    park_idle_after=self._settings.park_idle_after or None,
                    # A sink keeps a query of its own: its commits are the sink's.
                    group=self._group_for(query_config) if kind == "function" else None,
                    prepared=prepared,
                    version=self._version_of(kind, fqn),
                )
            with self.lock:
                if self.closing:
                    msg = f"the worker is shutting down; {kind} {fqn} was not started"
                    raise RuntimeError(msg)
                self._runs[key] = run
                self.starts += 1
            run.start()
            return run

    def _query_config(self, config: HostedConfig) -> FunctionConfig | SourceConfig:
        """What the run of ``config`` runs: a function's or sink's config as its query takes it."""
        allow = self._settings.allow_auto_topic_creation
        if isinstance(config, SinkConfig):
            return preparing.as_run(sink_function_config(config), auto_create_topics=allow)
        if isinstance(config, FunctionConfig):
            return preparing.as_run(config, auto_create_topics=allow)
        return config

    def runs_config(self, key: str, config: HostedConfig) -> bool:
        """Whether the run under ``key`` is live and runs ``config`` (not an older version)."""
        run = self.get(key)
        return run is not None and not ended(run) and run.config == self._query_config(config)

    def end(self, key: str, mode: StopMode) -> None:
        """Stop the run under ``key`` by ``mode`` and wait until it has ended."""
        with self.lock:
            run = self._runs.pop(key, None)
        if run is None:
            return
        if not run.stop(mode, timeout=self._settings.shutdown_timeout):
            run.stop(StopMode.CANCEL, timeout=self._settings.shutdown_timeout)
        try:
            run.wait(0)
        except (FunctionFailedError, ConnectorFailedError) as exc:  # its death is in its status
            log.warning("%s ended with an error: %s", key, exc)

    def live(self, key: str, instance_id: int) -> Run:
        """The running run under ``key`` that has instance ``instance_id``; else the kind's
        not-found error."""
        kind = key_kind(key)
        fqn = key.removeprefix(f"{kind}:")
        missing = self.registry_for(kind).missing
        with self.lock:
            run = self._runs.get(key)
        if run is None or ended(run):
            msg = f"{kind} {fqn} is not running, so instance {instance_id} cannot be changed"
            raise missing(msg)
        if not 0 <= instance_id < run.config.parallelism:
            msg = (
                f"{kind} {fqn} has no instance {instance_id} "
                f"(instances 0 to {run.config.parallelism - 1})"
            )
            raise missing(msg)
        return run

    def run_or_view(self, kind: str, fqfn: str) -> Run:
        """The run of ``fqfn``, or, not run here (stopped), one that is never started and
        reads its records."""
        registry = self.registry_for(kind)
        with self.lock:
            run = self._runs.get(registry.key(fqfn))
        if run is not None:
            return run
        config = registry.get(fqfn).config
        if isinstance(config, SourceConfig):
            return HostedSource(config, self._open_store())
        if isinstance(config, SinkConfig):
            config = sink_function_config(config)
        owner = self.owner_of(registry.key(fqfn)) if self.owner_of is not None else None
        worker_id = owner or self._settings.worker_id
        return FunctionRun(config, store=self._open_store(), kind=kind, worker_id=worker_id)


def until(deadline: float) -> float:
    """Seconds left until ``deadline`` (``time.monotonic()``), never below 0."""
    return max(0.0, deadline - time.monotonic())


def ended(run: Run) -> bool:
    """Whether ``run`` is over (or was never started)."""
    return run.supervisor is None or run.supervisor.ended


def key_kind(key: str) -> str:
    """The kind of a registry key: ``source:...`` and ``sink:...``, else a function."""
    kind = key.split(":", 1)[0] if ":" in key else "function"
    return kind if kind in MODELS else "function"


def run_fqn(run: Run) -> str:
    """The FQN of the function, source or sink ``run`` runs."""
    return fqn_of(run.config)
