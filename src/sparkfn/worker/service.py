"""The worker: keeps submitted functions, sources and sinks running in one process,
over one SparkSession.

Every registered function has a :class:`~sparkfn.runtime.localrun.LocalRun`
here (the same query and supervisor ``localrun`` uses), started on the
worker's shared SparkSession in a scheduler pool of its own, so one busy
function cannot starve the others. What should run is kept in the store
(:class:`~sparkfn.worker.registry.Registry`): a worker that comes back after
a stop or a SIGKILL starts those functions again, and each resumes from its
subscription, so under ``effectively_once`` nothing is lost or repeated.

Sources and sinks are hosted the same way, in the same map of runs and
under the same calls (``kind`` names which): a sink is a function whose
object is the sink (:mod:`sparkfn.connectors.sink.sink_config`), so it is a
``LocalRun`` of kind ``sink`` with a Spark query of its own; a source is a
:class:`~sparkfn.connectors.source.hosted_source.HostedSource`, its instances threads
of this process. Every kind is registered in the one
:class:`~sparkfn.worker.registry.Registry`, restarted with the worker and
stopped by the same stop modes.

The REST app (:mod:`sparkfn.worker.api.app`) is a thin layer over this class;
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
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sparkfn.api.errors import (
    ConnectorFailedError,
    FunctionFailedError,
    FunctionFailure,
)
from sparkfn.api.lifecycle import StopMode
from sparkfn.api.status import FunctionStats, FunctionStatus, SourceStatus
from sparkfn.config.connector import SinkConfig, SourceConfig
from sparkfn.config.function import FunctionConfig
from sparkfn.connectors.catalog import check_configs
from sparkfn.connectors.sink.sink_config import sink_function_config
from sparkfn.connectors.sink.sink_run import validate_sink
from sparkfn.connectors.source.hosted_source import HostedSource, purge_source, validate_source
from sparkfn.connectors.source.instances import INPUT_ENDED
from sparkfn.runtime.group.run import DEFAULT_GROUP, QueryGroup, groupable
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.localrun import LocalRun
from sparkfn.runtime.purge import purge_function
from sparkfn.runtime.query.build import (
    PreparedRun,
    apply_spark_conf,
    prepare,
    resolve_inputs,
    topic_creation,
)
from sparkfn.state.buffer import CommittedState
from sparkfn.state.store import get_state, put_state
from sparkfn.store.sealed import reseal
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.autocreate import TopicCreation, ensure_topic
from sparkfn.worker.cluster.membership import Membership
from sparkfn.worker.recovery import recover
from sparkfn.worker.registry import (
    KINDS,
    C,
    Desired,
    HostedConfig,
    Registry,
    Version,
    fqn_of,
    kind_of,
    registry_key,
)
from sparkfn.worker.session import WorkerSession
from sparkfn.worker.settings import WorkerSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# One run the worker hosts: a function's or a sink's query, or a source's instances.
Run = LocalRun | HostedSource
# The config model of each kind.
MODELS: dict[str, type[HostedConfig]] = {kind: model for model, (kind, _, _) in KINDS.items()}


class Worker:
    """The functions one worker process runs, and the operations on them."""

    def __init__(self, settings: WorkerSettings, *, spark: SparkSession | None = None) -> None:
        self.settings = settings
        self.store: Store | None = None
        # The session every function and sink shares, watched: see recover().
        self.session = WorkerSession(settings.spark_master, spark=spark, on_death=self._lost)
        # This worker's place in its store's cluster, from open() to shutdown().
        self.membership: Membership | None = None
        # Keyed by registry key: a function's FQFN, source:<fqn>, sink:<fqn>.
        self._runs: dict[str, Run] = {}
        self._groups: dict[str, QueryGroup] = {}
        # Functions moved out of their group for exceeding its budgets: a query of their own.
        self._dedicated: set[str] = set()
        self._lock = threading.RLock()
        self._starting = threading.Lock()
        # Called when a function's policy says SHUTDOWN_WORKER (the CLI ends the server).
        self.on_shutdown_request: Callable[[], None] | None = None
        self._closing = False
        self.started_at = time.time()
        # Set once restore() has run (readiness waits for it), with what it started.
        self.restored = threading.Event()
        self.restored_functions: list[str] = []
        self.restored_connectors: list[str] = []  # source:<fqn> and sink:<fqn> keys
        self.function_starts = 0  # runs this worker started: restore, create, start, ...
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
        settings = self.settings
        membership = Membership(
            store, settings.worker_id, host=settings.host, port=settings.port,
            capacity=settings.capacity, lease=settings.lease, on_fenced=self._fenced,
        )  # fmt: skip
        try:
            membership.start()
        except BaseException:
            store.close()
            raise
        self.store, self.membership = store, membership

    def _fenced(self) -> None:
        # Nothing is assigned by the leader yet (docs/cluster.md: not built), so
        # there is no work to give up; the membership already stopped leading.
        log.error(
            "worker %s is out of its cluster until a heartbeat is written", self.settings.worker_id
        )

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
            for kind in MODELS:
                for version in self.registry_for(kind).wanted_running():
                    if kind == "source" and self._finished(version.config):
                        continue
                    try:
                        self._start(version.config)
                        started.append(registry_key(kind, version.fqfn))
                    except Exception as exc:  # one broken run must not keep the others down
                        log.error("%s %s could not start again: %s", kind, version.fqfn, exc)
        finally:
            self.restored_functions = [k for k in started if _key_kind(k) == "function"]
            self.restored_connectors = [k for k in started if _key_kind(k) != "function"]
            self.restored.set()
        return started

    def _finished(self, config: HostedConfig) -> bool:
        """Whether a bounded source's last run read its input to the end (a drain of its
        own): it is recorded as stopped instead of being started to read it all again."""
        assert isinstance(config, SourceConfig)
        record = control.read_control(self.open_store(), control.control_id("source", config.fqn))
        if record is None or record.state != control.STOPPED or record.cause != INPUT_ENDED:
            return False
        self.registry_for("source").set_desired(config.fqn, Desired.STOPPED)
        log.info("source %s read its input to the end before; not started again", config.fqn)
        return True

    @property
    def registry(self) -> Registry[FunctionConfig]:
        """The function registry of the worker's store."""
        return Registry(self.open_store())

    def registry_for(self, kind: str) -> Registry[Any]:
        """The registry of ``kind`` (``function``, ``source`` or ``sink``)."""
        return Registry(self.open_store(), MODELS[kind])

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
        if not self._closing:
            recover(self, cause)

    def take_session_runs(self) -> tuple[list[LocalRun], list[QueryGroup]]:
        """Take out every run of the session (the functions' and sinks' queries) and
        its query groups; the sources' runs stay (they do not run in Spark)."""
        with self._lock:
            keys = [key for key, run in self._runs.items() if isinstance(run, LocalRun)]
            runs = [run for key in keys if isinstance(run := self._runs.pop(key), LocalRun)]
            groups = list(self._groups.values())
            self._groups.clear()
        return runs, groups

    def running(self, kind: str | None = "function") -> list[str]:
        """FQFNs of the functions (or sources, sinks; None: registry keys of all) whose runs
        have not ended."""
        with self._lock:
            keys = sorted(f for f, run in self._runs.items() if not _ended(run))
        if kind is None:
            return keys
        return [k for k in keys if _key_kind(k) == kind]

    def shutdown(self, mode: StopMode | None = None) -> None:
        """Stop every run (by default as ``shutdown_mode`` says) and close the store.

        What should run stays recorded, so the next worker starts them again.
        """
        stop_mode = mode or self.settings.shutdown_mode
        with self._lock:
            self._closing = True  # a start racing with this one fails instead of outliving it
            runs = list(self._runs.values())
            self._runs.clear()
        for run in runs:
            run.stop(stop_mode, timeout=0)
        # One deadline for all the runs (not shutdown_timeout each), then one for cancelling
        # the late ones: SIGTERM ends the worker within 2 * shutdown_timeout.
        deadline = time.monotonic() + self.settings.shutdown_timeout
        late = [r for r in runs if not r.stop(stop_mode, timeout=_until(deadline))]
        for run in late:
            log.warning("%s %s did not %s in time; cancelling it", run.kind, _fqn(run), stop_mode)
            run.stop(StopMode.CANCEL, timeout=0)
        deadline = time.monotonic() + self.settings.shutdown_timeout
        for run in late:
            run.stop(StopMode.CANCEL, timeout=_until(deadline))
        log.info("worker stopped %d run(s) (%s)", len(runs), stop_mode)
        self.session.close()
        with self._lock:
            groups = list(self._groups.values())
            self._groups.clear()
        for group in groups:
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
        registry: Registry[C] = Registry(self.open_store(), type(config))
        registry.check_free(fqn_of(config))  # a taken name is the first thing to say
        if not isinstance(config, SourceConfig):  # two readers of one would lose messages
            registry.check_subscription_free(config)
        prepared = self._check(config)  # bad topics, code or Spark settings fail first
        subscribed = self._subscribed(config)
        version = registry.create(config, package_digest=package_digest, who=who)
        try:
            self._start(version.config, prepared)
        except Exception:
            self._forget(config, keep_subscription=subscribed)
            raise
        return version

    def update(
        self,
        config: C,
        *,
        package_digest: str | None,
        who: str,
        mode: StopMode = StopMode.DRAIN,
    ) -> Version[C]:
        """Make ``config`` the next version; the running one ends by ``mode`` before it starts.

        ``drain`` and ``suspend`` both commit everything the old version took,
        and the new one resumes from the same subscription: nothing is lost or
        repeated across the switch under ``effectively_once``.
        """
        registry: Registry[C] = Registry(self.open_store(), type(config))
        fqfn = fqn_of(config)
        record = registry.record(fqfn)  # an unknown name is said first
        if not isinstance(config, SourceConfig):
            registry.check_subscription_free(config)
        prepared = self._check(config)  # refused here, the running version goes on untouched
        previous = registry.get(fqfn)
        version = registry.update(config, package_digest=package_digest, who=who)
        key = registry.key(fqfn)
        self._end(key, mode)
        if record.desired is Desired.RUNNING:
            try:
                self._start(version.config, prepared)
            except Exception:
                registry.withdraw(version)  # the previous version is current again
                self._start_again(previous.config)
                raise
        return version

    def delete(self, fqfn: str, *, kind: str = "function") -> Version[Any]:
        """Cancel the run and forget it: versions, state, stats, checkpoint, and,
        with ``cleanup_subscription``, its subscription."""
        registry = self.registry_for(kind)
        current = registry.get(fqfn)
        self._end(registry.key(fqfn), StopMode.CANCEL)
        registry.delete(fqfn)
        _purge(self.open_store(), current.config)
        return current

    def start(self, fqfn: str, instance_id: int | None = None, *, kind: str = "function") -> None:
        """Start the run (it stays started across worker restarts), or one stopped instance."""
        registry = self.registry_for(kind)
        current = registry.get(fqfn)
        key = registry.key(fqfn)
        if instance_id is not None:
            self._live(key, instance_id).restart_instance(instance_id)
            return
        registry.set_desired(fqfn, Desired.RUNNING)
        with self._lock:
            run = self._runs.get(key)
            if run is not None and not _ended(run):
                return
        self._start(current.config)

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
            one = self._live(key, instance_id)
            if mode is None:
                one.stop_instance(instance_id)
            else:
                one.stop_instance(instance_id, mode)
            return
        registry.set_desired(fqfn, Desired.STOPPED)
        with self._lock:
            run = self._runs.get(key)
        if run is not None:
            run.stop(mode or StopMode.SUSPEND, timeout=0)

    def restart(self, fqfn: str, instance_id: int | None = None, *, kind: str = "function") -> None:
        """Suspend and start again (the whole run), or restart one instance."""
        registry = self.registry_for(kind)
        current = registry.get(fqfn)
        key = registry.key(fqfn)
        if instance_id is not None:
            run = self._live(key, instance_id)
            run.stop_instance(instance_id, StopMode.CANCEL)  # at once: it starts again now
            run.restart_instance(instance_id)
            return
        self._end(key, StopMode.SUSPEND)
        registry.set_desired(fqfn, Desired.RUNNING)
        self._start(current.config)

    def status(self, fqfn: str) -> FunctionStatus:
        """Pulsar's ``FunctionStatus`` of the current version, running or not."""
        status = self._run_or_view("function", fqfn).status()
        assert isinstance(status, FunctionStatus)
        return status

    def stats(self, fqfn: str) -> FunctionStats:
        """Pulsar's ``FunctionStats`` of the function."""
        stats = self._run_or_view("function", fqfn).stats()
        assert isinstance(stats, FunctionStats)
        return stats

    def connector_status(self, kind: str, fqn: str) -> FunctionStatus | SourceStatus:
        """A source's :class:`SourceStatus`, or a sink's status (its query's ``FunctionStatus``)."""
        return self._run_or_view(kind, fqn).status()

    def connector_stats(self, kind: str, fqn: str) -> FunctionStats | SourceStatus:
        """A sink's ``FunctionStats``, or a source's instances with their counters."""
        return self._run_or_view(kind, fqn).stats()

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

    def _check(self, config: HostedConfig) -> PreparedRun | None:
        """What a start would refuse, refused before anything is kept: topics that do
        not exist, code that does not load, Spark settings the running session refuses.
        The checks are the start's: it does not make them again (a source has none of
        a query's, so None)."""
        store = self.open_store()
        if isinstance(config, SourceConfig):
            validate_source(store, config, self._topic_creation(store))
            return None
        if isinstance(config, SinkConfig):
            validate_sink(store, config, self._topic_creation(store))
            check_configs("sink", config.fqn, config.sink_type, config.configs)
            config = sink_function_config(config)
        if config.spark_conf:  # first: a function refused for it creates no topic
            apply_spark_conf(self.spark, config)
        return prepare(self.open_store(), self._as_run(config))

    def _subscribed(self, config: HostedConfig) -> bool:
        """Whether the run's subscription exists already (a kept one it resumes)."""
        if isinstance(config, SourceConfig):
            return False
        with self.open_store().read() as conn:
            return bool(subscription.cursors(conn, config.subscription))

    def _forget(self, config: HostedConfig, *, keep_subscription: bool) -> None:
        """Undo a create whose start failed: its run, its registry row, what the run wrote,
        and the subscription unless it existed before."""
        kind, fqn = kind_of(config), fqn_of(config)
        self._end(registry_key(kind, fqn), StopMode.CANCEL)
        self.registry_for(kind).delete(fqn)
        _purge(self.open_store(), config, keep_subscription=keep_subscription)

    def _start_again(self, config: HostedConfig) -> None:
        """Start the version that ran before a failed update's; a failure is logged only."""
        try:
            self._start(config)
        except Exception as exc:  # noqa: BLE001 - the update's own error is the answer
            log.error(
                "%s %s could not start its previous version: %s",
                kind_of(config),
                fqn_of(config),
                exc,
            )

    def _topic_creation(self, store: Store) -> TopicCreation:
        """How a source's or sink's missing topics are made, as a function's are: the
        store's setting, off when this worker's ``allow_auto_topic_creation`` is."""
        found = TopicCreation.read(store)
        return found if self.settings.allow_auto_topic_creation else replace(found, enabled=False)

    def _as_run(self, config: FunctionConfig) -> FunctionConfig:
        """``config`` as this worker runs it: no topic created on first use when
        its ``allow_auto_topic_creation`` is off (the registry keeps the config as given)."""
        if self.settings.allow_auto_topic_creation or not config.auto_create_topics:
            return config
        return config.model_copy(update={"auto_create_topics": False})

    def start_run(self, config: HostedConfig) -> Run:
        """Start ``config``'s run unless it runs already (a recovery's start)."""
        return self._start(config)

    def _start(self, config: HostedConfig, prepared: PreparedRun | None = None) -> Run:
        if isinstance(config, FunctionConfig):
            config = self._as_run(config)
        # One start at a time: the restore at startup and a request may both
        # want a run started, and two queries must never share it.
        kind, fqn = kind_of(config), fqn_of(config)
        key = registry_key(kind, fqn)
        query_config = (
            self._as_run(sink_function_config(config)) if isinstance(config, SinkConfig) else config
        )
        with self._starting:
            with self._lock:
                current = self._runs.get(key)
                if current is not None and not _ended(current) and current.config == query_config:
                    return current
            run: Run
            if isinstance(query_config, SourceConfig):
                run = HostedSource(
                    query_config,
                    self.open_store(),
                    on_worker_shutdown=self._shutdown_requested,
                    auto_create_topics=self.settings.allow_auto_topic_creation,
                )
            else:
                self._subscribe(query_config)
                run = LocalRun(
                    query_config,
                    store=self.open_store(),
                    spark=self.spark,
                    kind=kind,
                    scheduler_pool=key,
                    on_worker_shutdown=self._shutdown_requested,
                    worker_id=self.settings.worker_id,
                    park_idle_after=self.settings.park_idle_after or None,
                    # A sink keeps a query of its own: its commits are the sink's.
                    group=self._group_for(query_config) if kind == "function" else None,
                    prepared=prepared,
                )
            with self._lock:
                if self._closing:
                    msg = f"the worker is shutting down; {kind} {fqn} was not started"
                    raise RuntimeError(msg)
                self._runs[key] = run
                self.function_starts += 1
            run.start()
            return run

    def _group_for(self, config: FunctionConfig) -> QueryGroup | None:
        """The query group ``config`` runs in, or None for a query of its own.

        One group per worker for now; a function that sets Spark settings of
        its own (``spark_conf``, ``resources``), a trigger interval or a
        topics pattern keeps a query of its own (see docs/architecture.md).
        """
        if not self.settings.groups or not groupable(config):
            return None
        with self._lock:
            if config.fqfn in self._dedicated:
                return None
            group = self._groups.get(DEFAULT_GROUP)
            if group is None:
                group = self._groups[DEFAULT_GROUP] = QueryGroup(
                    self.spark,
                    self.open_store(),
                    DEFAULT_GROUP,
                    member_budget=self.settings.group_member_budget,
                    member_seconds=self.settings.group_member_seconds,
                    trigger_interval=self.settings.group_trigger_interval,
                    on_hot=self._hot,
                )
            return group

    def _hot(self, fqfn: str, why: str, graceful: bool) -> None:
        """A group member keeps exceeding its budgets: it gets a query of its own.

        Called from the group, which must not wait: the move (a suspend,
        which needs the group's next batch, or with ``graceful`` False a
        cancel, for a member that held a batch and left it already; then a
        start) runs on a thread of its own. Nothing is lost or repeated:
        the stopped run commits what it took, or nothing, and the new one
        resumes from the subscription. It stays dedicated while this worker runs.
        """
        with self._lock:
            if fqfn in self._dedicated or self._closing or fqfn not in self._runs:
                return
            self._dedicated.add(fqfn)
        log.warning("function %s: %s; moving it to a Spark query of its own", fqfn, why)
        mode = StopMode.SUSPEND if graceful else StopMode.CANCEL
        threading.Thread(target=self._move_out, args=(fqfn, mode), name="sparkfn-move-out").start()

    def _move_out(self, fqfn: str, mode: StopMode) -> None:
        try:
            record = self.registry.record(fqfn)
            current = self.registry.get(fqfn)
            self._end(fqfn, mode)
            if record.desired is Desired.RUNNING and not self._closing:
                self._start(current.config)
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

    def _subscribe(self, config: FunctionConfig) -> None:
        """Create the function's subscription now if it has none.

        Its ``subscription_position`` then means "as of this call": a message
        produced once ``create`` or ``start`` has returned is processed, even
        if the query takes seconds to start.
        """
        store = self.open_store()
        creation = topic_creation(store, config)  # a kept function's deleted input comes back
        topics = [ensure_topic(store, name, creation) for name in resolve_inputs(store, config)]
        with store.write() as conn:
            subscription.ensure(
                conn, config.subscription, topics, config.subscription_position.value
            )

    def _end(self, fqfn: str, mode: StopMode) -> None:
        """Stop the function's run by ``mode`` and wait until it has ended."""
        with self._lock:
            run = self._runs.pop(fqfn, None)
        if run is None:
            return
        if not run.stop(mode, timeout=self.settings.shutdown_timeout):
            run.stop(StopMode.CANCEL, timeout=self.settings.shutdown_timeout)
        try:
            run.wait(0)
        except (FunctionFailedError, ConnectorFailedError) as exc:  # its death is in its status
            log.warning("%s ended with an error: %s", fqfn, exc)

    def _live(self, key: str, instance_id: int) -> Run:
        kind = _key_kind(key)
        fqn = key.removeprefix(f"{kind}:")
        missing = self.registry_for(kind).missing
        with self._lock:
            run = self._runs.get(key)
        if run is None or _ended(run):
            msg = f"{kind} {fqn} is not running, so instance {instance_id} cannot be changed"
            raise missing(msg)
        if not 0 <= instance_id < run.config.parallelism:
            msg = (
                f"{kind} {fqn} has no instance {instance_id} "
                f"(instances 0 to {run.config.parallelism - 1})"
            )
            raise missing(msg)
        return run

    def _run_or_view(self, kind: str, fqfn: str) -> Run:
        registry = self.registry_for(kind)
        with self._lock:
            run = self._runs.get(registry.key(fqfn))
        if run is not None:
            return run
        # Not run here (stopped): a run object that is never started reads its records.
        config = registry.get(fqfn).config
        if isinstance(config, SourceConfig):
            return HostedSource(config, self.open_store())
        if isinstance(config, SinkConfig):
            config = sink_function_config(config)
        return LocalRun(
            config, store=self.open_store(), kind=kind, worker_id=self.settings.worker_id
        )


def _until(deadline: float) -> float:
    """Seconds left until ``deadline`` (``time.monotonic()``), never below 0."""
    return max(0.0, deadline - time.monotonic())


def _ended(run: Run) -> bool:
    return run.supervisor is None or run.supervisor.ended


def _key_kind(key: str) -> str:
    """The kind of a registry key: ``source:...`` and ``sink:...``, else a function."""
    kind = key.split(":", 1)[0] if ":" in key else "function"
    return kind if kind in MODELS else "function"


def _fqn(run: Run) -> str:
    return fqn_of(run.config)


def _purge(store: Store, config: HostedConfig, *, keep_subscription: bool | None = None) -> None:
    """Remove what the store and the data dir keep for a deleted function, source or sink;
    with ``keep_subscription`` given, its subscription goes unless it is True."""
    if isinstance(config, SourceConfig):
        purge_source(store, config)
        return
    kind = "sink" if isinstance(config, SinkConfig) else "function"
    made = sink_function_config(config) if isinstance(config, SinkConfig) else config
    if keep_subscription is not None:
        made = made.model_copy(update={"cleanup_subscription": not keep_subscription})
    purge_function(store, made, kind=kind)
