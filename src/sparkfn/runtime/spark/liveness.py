"""Whether this process's Spark JVM still lives, and forgetting a session whose JVM died.

A SparkSession's driver is a JVM, a child of the Python process that
started it. The kernel's OOM killer picks it first (it is the largest
process), and once it is gone every Py4J call fails with a connection
error, while pyspark still holds the dead session as the active one.

* :func:`jvm_death` says, without a Py4J call, whether the JVM has exited
  and why, in sparkfn's words ("the Spark JVM (pid 4242) was killed by
  SIGKILL, as the kernel's OOM killer does").
* :class:`JvmWatch` is a thread that looks every :data:`WATCH_SECONDS` and
  calls its ``on_death`` once with that cause: a worker starts a new
  session, ``localrun`` ends with one line.
* :func:`quiet_accumulators` keeps pyspark's accumulator server from
  printing a traceback on stderr when the JVM's connection to it ends, and
  :func:`quiet_py4j` keeps Py4J from logging one for each call that found
  the JVM gone (the caller gets the error and says what it means).
* :func:`collect_all` is ``DataFrame.collect()`` that never returns part of
  the rows: pyspark reads a collect's rows from a socket the JVM serves, and
  takes the socket's end for the rows' end, so a JVM that dies mid-read
  would hand back a truncated list (a commit would then move the cursors
  past messages whose outputs it never saw).
* :func:`forget_session` clears what pyspark keeps of a dead session, so
  that the next :func:`~sparkfn.runtime.spark.session.spark_session` starts
  a new JVM instead of handing back the dead one.

A session whose JVM this process did not start (a gateway given through
``PYSPARK_GATEWAY_PORT``) has no process to watch: :func:`jvm_death` then
says ``None`` and the watch is idle.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

_LOG = logging.getLogger("sparkfn.spark")

WATCH_SECONDS = 0.5  # how often a JvmWatch looks at the JVM process (a waitpid, no Py4J call)
SESSION_LOST = "SparkSessionLost"  # the type of the death cause of a run whose JVM died


def jvm_process() -> subprocess.Popen[bytes] | None:
    """The JVM process of this process's Spark gateway, or None (none, or not a child)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway  # noqa: SLF001 - pyspark's one gateway per process
    return getattr(gateway, "proc", None) if gateway is not None else None


def describe_exit(pid: int, code: int) -> str:
    """Why the JVM ``pid`` ended, from its exit status (negative: the signal)."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        oom = ", as the kernel's OOM killer does" if -code == signal.SIGKILL else ""
        return f"the Spark JVM (pid {pid}) was killed by {name}{oom}"
    return f"the Spark JVM (pid {pid}) exited with code {code}"


def jvm_death(process: subprocess.Popen[bytes] | None = None, *, wait: float = 0.0) -> str | None:
    """Why the JVM (``process``, by default this process's gateway's) ended; None while it runs.

    With ``wait``, a JVM still running is given that many seconds to end: a
    Py4J call that found its socket closed may come before the JVM's exit
    can be reaped.
    """
    process = process if process is not None else jvm_process()
    if process is None:
        return None
    try:
        code = process.wait(wait) if wait > 0 else process.poll()
    except subprocess.TimeoutExpired:
        return None
    return None if code is None else describe_exit(process.pid, code)


class JvmWatch:
    """A daemon thread calling ``on_death(cause)`` once, when the JVM ``process`` ends.

    ``close()`` stops it without a call (idempotent); a JVM stopped by this
    process on purpose is closed first, so its exit is not a death.
    """

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        on_death: Callable[[str], None],
        *,
        interval: float = WATCH_SECONDS,
    ) -> None:
        self.process = process
        self.on_death = on_death
        self.interval = interval
        self._closed = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, name=f"sparkfn-jvm-watch-{process.pid}", daemon=True
        )

    def start(self) -> JvmWatch:
        """Start looking; returns self."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop looking (the caller ends the JVM on purpose, or no longer cares)."""
        self._closed.set()

    def _watch(self) -> None:
        while not self._closed.wait(self.interval):
            cause = jvm_death(self.process)
            if cause is None:
                continue
            if self._closed.is_set():
                return
            self._closed.set()
            _LOG.error("%s", cause)
            try:
                self.on_death(cause)
            except Exception:
                _LOG.exception("acting on the death of the Spark JVM failed")
            return


