"""The worker: keeps submitted functions, sources and sinks running in one process, over one SparkSession.

Every registered function has a :class:`~sparkfn.runtime.function_run.FunctionRun`
here (the same query and supervisor ``localrun`` uses), started on the
worker's shared SparkSession in a scheduler pool of its own, so one busy
function cannot starve the others. What should run is kept in the store
(:class:`~sparkfn.worker.registry.Registry`): a worker that comes back after
a stop or a SIGKILL starts those functions again, and each resumes from its
subscription, so under ``effectively_once`` nothing is lost or repeated.

Sources and sinks are hosted the same way, in the same map of runs and
under the same calls (``kind`` names which): a sink is a function whose
object is the sink (:mod:`sparkfn.connectors.sink.sink_config`), so it is a
``FunctionRun`` of kind ``sink`` with a Spark query of its own; a source is a
:class:`~sparkfn.connectors.source.hosted_source.HostedSource`, its instances threads
of this process. Every kind is registered in the one
:class:`~sparkfn.worker.registry.Registry`, restarted with the worker and
stopped by the same stop modes.

The runs themselves are kept by :class:`~sparkfn.worker.runs.Runs`, a
function's place (the worker's query group, or a query of its own) by
:class:`~sparkfn.worker.placement.Placement`, and the checks a create makes
before anything is kept by :mod:`sparkfn.worker.preparing`. The REST app
(:mod:`sparkfn.worker.api.app`) is a thin layer over this class;
it can be driven directly too::

    worker = Worker(WorkerSettings.resolve(data_dir=tmp))
    worker.open()
    worker.create(config, package_digest=None, who="alice")
    print(worker.status("public/default/exclaim"))
    worker.shutdown()
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkfn.api.errors import FunctionFailure
from sparkfn.api.lifecycle import StopMode
from sparkfn.api.status import FunctionStats, FunctionStatus, SourceStatus
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function_run import FunctionRun
from sparkfn.runtime.group.run import QueryGroup
from sparkfn.runtime.metrics_store import reset_stats
from sparkfn.state.buffer import CommittedState
from sparkfn.state.store import get_state, put_state
from sparkfn.store.sealed import reseal
from sparkfn.store.store import Store
from sparkfn.worker.cluster.membership import Membership
from sparkfn.worker.cluster_work import ClusterWork, input_ended, join_cluster
from sparkfn.worker.placement import Placement
from sparkfn.worker.recovery import recover
from sparkfn.worker.registry import (
    C,
    Desired,
    HostedConfig,
    Registry,
    Version,
    registry_key,
)
from sparkfn.worker.runs import MODELS, Run, Runs, ended, key_kind
from sparkfn.worker.session import WorkerSession
from sparkfn.worker.settings import WorkerSettings
from sparkfn.worker.versions import Versions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class Worker:
    """The functions one worker process runs, and the operations on them."""

    def __init__(self, settings: WorkerSettings, *, spark: SparkSession | None = None) -> None:
        self.settings = settings
        self.store: Store | None = None
        # The session every function and sink shares, watched: see recover().
        self.session = WorkerSession(settings.spark_master, spark=spark, on_death=self._lost)
        # This worker's place in its store's cluster, from open() to shutdown().
        self.membership: Membership | None = None
        # A PostgreSQL store's: the leader's loop and what is assigned here (docs/cluster.md).
        self.cluster: ClusterWork | None = None
        # Keyed by registry key: a function's FQFN, source:<fqn>, sink:<fqn>.
        self._runs = Runs(
            settings,
            open_store=self.open_store,
            spark=lambda: self.spark,
            group_for=lambda config: self._placement.group_for(config),
            on_worker_shutdown=self._shutdown_requested,
        )
        self._placement = Placement(
            settings,
            self._runs,
            spark=lambda: self.spark,
            open_store=self.open_store,
            move_out=self._move_out,
        )
        self._versions = Versions(
            settings, self._runs, open_store=self.open_store, spark=lambda: self.spark
        )
        # Called when a function's policy says SHUTDOWN_WORKER (the CLI ends the server).
        self.on_shutdown_request: Callable[[], None] | None = None
        self.started_at = time.time()
        # Set once restore() has run (readiness waits for it), with what it started.
        self.restored = threading.Event()
        self.restored_functions: list[str] = []
        self.restored_connectors: list[str] = []  # source:<fqn> and sink:<fqn> keys
        # Called when a new session cannot start after the JVM died (the CLI exits non-zero).
        self.on_session_failure: Callable[[str], None] | None = None

    # --- the process -------------------------------------------------------------

    def open(self) -> None:
        """Open the store (creating the data dir and the schema if they are new) and join
        its cluster: a PostgreSQL store's as one member among others, a SQLite store's
        as its only worker (:class:`~sparkfn.api.errors.ConfigError` if it has one)."""
        store = Store.open(self.settings.store_url, self.settings.data_dir)
        try:
            resealed = reseal(store)  # what an older sparkfn (or an earlier key) left
        except BaseException:  # a key that is no key (SPARKFN_SECRETS_KEY), an unusable store
            store.close()
            raise
        if resealed:
            log.info("sealed the secrets of %d stored config versions", resealed)
        try:
            self.membership, self.cluster = join_cluster(
                store, self.settings, self._runs, ready=self.restored, start=self._start_assigned
            )
        except BaseException:
            store.close()
            raise
        self.store = store

    def _start_assigned(self, config: HostedConfig) -> bool:
        """Start a run assigned here; False: a source that read its input to the end.
        Raises if the gate found it not this worker's at the moment (the loop tries again)."""
        if input_ended(self.open_store(), config):
            return False
        if self._runs.start(config) is None:
            msg = f"not assigned to worker {self.settings.worker_id} now"
            raise RuntimeError(msg)
        return True

    def restore(self) -> list[str]:
        """Start Spark and every function that should run; returns their FQFNs.

        When it returns, :attr:`restored` is set (the worker is ready, if
        the store and Spark answer), even if some function could not start.
        """
        started: list[str] = []
        try:
            try:
                self.spark  # noqa: B018 -- started now: readiness means Spark is up
            except Exception as exc:
                log.error("Spark did not start (master %s): %s", self.settings.spark_master, exc)
                return started
            if self.cluster is not None:  # the assignment says what runs here
                started.extend(self.cluster.restore())
                return started
            for kind in MODELS:
                for version in self.registry_for(kind).wanted_running():
                    if input_ended(self.open_store(), version.config):
                        continue
                    try:
                        self._runs.start(version.config)
                        started.append(registry_key(kind, version.fqfn))
                    except Exception as exc:  # one broken run must not keep the others down
                        log.error("%s %s could not start again: %s", kind, version.fqfn, exc)
        finally:
            self.restored_functions = [k for k in started if key_kind(k) == "function"]
            self.restored_connectors = [k for k in started if key_kind(k) != "function"]
            self.restored.set()
        return started

    @property
    def registry(self) -> Registry[FunctionConfig]:
        """The function registry of the worker's store."""
        return Registry(self.open_store())

    def registry_for(self, kind: str) -> Registry[Any]:
        """The registry of ``kind`` (``function``, ``source`` or ``sink``)."""
        return self._runs.registry_for(kind)

    @property
    def function_starts(self) -> int:
        """Runs this worker started: restore, create, start, ..."""
        return self._runs.starts

    @property
    def spark_if_started(self) -> SparkSession | None:
        """The worker's SparkSession if it has one yet, else None (never starts one)."""
        return self.session.if_started

    @property
    def spark(self) -> SparkSession:
        """The SparkSession every function of this worker shares (created on first use)."""
        return self.session.get()

    @property
    def spark_error(self) -> str | None:
        """Why Spark did not start, if it did not."""
        return self.session.error

    @property
    def warming(self) -> threading.Thread | None:
        """The session's warm-up (runtime.spark.warm_up), if this worker made the session."""
        return self.session.warming

    def _lost(self, cause: str) -> None:
        """The session's JVM died (on the watch's thread): :func:`~.recovery.recover`."""
        if not self._runs.closing:
            recover(self, cause)

    def take_session_runs(self) -> tuple[list[FunctionRun], list[QueryGroup]]:
        """Take out every run of the session (the functions' and sinks' queries) and
        its query groups; the sources' runs stay (they do not run in Spark)."""
        with self._runs.lock:  # one picture of both
            return self._runs.take_session_runs(), self._placement.take_groups()

    def running(self, kind: str | None = "function") -> list[str]:
        """FQFNs of the functions (or sources, sinks; None: registry keys of all) whose runs
        have not ended."""
        return self._runs.running(kind)

    def shutdown(self, mode: StopMode | None = None) -> None:
        """Stop every run (by default as ``shutdown_mode`` says) and close the store.

        What should run stays recorded, so the next worker starts them again.
        """
        if self.cluster is not None:  # the next leader moves its work elsewhere
            self.cluster.close()
        self._runs.close(mode or self.settings.shutdown_mode)
        self.session.close()
        for group in self._placement.take_groups():
            group.close()
        if self.membership is not None:
            self.membership.close()
        if self.store is not None:
            self.store.close()
            self.store = None

    # --- functions ---------------------------------------------------------------

    def create(self, config: C, *, package_digest: str | None, who: str) -> Version[C]:
        """Register ``config`` (a function's, source's or sink's: version 1) and start it;
        refused, it leaves nothing."""
        return self._versions.create(config, package_digest=package_digest, who=who)

    def update(
        self,
        config: C,
        *,
        package_digest: str | None,
        who: str,
        mode: StopMode = StopMode.DRAIN,
    ) -> Version[C]:
        """Make ``config`` the next version; the running one ends by ``mode`` before it
        starts (see :meth:`Versions.update <sparkfn.worker.versions.Versions.update>`)."""
        return self._versions.update(config, package_digest=package_digest, who=who, mode=mode)

    def delete(self, fqfn: str, *, kind: str = "function") -> Version[Any]:
        """Cancel the run and forget it: versions, state, stats, checkpoint, and,
        with ``cleanup_subscription``, its subscription."""
        return self._versions.delete(fqfn, kind=kind)

    def start(self, fqfn: str, instance_id: int | None = None, *, kind: str = "function") -> None:
        """Start the run (it stays started across worker restarts), or one stopped instance."""
        registry = self.registry_for(kind)
        current = registry.get(fqfn)
        key = registry.key(fqfn)
        if instance_id is not None:
            self._runs.live(key, instance_id).restart_instance(instance_id)
            return
        registry.set_desired(fqfn, Desired.RUNNING)
        run = self._runs.get(key)
        if run is not None and not ended(run):
            if run.supervisor is None or run.supervisor.stopping is None:
                return  # it runs: nothing to start
            # A stop still ending: the start comes after it, not lost in it (it waits
            # its shutdown_timeout, then cancels the rest of the stop).
            if not run.stop(run.supervisor.stopping, timeout=self.settings.shutdown_timeout):
                run.stop(StopMode.CANCEL, timeout=self.settings.shutdown_timeout)
        self._runs.start(current.config)

    def stop(
        self,
        fqfn: str,
        instance_id: int | None = None,
        *,
        mode: StopMode | None = None,
        kind: str = "function",
    ) -> None:
        """Stop the run by ``mode`` (default ``suspend``; it stays stopped across worker
        restarts), or one instance (its run's own default, see ``stop_instance``).

        Stopping returns at once; status shows the run or the instance ending.
        """
        registry = self.registry_for(kind)
        registry.get(fqfn)
        key = registry.key(fqfn)
        if instance_id is not None:
            one = self._runs.live(key, instance_id)
            if mode is None:
                one.stop_instance(instance_id)
            else:
                one.stop_instance(instance_id, mode)
            return
        registry.set_desired(fqfn, Desired.STOPPED)
        run = self._runs.get(key)
        if run is not None:
            run.stop(mode or StopMode.SUSPEND, timeout=0)

    def restart(self, fqfn: str, instance_id: int | None = None, *, kind: str = "function") -> None:
        """Suspend and start again (the whole run), or restart one instance; the stats
        start from zero, as Pulsar's restarted instances' do."""
        registry = self.registry_for(kind)
        current, key = registry.get(fqfn), registry.key(fqfn)
        if instance_id is not None:
            run = self._runs.live(key, instance_id)
            run.stop_instance(instance_id, StopMode.CANCEL)  # at once: it starts again now
            reset_stats(self.open_store(), key, instance_id)
            run.restart_instance(instance_id)
            return
        self._runs.end(key, StopMode.SUSPEND)
        reset_stats(self.open_store(), key)
        registry.set_desired(fqfn, Desired.RUNNING)
        self._runs.start(current.config)

    def status(self, fqfn: str) -> FunctionStatus:
        """Pulsar's ``FunctionStatus`` of the current version, running or not."""
        status = self._runs.run_or_view("function", fqfn).status()
        assert isinstance(status, FunctionStatus)
        return status

    def stats(self, fqfn: str) -> FunctionStats:
        """Pulsar's ``FunctionStats`` of the function."""
        stats = self._runs.run_or_view("function", fqfn).stats()
        assert isinstance(stats, FunctionStats)
        return stats

    def connector_status(self, kind: str, fqn: str) -> FunctionStatus | SourceStatus:
        """A source's :class:`SourceStatus`, or a sink's status (its query's ``FunctionStatus``)."""
        return self._runs.run_or_view(kind, fqn).status()

    def connector_stats(self, kind: str, fqn: str) -> FunctionStats | SourceStatus:
        """A sink's ``FunctionStats``, or a source's instances with their counters."""
        return self._runs.run_or_view(kind, fqn).stats()

    def get_state(self, fqfn: str, key: str) -> CommittedState | None:
        """A committed state entry of the function, or None."""
        self.registry.get(fqfn)
        return get_state(self.open_store(), fqfn, key)

    def put_state(self, fqfn: str, key: str, value: bytes | None, counter: int | None) -> None:
        """Set a state entry from outside the function (Pulsar's ``putstate``)."""
        self.registry.get(fqfn)
        put_state(self.open_store(), fqfn, key, value=value, counter=counter)

    # --- internals ---------------------------------------------------------------

    def open_store(self) -> Store:
        """The worker's store; ``RuntimeError`` before :meth:`open` or after :meth:`shutdown`."""
        if self.store is None:
            msg = "the worker is not open"
            raise RuntimeError(msg)
        return self.store

    def start_run(self, config: HostedConfig) -> Run | None:
        """Start ``config``'s run unless it runs already (a recovery's start); None in a
        cluster when another worker owns it."""
        return self._runs.start(config)

    def _move_out(self, fqfn: str, mode: StopMode) -> None:
        """Move a hot group member to a query of its own (:meth:`Placement.hot`'s thread)."""
        try:
            record = self.registry.record(fqfn)
            current = self.registry.get(fqfn)
            self._runs.end(fqfn, mode)
            if record.desired is Desired.RUNNING and not self._runs.closing:
                self._runs.start(current.config)
        except Exception:  # a user's own operation may have won the race: said, not raised
            log.exception("function %s could not be moved to a query of its own", fqfn)

    def _shutdown_requested(self, failure: FunctionFailure) -> None:
        """A function's failure policy answered ``SHUTDOWN_WORKER``: the whole worker stops.

        The failed function is ``ERROR`` already; :attr:`on_shutdown_request`
        (the server's own graceful stop, set by ``sparkfn worker start``) ends
        the process, whose shutdown suspends (or drains) the other functions.
        """
        log.error("function %s asked the worker to shut down: %s", failure.fqfn, failure)
        if self.on_shutdown_request is not None:
            self.on_shutdown_request()
        else:
            threading.Thread(target=self.shutdown, name="sparkfn-worker-shutdown").start()
