"""The worker's SparkSession: started on first use, watched, started again when its JVM dies.

Every function and sink of a worker runs in one SparkSession, whose driver
is a JVM child of the worker process. When that JVM dies (the kernel's OOM
killer picks it first), :class:`WorkerSession` sees it within
:data:`~sparkfn.runtime.spark.liveness.WATCH_SECONDS` (a ``waitpid``, no
Py4J call) and tells the worker (:meth:`sparkfn.worker.service.Worker.recover`),
which ends each run of the dead session in ``ERROR`` with the cause, starts a
new session through :meth:`WorkerSession.replace` and starts every run again
from its subscription, as a worker restart would.

The session's state, for ``/health`` and ``/ready``:

==============  ==============================================================
``none``        no session was asked for yet (a worker with nothing to run)
``up``          the session runs
``restarting``  its JVM died; a new session is being started
``failed``      no session could be started; the worker exits non-zero
==============  ==============================================================
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from sparkfn.runtime.spark.liveness import JvmWatch, forget_session, jvm_process
from sparkfn.runtime.spark.session import spark_session, warm_up

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("sparkfn.worker")

# Every function gets a pool of its own under Spark's FAIR scheduler.
SPARK_CONF = {"spark.scheduler.mode": "FAIR"}

NONE, UP, RESTARTING, FAILED = "none", "up", "restarting", "failed"


class WorkerSession:
    """The worker's one SparkSession and the watch on its JVM."""

    def __init__(
        self,
        master: str,
        *,
        spark: SparkSession | None = None,
        on_death: Callable[[str], None] | None = None,
    ) -> None:
        self.master = master
        # Called on the watch's thread with the cause when the session's JVM dies.
        self.on_death = on_death
        self._spark = spark
        self.state = UP if spark is not None else NONE
        self.restarts = 0  # sessions started again after their JVM died
        self.last_loss: str | None = None  # why the last session was lost
        self.error: str | None = None  # why a session did not start, if one did not
        # The session's warm-up (runtime.spark.warm_up), if this worker made the session.
        self.warming: threading.Thread | None = None
        self._watch: JvmWatch | None = None
        self._lock = threading.Lock()  # the restore and a request may both ask first

    @property
    def if_started(self) -> SparkSession | None:
        """The session if one runs, else None (never starts one)."""
        return self._spark

    def get(self) -> SparkSession:
        """The session (started on first use, watched from then on)."""
        with self._lock:
            if self._spark is None:
                self._spark = self._start()
            return self._spark

    def _start(self) -> SparkSession:
        try:
            spark = spark_session(master=self.master, app_name="sparkfn worker", conf=SPARK_CONF)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            raise
        self.error = None
        self.state = UP
        process = jvm_process()
        if process is not None and self.on_death is not None:
            self._watch = JvmWatch(process, self.on_death).start()
        self.warming = threading.Thread(
            target=_warm_up, args=(spark,), name="sparkfn-warm-up", daemon=True
        )
        self.warming.start()
        return spark

    def replace(self, cause: str, before: Callable[[], None]) -> SparkSession:
        """Forget the session whose JVM died (``cause``) and start a new one.

        ``before`` runs first (it ends the runs of the dead session); a caller
        of :meth:`get` meanwhile waits for the new session. Raises what the
        start raised; the state is then ``failed``.
        """
        with self._lock:
            self.state = RESTARTING
            self.last_loss = cause
            if self._watch is not None:
                self._watch.close()
            before()
            dead, self._spark = self._spark, None
            if dead is not None:
                forget_session(dead)
            try:
                self._spark = self._start()
            except Exception:
                self.state = FAILED
                raise
            self.restarts += 1
            return self._spark

    def close(self) -> None:
        """Stop watching (the worker stops; the JVM ends with the process)."""
        if self._watch is not None:
            self._watch.close()


def _warm_up(spark: SparkSession) -> None:
    """In the background: the session's first Python tasks, before any function's."""
    try:
        warm_up(spark)
    except Exception as exc:  # noqa: BLE001 - only a first batch's speed depends on it
        log.debug("the session's warm-up tasks failed: %s", exc)
