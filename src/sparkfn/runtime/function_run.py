"""A run of one function (or a sink's function): its group of one or its membership of a
worker's query group, and the supervisor that starts, stops and restarts it.

Every function and sink runs as a :class:`FunctionRun`: a worker hosts one per
function and sink it runs, ``localrun`` runs one in the foreground, and a
Python program may start one itself (exported as :class:`sparkfn.LocalRun`
too, the name Pulsar's LocalRunner users know):

>>> config = FunctionConfig.build(name="exclaim", py="examples/exclamation.py",
...                               inputs=["in"], output="out")
>>> with FunctionRun(config, store=store) as run:
...     run.start(until_drained=True)   # process what is there, then stop
...     run.wait(timeout=120)
...     print(run.status())

``localrun`` on the CLI is this class plus live output. It is the same run a
worker hosts; only the process around it differs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkfn._closing import Closing
from sparkfn.api.errors import FunctionFailedError, FunctionFailure, StaleRunError
from sparkfn.api.lifecycle import StopMode
from sparkfn.api.status import FunctionStats, FunctionStatus
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.group.run import GroupMemberTarget
from sparkfn.runtime.group.solo import start_solo_query
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.causes import short_error
from sparkfn.runtime.lifecycle.function import FunctionSupervisor
from sparkfn.runtime.query.build import PreparedRun, prepare, resolve_inputs
from sparkfn.runtime.spark.session import spark_session
from sparkfn.runtime.status import function_stats, function_status
from sparkfn.state.buffer import CommittedState
from sparkfn.state.store import all_state, get_state
from sparkfn.store.store import Store
from sparkfn.topics import subscription

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from sparkfn.runtime.group.run import QueryGroup

__all__ = ["FunctionRun", "short_error"]


class FunctionRun(Closing):
    """One function's (or sink's) run, started and watched from this process."""

    def __init__(
        self,
        config: FunctionConfig,
        *,
        store: Store | None = None,
        data_dir: str | Path | None = None,
        store_url: str | None = None,
        spark_master: str = "local[*]",
        spark: SparkSession | None = None,
        kind: str = "function",
        scheduler_pool: str | None = None,
        on_worker_shutdown: Callable[[FunctionFailure], None] | None = None,
        worker_id: str = "localrun",
        park_idle_after: float | None = None,
        group: QueryGroup | None = None,
        prepared: PreparedRun | None = None,
        version: str | None = None,
    ) -> None:
        self.config = config
        # The checks of its start, made once by whoever decided it (None: start() makes them).
        self.prepared = prepared if prepared is not None and prepared.config == config else None
        if self.prepared is not None and version is not None:
            self.prepared = replace(self.prepared, version=version)
        # The version it runs (its registry's; "1" for localrun): the one it is prepared from.
        self.version = self.prepared.version if self.prepared is not None else version or "1"
        # The query group the run is a member of (a worker's), or None: a query of its own.
        self.group = group
        self.kind = kind
        # A worker runs every function in a Spark FAIR-scheduler pool of its own.
        self.scheduler_pool = scheduler_pool
        # What a SHUTDOWN_WORKER response does beyond ending this run (a worker stops).
        self.on_worker_shutdown = on_worker_shutdown
        self.worker_id = worker_id  # shown as workerId in status
        # Seconds without input after which the query is parked (None: never).
        self.park_idle_after = park_idle_after
        self._own_store = store is None
        self.store = store or Store.open(store_url, data_dir)
        self.spark_master = spark_master
        self._spark = spark
        self.query: StreamingQuery | None = None
        self.supervisor: FunctionSupervisor | None = None
        # A function's records are kept under its FQFN, a sink's under sink:<fqfn>.
        self.control_id = control.control_id(kind, config.fqfn)

    @property
    def spark(self) -> SparkSession:
        """The SparkSession (created on first use)."""
        if self._spark is None:
            self._spark = spark_session(
                master=self.spark_master,
                app_name=f"sparkfn {self.config.fqfn}",
                conf=self.config.session_conf,
            )
        return self._spark

    def start(self, *, until_drained: bool = False, checkpoint: Path | None = None) -> FunctionRun:
        """Validate and start the query; with ``until_drained`` it drains what is there and stops."""
        try:
            # Fail on bad topics, code or a subscription another run owns
            # before paying for a JVM (its first plan would refuse it too).
            if self.prepared is None:
                self.prepared = prepare(self.store, self.config, self.version)
            prepared = self.prepared
            with self.store.read() as conn:
                subscription.check_free(conn, self.config.subscription, self.control_id)
        except Exception as exc:
            self.record_start_error(exc)
            raise

        def start_query(epoch: int) -> StreamingQuery:
            if self.scheduler_pool is not None:
                # A local property of the starting thread; the query's thread inherits it.
                self.spark.sparkContext.setLocalProperty(
                    "spark.scheduler.pool", self.scheduler_pool
                )
            self.query = start_solo_query(
                self.spark,
                self.store,
                prepared,
                checkpoint=checkpoint,
                epoch=epoch,
                kind=self.kind,
                version=prepared.version,
                probe=self.supervisor.take_probe() if self.supervisor is not None else None,
            )
            return self.query

        self.supervisor = FunctionSupervisor(
            self.store,
            self.config,
            start_query,
            lambda: resolve_inputs(self.store, self.config),
            kind=self.kind,
            control_id=self.control_id,
            on_worker_shutdown=self.on_worker_shutdown,
            park_idle_after=self.park_idle_after,
            member=None
            if self.group is None
            else partial(GroupMemberTarget, self.group, self.config, version=self.version),
        )
        self.supervisor.start(until_drained=until_drained)
        return self

    def record_start_error(self, exc: Exception) -> None:
        """A run that cannot start shows ``ERROR`` with ``exc`` in its status."""
        control.begin_run(self.store, self.control_id, self.kind, self.config.parallelism, "")
        ids = [control.FUNCTION, *range(self.config.parallelism)]
        control.set_state(self.store, self.control_id, control.ERROR, str(exc), ids)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the run to end; True if it ended. Raises :class:`FunctionFailedError` if it ended in ERROR."""
        if self.supervisor is None:
            return True
        ended = self.supervisor.wait(timeout)
        if ended:
            self._raise_if_failed()
        return ended

    def _raise_if_failed(self) -> None:
        failure = self.supervisor.failure if self.supervisor is not None else None
        if failure is not None and failure.cause.type == "StaleRunError":
            raise StaleRunError(failure.cause.message)  # the record is the newer run's now
        record = control.read_control(self.store, self.control_id)
        if record is not None and record.state == control.ERROR:
            deaths = sorted(
                (r for r in record.instances.values() if r.death is not None),
                key=lambda r: r.died_at or datetime.min,
            )
            why = str(deaths[0].death) if deaths else record.cause
            msg = f"function {self.config.fqfn} failed: {why}"
            raise FunctionFailedError(msg)

    @property
    def run_state(self) -> str:
        """The function's state (``CREATED`` before the first start)."""
        record = control.read_control(self.store, self.control_id)
        return record.state if record is not None else control.CREATED

    def wait_for(self, predicate: Callable[[], object], timeout: float, what: str) -> None:
        """Poll ``predicate()`` until true; fail naming ``what`` after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.supervisor is not None and self.supervisor.ended:
                self._raise_if_failed()
            if time.monotonic() > deadline:
                msg = f"function {self.config.fqfn}: {what} did not happen within {timeout} s"
                raise TimeoutError(msg)
            time.sleep(0.2)

    def stop(self, mode: str | StopMode = StopMode.CANCEL, *, timeout: float | None = None) -> bool:
        """Stop the run (``drain``, ``suspend`` or ``cancel``); idempotent. True once ended.

        The supervisor's thread does the stopping; this waits up to ``timeout``
        seconds for it (``None``: until the run ended; ``0``: not at all).
        """
        if self.supervisor is None:
            return True
        self.supervisor.stop(mode)
        return self.supervisor.wait(timeout)

    def lose(self, cause: str) -> None:
        """The session's JVM died (``cause``): the run ends in ``ERROR`` with it (no Spark call)."""
        if self.supervisor is not None:
            self.supervisor.lose(cause)

    def drain(self, timeout: float | None = None) -> bool:
        """Process everything present now, ``prepare_to_shutdown``, ``shutdown``, ``close``; ``STOPPED``."""
        return self.stop(StopMode.DRAIN, timeout=timeout)

    def suspend(self, timeout: float | None = None) -> bool:
        """Stop admitting input, finish the batch in flight, shut down gracefully; ``SUSPENDED``."""
        return self.stop(StopMode.SUSPEND, timeout=timeout)

    def cancel(self, timeout: float | None = None) -> bool:
        """Stop now; the batch in flight is abandoned (replayed per the guarantee); ``close`` only."""
        return self.stop(StopMode.CANCEL, timeout=timeout)

    def stop_instance(self, instance_id: int, mode: str | StopMode = StopMode.SUSPEND) -> None:
        """Stop one instance (returns at once); the others take its share.

        ``suspend`` (the default, as for a whole function): it takes no more
        input, the batch it is in commits, its objects are closed gracefully,
        then it is ``STOPPED``. ``drain``: first, what was in the input when
        asked is processed. ``cancel``: ``close()`` only, now.
        """
        self._supervised().stop_instance(instance_id, mode)

    def drain_instance(self, instance_id: int) -> None:
        """:meth:`stop_instance` with ``drain``."""
        self.stop_instance(instance_id, StopMode.DRAIN)

    def suspend_instance(self, instance_id: int) -> None:
        """:meth:`stop_instance` with ``suspend``."""
        self.stop_instance(instance_id, StopMode.SUSPEND)

    def restart_instance(self, instance_id: int) -> None:
        """Start a stopped or shut-down instance again; it takes its share back."""
        self._supervised().restart_instance(instance_id)

    def _supervised(self) -> FunctionSupervisor:
        if self.supervisor is None:
            msg = f"function {self.config.fqfn} is not running"
            raise RuntimeError(msg)
        return self.supervisor

    def transitions(self) -> list[dict[str, Any]]:
        """Every recorded state transition of the function and its instances."""
        return control.transitions_of(self.store, self.control_id)

    def status(self) -> FunctionStatus:
        """Pulsar's ``FunctionStatus``, with ``state`` and ``deathException`` per instance."""
        unclosed = self.supervisor.unclosed if self.supervisor is not None else []
        return function_status(
            self.store,
            self.config.fqfn,
            self.config.parallelism,
            unclosed=unclosed,
            control_id=self.control_id,
            worker_id=self.worker_id,
        )

    def stats(self) -> FunctionStats:
        """Pulsar's ``FunctionStats``."""
        return function_stats(
            self.store, self.config.fqfn, self.config.parallelism, control_id=self.control_id
        )

    def get_counter(self, key: str) -> int:
        """A committed counter of the function."""
        found = get_state(self.store, self.config.fqfn, key)
        return (found.counter or 0) if found else 0

    def get_state(self, key: str) -> bytes | None:
        """A committed state value of the function."""
        found = get_state(self.store, self.config.fqfn, key)
        return found.value if found else None

    def state(self) -> dict[str, CommittedState]:
        """All committed state of the function."""
        return all_state(self.store, self.config.fqfn)

    def close(self) -> None:
        """Cancel the run if it still runs, and close the store if this run opened it."""
        self.stop(StopMode.CANCEL)
        if self._own_store:
            self.store.close()


# The name a user runs a function by in Python (``with LocalRun(config) as run``), as
# Pulsar's LocalRunner; the worker hosts the same object as a FunctionRun.
LocalRun = FunctionRun