def forget_session(spark: SparkSession) -> None:
    """Clear what pyspark keeps of ``spark`` after its JVM died, without a Py4J call.

    The next session this process asks for starts a new JVM. The dead JVM's
    process is reaped. Only for a session whose JVM has ended: a live one
    is stopped with ``spark.stop()``.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession as Session
    from pyspark.sql.context import SQLContext

    context = spark.sparkContext
    context._jsc = None  # noqa: SLF001 - stop() then makes no Py4J call
    with contextlib.suppress(Exception):
        context.stop()  # the accumulator server, and the active context
    Session._instantiatedSession = None  # noqa: SLF001 - what spark.stop() clears
    Session._activeSession = None  # noqa: SLF001
    SQLContext._instantiatedContext = None  # noqa: SLF001
    gateway = SparkContext._gateway  # noqa: SLF001
    SparkContext._gateway = None  # noqa: SLF001
    SparkContext._jvm = None  # noqa: SLF001
    if gateway is None:
        return
    with contextlib.suppress(Exception):  # its sockets only: the JVM side is gone
        gateway.close(keep_callback_server=False, close_callback_server_connections=True)
    process = getattr(gateway, "proc", None)
    if process is not None:
        with contextlib.suppress(Exception):
            process.kill()  # dead already; a JVM that only stopped answering goes too
            process.wait(5)


def quiet_accumulators(spark: SparkSession) -> None:
    """No traceback from ``spark``'s accumulator server when its JVM's connection ends.

    pyspark's server (a ``socketserver``) prints one on stderr for the
    ``EOFError`` a dead JVM's closed socket gives; other errors are printed
    as before.
    """
    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    if server is None:
        return
    report = server.handle_error

    def handle_error(request: object, address: object) -> None:
        if isinstance(sys.exc_info()[1], EOFError | ConnectionError):
            return  # the JVM closed its connection: it ended, which is said elsewhere
        report(request, address)

    server.handle_error = handle_error


PY4J_SEND_FAILED = "Exception while sending command."  # what Py4J logs, on the root logger


def _not_py4j_send_failure(record: logging.LogRecord) -> bool:
    """False for Py4J's own record of a call whose connection failed (see :func:`quiet_py4j`)."""
    if record.name != "root" or record.msg != PY4J_SEND_FAILED:
        return True
    return not (record.pathname.endswith("java_gateway.py") and record.exc_info)


def quiet_py4j() -> None:
    """Drop Py4J's traceback for a call whose connection to the JVM failed (once per process).

    Py4J logs it on the root logger (configuring logging if nothing did), and
    the call then raises in its caller, which reports it in sparkfn's words:
    the traceback only repeated it, once per call, when the JVM died.
    """
    root = logging.getLogger()
    if _not_py4j_send_failure not in root.filters:
        root.addFilter(_not_py4j_send_failure)


class SessionLostError(RuntimeError):
    """The Spark JVM ended during a call whose result would have been partial."""


def collect_all(frame: DataFrame) -> list[Row]:
    """``frame.collect()``, or :class:`SessionLostError` if the JVM ended during the read.

    After the rows are read, one Py4J round trip asks the JVM the time: a
    JVM that closed the rows' socket by dying has closed the gateway's too,
    so the call fails, and the caller commits nothing of the batch.
    """
    rows = frame.collect()
    try:
        frame.sparkSession._jvm.java.lang.System.nanoTime()  # type: ignore[union-attr]  # noqa: SLF001
    except Exception as exc:
        why = jvm_death(wait=2.0) or f"the Spark JVM stopped answering ({type(exc).__name__})"
        msg = f"{why} while a batch's rows were read; nothing of the batch is committed"
        raise SessionLostError(msg) from exc
    return rows
